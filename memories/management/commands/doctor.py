import json

from django.core.management.base import CommandError

from memories import health
from memories.management.cli import ProjectCommand


class Command(ProjectCommand):
    help = "Check Python, SQLite features, the database file, the schema and the search indexes."

    # Doctor reports missing SQLite features and unapplied migrations itself, one line each.
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", dest="as_json", help="Print the checks as JSON.")

    def handle(self, *args, as_json: bool, **options):
        checks = health.run_checks()
        failed = [check.name for check in checks if not check.ok]
        if as_json:
            self.stdout.write(json.dumps({"ok": not failed, "checks": [check.as_dict() for check in checks]}))
        else:
            width = max(len(check.name) for check in checks)
            for check in checks:
                status = self.style.SUCCESS("ok  ") if check.ok else self.style.ERROR("FAIL")
                self.stdout.write(f"{status} {check.name.ljust(width)}  {check.detail}")
        if failed:
            raise CommandError(f"{len(failed)} of {len(checks)} checks failed: {', '.join(failed)}.", returncode=1)
        if not as_json:
            self.stdout.write(f"All {len(checks)} checks passed.")
