"""The one place REST errors take their shape: ``{"error": {"code", "message", "field"?}}``.

Domain errors are mapped by class, DRF's own errors (validation, parsing, auth,
throttling, methods, media types) by type, and Django's ``ValidationError``, ``Http404``
and ``PermissionDenied`` too, and its refusals of malformed requests (too many query
parameters), so none of them reaches a client as a 500 or as DRF's
default ``{"detail": ...}``. Anything else is logged and answered with a 500 in the
same shape, without a traceback.
"""

import logging
import math

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import SuspiciousOperation, TooManyFieldsSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from api.records import ErrorDetail, ErrorResponse
from memories.access import AuthenticationFailed, PermissionDenied
from memoryproject.exceptions import (
    Conflict,
    DuplicateContent,
    InvalidInput,
    MemoryServiceError,
    NotFound,
    RateLimited,
    StorageFull,
    TooLarge,
    Unavailable,
)

logger = logging.getLogger(__name__)

BEARER_CHALLENGE = 'Bearer realm="memory"'

# Most specific first: TooLarge is an InvalidInput, DuplicateContent a Conflict.
_DOMAIN_STATUS = (
    (StorageFull, status.HTTP_507_INSUFFICIENT_STORAGE),
    (TooLarge, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE),
    (InvalidInput, status.HTTP_400_BAD_REQUEST),
    (NotFound, status.HTTP_404_NOT_FOUND),
    (Conflict, status.HTTP_409_CONFLICT),
    (AuthenticationFailed, status.HTTP_401_UNAUTHORIZED),
    (PermissionDenied, status.HTTP_403_FORBIDDEN),
    (Unavailable, status.HTTP_503_SERVICE_UNAVAILABLE),
    (RateLimited, status.HTTP_429_TOO_MANY_REQUESTS),
)

# DRF's exception codes, in the project's vocabulary (memoryproject.exceptions, memories.access).
_DRF_CODES = {
    "not_authenticated": "unauthenticated",
    "authentication_failed": "unauthenticated",
    "permission_denied": "forbidden",
    "not_found": "not_found",
    "parse_error": "parse_error",
    "method_not_allowed": "method_not_allowed",
    "not_acceptable": "not_acceptable",
    "unsupported_media_type": "unsupported_media_type",
    "throttled": "throttled",
}


class BodyTooLarge(drf.APIException):
    """A request body over the documented limit, refused before it is parsed."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class LengthRequired(drf.APIException):
    """A chunked request body that reached Django without a length (not under `make run`): DRF would read it
    as empty."""

    status_code = status.HTTP_411_LENGTH_REQUIRED
    default_code = "length_required"
    default_detail = "Send the request body with a Content-Length header; chunked request bodies are not accepted here."


def error_body(code: str, message: str, field: str | None = None, *, memory_id: int | None = None) -> dict:
    return ErrorResponse(error=ErrorDetail(code=code, message=message, field=field, memory_id=memory_id)).as_dict()


def _first_problem(detail, path: str = "") -> tuple[str, str, str]:
    """Return (field path, message, DRF code) of the first problem in a ValidationError's detail."""
    if isinstance(detail, dict):
        name, inner = next(iter(detail.items()))
        if name == "non_field_errors":
            return _first_problem(inner, path)
        step = f"[{name}]" if isinstance(name, int) else (f".{name}" if path else str(name))
        return _first_problem(inner, path + step)
    if isinstance(detail, list):
        return _first_problem(detail[0], path) if detail else (path, "is not valid.", "invalid")
    return path, str(detail), getattr(detail, "code", "invalid")


def _validation_response(exc: drf.ValidationError) -> Response:
    field, message, code = _first_problem(exc.detail)
    top = field.split(".")[0].split("[")[0] or None
    too_long = code in ("max_length", "max_string_length")
    return Response(
        error_body("too_large" if too_long else "invalid", f"{field}: {message}" if field else message, top),
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE if too_long else status.HTTP_400_BAD_REQUEST,
    )


def _domain_response(exc: MemoryServiceError) -> Response:
    code = next(
        (status_code for kind, status_code in _DOMAIN_STATUS if isinstance(exc, kind)), status.HTTP_400_BAD_REQUEST
    )
    # A duplicate names its twin, to update or tag instead.
    twin = exc.memory_id if isinstance(exc, DuplicateContent) else None
    headers = {"WWW-Authenticate": BEARER_CHALLENGE} if code == status.HTTP_401_UNAUTHORIZED else None
    # The database stayed locked or cannot be reached, or the key spent its minute: worth a retry.
    if exc.retry_after_seconds is not None:
        headers = {"Retry-After": str(exc.retry_after_seconds)}
    return Response(error_body(exc.code, exc.message, exc.field, memory_id=twin), status=code, headers=headers)


def _api_exception_response(exc: drf.APIException) -> Response:
    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None) is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.wait)))
    code = _DRF_CODES.get(exc.default_code, exc.default_code)
    return Response(error_body(code, str(exc.detail)), status=exc.status_code, headers=headers)


def handler(exc, context) -> Response:
    """DRF's exception handler for every REST view (api.views.ApiView.get_exception_handler)."""
    set_rollback()
    if isinstance(exc, MemoryServiceError):
        return _domain_response(exc)
    if isinstance(exc, drf.ValidationError):
        return _validation_response(exc)
    if isinstance(exc, drf.APIException):
        return _api_exception_response(exc)
    if isinstance(exc, DjangoValidationError):
        # DRF's default turns these into 500s; a model rule a client broke is a 400.
        return Response(error_body("invalid", " ".join(exc.messages)), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "Not found."), status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, DjangoPermissionDenied):
        return Response(error_body("forbidden", "Not allowed."), status=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, TooManyFieldsSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return Response(
            error_body(
                "invalid", f"More than {limit} query parameters: send at most {limit}, and long lists in a JSON body."
            ),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, SuspiciousOperation):
        # Django's own refusals of malformed requests; their messages may echo the request.
        return Response(
            error_body("invalid", "The request is malformed and was refused."), status=status.HTTP_400_BAD_REQUEST
        )
    view = context.get("view")
    logger.exception("REST %s failed", type(view).__name__ if view else "view")
    return Response(
        error_body(
            "internal",
            "The server failed to answer because of an internal error (logged on "
            "the server). Try again; if it keeps failing, tell the operator.",
        ),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


@csrf_exempt  # a POST to a wrong path is a 404, not a CSRF failure page
def not_found(request, *args, **kwargs) -> JsonResponse:
    """Every path under /api/ that no endpoint answers: a 404 in the same shape as every other error."""
    from django.urls import Resolver404, resolve

    message = f"No endpoint at {request.path}. The endpoints are listed at /api/docs/."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not not_found:
            message = f"No endpoint at {request.path}; did you mean {request.path}/ (with the trailing slash)?"
    return JsonResponse(error_body("not_found", message), status=status.HTTP_404_NOT_FOUND)
