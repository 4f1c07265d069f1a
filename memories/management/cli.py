"""What the management commands share: their base class, the acting user's name and a progress line."""

import getpass
import os
import sys
import time
from typing import NoReturn

from django.core.management.base import BaseCommand, CommandError
from django.db.utils import OperationalError, ProgrammingError

from memories.records.import_export import ImportReport
from memoryproject.exceptions import MemoryServiceError, Unavailable

NOT_MIGRATED_MESSAGE = "The database has no tables yet. Run 'python manage.py migrate' (or 'make run') first."


class NotMigrated(Unavailable):
    code = "not_migrated"


class ProjectCommand(BaseCommand):
    """Base of the project's commands: a domain error ends the command with its one-line message, not a traceback.

    Among them a full, read-only or unopenable database (``memoryproject.storage``), and a
    database not migrated yet, which is recognised here. From the shell Django prints the
    ``CommandError`` as one line and exits with status 1; ``call_command`` raises it.
    """

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except BrokenPipeError:
            _stop_writing_to_stdout()
        except MemoryServiceError as error:
            self.fail(error)
        except (OperationalError, ProgrammingError) as error:
            # SQLite says "no such table"; PostgreSQL raises undefined_table (SQLSTATE 42P01).
            if "no such table" not in str(error) and getattr(error.__cause__, "sqlstate", None) != "42P01":
                raise
            self.fail(NotMigrated(NOT_MIGRATED_MESSAGE))

    def fail(self, error: MemoryServiceError) -> NoReturn:
        """End the command because of ``error``."""
        raise CommandError(error.message) from error


def _stop_writing_to_stdout() -> NoReturn:
    """End quietly because whoever read stdout has stopped (``| head``): what it asked for, not an error."""
    # Python flushes stdout again at exit: pointed at /dev/null, that flush cannot fail and print a traceback.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(0)


def cli_actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # a uid with no name, as in some containers
        return f"cli:uid-{os.getuid()}"


class ProgressLine:
    """``label: done/total`` redrawn in place on stderr, at most ten times a second; silent unless a terminal."""

    def __init__(self, label: str, stream=None):
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.shown_at = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.shown_at < 0.1 and done != total):
            return
        self.shown_at = now
        self.stream.write(f"\r{self.label}: {done}/{total}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.shown_at:
            self.stream.write("\r\x1b[K")  # erase the line, so the summary starts clean
            self.stream.flush()


def report_line(report: ImportReport, *, dry_run: bool) -> str:
    counts = ", ".join(f"{value} {name}" for name, value in report.as_dict().items())
    return f"Dry run, nothing written; would be: {counts}." if dry_run else f"Imported: {counts}."
