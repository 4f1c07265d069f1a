from memories.management.cli import ProjectCommand, cli_actor
from memories.services.keys import api_key_revoke


class Command(ProjectCommand):
    help = "Revoke an API key by its prefix (the 8 characters after 'mem_'); it stops working at once."

    def add_arguments(self, parser):
        parser.add_argument("prefix", help="the key's prefix, e.g. 1a2b3c4d")

    def handle(self, *args, prefix: str, **options):
        key = api_key_revoke(prefix=prefix, actor=cli_actor(), interface="cli")
        self.stdout.write(f"Revoked API key {key.prefix} '{key.name}' (at {key.revoked_at:%Y-%m-%d %H:%M:%S} UTC).")
