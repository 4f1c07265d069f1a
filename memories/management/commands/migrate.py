"""Django's migrate, one at a time per store: a second waits for the first, then finds its migrations applied."""

from django.core.management.commands import migrate
from django.db import connections

from memories.management.cli import ProjectCommand

# How long a migrate waits for another on the same store: long enough for a large store's data migrations.
WAIT_SECONDS = 15 * 60


class Command(ProjectCommand, migrate.Command):
    def handle(self, *args, **options):
        # Held from before the first read of the applied migrations to after post_migrate's rows (content types,
        # permissions): run at once, two migrates would both apply the same migrations.
        with connections[options["database"]].migration_lock(timeout=WAIT_SECONDS, on_wait=self.say_waiting):
            return super().handle(*args, **options)

    def say_waiting(self) -> None:
        self.stderr.write("Waiting for another migrate on this store...", style_func=self.style.WARNING)
