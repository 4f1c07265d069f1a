from django.conf import settings

from memories import services
from memories.management.cli import ProgressLine, ProjectCommand, cli_actor
from memories.services.erasure import PURGE_BATCH_SIZE
from memoryproject import dialect


class Command(ProjectCommand):
    help = (
        "Delete revisions whose TTL has run out, the tombstones and memories they leave, old telemetry and "
        "the rows of imports that died; with --vacuum, then compact the file (PostgreSQL: VACUUM FULL of the "
        "tables purged)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Count what would be removed; change nothing.")
        parser.add_argument(
            "--batch-size",
            type=int,
            default=PURGE_BATCH_SIZE,
            help=f"Revisions per transaction (default {PURGE_BATCH_SIZE}).",
        )
        parser.add_argument(
            "--vacuum",
            action="store_true",
            help="Rebuild the file afterwards so freed space goes back to the disk. It holds "
            "every writer for its whole length (seconds per GB). PostgreSQL: VACUUM FULL of "
            "the purged tables, each locked against reads and writes in turn.",
        )

    def handle(self, *args, dry_run, batch_size, vacuum, **options):
        progress = ProgressLine("Purging")
        try:
            imports = services.purge_dead_imports(actor=cli_actor(), interface="cli", dry_run=dry_run)
            counts = services.purge_expired(
                actor=cli_actor(), interface="cli", dry_run=dry_run, batch_size=batch_size, progress=progress
            )
            compacted = False
            if vacuum and not dry_run:
                services.database_vacuum()
                compacted = True
            elif not dry_run:
                # Only where the file was made for it (auto_vacuum = INCREMENTAL): quick, no rewrite.
                compacted = services.database_release_free_pages()
        finally:
            progress.close()
        verb = "Would purge" if dry_run else "Purged"
        summary = (
            f"{verb} {counts['revisions']} expired revision(s), {counts['tombstones']} tombstone(s) and "
            f"{counts['memories']} emptied memory(ies)"
        )
        if counts["tombstones_repointed"]:
            summary += f"; {counts['tombstones_repointed']} tombstone(s) now hide older text instead"
        if counts["telemetry"]:
            summary += f"; {counts['telemetry']} telemetry row(s) older than {settings.MEMORY_TELEMETRY_DAYS} days"
        if imports["imports"]:
            summary += (
                f"; {imports['imports']} unfinished import(s) whose process died, with "
                f"{imports['memories']} memory(ies) and {imports['revisions']} revision(s)"
            )
        compacted_what = "tables rewritten (VACUUM FULL)" if dialect.is_postgresql() else "file compacted"
        self.stdout.write(summary + (f"; {compacted_what}." if compacted else "."))
