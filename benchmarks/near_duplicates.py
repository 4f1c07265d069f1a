"""Choosing MEMORY_NEAR_DUPLICATE_COSINE: cosines of distinct memories against those of light rewrites.

    .venv/bin/python benchmarks/near_duplicates.py ../shared/bench-data/locomo/locomo10.json \
        [--embedder minilm] [--output benchmarks/results/near_duplicates.json]

Distinct pairs (should not be flagged): every pair of the 40 recall-dev facts, and every
pair of turns within each of the first three LoCoMo conversations (turn text only, no
speaker or date, so two turns are as alike as their words). Near duplicates (should be
flagged): each text against a light rewrite of itself made by rules that keep its
meaning: lower case without punctuation, one middle word dropped, a lead-in
("Remember that ..."), two adjacent words swapped, a short tail added ("... as of
now."). LoCoMo turns under 6 words are left out of the rewrites (dropping a word
there changes the meaning). Reported per threshold: the share of distinct pairs
flagged (false alarms) and of rewrites flagged (caught). The data is read from the path
given and never copied.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

THRESHOLDS = (0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.96)
RECALL_DEV = harness.ROOT.parent / "shared" / "bench-data" / "recall-dev" / "recall_dev.json"


def rewrites(text: str) -> dict[str, str]:
    words = text.split()
    middle = len(words) // 2
    swapped = words[: middle - 1] + [words[middle], words[middle - 1]] + words[middle + 1 :]
    plain = "".join(char for char in text.lower() if char.isalnum() or char.isspace())
    return {
        "lowercase_no_punctuation": " ".join(plain.split()),
        "one_word_dropped": " ".join(words[:middle] + words[middle + 1 :]),
        "lead_in": "Remember that " + text[0].lower() + text[1:],
        "adjacent_words_swapped": " ".join(swapped),
        "tail_added": text.rstrip(".!? ") + " as of now.",
    }


def turn_texts(sample: dict) -> list[str]:
    conversation = sample["conversation"]
    texts = []
    for key, value in conversation.items():
        if key.startswith("session_") and isinstance(value, list):
            texts.extend(turn["text"].strip() for turn in value if turn.get("text", "").strip())
    return texts


def pair_cosines(matrix: np.ndarray) -> np.ndarray:
    similarity = matrix @ matrix.T
    upper = np.triu_indices(len(matrix), k=1)
    return similarity[upper]


def shares(values: np.ndarray) -> dict:
    return {f"{threshold:.2f}": round(float((values >= threshold).mean()), 5) for threshold in THRESHOLDS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("locomo", help="path of locomo10.json")
    parser.add_argument("--embedder", default="minilm", choices=("minilm", "hash"))
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--output", default="benchmarks/results/near_duplicates.json")
    args = parser.parse_args()

    harness.setup(Path("/tmp/near-duplicates-unused.db"), embedder=args.embedder)
    from search.embeddings import get_embedder

    embedder = get_embedder()
    facts = list(json.loads(RECALL_DEV.read_text())["facts"].values())
    samples = json.loads(Path(args.locomo).read_text())[: args.conversations]

    distinct = {"recall_dev_facts": pair_cosines(embedder.embed(facts))}
    sources = {"recall_dev_facts": facts}
    for sample in samples:
        texts = list(dict.fromkeys(turn_texts(sample)))  # exact repeats are the store's own dedup
        distinct[f"locomo_{sample['sample_id']}_turns"] = pair_cosines(embedder.embed(texts))
        sources[f"locomo_{sample['sample_id']}_turns"] = [text for text in texts if len(text.split()) >= 6]

    caught: dict[str, list[float]] = {}
    for texts in sources.values():
        originals = embedder.embed(texts)
        variants = [rewrites(text) for text in texts]
        for name in variants[0]:
            vectors = embedder.embed([variant[name] for variant in variants])
            caught.setdefault(name, []).extend(np.sum(originals * vectors, axis=1).tolist())

    all_distinct = np.concatenate(list(distinct.values()))
    all_caught = np.array([value for values in caught.values() for value in values])
    result = {
        "benchmark": "near_duplicates",
        "embedder": embedder.name,
        "environment": harness.environment(),
        "distinct_pairs": {
            name: {
                "pairs": len(values),
                "max": round(float(values.max()), 4),
                "p99_9": round(float(np.quantile(values, 0.999)), 4),
                "flagged_share": shares(values),
            }
            for name, values in distinct.items()
        },
        "rewrites": {
            name: {
                "pairs": len(values),
                "min": round(float(min(values)), 4),
                "p5": round(float(np.quantile(values, 0.05)), 4),
                "flagged_share": shares(np.array(values)),
            }
            for name, values in caught.items()
        },
        "overall": {
            "distinct_flagged": shares(all_distinct),
            "rewrites_flagged": shares(all_caught),
            "distinct_pairs": len(all_distinct),
            "rewrite_pairs": len(all_caught),
        },
    }
    print(json.dumps(result["overall"], indent=2))
    harness.save(result, Path(args.output))


if __name__ == "__main__":
    main()
