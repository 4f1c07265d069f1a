import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import CommandError
from django.db import transaction

from memories.management.cli import ProjectCommand, cli_actor
from memories.models import ApiKey
from memories.services.keys import api_key_create
from memoryproject.exceptions import InvalidInput


def first_run_file() -> Path:
    """Where the drawn password and key are written: beside the database file (on PostgreSQL, where it would be)."""
    return Path(f"{settings.MEMORY_DB_PATH}.first-run")


class Command(ProjectCommand):
    help = (
        "On an empty database, create an admin login and a first API key (`serve` runs it): the password and key "
        "are MEMORY_FIRST_ADMIN_PASSWORD and MEMORY_FIRST_API_KEY, or drawn, written to a file only the owner reads "
        "(<database>.first-run) and shown once when the output is a terminal."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username, **options):
        users = get_user_model()
        # Reads first: a store that has its login (every start but the first, a read-only disk) takes no write lock.
        if users.objects.exists():
            if not ApiKey.objects.exists():
                self.stdout.write("No API key yet: create one with 'manage.py create_api_key --name NAME'.")
            return
        password = settings.MEMORY_FIRST_ADMIN_PASSWORD or None
        if password is not None:
            _check_password(password, username)
        # Under the write lock, looked at again: of two servers starting at once on a new store, one makes the
        # login and key, and the other finds them made.
        with transaction.atomic():
            if users.objects.exists():
                return
            drawn = {}
            if password is None:
                password = drawn["password"] = secrets.token_urlsafe(18)
            users.objects.create_superuser(username=username, email="", password=password)
            key_made = not ApiKey.objects.exists()
            if key_made:
                token = _first_key()
                if not settings.MEMORY_FIRST_API_KEY:
                    drawn["key"] = token
            # Inside the transaction: if the file cannot be written, nothing is made and the next start tries again.
            if drawn:
                _write_privately(first_run_file(), _file_text(username, drawn))
        self.report(username, drawn, key_made=key_made)

    def report(self, username: str, drawn: dict, *, key_made: bool) -> None:
        """Say what was made; the drawn secrets only on a terminal (a process manager's stdout goes to its logs)."""
        made = f"the first admin login '{username}'" + (" and the first API key" if key_made else "")
        self.stdout.write(self.style.SUCCESS(f"Created {made}."))
        given = [
            "MEMORY_FIRST_ADMIN_PASSWORD" if "password" not in drawn else "",
            "MEMORY_FIRST_API_KEY" if key_made and "key" not in drawn else "",
        ]
        if any(given):
            self.stdout.write(f"  as given in {' and '.join(filter(None, given))}")
        if not drawn:
            return
        self.stdout.write(
            f"  the drawn {' and '.join(drawn)}: in {first_run_file()} (mode 0600, yours only); read, then delete it"
        )
        if self.stdout.isatty():
            self.stdout.write("  shown this once:")
            self.stdout.write(_file_text(username, drawn).rstrip("\n"))


def _check_password(password: str, username: str) -> None:
    try:
        validate_password(password, get_user_model()(username=username))
    except ValidationError as error:
        raise CommandError(f"MEMORY_FIRST_ADMIN_PASSWORD is refused: {' '.join(error.messages)}") from None


def _first_key() -> str:
    try:
        _, token = api_key_create(
            name="first key",
            scopes=["read", "write"],
            namespaces=None,
            token=settings.MEMORY_FIRST_API_KEY or None,
            actor=cli_actor(),
            interface="cli",
        )
    except InvalidInput as error:
        raise CommandError(f"MEMORY_FIRST_API_KEY is refused: {error.message.removeprefix('token: ')}") from None
    return token


def _file_text(username: str, drawn: dict) -> str:
    lines = [f"  username: {username}"]
    if "password" in drawn:
        lines.append(f"  password: {drawn['password']}")
    if "key" in drawn:
        lines.append(f"  key: {drawn['key']}")
        lines.append("  (read, write; all namespaces) use it as 'Authorization: Bearer <key>' (README: MCP, REST API)")
    return "\n".join(lines) + "\n"


def _write_privately(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole, readable by this user only from the first byte (a file there is replaced)."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(text)
        os.replace(partial, path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise CommandError(
            f"Cannot write the first login's password and key to {path}: {error.strerror}. Make its folder "
            "writable, or give them as MEMORY_FIRST_ADMIN_PASSWORD and MEMORY_FIRST_API_KEY."
        ) from None
