from django.core.management.base import BaseCommand, CommandError

from memories.management.cli import cli_actor
from memories.services.keys import api_key_revoke
from memoryproject.exceptions import MemoryServiceError


class Command(BaseCommand):
    help = "Revoke an API key by its prefix (the 8 characters after 'mem_'); it stops working at once."

    def add_arguments(self, parser):
        parser.add_argument("prefix", help="the key's prefix, e.g. 1a2b3c4d")

    def handle(self, *args, prefix: str, **options):
        try:
            key = api_key_revoke(prefix=prefix, actor=cli_actor(), interface="cli")
        except MemoryServiceError as error:
            raise CommandError(error.message) from None
        self.stdout.write(f"Revoked API key {key.prefix} '{key.name}' (at {key.revoked_at:%Y-%m-%d %H:%M:%S} UTC).")
