from pathlib import Path

from django.core.management.base import CommandError

from memories import services
from memories.management.cli import ProgressLine, ProjectCommand
from memoryproject import dialect
from memoryproject.timeparse import format_instant, parse_optional_instant


class Command(ProjectCommand):
    help = "Write memories with every revision known at a cutoff as one JSON document, to a new file or stdout."

    def add_arguments(self, parser):
        parser.add_argument(
            "--output",
            default="-",
            help="File to create (an existing file is never overwritten); '-' or nothing for stdout.",
        )
        parser.add_argument("--namespace", help="Export only this namespace.")
        parser.add_argument("--as-of", help="Knowledge cutoff, YYYY-MM-DD or ISO 8601 with a timezone (default now).")

    def handle(self, *args, output, namespace, as_of, **options):
        progress = ProgressLine("Exporting")
        exported = [0]

        def track(done, total):
            exported[0] = done
            progress(done, total)

        cutoff = parse_optional_instant(as_of, field="as-of") or dialect.now()
        chunks = services.memories_export(namespace=namespace, as_of=cutoff, progress=track)
        if output == "-":
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
            self.stdout.flush()
            target, summary_to = "stdout", self.stderr
        else:
            target, summary_to = output, self.stdout
            self._write_new_file(Path(output), chunks)
        progress.close()
        summary_to.write(
            f"Exported {exported[0]} memories known at {format_instant(cutoff)} to {target}.",
            style_func=self.style.SUCCESS,
        )

    def _write_new_file(self, path: Path, chunks) -> None:
        try:
            handle = path.open("x", encoding="utf-8")  # "x": never overwrite, even a file created meanwhile
        except FileExistsError:
            raise CommandError(f"{path} already exists; export never overwrites a file. Choose a new name.") from None
        except OSError as error:
            raise CommandError(f"Cannot create {path}: {error.strerror}.") from None
        try:
            with handle:
                for chunk in chunks:
                    handle.write(chunk)
        except BaseException:
            path.unlink(missing_ok=True)  # no half-written export left behind to be imported later
            raise
