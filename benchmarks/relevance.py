"""Relevance: recall that answers when a memory is relevant and stays quiet when none is, on short facts and chat.

    .venv/bin/python benchmarks/relevance.py ../shared/bench-data/locomo/locomo10.json \
        ../shared/bench-data/recall-dev/recall_dev.json --db /tmp/locomo-minilm.db \
        [--output benchmarks/results/relevance.json]

With the default settings (hybrid recall, the relevance decision of ``search/relevance.py``):

- recall-dev through the hook path (``hook_recall``, default limit and budget): how many of
  the 40 questions get their expected memory injected, how many memories a question gets on
  average and the share of them that are the expected one, and how many of the 20
  ``negatives`` (prompts no memory answers) get nothing injected. The facts are in a
  namespace of their own. LoCoMo's questions through the hook path too: memories injected
  per question, and the share of questions with an evidence turn among them.
- LoCoMo evidence R@5 / R@10 of recall, per split (``locomo.evaluate``).
- Calibration: each query's evidence (the best coverage of the query's words and the best
  judged cosine among its candidates) and, for each pair of bars on a grid, what recall-dev
  and the LoCoMo tuning split would get. The bars are chosen on those (the dev data); the
  LoCoMo held-out split is only reported, with the chosen bars.

The store is the LoCoMo store of ``benchmarks/locomo.py`` (``--db``, loaded on first use),
as in ``fusion_sweep.py``.
"""

import argparse
import json
from unittest import mock

import locomo
import recall_dev
from store import RESULTS, fusion_settings, save

COVERAGE_GRID = (0.34, 0.4, 0.5, 0.6, 0.75, 1.0)
COSINE_GRID = (0.22, 0.24, 0.25, 0.26, 0.27, 0.28, 0.3, 0.32, 0.35)


def recording_evidence():
    """Patch ``relevance.evidence`` so each recall's evidence is kept (the last one in ``seen``)."""
    from search import relevance

    seen = []
    original = relevance.evidence

    def evidence(channels):
        seen.append(original(channels))
        return seen[-1]

    return mock.patch.object(relevance, "evidence", evidence), seen


def evidence_of(query: str, namespace: str, seen: list) -> tuple[float, float]:
    """The evidence recall weighs for ``query`` (none when no candidate was found at all)."""
    from memories.selectors import memory_recall

    seen.clear()
    memory_recall(query=query, namespace=namespace, limit=1)
    return seen[-1] if seen else (0.0, 0.0)


def hook_path(data: dict) -> dict:
    """recall-dev through ``hook_recall``: questions with their memory injected, negatives with nothing."""
    from memories.access import Caller
    from memories.models import Scope
    from memories.services import hook_recall

    caller = Caller(actor="benchmark", interface="cli", scopes=frozenset({Scope.READ}))
    missed, injected, counts = [], [], []
    for query in data["queries"]:
        block = hook_recall(caller=caller, query=query["q"], namespace=recall_dev.NAMESPACE)
        counts.append(len(block.hits))
        if query["expect"] not in [hit.key for hit in block.hits]:
            missed.append(query["q"])
    for prompt in data["negatives"]:
        block = hook_recall(caller=caller, query=prompt, namespace=recall_dev.NAMESPACE)
        if block.block:
            injected.append({"prompt": prompt, "memories": [hit.key for hit in block.hits]})
    answered = len(data["queries"]) - len(missed)
    return {
        "answered_injected": answered,
        "answered": len(data["queries"]),
        "injected_per_question": round(sum(counts) / len(counts), 3),
        "expected_share_of_injected": round(answered / sum(counts), 3) if sum(counts) else None,
        "negatives_quiet": len(data["negatives"]) - len(injected),
        "negatives": len(data["negatives"]),
        "answered_missed": missed,
        "negatives_injected": injected,
    }


def locomo_hook_path(samples: list[dict], keys: dict) -> dict:
    """LoCoMo's questions through ``hook_recall``, per split: memories injected per question, and the share of
    questions with at least one of their evidence turns injected."""
    from memories.access import Caller
    from memories.models import Scope
    from memories.services import hook_recall

    caller = Caller(actor="benchmark", interface="cli", scopes=frozenset({Scope.READ}))
    found = {}
    for sample in samples:
        split = "tuning" if sample["sample_id"] in locomo.TUNING else "held_out"
        turns = keys[sample["sample_id"]]
        for item in locomo.questions(sample, set(turns)):
            block = hook_recall(caller=caller, query=item["question"], namespace=sample["sample_id"])
            wanted = {turns[dia_id] for dia_id in item["evidence"]}
            shown = [hit.key for hit in block.hits]
            found.setdefault(split, []).append((len(shown), bool(wanted & set(shown))))
    return {
        split: {
            "questions": len(rows),
            "injected_per_question": round(sum(n for n, _ in rows) / len(rows), 3),
            "with_evidence_injected": round(sum(hit for _, hit in rows) / len(rows), 3),
        }
        for split, rows in found.items()
    }


def grid(rd_pos, rd_neg, tuning) -> list[dict]:
    """Per pair of bars: recall-dev questions kept, negatives silenced, LoCoMo tuning questions silenced."""
    rows = []
    for coverage in COVERAGE_GRID:
        for cosine in COSINE_GRID:

            def passes(item):
                return item[0] >= coverage or item[1] >= cosine

            rows.append(
                {
                    "coverage": coverage,
                    "cosine": cosine,
                    "recall_dev_answered": sum(map(passes, rd_pos)),
                    "recall_dev_negatives_quiet": sum(not passes(item) for item in rd_neg),
                    "locomo_tuning_silenced": sum(not passes(item) for item in tuning),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo", help="path to locomo10.json")
    parser.add_argument("recall_dev", help="path to recall_dev.json")
    parser.add_argument("--db", required=True, help="the LoCoMo store of benchmarks/locomo.py (loaded if new)")
    parser.add_argument("--output", default=str(RESULTS / "relevance.json"))
    args = parser.parse_args()
    with open(args.locomo, encoding="utf-8") as handle:
        samples = json.load(handle)
    with open(args.recall_dev, encoding="utf-8") as handle:
        rd = json.load(handle)
    keys, _ = locomo.open_loaded_store(args.locomo, samples, db=args.db, form="dated", embedder="minilm")
    from django.conf import settings

    from memories.models import Memory

    if not Memory.objects.filter(namespace=recall_dev.NAMESPACE).exists():
        recall_dev.load(rd["facts"])

    hooks = hook_path(rd)
    print(
        f"recall-dev via hooks: {hooks['answered_injected']}/{hooks['answered']} questions with their memory "
        f"injected ({hooks['injected_per_question']} memories per question, {hooks['expected_share_of_injected']} "
        f"of them the expected one), {hooks['negatives_quiet']}/{hooks['negatives']} negatives with nothing injected"
    )
    locomo_hooks = locomo_hook_path(samples, keys)
    for split, figures in locomo_hooks.items():
        print(
            f"LoCoMo {split:8} via hooks: {figures['injected_per_question']} memories per question, "
            f"{figures['with_evidence_injected']:.3f} with an evidence turn injected"
        )
    lc = locomo.evaluate(samples, keys, modes=("hybrid",))["hybrid"]
    for split, table in lc.items():
        print(f"LoCoMo {split:8} R@5 {table['all']['R@5']:.3f}  R@10 {table['all']['R@10']:.3f}")

    patch, seen = recording_evidence()
    with patch:
        rd_pos = [evidence_of(query["q"], recall_dev.NAMESPACE, seen) for query in rd["queries"]]
        rd_neg = [evidence_of(prompt, recall_dev.NAMESPACE, seen) for prompt in rd["negatives"]]
        by_split = {"tuning": [], "held_out": []}
        for sample in samples:
            split = "tuning" if sample["sample_id"] in locomo.TUNING else "held_out"
            for item in locomo.questions(sample, set(keys[sample["sample_id"]])):
                by_split[split].append(evidence_of(item["question"], sample["sample_id"], seen))
    chosen = (settings.MEMORY_RELEVANT_COVERAGE, settings.MEMORY_RELEVANT_COSINE)
    held_out_silenced = sum(not (item[0] >= chosen[0] or item[1] >= chosen[1]) for item in by_split["held_out"])
    print(
        f"chosen bars: coverage {chosen[0]}, judged cosine {chosen[1]}; LoCoMo held-out questions silenced: "
        f"{held_out_silenced}/{len(by_split['held_out'])}"
    )

    def rounded(items):
        return [[round(coverage, 4), round(cosine, 4)] for coverage, cosine in items]

    save(
        {
            "benchmark": "relevance",
            "locomo_data": args.locomo,
            "recall_dev": args.recall_dev,
            "settings": {
                **fusion_settings(),
                "MEMORY_RELEVANT_COVERAGE": chosen[0],
                "MEMORY_RELEVANT_COSINE": chosen[1],
            },
            "chosen_on": "recall-dev and the LoCoMo tuning split; held-out reported with the chosen bars only",
            "hooks_recall_dev": hooks,
            "hooks_locomo": locomo_hooks,
            "locomo": {split: table["all"] for split, table in lc.items()},
            "locomo_by_category": lc,
            "locomo_held_out_silenced": held_out_silenced,
            "grid": grid(rd_pos, rd_neg, by_split["tuning"]),
            "evidence": {
                "recall_dev_questions": rounded(rd_pos),
                "recall_dev_negatives": rounded(rd_neg),
                "locomo_tuning": rounded(by_split["tuning"]),
            },
            "targets": {
                "answered_injected": ">= 39/40",
                "negatives_quiet": ">= 18/20",
                "locomo_held_out_R@10": ">= 0.72",
                "injected_per_question": "<= 2.0",
            },
        },
        args.output,
    )


if __name__ == "__main__":
    main()
