from memories import selectors, services
from memories.management.cli import ProjectCommand, cli_actor


class Command(ProjectCommand):
    help = "Destroy a memory's text everywhere in the database (every revision) and record an erasure receipt."

    def add_arguments(self, parser):
        parser.add_argument("id", type=int, help="the memory to erase")
        parser.add_argument("--reason", default="", help="kept on the receipt")
        parser.add_argument("--yes", action="store_true", help="confirm; without it, only show what would go")

    def handle(self, *args, id: int, reason: str, yes: bool, **options):
        revisions = selectors.memory_history(memory_id=id)
        if not yes:
            self.stdout.write(
                f"Would erase memory {id} and its {len(revisions)} revision(s); this cannot be "
                "undone. Run again with --yes to erase."
            )
            return
        receipt = services.memory_erase(memory_id=id, reason=reason, actor=cli_actor(), interface="cli")
        self.stdout.write(
            f"Erased memory {id}: {len(receipt.revision_ids)} revision(s); receipt {receipt.pk}; "
            f"{receipt.telemetry_queries_removed} telemetry query(ies) removed."
        )
