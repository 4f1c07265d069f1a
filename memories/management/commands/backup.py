from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection

from memories.management.cli import ProjectCommand
from memoryproject import dialect
from memoryproject.sqlite_backend.backup import CopyFailed, backup

# backup and restore copy SQLite files; PostgreSQL has its own tools.
POSTGRESQL_MESSAGE = (
    "backup and restore copy a SQLite file; this server runs on PostgreSQL (MEMORY_DATABASE_URL). "
    "Use pg_dump -Fc and pg_restore (or your platform's backups), or export_memories and "
    "import_memories for the memories alone."
)


def store_files(database: Path) -> list[Path]:
    """The files the store keeps beside its database and in its data directory: a backup never takes their place."""
    suffixes = ("-wal", "-shm", "-journal", "-writelock", "-migratelock", "-serving")
    suffixes += ("-ratelimit", "-ratelimit-wal", "-ratelimit-shm")  # the rate limits' counts (memories.ratelimit)
    beside = [Path(f"{database}{suffix}") for suffix in suffixes]
    discovery = Path(settings.MEMORY_DISCOVERY_FILE)
    return [database, *beside, discovery, Path(f"{discovery}.lock"), Path(settings.DATA_DIR) / "secret_key"]


def size_text(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


class Command(ProjectCommand):
    help = "Copy the live database to a new file with SQLite's online backup API while it serves, and check the copy."

    def add_arguments(self, parser):
        parser.add_argument("path", help="The file to create. An existing file is refused unless --force.")
        parser.add_argument(
            "--force", action="store_true", help="Replace the file at PATH if it is a backup this command wrote."
        )

    def handle(self, *args, path: str, force: bool, **options):
        database = connection.settings_dict["NAME"]
        if dialect.is_postgresql():
            raise CommandError(POSTGRESQL_MESSAGE)
        if connection.is_in_memory_db():
            raise CommandError("The database is in memory; there is no file to back up.")
        if not Path(database).is_file():
            raise CommandError(f"{database} does not exist; there is nothing to back up.")
        if Path(path).resolve() in {own.resolve() for own in store_files(Path(database))}:
            raise CommandError(
                f"{path} is one of the store's own files (its database, the database's -wal, -shm and "
                "lock files, the discovery file and its lock, or the secret key); backup never writes there, even "
                "with --force. Give a path outside them."
            )
        connection.ensure_connection()
        try:
            copy = backup(connection.connection, Path(path), overwrite=force)
        except CopyFailed as error:
            raise CommandError(str(error)) from None
        rows = copy.rows
        self.stdout.write(
            f"Backed up {database} to {copy.path}: {size_text(copy.bytes)} in {copy.seconds:.2f} s; "
            f"integrity check ok; {rows['memories_memory']} memories, {rows['memories_revision']} "
            "revisions.",
            style_func=self.style.SUCCESS,
        )
