"""Multi-row INSERTs for the bulk write paths, without the ORM's per-value machinery.

``QuerySet.bulk_create`` prepares every value of every row through the field, the
compiler and the backend, and on SQLite packs at most 999 parameters into a statement.
Here a field whose stored value is its Python value (text, integers, booleans, foreign
keys) passes through as it is, a time in UTC becomes its text directly, and only the
others (other times, JSON) go through ``get_db_prep_save``, the same call bulk_create
makes for them, so the rows written are the same (tests/test_inserts.py). What it saves
a trusted import is measured by ``benchmarks/bulk_import.py``.
"""

import datetime as dt

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, models

# SQLite's default limit on parameters in one statement (SQLITE_MAX_VARIABLE_NUMBER) since 3.32;
# a build may allow more, none built with the default allows fewer.
_MAX_PARAMETERS = 32_766
# Field classes whose value SQLite stores as given (after the services have checked its type).
_AS_GIVEN = (
    models.CharField,
    models.SlugField,
    models.TextField,
    models.BooleanField,
    models.IntegerField,
    models.BigIntegerField,
    models.ForeignKey,
)


def insert_all(objects: list[models.Model]) -> list[models.Model]:
    """Insert new ``objects`` (one model, no primary keys yet) and give them their ids, in order.

    What ``bulk_create`` does for the models here (no signals, no parents, no
    auto_now fields), in the caller's transaction. Returns ``objects``.
    """
    if not objects:
        return objects
    meta = objects[0]._meta
    if any(type(obj) is not meta.model or obj.pk is not None for obj in objects):
        raise ValueError("insert_all takes new objects of one model")
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    if any(getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False) for field in fields):
        raise ValueError(f"{meta.label} has auto_now fields: use bulk_create")
    # The connection itself, not django.db.connection: every attribute read through that proxy
    # looks the connection up again, and get_db_prep_save reads a few per value.
    connection = connections[DEFAULT_DB_ALIAS]
    names = [field.attname for field in fields]
    prepared = [None if type(field) in _AS_GIVEN else _preparer(field, connection) for field in fields]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    row_marks = "(" + ", ".join(["%s"] * len(fields)) + ")"
    per_statement = max(1, _MAX_PARAMETERS // len(fields))
    with connection.cursor() as cursor:
        for start in range(0, len(objects), per_statement):
            chunk = objects[start : start + per_statement]
            params = []
            for obj in chunk:
                values = obj.__dict__
                params.extend(
                    values[name] if prepare is None else prepare(values[name]) for name, prepare in zip(names, prepared)
                )
            cursor.execute(
                f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES "
                f"{', '.join([row_marks] * len(chunk))} RETURNING {quote(meta.pk.column)}",
                params,
            )
            # One statement gives its rows ascending ids in the order of VALUES; RETURNING's order is not promised.
            for obj, pk in zip(chunk, sorted(row[0] for row in cursor.fetchall()), strict=True):
                obj.pk = pk
                obj._state.adding = False
                obj._state.db = connection.alias
    return objects


def _preparer(field: models.Field, connection):
    """The function that turns a value of ``field`` into what SQLite stores, as ``get_db_prep_save`` does.

    A time in UTC, stored in UTC, is its text without the zone (what Django's path gives
    it, without that path's calls per value); every other value takes that path.
    """
    if type(field) is models.DateTimeField and settings.USE_TZ and connection.timezone is dt.timezone.utc:

        def prepare(value):
            if value.__class__ is dt.datetime and value.tzinfo is dt.timezone.utc:
                return str(value.replace(tzinfo=None))
            return None if value is None else field.get_db_prep_save(value, connection)

        return prepare
    return lambda value: field.get_db_prep_save(value, connection)
