import json

from django.core.management.base import CommandError

from memories.management.cli import ProjectCommand, cli_actor
from memories.selectors.audit import run_audit
from memories.services.audit import audit_fix


class Command(ProjectCommand):
    help = (
        "Check the whole store against its history: indexes, fact rows, vectors, states, tombstones, rows "
        "waiting for purge. Exit 1 on a problem; --fix first repairs what is safe (derived rows only)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--fix",
            action="store_true",
            help="Rebuild what is derived from the history (full-text index, postings, fact rows, "
            "states), then check again.",
        )
        parser.add_argument("--json", action="store_true", dest="as_json", help="Print the report as JSON.")

    def handle(self, *args, fix: bool, as_json: bool, **options):
        done = {}
        if fix:
            report, done = audit_fix(actor=cli_actor(), interface="cli")
        else:
            report = run_audit()
        if as_json:
            self.stdout.write(json.dumps({**report.as_dict(), "repaired": done}))
        else:
            if done:
                self.stdout.write(
                    "Repaired: " + ", ".join(f"{name.replace('_', ' ')} {count}" for name, count in done.items())
                )
            width = max(len(finding.check) for finding in report.findings)
            for finding in report.findings:
                status = self.style.SUCCESS("ok  ") if finding.ok else self.style.ERROR("FAIL")
                ids = f" (ids {', '.join(map(str, finding.ids))})" if finding.ids else ""
                fix_hint = f" Fix: {finding.fix}." if finding.fix else ""
                self.stdout.write(f"{status} {finding.check.ljust(width)}  {finding.detail}{ids}{fix_hint}")
        failed = [finding.check for finding in report.findings if not finding.ok]
        if failed:
            raise CommandError(
                f"{len(failed)} of {len(report.findings)} checks found problems: {', '.join(failed)}.", returncode=1
            )
        if not as_json:
            self.stdout.write(f"All {len(report.findings)} checks passed.")
