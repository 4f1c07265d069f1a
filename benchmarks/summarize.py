"""Print saved latency results as Markdown tables, or two runs side by side with the change.

    .venv/bin/python benchmarks/summarize.py benchmarks/results/latency-minilm.json benchmarks/results/latency-hash.json
    .venv/bin/python benchmarks/summarize.py --compare before.json after.json

Every number printed is read from the JSON files named; nothing is measured here.
"""

import json
import sys
from pathlib import Path

ROWS = [
    ("keyword now", "keyword_now"),
    ("keyword now, query after query", "keyword_now_back_to_back"),
    ("keyword historical", "keyword_historical"),
    ("semantic now", "semantic_now"),
    ("hybrid now", "hybrid_now"),
    ("hybrid now, query vector given", "hybrid_now_excl_embedding"),
    ("hybrid historical", "hybrid_historical"),
    ("query embedding alone", "query_embedding"),
    ("floor: FTS5 MATCH (OR) ORDER BY rank LIMIT 10", "floor_fts5_or"),
    ("floor: FTS5 MATCH (AND) ORDER BY rank LIMIT 10", "floor_fts5_and"),
    ("floor: sqlite-vec KNN k=10", "floor_vec0_knn"),
    ("floor: numpy matrix @ query (all vectors)", "floor_numpy_matrix_scan"),
    ("floor: int8 scan with error bounds (all vectors)", "floor_int8_bounds"),
]
WRITES = [
    ("remember", "remember"),
    ("keyword recall right after a write", "keyword_after_write"),
    ("hybrid recall right after a write", "hybrid_after_write"),
]


def table(path: Path) -> str:
    data = json.loads(path.read_text())
    sizes = data["sizes"]
    lines = [f"### {path.name}: embedder {data['embedder']}, BLAS threads {data.get('blas_threads')}", ""]
    header = "| measure (ms, p50 / p95 wall; p50 CPU) | " + " | ".join(f"{s['size']:,}" for s in sizes) + " |"
    lines += [header, "|" + "---|" * (len(sizes) + 1)]
    for label, key in ROWS:
        cells = []
        for size in sizes:
            stats = size["recall"].get(key)
            cells.append(
                f"{stats['p50_ms']:.1f} / {stats['p95_ms']:.1f}; {stats.get('cpu_p50_ms', float('nan')):.1f}"
                if stats
                else "—"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for label, key in WRITES:
        cells = [
            f"{s['writes'][key]['p50_ms']:.1f} / {s['writes'][key]['p95_ms']:.1f}; "
            f"{s['writes'][key].get('cpu_p50_ms', float('nan')):.1f}"
            for s in sizes
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(
        "| bulk import (memories/s, memories_import) | "
        + " | ".join(f"{s['bulk_import']['memories_per_s']:,.0f}" for s in sizes)
        + " |"
    )
    lines.append(
        "| load average (1 min) at start / end | "
        + " | ".join(f"{s['load_average_at_start'][0]:.1f} / {s['load_average_at_end'][0]:.1f}" for s in sizes)
        + " |"
    )
    return "\n".join(lines)


def compare(before_path: Path, after_path: Path) -> str:
    """Each figure of two single-size runs, p50 and p95, with after / before."""
    before, after = (json.loads(path.read_text())["sizes"][0] for path in (before_path, after_path))
    lines = [
        f"| figure ({before['size']:,} memories) | {before_path.name} p50 / p95 | {after_path.name} p50 / p95 "
        "| after / before (p50, p95) |",
        "|---|---|---|---|",
    ]

    def row(label, old, new):
        if old and new:
            lines.append(
                f"| {label} | {old['p50_ms']:.2f} / {old['p95_ms']:.2f} | {new['p50_ms']:.2f} / "
                f"{new['p95_ms']:.2f} | {new['p50_ms'] / old['p50_ms']:.2f}, {new['p95_ms'] / old['p95_ms']:.2f} |"
            )

    for label, key in ROWS:
        row(label, before["recall"].get(key), after["recall"].get(key))
    for label, key in WRITES + [("remember without the near-twin check", "remember_without_near_duplicate_check")]:
        row(label, before["writes"].get(key), after["writes"].get(key))
    for name in ("hybrid_recall", "remember"):
        row(f"concurrent {name}", before["concurrent"].get(name), after["concurrent"].get(name))
    old, new = before["bulk_import"]["memories_per_s"], after["bulk_import"]["memories_per_s"]
    lines.append(f"| bulk import (memories/s) | {old:,.1f} | {new:,.1f} | {new / old:.2f} |")
    return "\n".join(lines)


def main():
    if sys.argv[1:2] == ["--compare"]:
        print(compare(Path(sys.argv[2]), Path(sys.argv[3])))
        return
    for name in sys.argv[1:]:
        print(table(Path(name)))
        print()


if __name__ == "__main__":
    main()
