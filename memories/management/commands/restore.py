from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError
from django.db import OperationalError

from memories.management.cli import ProjectCommand
from memories.management.commands.backup import POSTGRESQL_MESSAGE, size_text
from memoryproject import dialect
from memoryproject.sqlite_backend.backup import Copy, CopyFailed, ServingLock, check_copy, count_rows, restore
from memoryproject.sqlite_backend.writelock import WriteLock


def _counts(rows: dict[str, int]) -> str:
    return f"{rows['memories_memory']} memories, {rows['memories_revision']} revisions"


class Command(ProjectCommand):
    help = "Replace the database with a backup file, refused while a server runs; without --yes, only say what changes."

    # Nothing here may open the database through Django: the restore writes it with its own connections.
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser):
        parser.add_argument("path", help="A file written by 'manage.py backup'.")
        parser.add_argument("--yes", action="store_true", help="Confirm; without it, only show what would change.")

    def handle(self, *args, path: str, yes: bool, **options):
        if dialect.is_postgresql():
            raise CommandError(POSTGRESQL_MESSAGE)
        source, incoming = _backup(path)
        database = _database_file()
        if not yes:
            self.stdout.write(
                f"Would replace {database} ({_contents(database)}) with {source} ({_counts(incoming)}). Stop every "
                "server first. Run again with --yes to restore."
            )
            return
        copy = _replace(source, database)
        self.stdout.write(
            f"Restored {source} into {database}: {_counts(copy.rows)}, {size_text(copy.bytes)} in "
            f"{copy.seconds:.2f} s. Run 'manage.py migrate' if the backup comes from an older version, "
            "then 'manage.py doctor'.",
            style_func=self.style.SUCCESS,
        )


def _backup(path: str) -> tuple[Path, dict[str, int]]:
    """The backup file at ``path`` and its row counts, once it reads as a whole copy of the store."""
    source = Path(path)
    if not source.is_file():
        raise CommandError(f"{source} is not a file; give the path of a backup.")
    try:
        return source, check_copy(source)
    except CopyFailed as error:
        raise CommandError(str(error)) from None


def _database_file() -> Path:
    """The database file to restore into; its folder must exist."""
    name = str(settings.DATABASES["default"]["NAME"])
    if name == ":memory:" or name.startswith("file:"):
        raise CommandError("The database is in memory; there is no file to restore into.")
    database = Path(name)
    if not database.parent.is_dir():
        raise CommandError(f"The folder {database.parent} does not exist; create it, then run restore again.")
    return database


def _contents(database: Path) -> str:
    """What the database holds now, in words, for the dry run."""
    if not database.is_file():
        return "no database yet"
    try:
        return _counts(count_rows(database))
    except CopyFailed as error:
        return f"unreadable: {error}"


def _replace(source: Path, database: Path) -> Copy:
    """Copy ``source`` over ``database`` while no server serves it and no command-line writer writes to it."""
    serving = ServingLock(database)
    try:
        taken = serving.restore()
    except CopyFailed as error:
        raise CommandError(str(error)) from None
    if not taken:
        raise CommandError(f"A server is using {database} (it holds {serving.path}): stop it, then run restore again.")
    try:
        # Keeps the command-line writers (memory, import) out until the restore is done.
        writers = WriteLock(f"{database}-writelock", timeout=settings.DATABASES["default"]["OPTIONS"]["timeout"])
        try:
            writers.acquire()
        except OperationalError:
            raise CommandError(
                "Another process kept writing to the database for the whole busy timeout; "
                "stop it, then run restore again."
            ) from None
        try:
            return restore(source, database)
        except CopyFailed as error:
            raise CommandError(str(error)) from None
        finally:
            writers.close()
    finally:
        serving.release()
