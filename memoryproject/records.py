"""The base of every record the apps return and the interfaces send (``memories.records``, ``telemetry.records``).

A record is a frozen pydantic model whose fields, with their descriptions, are its
output: ``as_dict()`` for the CLI, ``as_json()`` for REST, the model itself for MCP and
OpenAPI. ``OmittedWhenEmpty[T]`` marks a key that REST and the CLI leave out when it is
empty, and that MCP sends as null.
"""

import contextlib
import contextvars
import datetime as dt
from typing import Annotated, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema

from memoryproject.timeparse import format_instant

T = TypeVar("T")

# Whether the dump under way leaves empty optional keys out (as_dict, as_json) or sends them
# as null (MCP's): a field's exclude_if is given only the value, not the dump's context.
_leaving_out_empty = contextvars.ContextVar("leaving_out_empty", default=False)


def _left_out(value) -> bool:
    return value is None and _leaving_out_empty.get()


def _none_if_empty(value):
    return None if value == "" else value


OmittedWhenEmpty = Annotated[T | None, BeforeValidator(_none_if_empty), Field(exclude_if=_left_out)]
# A time in every response: UTC with microseconds, e.g. 2025-05-01T09:30:00.000000Z.
Instant = Annotated[
    dt.datetime,
    PlainSerializer(format_instant, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
InstantText = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


@contextlib.contextmanager
def _leaving_out():
    token = _leaving_out_empty.set(True)
    try:
        yield
    finally:
        _leaving_out_empty.reset(token)


class Record(BaseModel):
    """Base of every record: frozen, and written out by its fields' own serializers only."""

    model_config = ConfigDict(frozen=True, serialize_by_alias=True)

    @classmethod
    def optional_keys(cls) -> set[str]:
        """The output's keys that are left out when empty (``OmittedWhenEmpty``)."""
        return {field.alias or name for name, field in cls.model_fields.items() if field.exclude_if is _left_out}

    @classmethod
    def _arrange_schema(cls, schema: dict, handler) -> None:
        """Change the record's JSON schema before its required keys are listed (``MemoryPlus`` spreads one)."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema, handler):
        schema = handler(core_schema)
        own = handler.resolve_ref_schema(schema)
        cls._arrange_schema(own, handler)
        optional = cls.optional_keys()
        # A record's output has every key but the empty optional ones, defaults or not.
        own["required"] = [key for key in own["properties"] if key not in optional]
        return schema

    def as_dict(self) -> dict:
        """The record as REST and the CLI answer it (JSON types, empty optional keys left out)."""
        with _leaving_out():
            return self.model_dump(mode="json")

    def as_json(self) -> bytes:
        """``as_dict()`` encoded, for a response body."""
        with _leaving_out():
            return self.model_dump_json().encode()
