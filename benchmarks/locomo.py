"""LoCoMo evidence retrieval: recall@5 and recall@10 of the evidence turns, per category and recall mode.

    .venv/bin/python benchmarks/locomo.py ../shared/bench-data/locomo/locomo10.json \
        [--output benchmarks/results/locomo.json] [--db /tmp/locomo-minilm.db] [--conversations conv-26 ...]

The data (CC BY-NC 4.0, evaluation only) is read from the path given and never copied.

Corpus: one memory per turn, one namespace per conversation (its ``sample_id``), key
the turn's ``dia_id``. The memory's text is (``--form dated``, the default)::

    Caroline on 8 May 2023: I went to a LGBTQ support group yesterday and it was so powerful.

and a turn that shares an image gets the image's caption appended as
``[shared a photo of a painting of a sunset over a lake]`` (the BLIP caption the data
set ships; the image search ``query`` field is not used). The session's date-time
(``%I:%M %p on %d %B, %Y``, taken as UTC) is both the memory's valid_from and its
known_at, written through ``memory_remember``'s trusted ``known_at`` path.

Questions: categories 1-4 (category 5 is adversarial), evidence ids split on ``;`` and
whitespace and kept when they look like ``D<session>:<turn>`` (leading zeros dropped) and
name a turn of the conversation (4 questions are left with none and are skipped: 1,536
of 1,540). R@k of a question is the share of its evidence turns among its top k
recalled memories; the reported R@k is the mean over questions, per category and
overall, for the tuning split (conv-26 .. conv-43, the first five) and the held-out
split (the last five). Fusion defaults were tuned on the tuning split only.

Loading 5,882 turns with MiniLM (one ``memory_remember`` each, one transaction per
conversation) took 2.7 minutes here and evaluating the three modes 2.4; ``--db PATH``
keeps the loaded store and reuses it when its corpus fingerprint (data hash, text form,
embedder) matches, so a tuning run costs only the evaluation. ``--form`` chooses another
text form, for comparison: ``dated-nocaption`` (no image captions) or ``plain``
(``Speaker: text``, no date, as the data set's README baselines). ``--batched`` writes
each conversation as an import does (``search.indexing.batched``: postings and vectors
made at the end, the texts embedded in batches), to show what batching changes.

``--injection-boost A --inject answer|top`` measures injection-aware ranking: LoCoMo has no
injections, so after each question its first 8 hits (what ``hooks/recall/`` injects by
default) are reported as injected (``hooks/report/``'s service), then ``answer`` hands the
data set's answer to ``hooks/used/``'s service, which marks the hits that answer used, and
``top`` marks the top hit used whatever it was (the worst case: a signal that says nothing).
Later questions of the conversation are recalled with ``MEMORY_INJECTION_BOOST=A``.
"""

import argparse
import datetime as dt
import hashlib
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

from store import MODES, RESULTS, fusion_settings, open_store, save

TUNING = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
# Hits reported as injected after each question with --inject: hooks/recall/'s default limit.
INJECTED = 8
_EVIDENCE = re.compile(r"D(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")
FORMS = ("dated", "plain", "dated-nocaption")


def session_time(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.timezone.utc)


def turn_text(turn: dict, when: dt.datetime, form: str) -> str:
    """The memory text of one turn (see the module docstring)."""
    date = f"{when.day} {when:%B %Y}"
    head = f"{turn['speaker']}: " if form == "plain" else f"{turn['speaker']} on {date}: "
    body = head + turn["text"].strip()
    caption = (turn.get("blip_caption") or "").strip()
    if caption and form != "dated-nocaption":
        body += f" [shared {caption}]"
    return body


def turns(sample: dict, form: str):
    """Yield (dia_id, text, session time) for each turn, session by session."""
    conversation = sample["conversation"]
    sessions = sorted((int(match.group(1)), key) for key in conversation if (match := _SESSION.fullmatch(key)))
    for number, key in sessions:
        when = session_time(conversation[f"{key}_date_time"])
        for turn in conversation[key]:
            yield turn["dia_id"], turn_text(turn, when, form), when


def questions(sample: dict, dia_ids: set[str]) -> list[dict]:
    """The category 1-4 questions of a conversation with their valid evidence ids."""
    found = []
    for item in sample["qa"]:
        if item.get("category") not in CATEGORIES:
            continue
        evidence = []
        for part in item.get("evidence") or []:
            for piece in re.split(r"[;\s]+", str(part)):
                if match := _EVIDENCE.fullmatch(piece):
                    piece = f"D{int(match.group(1))}:{int(match.group(2))}"  # "D30:05" names D30:5
                    if piece in dia_ids and piece not in evidence:
                        evidence.append(piece)
        if evidence:
            found.append(
                {
                    "question": item["question"],
                    "category": item["category"],
                    "evidence": evidence,
                    "answer": str(item.get("answer", "")),
                }
            )
    return found


def fingerprint(data_path: str, form: str, embedder: str, load_way: dict) -> str:
    digest = hashlib.sha256(Path(data_path).read_bytes()).hexdigest()
    return json.dumps({"data_sha256": digest, "form": form, "embedder": embedder, **load_way}, sort_keys=True)


def load_way(batched: bool) -> dict:
    """For ``--batched``, how the turns are written (in the fingerprint and the results); empty otherwise,
    so stores kept with ``--db`` before still match. Batches run in float32, as stores loaded so before."""
    if not batched:
        return {}
    return {"load": "batched", "batch_precision": "float32"}


def load(samples: list[dict], form: str, *, batched: bool = False) -> dict[str, dict[str, str]]:
    """Remember every turn; return, per conversation, dia_id -> key of the memory holding its text."""
    import contextlib

    from django.db import transaction

    from memories.services import memory_remember
    from search import indexing

    keys = {}
    for sample in samples:
        namespace = sample["sample_id"]
        keys[namespace] = {}
        started = time.perf_counter()
        count = 0
        # One commit per conversation, not per turn; batched, indexed at its end.
        with transaction.atomic(), indexing.batched() if batched else contextlib.nullcontext():
            for dia_id, text, when in turns(sample, form):
                result = memory_remember(
                    namespace=namespace,
                    key=dia_id,
                    content=text,
                    known_at=when,
                    valid_from=when,
                    actor="benchmark",
                    interface="cli",
                )
                # An identical text already in the namespace is deduplicated into that memory.
                keys[namespace][dia_id] = result.memory.key
                count += 1
        print(f"  loaded {namespace}: {count} turns in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return keys


def evaluate(samples: list[dict], keys: dict[str, dict[str, str]], *, modes=MODES, inject: str = "none") -> dict:
    """Return per mode, per split: R@5 / R@10 overall and per category, with per-question recalls.

    ``inject``: after each question, its first ``INJECTED`` hits are reported as injected, and marked used
    by the data set's answer (``hooks/used/``'s rule: "answer") or the top hit marked used ("top"); each
    question is then recalled with the injections of the questions asked before it in its conversation.
    "none": no reports.
    """
    from memories.access import Caller
    from memories.selectors import memory_recall as recall
    from memories.services.hooks import hook_report, hook_used
    from telemetry.models import Injection
    from telemetry.services import injection_used_mark

    Injection.objects.all().delete()  # a reused store starts with none
    harness = Caller(actor="benchmark", interface="api", scopes=frozenset({"read"}), namespaces=None)

    depth = max(KS)
    report = {}
    # Injected hits, those that were evidence, and of each how many were marked used.
    marks = defaultdict(int)
    for mode in modes:
        per_split = {}
        for split in ("tuning", "held_out"):
            chosen = [sample for sample in samples if (sample["sample_id"] in TUNING) == (split == "tuning")]
            if not chosen:
                continue
            scores = defaultdict(lambda: defaultdict(list))  # category -> k -> [recall per question]
            for sample in chosen:
                namespace = sample["sample_id"]
                mapping = keys[namespace]
                for item in questions(sample, set(mapping)):
                    result = recall(query=item["question"], namespace=namespace, mode=mode, limit=depth)
                    ranked = [hit.memory.key for hit in result.hits]
                    wanted = {mapping[dia_id] for dia_id in item["evidence"]}
                    if inject != "none" and result.hits:
                        shown = result.hits[:INJECTED]
                        record = hook_report(
                            caller=harness,
                            harness="locomo",
                            hook="simulated",
                            session=namespace,
                            query=item["question"],
                            characters=sum(len(hit.memory.content) for hit in shown),
                            memories=[
                                {"memory_id": hit.memory.id, "revision_id": hit.memory.revision_id} for hit in shown
                            ],
                        )
                        if inject == "answer":
                            used = hook_used(caller=harness, injection=record.id, answer=item["answer"]).used
                        else:
                            used = [shown[0].memory.id]
                            injection_used_mark(injection_id=record.id, memory_ids=used)
                        evidence = {hit.memory.id for hit in shown if hit.memory.key in wanted}
                        marks["carried"] += len(shown)
                        marks["carried_evidence"] += len(evidence)
                        marks["used"] += len(used)
                        marks["used_evidence"] += len(evidence & set(used))
                    for k in KS:
                        got = len(wanted & set(ranked[:k])) / len(wanted)
                        scores[item["category"]][k].append(got)
                        scores["all"][k].append(got)
            per_split[split] = {
                str(category): {
                    "n": len(values[KS[0]]),
                    **{f"R@{k}": round(sum(values[k]) / len(values[k]), 4) for k in KS},
                }
                for category, values in sorted(scores.items(), key=lambda item: str(item[0]))
            }
        report[mode] = per_split
    if inject != "none":
        report["marked_used"] = dict(marks)
    return report


def open_loaded_store(
    data_path: str, samples: list[dict], *, db: str | None, form: str, embedder: str, batched: bool = False
):
    """Open (and fill, unless ``db`` already holds this corpus) the store; return dia_id -> memory key maps."""
    path, existed = open_store(db_path=db, embedder=embedder)
    marker = Path(f"{path}.corpus.json")
    wanted = fingerprint(data_path, form, embedder, load_way(batched))
    if existed and marker.exists():
        stored = json.loads(marker.read_text())
        if stored["fingerprint"] == wanted and {sample["sample_id"] for sample in samples} <= set(stored["keys"]):
            return stored["keys"], stored["load_seconds"]
    if existed:
        sys.exit(f"{path} exists but holds another corpus (or none recorded); remove it or pass another --db.")
    started = time.perf_counter()
    keys = load(samples, form, batched=batched)
    seconds = round(time.perf_counter() - started, 1)
    if db is not None:
        marker.write_text(json.dumps({"fingerprint": wanted, "keys": keys, "load_seconds": seconds}))
    return keys, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="path to locomo10.json")
    parser.add_argument("--output", default=str(RESULTS / "locomo.json"))
    parser.add_argument("--db", help="keep the loaded store in this SQLite file and reuse it on later runs")
    parser.add_argument("--conversations", nargs="+", help="sample ids to use (default: all ten)")
    parser.add_argument("--form", choices=FORMS, default="dated", help="text form of a turn (default: dated)")
    parser.add_argument("--embedder", default="minilm", help="minilm (default) or hash")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--injection-boost", type=float, default=0.0, help="MEMORY_INJECTION_BOOST for this run")
    parser.add_argument(
        "--inject",
        choices=("none", "top", "answer"),
        default="none",
        help="after each question, report its first 8 hits as injected and mark used those the "
        "data set's answer used (answer), or the top hit (top)",
    )
    parser.add_argument(
        "--batched", action="store_true", help="write each conversation as an import does (texts embedded in batches)"
    )
    args = parser.parse_args()
    with open(args.data, encoding="utf-8") as handle:
        samples = json.load(handle)
    if args.conversations:
        unknown = set(args.conversations) - {sample["sample_id"] for sample in samples}
        if unknown:
            parser.error(f"unknown conversations: {', '.join(sorted(unknown))}")
        samples = [sample for sample in samples if sample["sample_id"] in args.conversations]
    keys, load_seconds = open_loaded_store(
        args.data, samples, db=args.db, form=args.form, embedder=args.embedder, batched=args.batched
    )
    from django.conf import settings

    settings.MEMORY_INJECTION_BOOST = args.injection_boost
    started = time.perf_counter()
    report = evaluate(samples, keys, modes=args.modes, inject=args.inject)
    marked = report.pop("marked_used", None)
    seconds = round(time.perf_counter() - started, 1)
    for mode in args.modes:
        for split, table in report[mode].items():
            overall = table["all"]
            categories = "  ".join(
                f"c{category} {table[str(category)]['R@10']:.3f}" for category in CATEGORIES if str(category) in table
            )
            print(
                f"{mode:8} {split:8} n={overall['n']:4}  R@5 {overall['R@5']:.3f}  R@10 {overall['R@10']:.3f}"
                f"   R@10 by category: {categories}"
            )
    if marked:
        print(
            f"injected {marked['carried']} hits ({marked['carried_evidence']} evidence); marked used "
            f"{marked['used']} ({marked['used_evidence']} evidence)"
        )
    save(
        {
            "benchmark": "locomo",
            "data": args.data,
            "conversations": [sample["sample_id"] for sample in samples],
            "tuning_split": list(TUNING),
            "form": args.form,
            "load": "remember",
            **load_way(args.batched),
            "settings": {**fusion_settings(), "MEMORY_INJECTION_BOOST": args.injection_boost},
            "injections": args.inject,
            "marked_used": marked,
            "load_seconds": load_seconds,
            "evaluate_seconds": seconds,
            "category_names": CATEGORY_NAMES,
            "modes": report,
            "targets": {"held_out_hybrid_R@10": ">= 0.70"},
        },
        args.output,
    )


if __name__ == "__main__":
    main()
