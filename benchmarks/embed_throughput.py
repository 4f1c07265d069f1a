"""How many texts a second MiniLM embeds here, by each way of running it: what bounds a MiniLM import.

    .venv/bin/python benchmarks/embed_throughput.py --output benchmarks/results/embed_throughput.json

On ``--texts`` corpus texts (the latency benchmark's; ~55 tokens at p50), each way in
turn, after a warm-up:

1. ``batches``: ``embedder.embed`` of the whole list, as an import embeds it
   (sentence-transformers' encode, batches of ``ENCODE_BATCH_SIZE``, one torch thread),
   in float32 and in bfloat16 (the model's bfloat16 copy, ``MEMORY_EMBED_PRECISION``; the run
   records which one "auto" chose here) on one thread, and in bfloat16 shared between
   ``--threads`` threads (``MEMORY_EMBED_BATCH_THREADS``, as an import runs by default).
2. ``one text at a time``: ``embedder.embed([text])`` for each text, as a single write
   embeds it (the compiled pass, ONNX Runtime or the TorchScript trace), in float32 and
   through the padded bfloat16 trace (the run records which "auto" chose here).
3. ``one text at a time on N threads``: the same split over N Python threads (the compiled
   pass runs outside the GIL), the most two cores can give without a second process.

The largest vector difference of each way from float32 batches is reported too (one text at a
time in float32 must agree to ~1e-6; bfloat16 to ~2e-3, with the least cosine).
Only the model is timed: an import also writes rows, postings and vectors (``bulk_import.py``).
"""

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=600)
    parser.add_argument("--threads", type=int, default=2, help="threads for the third way")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/embed_throughput.json")
    args = parser.parse_args()

    # Nothing is stored: the settings only need a database to point at.
    harness.setup(Path(tempfile.mkdtemp(prefix="memory-embed-")) / "embed.db", embedder="minilm")
    import numpy as np
    from corpus import Corpus
    from django.test import override_settings

    from search.embeddings import ENCODE_BATCH_SIZE, get_embedder

    corpus = Corpus(args.seed)
    texts = [corpus.text() for _ in range(args.texts)]
    embedder = get_embedder()
    if not embedder.available():
        sys.exit(f"MiniLM cannot be loaded: {embedder.load_error}")
    embedder.embed_query("warm up")
    embedder.embed([texts[0], texts[1]])
    embedder.embed([texts[0]])

    output = {"benchmark": "embed_throughput", "command": " ".join(sys.argv), "environment": harness.environment(),
              "load_average_at_start": os.getloadavg(), "texts": len(texts), "embedder": embedder.name,
              "encode_batch_size": ENCODE_BATCH_SIZE}
    tokens = [len(embedder._load().tokenizer(text)["input_ids"]) for text in texts]
    output["tokens"] = {"p50": int(np.median(tokens)), "max": int(max(tokens))}

    with override_settings(MEMORY_EMBED_PRECISION="auto"):
        output["auto_batch_precision"] = embedder.batch_precision()
        output["auto_longer_text_pipeline"] = embedder._for_longer(embedder._load()).__name__
    with override_settings(MEMORY_EMBED_PRECISION="float32", MEMORY_EMBED_BATCH_THREADS=1):
        start = time.perf_counter()
        batched = embedder.embed(texts)
        rates = {"batches": len(texts) / (time.perf_counter() - start)}
    with override_settings(MEMORY_EMBED_PRECISION="bfloat16", MEMORY_EMBED_BATCH_THREADS=1):
        embedder.embed(texts[:64])  # its kernels
        start = time.perf_counter()
        bfloat16 = embedder.embed(texts)
        rates["batches in bfloat16"] = len(texts) / (time.perf_counter() - start)
    with override_settings(MEMORY_EMBED_PRECISION="bfloat16", MEMORY_EMBED_BATCH_THREADS=args.threads):
        start = time.perf_counter()
        shared = embedder.embed(texts)
        rates[f"batches in bfloat16 on {args.threads} threads"] = len(texts) / (time.perf_counter() - start)

    with override_settings(MEMORY_EMBED_PRECISION="float32"):
        embedder.embed([texts[0]])  # timed and chosen in float32 (_for_longer)
        start = time.perf_counter()
        single = np.stack([embedder.embed([text])[0] for text in texts])
        rates["one text at a time"] = len(texts) / (time.perf_counter() - start)
    with override_settings(MEMORY_EMBED_PRECISION="bfloat16"):
        embedder.embed([texts[0]])  # the bfloat16 trace built, its shapes run
        start = time.perf_counter()
        single_bfloat16 = np.stack([embedder.embed([text])[0] for text in texts])
        rates["one text at a time in bfloat16"] = len(texts) / (time.perf_counter() - start)

    parts = [None] * args.threads

    def embed_share(index):
        parts[index] = [(position, embedder.embed([texts[position]])[0])
                        for position in range(index, len(texts), args.threads)]

    workers = [threading.Thread(target=embed_share, args=(index,)) for index in range(args.threads)]
    with override_settings(MEMORY_EMBED_PRECISION="float32"):
        start = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        rates[f"one text at a time on {args.threads} threads"] = len(texts) / (time.perf_counter() - start)
    threaded = np.zeros_like(batched)
    for part in parts:
        for position, vector in part:
            threaded[position] = vector

    output["texts_per_s"] = {name: round(rate, 1) for name, rate in rates.items()}
    output["least_cosine_bfloat16_with_float32"] = {
        "batches": float(np.min(np.sum(bfloat16 * batched, axis=1))),
        "one text at a time": float(np.min(np.sum(single_bfloat16 * batched, axis=1)))}
    output["max_abs_difference_from_batches"] = {
        "batches in bfloat16": float(np.abs(bfloat16 - batched).max()),
        f"batches in bfloat16 on {args.threads} threads": float(np.abs(shared - batched).max()),
        "one text at a time": float(np.abs(single - batched).max()),
        "one text at a time in bfloat16": float(np.abs(single_bfloat16 - batched).max()),
        f"one text at a time on {args.threads} threads": float(np.abs(threaded - batched).max())}
    output["load_average_at_end"] = os.getloadavg()
    print(output["texts_per_s"], output["max_abs_difference_from_batches"])
    print(f"saved {harness.save(output, args.output)}")


if __name__ == "__main__":
    main()
