"""Database functions the apps' aggregate reads share."""

from django.db import models


class UtcDay(models.Func):
    """The UTC day of a stored instant (a DateTimeField), by SQLite's own ``date()``.

    Instants are stored as UTC text, so this is TruncDate's answer under the UTC time
    zone the project runs in; Django's TruncDate calls a Python function per row on
    SQLite instead, which slows the dashboard's daily counts on a large store.
    """

    function = "date"
    output_field = models.DateField()
