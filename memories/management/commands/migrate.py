"""Django's migrate, one at a time per store: a second waits for the first, then finds its migrations applied.

With JSON logs (MEMORY_LOG_FORMAT=json) it says what it does as JSON log lines, one per migration applied or
unapplied and one when it is done, instead of Django's text.
"""

import logging
import time

from django.conf import settings
from django.core.management.commands import migrate
from django.db import connections

from memories.management.cli import ProjectCommand

# How long a migrate waits for another on the same store: long enough for a large store's data migrations.
WAIT_SECONDS = 15 * 60

logger = logging.getLogger("memory.migrate")


class Command(ProjectCommand, migrate.Command):
    def handle(self, *args, **options):
        self.json_logs = settings.MEMORY_LOG_FORMAT == "json" and options["verbosity"] >= 1
        self.done: dict[str, str] = {}  # each migration applied or unapplied, with which
        if self.json_logs:
            options["verbosity"] = 0  # Django's own text off; migration_progress_callback logs each step
        # Held from before the first read of the applied migrations to after post_migrate's rows (content types,
        # permissions): run at once, two migrates would both apply the same migrations.
        with connections[options["database"]].migration_lock(timeout=WAIT_SECONDS, on_wait=self.say_waiting):
            result = super().handle(*args, **options)
        if self.json_logs:
            verbs = sorted(set(self.done.values()))
            summary = f"{len(self.done)} migration(s) {' or '.join(verbs)}" if self.done else "No migrations to apply"
            logger.info(summary, extra={"fields": {"migrations": list(self.done)}})
        return result

    def migration_progress_callback(self, action, migration=None, fake=False):
        if not self.json_logs:
            return super().migration_progress_callback(action, migration, fake)
        if action in ("apply_start", "unapply_start"):
            self.started = time.monotonic()
        elif action in ("apply_success", "unapply_success"):
            verb = "applied" if action == "apply_success" else "unapplied"
            self.done[str(migration)] = verb
            fields = {
                "migration": str(migration),
                "action": verb,
                "fake": fake,
                "duration_ms": round((time.monotonic() - self.started) * 1000, 1),
            }
            logger.info("%s %s%s", verb.capitalize(), migration, " (fake)" if fake else "", extra={"fields": fields})
        return None

    def say_waiting(self) -> None:
        if getattr(self, "json_logs", False):
            logger.warning("Waiting for another migrate on this store...")
        else:
            self.stderr.write("Waiting for another migrate on this store...", style_func=self.style.WARNING)
