"""How many texts a second MiniLM embeds here, by each way of running it: what bounds a MiniLM import.

    .venv/bin/python benchmarks/embed_throughput.py --output benchmarks/results/embed_throughput.json

On ``--texts`` corpus texts (the latency benchmark's; ~55 tokens at p50), ``--rounds``
times, the ways in turn (their order alternating from round to round), after a warm-up:

1. ``onnx batches``: ``embedder.embed`` of the whole list, as an import embeds it (ONNX
   Runtime, batches of ``BATCH_SIZE`` texts sorted by length, ``MEMORY_TORCH_THREADS``);
2. ``torch batches``: sentence-transformers' ``encode`` of the same list, batches of the
   same size, one torch thread: the way before ONNX Runtime ran batches, and the fallback;
3. ``onnx batches on N threads``: the same batches taken by ``--threads`` Python threads
   as they come free (ONNX Runtime runs outside the GIL): what helper threads would give;
4. ``onnx one text at a time``: ``embed_query`` for each text, as a single write embeds it.

Reported: the median texts/s of each way (wall clock), its CPU texts/s (process CPU time,
which other processes on a shared machine do not inflate), and the largest difference of
each way's vectors from torch's.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=320)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="threads for the third way")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/embed_throughput.json")
    args = parser.parse_args()

    # Nothing is stored: the settings only need a database to point at.
    harness.setup(Path(tempfile.mkdtemp(prefix="memory-embed-")) / "embed.db", embedder="minilm")
    import numpy as np
    from corpus import Corpus

    from search.embeddings import BATCH_SIZE, _OnnxModel, _TorchModel, get_embedder, minilm_model_dir

    corpus = Corpus(args.seed)
    texts = [corpus.text() for _ in range(args.texts)]
    embedder = get_embedder()
    if not embedder.available():
        sys.exit(f"MiniLM cannot be loaded: {embedder.load_error}")
    onnx = embedder._load()
    assert isinstance(onnx, _OnnxModel), "the ONNX export could not be used here"
    torch_model = _TorchModel(minilm_model_dir())
    pool = ThreadPoolExecutor(args.threads)

    def on_threads(texts):
        order = np.argsort([-len(text) for text in texts], kind="stable")
        batches = [order[start : start + BATCH_SIZE] for start in range(0, len(texts), BATCH_SIZE)]
        vectors = np.empty((len(texts), embedder.dim), dtype=np.float32)
        for batch, embedded in zip(batches, pool.map(lambda batch: onnx._batch([texts[i] for i in batch]), batches)):
            vectors[batch] = embedded
        return vectors

    ways = {
        "onnx batches": embedder.embed,
        "torch batches": torch_model.embed,
        f"onnx batches on {args.threads} threads": on_threads,
        "onnx one text at a time": lambda texts: np.stack([embedder.embed_query(text) for text in texts]),
    }
    for way in ways.values():
        way(texts[:BATCH_SIZE])
    tokens = [sum(encoding.attention_mask) for encoding in onnx.tokenizer.encode_batch(texts)]
    load = os.getloadavg()
    wall, cpu, vectors = {name: [] for name in ways}, {name: [] for name in ways}, {}
    for number in range(args.rounds):
        for name in list(ways) if number % 2 == 0 else list(reversed(ways)):
            started, cpu_started = time.perf_counter(), time.process_time()
            vectors[name] = ways[name](texts)
            wall[name].append(len(texts) / (time.perf_counter() - started))
            cpu[name].append(len(texts) / (time.process_time() - cpu_started))

    reference = vectors["torch batches"]
    output = {
        "benchmark": "embed_throughput",
        "command": " ".join(sys.argv),
        "environment": harness.environment(),
        "load_average_at_start": load,
        "load_average_at_end": os.getloadavg(),
        "texts": len(texts),
        "rounds": args.rounds,
        "embedder": embedder.name,
        "batch_size": BATCH_SIZE,
        "torch_threads": 1,
        "tokens": {"p50": int(np.median(tokens)), "max": int(max(tokens))},
        "texts_per_s": {name: round(statistics.median(rates), 1) for name, rates in wall.items()},
        "texts_per_cpu_s": {name: round(statistics.median(rates), 1) for name, rates in cpu.items()},
        "samples_texts_per_s": {name: [round(rate, 1) for rate in rates] for name, rates in wall.items()},
        "max_abs_difference_from_torch": {
            name: float(np.abs(found - reference).max()) for name, found in vectors.items()
        },
        "least_cosine_with_torch": {
            name: float(np.sum(found * reference, axis=1).min()) for name, found in vectors.items()
        },
    }
    print(output["texts_per_s"], output["texts_per_cpu_s"], output["max_abs_difference_from_torch"])
    print(f"saved {harness.save(output, args.output)}")


if __name__ == "__main__":
    main()
