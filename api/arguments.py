"""How REST takes an operation's declared arguments (``memories.arguments``): path, query string, JSON body.

A body's values must have the declared JSON types (no "5" for 5, no 1 for true); a query
string is text, read as the declared types. A field the endpoint does not take is
refused by name, since a typo must not pass as a default, and so is a query parameter
given twice unless it is a list. Problems become domain errors, which take the one
error shape in ``api.exceptions``.
"""

from types import UnionType
from typing import Annotated, Union, get_args, get_origin

from memories.arguments import Arguments, validated
from memoryproject.exceptions import InvalidInput


def _takes_list(annotation) -> bool:
    origin = get_origin(annotation)
    if origin is list:
        return True
    if origin in (Annotated, Union, UnionType):
        return any(_takes_list(part) for part in get_args(annotation)[: 1 if origin is Annotated else None])
    return False


def _refuse_unknown(names, taken: list[str]) -> None:
    for name in names:
        if name not in taken:
            raise InvalidInput(f"{name}: unknown field. This endpoint takes: {', '.join(taken)}.", field=name)


def from_query(model: type[Arguments], query, **path) -> Arguments:
    """``model``'s arguments from a query string (a QueryDict) and the values the URL's path gave."""
    taken = [name for name in model.model_fields if name not in path]
    _refuse_unknown(query.keys(), taken)
    data = dict(path)
    for name in query.keys():
        values = query.getlist(name)
        if _takes_list(model.model_fields[name].annotation):
            data[name] = values
        elif len(values) > 1:
            raise InvalidInput(f"{name}: given more than once; give it once.", field=name)
        else:
            data[name] = values[0]
    return validated(model, data, strict=False)


def from_body(model: type[Arguments], body, query, **path) -> Arguments:
    """``model``'s arguments from a parsed JSON body and the values the URL's path gave; no query string."""
    for name in query.keys():
        raise InvalidInput(
            f"{name}: unknown parameter: this endpoint takes its arguments in the JSON body.", field=name
        )
    if not isinstance(body, dict):
        raise InvalidInput(f"Invalid data. Expected a dictionary, but got {type(body).__name__}.")
    _refuse_unknown(body.keys(), [name for name in model.model_fields if name not in path])
    return validated(model, {**body, **path}, strict=True)
