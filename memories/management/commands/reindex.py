import time

from django.core.management.base import CommandError

from knowledge import facts
from memories.management.cli import ProjectCommand


class Command(ProjectCommand):
    help = "Drop and rebuild derived indexes from the revisions: --graph rebuilds the fact rows the graph reads."

    def add_arguments(self, parser):
        parser.add_argument(
            "--graph",
            action="store_true",
            help="Rebuild the fact rows (each revision's triple in normal form) in one transaction; "
            "writers wait for it.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Report where the stored rows differ from a rebuild; change nothing."
        )

    def handle(self, *args, graph, dry_run, **options):
        if not graph:
            raise CommandError("Say what to rebuild: --graph (the fact rows the graph reads).")
        if dry_run:
            problems = facts.fact_drift()
            for line in problems:
                self.stdout.write(line)
            self.stdout.write(
                "The fact rows are in step with the revisions."
                if not problems
                else "A rebuild would change the fact rows."
            )
            return
        started = time.monotonic()
        count = facts.rebuild_facts()
        self.stdout.write(f"Rebuilt {count} fact row(s) from the revisions in {time.monotonic() - started:.1f} s.")
