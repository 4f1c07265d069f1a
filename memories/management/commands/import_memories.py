import sys
from pathlib import Path

from django.core.management.base import CommandError

from memories import services
from memories.management.cli import ProgressLine, ProjectCommand, cli_actor, report_line


class Command(ProjectCommand):
    help = (
        "Import a JSON export: every item is checked first, then all are written, unseen until the last "
        "step publishes them together."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="The export file, or '-' for stdin.")
        parser.add_argument(
            "--trusted",
            action="store_true",
            help="Replay every revision with its recorded known_at, tombstones included "
            "(restoring a trusted export); without it only current texts are remembered now.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Check the file and count what would change; write nothing."
        )

    def handle(self, *args, path, trusted, dry_run, **options):
        if path == "-":
            document = sys.stdin.buffer.read()
        else:
            try:
                document = Path(path).read_bytes()
            except OSError as error:
                raise CommandError(f"Cannot read {path}: {error.strerror}.") from None
        progress = ProgressLine("Importing")
        try:
            report = services.memories_import(
                document=document,
                actor=cli_actor(),
                interface="cli",
                trusted=trusted,
                dry_run=dry_run,
                progress=progress,
            )
        finally:
            progress.close()
        self.stdout.write(report_line(report, dry_run=dry_run), style_func=self.style.SUCCESS)
