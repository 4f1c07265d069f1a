import secrets

from django.contrib.auth import get_user_model
from django.db import transaction

from memories.management.cli import ProjectCommand, cli_actor
from memories.models import ApiKey
from memories.services.keys import api_key_create


class Command(ProjectCommand):
    help = "On an empty database, create an admin login and a first API key and print them once (`serve` runs it)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username, **options):
        users = get_user_model()
        # Reads first: a store that has its login (every start but the first, a read-only disk) takes no write lock.
        if users.objects.exists():
            if not ApiKey.objects.exists():
                self.stdout.write("No API key yet: create one with 'manage.py create_api_key --name NAME'.")
            return
        # Under the write lock, looked at again: of two servers starting at once on a new store, one makes the
        # login and key, and the other finds them made.
        with transaction.atomic():
            if users.objects.exists():
                return
            password = secrets.token_urlsafe(18)
            users.objects.create_superuser(username=username, email="", password=password)
            token = None
            if not ApiKey.objects.exists():
                _, token = api_key_create(
                    name="first key", scopes=["read", "write"], namespaces=None, actor=cli_actor(), interface="cli"
                )
        # Printed once committed: what is shown is stored.
        self.stdout.write(self.style.SUCCESS("Created the first admin login (shown only this once):"))
        self.stdout.write(f"  username: {username}\n  password: {password}")
        if token is not None:
            self.stdout.write(
                self.style.SUCCESS("Created the first API key (read, write; all namespaces), shown only this once:")
            )
            self.stdout.write(f"  key: {token}")
            self.stdout.write("  use it as 'Authorization: Bearer <key>' (README: MCP, REST API)")
