"""Temporal leakage: how often shortcuts to point-in-time search return a different top 5 than the truth.

    .venv/bin/python benchmarks/temporal_leakage.py --seed 0 --output benchmarks/results/temporal_leakage.json

A seeded history (hundreds of memories, ~1,000 revisions over two years: later revisions,
bounded corrections of past periods, TTLs, tombstones and restores, two namespaces) is
written through ``append_revision`` (the one way the store adds revisions), then ~300
queries at random (as_of, valid_at) points in the past are answered six ways:

- ground truth, computed without the engine: the visibility rule applied by brute force
  in Python to the generated history, then SQLite's own FTS5 ``bm25()`` over a brand-new
  in-memory FTS5 table holding exactly the visible rows of the namespaces searched;
- latest_version_only: one index of each memory's newest revision (tombstoned ones
  dropped), both namespaces, the cutoff ignored;
- global_top_{20,50,100}_then_filter: one index of every revision ever written (both
  namespaces), FTS5's top N, then the rows not visible at the point (or in other
  namespaces) dropped;
- every_match_then_filter: the same without N;
- index_known_by_cutoff: an index of every revision known by ``as_of`` (what a live
  index held at that moment: superseded, expired and other-namespace rows included),
  every match, then filtered;
- this_store: ``memories.selectors.memory_recall(mode="keyword")``, whose BM25 scores must also
  equal the ground truth's within 1e-9 relative.

Matching follows the engine's ``match="auto"``: every word if any visible row has them
all, else any word, ranked by matched words, then BM25, then the most recently learned.
Every approach applies the same rule to the rows it has. Query words come from a
vocabulary whose words have distinct first three letters, so a word's light-root
prefix (the engine's "deploys" finds "deployment") reaches no other word's stem and a
plain FTS5 phrase is the exact reference; each word of a query occurs in some visible
row of the namespaces searched, so no substring (trigram) channel joins in.
"""

import argparse
import datetime as dt
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from corpus import ADJECTIVES, COMMON, NOUNS, PLACES, PROJECTS, TOOLS, VERBS  # noqa: E402

T0 = dt.datetime(2022, 1, 1, tzinfo=dt.timezone.utc)
SPAN = dt.timedelta(days=730)
NAMESPACES = ("alpha", "beta")
SHORTCUT_DEPTHS = (20, 50, 100)
TOP = 5
RELATIVE_TOLERANCE = 1e-9


@dataclass
class Rev:
    memory: int  # index into the generated memories
    namespace: str
    known: dt.datetime
    content: str
    valid_from: dt.datetime
    valid_to: dt.datetime | None
    expires: dt.datetime | None
    tombstone: bool
    hides: int | None = None  # index into the memory's own revisions
    id: int | None = None  # database id, once written
    memory_id: int | None = None


def vocabulary(sqlite3) -> list[str]:
    """Lowercase words, none filler, no two sharing their first three letters (see the module docstring)."""
    from search.text import _filler_words

    filler = _filler_words()
    words, prefixes = [], set()
    for word in [*NOUNS, *VERBS, *ADJECTIVES, *COMMON, *(w.lower() for w in [*TOOLS, *PROJECTS, *PLACES])]:
        if not word.isalpha() or not word.isascii() or len(word) < 4 or word in filler or word[:3] in prefixes:
            continue
        prefixes.add(word[:3])
        words.append(word)
    # Independent check with FTS5 itself: every stem keeps its word's first three letters or is shorter.
    scratch = sqlite3.connect(":memory:")
    scratch.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')")
    scratch.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    scratch.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", enumerate(words, start=1))
    for rowid, term in scratch.execute("SELECT doc, term FROM v"):
        word = words[rowid - 1]
        assert len(term) < 3 or term[:3] == word[:3], (word, term)
    scratch.close()
    return words


def make_history(rng: np.random.Generator, words: list[str], memories: int) -> list[list[Rev]]:
    weights = 1.0 / np.arange(1, len(words) + 1) ** 1.0
    weights /= weights.sum()

    def text():
        count = int(rng.integers(4, 26))
        return " ".join(words[index] for index in rng.choice(len(words), count, p=weights))

    def moment(low: dt.datetime, high: dt.datetime) -> dt.datetime:
        seconds = max(0.0, (high - low).total_seconds())
        return low + dt.timedelta(microseconds=int(rng.uniform(0, seconds) * 1e6))

    end = T0 + SPAN
    histories = []
    for number in range(memories):
        namespace = NAMESPACES[0] if rng.random() < 0.6 else NAMESPACES[1]
        known = moment(T0, end - dt.timedelta(days=30))
        revisions = []

        def add(**fields):
            revisions.append(Rev(memory=number, namespace=namespace, **fields))

        expires = known + dt.timedelta(days=float(rng.uniform(10, 300))) if rng.random() < 0.12 else None
        add(known=known, content=text(), valid_from=known, valid_to=None, expires=expires, tombstone=False)
        for _ in range(int(rng.choice([0, 1, 2, 3, 4], p=[0.35, 0.3, 0.2, 0.1, 0.05]))):
            known = moment(known, min(end, known + dt.timedelta(days=200)))
            last_text = max(index for index, revision in enumerate(revisions) if not revision.tombstone)
            roll = rng.random()
            if roll < 0.45:  # a later revision: holds from now on
                expires = known + dt.timedelta(days=float(rng.uniform(10, 300))) if rng.random() < 0.1 else None
                add(known=known, content=text(), valid_from=known, valid_to=None, expires=expires, tombstone=False)
            elif roll < 0.75:  # a bounded correction of a past period
                start = moment(T0 - dt.timedelta(days=60), known)
                add(
                    known=known,
                    content=text(),
                    valid_from=start,
                    valid_to=start + dt.timedelta(days=float(rng.uniform(1, 120))),
                    expires=None,
                    tombstone=False,
                )
            elif not revisions[-1].tombstone:  # forget: a tombstone hides the memory from now on
                add(
                    known=known,
                    content="",
                    valid_from=known,
                    valid_to=None,
                    expires=None,
                    tombstone=True,
                    hides=last_text,
                )
            else:  # restore after a tombstone: a new text revision
                add(known=known, content=text(), valid_from=known, valid_to=None, expires=None, tombstone=False)
        histories.append(revisions)
    return histories


def write(histories: list[list[Rev]]) -> None:
    from django.db import transaction

    from memories import validation
    from memories.models import Memory
    from memories.services.revisions import append_revision

    # Revisions in known_at order across memories, as a live store would have received them.
    ordered = sorted((revision for history in histories for revision in history), key=lambda r: r.known)
    with transaction.atomic():
        memories = {}
        for revision in ordered:
            memory = memories.get(revision.memory)
            if memory is None:
                memory = memories[revision.memory] = Memory.objects.create(
                    namespace=revision.namespace, key=f"m{revision.memory}", created_at=revision.known
                )
            hides = histories[revision.memory][revision.hides].id if revision.tombstone else None
            stored = append_revision(
                memory=memory,
                content=revision.content,
                content_hash=validation.content_hash(revision.content),
                known_at=revision.known,
                valid_from=revision.valid_from,
                valid_to=revision.valid_to,
                expires_at=revision.expires,
                tombstone=revision.tombstone,
                hides_id=hides,
                author="bench",
                interface="cli",
            )
            revision.id, revision.memory_id = stored.pk, memory.pk


def visible(histories, *, as_of, valid_at, namespaces=NAMESPACES) -> list[Rev]:
    """The visibility rule by brute force: per memory, the newest qualifying revision; tombstone winners dropped."""
    shown = []
    for history in histories:
        if history[0].namespace not in namespaces:
            continue
        candidates = [
            r
            for r in history
            if r.known <= as_of
            and (r.expires is None or r.expires > as_of)
            and (r.tombstone or (r.valid_from <= valid_at and (r.valid_to is None or valid_at < r.valid_to)))
        ]
        if candidates:
            winner = max(candidates, key=lambda r: (r.known, r.id))
            if not winner.tombstone:
                shown.append(winner)
    return shown


class Index:
    """A fresh in-memory FTS5 table with the engine's tokenizer; rowid = revision id."""

    def __init__(self, sqlite3, rows: list[Rev]):
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')")
        self.db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", [(row.id, row.content) for row in rows])
        self.rows = {row.id: row for row in rows}

    def scores(self, words, joiner, limit=None) -> list[tuple[int, float]]:
        """(revision id, positive BM25) of the rows matching, best first (ties by id), at most ``limit``."""
        query = joiner.join(f'"{word}"' for word in words)
        sql = "SELECT rowid, -bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t), rowid"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self.db.execute(sql, [query]).fetchall()

    def matching(self, word) -> set[int]:
        return {rowid for (rowid,) in self.db.execute("SELECT rowid FROM t WHERE t MATCH ?", [f'"{word}"'])}

    def close(self):
        self.db.close()


def ranked(index: Index, words, *, keep, limit=None):
    """The engine's "auto" rule over ``index``'s rows that ``keep`` lets through; (mode, [(memory id, score)])."""
    all_rows = [(rid, score) for rid, score in index.scores(words, " AND ", limit) if keep(index.rows[rid])]
    if all_rows:
        return "all", [
            (index.rows[rid].memory_id, score)
            for rid, score in sorted(all_rows, key=lambda item: (-item[1], index.rows[item[0]].memory_id))
        ]
    any_rows = [(rid, score) for rid, score in index.scores(words, " OR ", limit) if keep(index.rows[rid])]
    counts = {}
    for word in words:
        for rid in index.matching(word):
            counts[rid] = counts.get(rid, 0) + 1
    order = sorted(
        any_rows,
        key=lambda item: (
            -counts[item[0]],
            -item[1],
            -index.rows[item[0]].known.timestamp(),
            index.rows[item[0]].memory_id,
        ),
    )
    return "any", [(index.rows[rid].memory_id, score) for rid, score in order]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memories", type=int, default=450)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--output", default="benchmarks/results/temporal_leakage.json")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="memory-leakage-"))
    harness.setup(workdir / "leakage.db", embedder="hash")
    from memories.selectors import memory_recall as recall
    from search.text import sqlite3

    rng = np.random.default_rng(args.seed)
    words = vocabulary(sqlite3)
    histories = make_history(rng, words, args.memories)
    started = time.perf_counter()
    write(histories)
    write_seconds = time.perf_counter() - started
    everything = [revision for history in histories for revision in history]
    texts = [revision for revision in everything if not revision.tombstone]

    # Shortcut indexes that do not depend on the query point.
    latest = []
    for history in histories:
        newest = max(history, key=lambda r: (r.known, r.id))
        if not newest.tombstone:
            latest.append(newest)
    latest_index = Index(sqlite3, latest)
    global_index = Index(sqlite3, texts)

    approaches = [
        "latest_version_only",
        *(f"global_top_{n}_then_filter" for n in SHORTCUT_DEPTHS),
        "every_match_then_filter",
        "index_known_by_cutoff",
        "this_store",
    ]
    differs = dict.fromkeys(approaches, 0)
    set_differs = dict.fromkeys(approaches, 0)
    score_mismatch = dict.fromkeys(approaches, 0)
    worst_relative = 0.0
    modes = {"all": 0, "any": 0}
    visible_sizes, examples, done, attempts, mode_differs = [], [], 0, 0, 0
    while done < args.queries:
        attempts += 1
        as_of = T0 + dt.timedelta(seconds=float(rng.uniform(0.05, 1.02)) * SPAN.total_seconds())
        valid_at = as_of
        if rng.random() < 0.35:  # about a past moment: where bounded corrections show
            valid_at = as_of - dt.timedelta(seconds=float(rng.uniform(0, (as_of - T0).total_seconds() + 5e6)))
        namespaces = [list(NAMESPACES[:1]), list(NAMESPACES[1:]), list(NAMESPACES)][
            int(rng.choice(3, p=[0.4, 0.3, 0.3]))
        ]
        shown = visible(histories, as_of=as_of, valid_at=valid_at, namespaces=namespaces)
        if not shown:
            continue
        truth_index = Index(sqlite3, shown)
        # Half the queries take their words from one visible row (so "all" mode usually answers),
        # half from all the visible rows' words.
        source = [shown[int(rng.integers(len(shown)))]] if rng.random() < 0.5 else shown
        present = sorted({term for row in source for term in row.content.split()})
        query_words = list(rng.choice(present, size=min(len(present), int(rng.integers(1, 4))), replace=False))
        shown_ids = {row.id for row in shown}
        truth_mode, truth = ranked(truth_index, query_words, keep=lambda row: True)
        truth_index.close()
        if not truth:
            continue
        done += 1
        modes[truth_mode] += 1
        visible_sizes.append(len(shown))
        top = truth[:TOP]
        truth_scores = dict(truth)

        def in_scope(row):
            return row.id in shown_ids

        answers = {}
        _, answer = ranked(latest_index, query_words, keep=lambda row: row.namespace in namespaces)
        answers["latest_version_only"] = answer
        for depth in SHORTCUT_DEPTHS:
            answers[f"global_top_{depth}_then_filter"] = ranked(global_index, query_words, keep=in_scope, limit=depth)[
                1
            ]
        answers["every_match_then_filter"] = ranked(global_index, query_words, keep=in_scope)[1]
        known_index = Index(sqlite3, [row for row in texts if row.known <= as_of])
        answers["index_known_by_cutoff"] = ranked(known_index, query_words, keep=in_scope)[1]
        known_index.close()
        result = recall(
            query=" ".join(query_words),
            namespace=namespaces,
            mode="keyword",
            match="auto",
            limit=TOP,
            as_of=as_of,
            valid_at=valid_at,
            explain=True,
        )
        answers["this_store"] = [(hit.memory.id, hit.explain["bm25"]) for hit in result.hits]
        if result.match_mode != truth_mode:
            mode_differs += 1
        for name, answer in answers.items():
            ids = [memory_id for memory_id, _ in answer[:TOP]]
            if ids != [memory_id for memory_id, _ in top]:
                differs[name] += 1
                if len(examples) < 12 and name == "this_store":
                    examples.append(
                        {
                            "words": query_words,
                            "as_of": as_of.isoformat(),
                            "valid_at": valid_at.isoformat(),
                            "namespaces": namespaces,
                            "truth": top,
                            "got": answer[:TOP],
                        }
                    )
            if set(ids) != {memory_id for memory_id, _ in top}:
                set_differs[name] += 1
            for memory_id, score in answer[:TOP]:
                expected = truth_scores.get(memory_id)
                if expected is None:
                    continue
                relative = abs(score - expected) / abs(expected) if expected else abs(score)
                if relative > RELATIVE_TOLERANCE:
                    score_mismatch[name] += 1
                    break
                if name == "this_store":
                    worst_relative = max(worst_relative, relative)
    latest_index.close()
    global_index.close()

    n = done
    output = {
        "benchmark": "temporal_leakage",
        "command": " ".join(sys.argv),
        "seed": args.seed,
        "environment": harness.environment(),
        "corpus": {
            "memories": len(histories),
            "revisions": len(everything),
            "text_revisions": len(texts),
            "tombstones": sum(r.tombstone for r in everything),
            "bounded_corrections": sum(r.valid_to is not None for r in everything),
            "with_ttl": sum(r.expires is not None for r in everything),
            "namespaces": {name: sum(h[0].namespace == name for h in histories) for name in NAMESPACES},
            "span": f"{T0.date()} .. {(T0 + SPAN).date()}",
            "vocabulary_words": len(words),
            "write_seconds": round(write_seconds, 2),
        },
        "queries": {
            "count": n,
            "words_per_query": "1-3, each present in the visible rows searched "
            "(half the queries: all from one visible row)",
            "valid_at_differs_from_as_of": "about 35%",
            "ground_truth_match_mode": modes,
            "visible_rows_median": int(np.median(visible_sizes)),
            "top": TOP,
        },
        "ground_truth": "brute-force visibility in Python over the generated history, then FTS5 bm25() on a fresh "
        "in-memory FTS5 table (porter unicode61 remove_diacritics 2) of exactly the visible rows of "
        "the namespaces searched",
        "top5_differs_share": {name: round(count / n, 4) for name, count in differs.items()},
        "top5_set_differs_share": {name: round(count / n, 4) for name, count in set_differs.items()},
        "score_differs_share": {name: round(count / n, 4) for name, count in score_mismatch.items()},
        "this_store": {
            "top5_differs_percent": round(100.0 * differs["this_store"] / n, 2),
            "max_relative_bm25_difference": worst_relative,
            "match_mode_differs": mode_differs,
            "tolerance": RELATIVE_TOLERANCE,
            "examples_of_differences": examples,
        },
    }
    path = harness.save(output, args.output)
    for name in approaches:
        print(
            f"{name:32s} top5 differs {100 * differs[name] / n:6.2f}%   "
            f"scores differ {100 * score_mismatch[name] / n:6.2f}%"
        )
    print(f"this_store max relative bm25 difference {worst_relative:.3g}; saved {path}")
    if differs["this_store"] or score_mismatch["this_store"] or mode_differs:
        sys.exit(1)


if __name__ == "__main__":
    main()
