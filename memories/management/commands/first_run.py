import secrets

from django.contrib.auth import get_user_model

from memories.management.cli import ProjectCommand, cli_actor
from memories.models import ApiKey
from memories.services.keys import api_key_create


class Command(ProjectCommand):
    help = "On an empty database, create an admin login and a first API key and print them once (`serve` runs it)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username, **options):
        users = get_user_model()
        empty = not users.objects.exists() and not ApiKey.objects.exists()
        if not users.objects.exists():
            password = secrets.token_urlsafe(18)
            users.objects.create_superuser(username=username, email="", password=password)
            self.stdout.write(self.style.SUCCESS("Created the first admin login (shown only this once):"))
            self.stdout.write(f"  username: {username}\n  password: {password}")
        if empty:
            _, token = api_key_create(name="first key", scopes=["read", "write"], namespaces=None,
                                      actor=cli_actor(), interface="cli")
            self.stdout.write(self.style.SUCCESS(
                "Created the first API key (read, write; all namespaces), shown only this once:"))
            self.stdout.write(f"  key: {token}")
            self.stdout.write("  use it as 'Authorization: Bearer <key>' (README: MCP, REST API)")
        elif not ApiKey.objects.exists():
            self.stdout.write("No API key yet: create one with 'manage.py create_api_key --name NAME'.")
