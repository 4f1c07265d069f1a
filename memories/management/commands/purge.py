from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from memories import services
from memories.management.cli import ProgressLine, cli_actor
from memories.services.erasure import PURGE_BATCH_SIZE
from memoryproject.exceptions import MemoryServiceError


class Command(BaseCommand):
    help = ("Delete revisions whose TTL has run out, the tombstones and memories they leave, and old telemetry, "
            "then compact the file.")

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Count what would be removed; change nothing.")
        parser.add_argument("--batch-size", type=int, default=PURGE_BATCH_SIZE,
                            help=f"Revisions per transaction (default {PURGE_BATCH_SIZE}).")

    def handle(self, *args, dry_run, batch_size, **options):
        progress = ProgressLine("Purging")
        try:
            counts = services.purge_expired(actor=cli_actor(), interface="cli", dry_run=dry_run,
                                            batch_size=batch_size, progress=progress)
        except MemoryServiceError as error:
            raise CommandError(error.message) from error
        finally:
            progress.close()
        # Telemetry rows hold prompts (the queries): their pages are worth compacting away too.
        removed = counts["revisions"] + counts["tombstones"] + counts["memories"] + counts["telemetry"]
        if removed and not dry_run:
            services.database_vacuum()
        verb = "Would purge" if dry_run else "Purged"
        summary = (f"{verb} {counts['revisions']} expired revision(s), {counts['tombstones']} tombstone(s) and "
                   f"{counts['memories']} emptied memory(ies)")
        if counts["tombstones_repointed"]:
            summary += f"; {counts['tombstones_repointed']} tombstone(s) now hide older text instead"
        if counts["telemetry"]:
            summary += (f"; {counts['telemetry']} telemetry row(s) older than "
                        f"{settings.MEMORY_TELEMETRY_DAYS} days")
        self.stdout.write(summary + ("; file compacted." if removed and not dry_run else "."))
