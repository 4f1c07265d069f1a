from pathlib import Path

from memories import services
from memories.management.cli import ProgressLine, ProjectCommand, cli_actor, report_line


class Command(ProjectCommand):
    help = "Import a folder of Markdown files as chunk memories; re-running updates, and forgets removed chunks."

    def add_arguments(self, parser):
        parser.add_argument("path", help="The folder to read (recursively; hidden entries and symlinks skipped).")
        parser.add_argument("--namespace", required=True)
        parser.add_argument(
            "--collection", required=True, help="Name for this folder's chunks: keys are md:COLLECTION:PATH#N."
        )
        parser.add_argument("--tag", action="append", dest="tags", default=[], help="Tag every chunk (repeatable).")
        parser.add_argument("--dry-run", action="store_true", help="Read and count what would change; write nothing.")

    def handle(self, *args, path, namespace, collection, tags, dry_run, **options):
        progress = ProgressLine("Importing chunks")
        try:
            report = services.markdown_import(
                root=Path(path).expanduser(),
                namespace=namespace,
                collection=collection,
                tags=tags,
                actor=cli_actor(),
                interface="cli",
                dry_run=dry_run,
                progress=progress,
            )
        finally:
            progress.close()
        self.stdout.write(report_line(report, dry_run=dry_run), style_func=self.style.SUCCESS)
