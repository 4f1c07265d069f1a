"""Request bodies: JSON only, size-limited, parsed strictly."""

import json

from django.conf import settings
from rest_framework import exceptions
from rest_framework.parsers import BaseParser

from api.exceptions import BodyTooLarge, error_body
from memoryproject.jsontext import parse_strict_json


def too_large_message(limit: int, setting: str) -> str:
    return (
        f"The request body is over the limit of {limit} bytes ({setting}). Send less per request: split "
        "the content or the import into smaller parts."
    )


def too_large_refusal(limit: int, setting: str) -> bytes:
    """The 413 body the ASGI body limit sends for /api (memoryproject.bodylimit), in the REST error shape."""
    return json.dumps(error_body("too_large", too_large_message(limit, setting))).encode()


def body_limit(view) -> tuple[int, str]:
    """Return the body limit for ``view`` and the setting that sets it."""
    setting = getattr(view, "body_limit_setting", "MEMORY_API_MAX_BODY_BYTES")
    return getattr(settings, setting), setting


class StrictJSONParser(BaseParser):
    """Read at most the view's body limit, then parse JSON refusing duplicate keys, NaN and Infinity.

    The view refuses a declared Content-Length over the limit, and a body without one,
    before anything is read (api.views.ApiView.initial); reading at most the limit here
    keeps that true for any stream.
    """

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        limit, setting = body_limit((parser_context or {}).get("view"))
        body = stream.read(limit + 1)
        if len(body) > limit:
            raise BodyTooLarge(too_large_message(limit, setting))
        try:
            return parse_strict_json(body)
        except ValueError as error:
            raise exceptions.ParseError(f"The body is not valid JSON: {error}.") from None
