"""How concentrated the synthetic corpus's words are, beside a real chat corpus (LoCoMo), by document frequency.

    .venv/bin/python benchmarks/corpus_stats.py --locomo ../shared/bench-data/locomo/locomo10.json \
        --output benchmarks/results/corpus_stats.json

Keyword recall costs grow with how many stored memories each query word is in, so the
latency benchmark's text must not make common words far commoner than real memories
do. Both corpora are tokenised as the index does (porter unicode61, through
``search.text``); filler words (which queries drop) and stems under three letters are
left out. The LoCoMo file is read where it lies and never copied.
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def stats(texts, top=25):
    from search.text import _filler_words, documents_terms

    filler = _filler_words()
    df = Counter()
    for terms, _ in documents_terms(texts):
        df.update(terms.keys())
    content = [(term, count) for term, count in df.most_common() if term not in filler and len(term) >= 3]
    shares = [count / len(texts) for _, count in content]
    return {
        "documents": len(texts),
        "mean_chars": round(sum(map(len, texts)) / len(texts), 1),
        "distinct_terms": len(df),
        "top_content_terms": [[term, round(count / len(texts), 3)] for term, count in content[:top]],
        "df_share_of_1st_10th_25th_100th": [round(shares[i], 3) for i in (0, 9, 24, 99) if i < len(shares)],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", default=None, help="path to locomo10.json (optional)")
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/corpus_stats.json")
    args = parser.parse_args()
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
    import django

    django.setup()
    from corpus import Corpus

    corpus = Corpus(args.seed)
    result = {
        "benchmark": "corpus_stats",
        "command": " ".join(sys.argv),
        "synthetic": stats([corpus.text() for _ in range(args.documents)]),
    }
    if args.locomo:
        data = json.loads(Path(args.locomo).read_text())
        turns = [
            turn["text"]
            for conversation in data
            for session in conversation["conversation"].values()
            if isinstance(session, list)
            for turn in session
            if isinstance(turn, dict) and "text" in turn
        ]
        result["locomo_turns"] = stats(turns)
    path = harness.save(result, args.output)
    print(
        json.dumps(
            {
                name: value.get("df_share_of_1st_10th_25th_100th")
                for name, value in result.items()
                if isinstance(value, dict)
            }
        )
    )
    print(f"saved {path}")


if __name__ == "__main__":
    main()
