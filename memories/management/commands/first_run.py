import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "On an empty database, create an admin login and print it once; always print the URLs."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", default="8000")
        parser.add_argument("--username", default="admin")

    def handle(self, *args, host, port, username, **options):
        base = f"http://{host}:{port}"
        users = get_user_model()
        if not users.objects.exists():
            password = secrets.token_urlsafe(18)
            users.objects.create_superuser(username=username, email="", password=password)
            self.stdout.write(self.style.SUCCESS("Created the first admin login (shown only this once):"))
            self.stdout.write(f"  username: {username}\n  password: {password}")
        self.stdout.write(f"Admin:     {base}/admin/")
        self.stdout.write(f"REST docs: {base}/api/docs/")
        self.stdout.write(f"MCP:       {base}/mcp")
