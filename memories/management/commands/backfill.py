import time

from django.core.management.base import CommandError

from memories.management.cli import ProgressLine, ProjectCommand
from memoryproject.exceptions import MemoryServiceError
from search import vectors
from search.embeddings import EmbedderUnavailable, get_embedder
from search.errors import SearchError


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def progress_text(label: str, done: int, total: int, elapsed: float) -> str:
    """Return ``label: done/total (pct), rate/s, ETA m:ss`` for the progress line."""
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = _duration((total - done) / rate) if rate and total > done else ("0:00" if total <= done else "?")
    percent = 100 * done // total if total else 100
    return f"{label}: {done}/{total} ({percent}%), {rate:.0f}/s, ETA {eta}"


class RateProgress(ProgressLine):
    """The commands' progress line, with the rate so far and the time left."""

    def __init__(self, label: str, stream=None):
        super().__init__(label, stream)
        self.started = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.shown_at < 0.1 and done != total):
            return
        self.shown_at = now
        self.stream.write("\r\x1b[K" + progress_text(self.label, done, total, now - self.started))
        self.stream.flush()


class Command(ProjectCommand):
    help = "Embed the revisions that have no vector yet (all of them with --reembed), in id order, resumably."

    def add_arguments(self, parser):
        parser.add_argument(
            "--batch-size",
            type=int,
            default=vectors.STORE_BATCH_SIZE,
            help=f"Revisions embedded and stored per transaction (default {vectors.STORE_BATCH_SIZE}).",
        )
        parser.add_argument(
            "--reembed",
            action="store_true",
            help="Drop every stored vector and re-embed all revisions with MEMORY_EMBEDDER. If it "
            "is interrupted, run backfill again without --reembed to finish.",
        )
        parser.add_argument("--dry-run", action="store_true", help="Count what would be embedded; change nothing.")

    def handle(self, *args, batch_size, reembed, dry_run, **options):
        if not 1 <= batch_size <= 10_000:
            raise CommandError(f"--batch-size must be from 1 to 10000, got {batch_size}.")
        embedder = get_embedder()
        if not embedder.available():
            raise CommandError(
                f"The embedder {embedder.name} cannot be loaded ({embedder.load_error}); check "
                "MEMORY_EMBEDDER and the model files, then run backfill again."
            )
        model = f"{embedder.name} ({embedder.dim} dimensions)"
        try:
            if dry_run:
                self._dry_run(embedder, model, reembed=reembed)
                return
            previous = vectors.current_space()
            if reembed:
                vectors.reset_space(embedder)
            else:
                vectors.ensure_space(embedder)
        except SearchError as error:
            raise CommandError(error.message) from error

        total = vectors.pending_count()
        progress = RateProgress("Embedding")
        started = time.monotonic()
        after_id, embedded = 0, 0
        try:
            while True:
                try:
                    batch = vectors.backfill_batch(after_id=after_id, limit=batch_size, embedder=embedder)
                except (MemoryServiceError, SearchError, EmbedderUnavailable) as error:
                    raise CommandError(
                        f"{error} {embedded} revision(s) were embedded before this; run backfill again to continue."
                    ) from error
                if not batch.revision_ids:
                    break
                after_id = batch.revision_ids[-1]
                embedded += batch.embedded
                progress(embedded, max(total, embedded))
        finally:
            progress.close()
        elapsed = time.monotonic() - started
        rate = f", {embedded / elapsed:.0f}/s" if embedded and elapsed > 0 else ""
        replaced = f" (replacing the vectors of {previous.embedder})" if reembed and previous is not None else ""
        self.stdout.write(f"Embedded {embedded} revision(s) with {model}{replaced} in {elapsed:.1f} s{rate}.")

    def _dry_run(self, embedder, model: str, *, reembed: bool) -> None:
        if reembed:
            space = vectors.current_space()
            dropped = f"drop {vectors.vector_count()} vector(s) of {space.embedder} and " if space is not None else ""
            count = vectors.pending_count(reembed=True)
            self.stdout.write(
                f"Dry run, nothing written: --reembed would {dropped}embed {count} revision(s) with {model}."
            )
            return
        vectors.check_space(embedder)
        self.stdout.write(
            f"Dry run, nothing written: {vectors.pending_count()} revision(s) would be embedded with {model}."
        )
