"""Embeddings and stored vectors: the models, the embedding space, pending revisions, backfill and erasure.

Semantic tests use the real all-MiniLM-L6-v2 from the wheel (loaded once per process);
the rest use the hash embedder, and subprocesses always do, to stay fast.
"""

import json
import threading
import time

import numpy as np
import pytest
import torch
from django.core.management import CommandError, call_command

from memories import services
from memories.management.commands.backfill import progress_text
from memories.models import Revision
from memories.selectors import memory_recall as recall
from memories.services import imports
from search import embeddings, indexing, vectors
from search.embeddings import (
    BFLOAT16_MIN_TEXTS,
    BFLOAT16_PAD_TOKENS,
    ONNX_MAX_TOKENS,
    EmbedderUnavailable,
    HashEmbedder,
    MiniLMEmbedder,
    PathEmbedder,
    _chosen_precision,
    _OnnxPipeline,
    _PaddedBfloat16Trace,
    _pipeline,
    _quicker_for_longer,
    _TracedPipeline,
    get_embedder,
    minilm_model_dir,
    revision_text,
    warm_up,
)
from search.errors import SpaceConflict
from tests.subprocesses import clean_env, instance, manage, migrated_db, python  # noqa: F401  (fixtures)

ACTOR = {"actor": "tester", "interface": "cli"}


@pytest.fixture(scope="module")
def minilm():
    embedder = MiniLMEmbedder()
    assert embedder.available(), embedder.load_error
    return embedder


@pytest.fixture
def hash_writes(settings):
    """Writes embed with the hash embedder (as in the subprocesses)."""
    settings.MEMORY_EMBEDDER = "hash"
    return get_embedder()


@pytest.fixture
def no_model_writes(settings, tmp_path):
    """Writes find no model to load, so their revisions stay pending."""
    settings.MEMORY_EMBEDDER = str(tmp_path / "no-model-here")


def _cos(a, b) -> float:
    return float(np.dot(a, b))


def _text_revision_ids(memory_id=None) -> list[int]:
    revisions = Revision.objects.filter(tombstone=False)
    if memory_id is not None:
        revisions = revisions.filter(memory_id=memory_id)
    return list(revisions.order_by("id").values_list("id", flat=True))


# The models


def test_minilm_embeds_into_384_dimensional_unit_vectors(minilm):
    embedded = minilm.embed(["The deploy happens on Tuesdays.", "My cat likes fish."])

    assert minilm.name == "all-MiniLM-L6-v2" and minilm.dim == 384
    assert embedded.dtype == np.float32 and embedded.shape == (2, 384)
    assert embedded.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(embedded, axis=1), 1.0, atol=1e-5)


def test_minilm_puts_paraphrases_closer_than_unrelated_sentences(minilm):
    deploy, release, cat = minilm.embed(
        ["The deploy happens on Tuesdays", "Releases ship every Tuesday", "My cat likes fish"]
    )

    assert _cos(deploy, release) > 0.5
    assert _cos(deploy, release) > _cos(deploy, cat) + 0.3
    assert _cos(release, cat) < 0.2


def test_a_query_embeds_like_the_same_text_in_a_batch(minilm):
    batch = minilm.embed(["Releases ship every Tuesday", "My cat likes fish"])

    np.testing.assert_allclose(minilm.embed_query("Releases ship every Tuesday"), batch[0], atol=1e-6)
    assert minilm.embed([]).shape == (0, 384)


def _varied_texts(count: int) -> list[str]:
    subjects = ["The deploy", "Ana's runbook", "The billing service", "Our cat", "The quarterly report", "Kubernetes"]
    endings = ["runs every Friday", "moved to the ops wiki", "failed after the outage in March",
               "likes fish more than rice", "is due before the board meeting", "needs a new node pool"]
    return [f"{subjects[number % 6]} {endings[number // 6 % 6]} (note {number})" for number in range(count)]


def test_batches_in_bfloat16_stay_within_rounding_of_float32(minilm, settings):
    texts = _varied_texts(BFLOAT16_MIN_TEXTS + 8)
    settings.MEMORY_EMBED_PRECISION = "float32"
    exact = minilm.embed(texts)
    settings.MEMORY_EMBED_PRECISION = "bfloat16"
    rounded = minilm.embed(texts)

    assert rounded.dtype == np.float32 and rounded.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(rounded, axis=1), 1.0, atol=1e-6)
    assert np.abs(rounded - exact).max() > 1e-5  # bfloat16 did run
    assert np.abs(rounded - exact).max() < 5e-3
    assert np.sum(rounded * exact, axis=1).min() >= 0.9999


def test_fewer_texts_than_a_batch_always_run_in_float32(minilm, settings):
    texts = _varied_texts(BFLOAT16_MIN_TEXTS - 1)
    settings.MEMORY_EMBED_PRECISION = "bfloat16"

    assert minilm.batch_precision() == "bfloat16"
    np.testing.assert_array_equal(minilm.embed(texts), minilm._load().encode(
        texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True))


def test_auto_times_both_once_and_keeps_its_choice(settings, caplog):
    settings.MEMORY_EMBED_PRECISION = "auto"
    embedder = MiniLMEmbedder()  # the model itself is loaded once per process

    with caplog.at_level("INFO", logger="search.embeddings"):
        chosen = embedder.batch_precision()
        again = embedder.batch_precision()

    assert chosen == again and chosen in ("float32", "bfloat16")
    timed = [record.getMessage() for record in caplog.records if record.getMessage().startswith("Batches of")]
    assert len(timed) == 1 and f"run in {chosen} here" in timed[0]
    settings.MEMORY_EMBED_PRECISION = "float32"
    assert embedder.batch_precision() == "float32"  # a setting other than auto is followed as it is


@pytest.mark.parametrize(("float32_ms", "bfloat16_ms", "cosine", "chosen"), [
    (380, 130, 0.99998, "bfloat16"),  # this Xeon (AMX)
    (300, 272, 0.99998, "bfloat16"),  # just over 1.1 times quicker
    (300, 280, 0.99998, "float32"),  # within the timing's noise
    (380, 130, 0.9990, "float32"),  # quicker, but the vectors drift
    (200, 900, 1.0, "float32"),  # no bfloat16 instructions: emulated, slower
])
def test_auto_takes_bfloat16_only_when_clearly_quicker_and_close(float32_ms, bfloat16_ms, cosine, chosen):
    assert _chosen_precision(float32_ms / 1000, bfloat16_ms / 1000, cosine) == chosen


class _Shares(list):
    """(thread name, texts) of each ``_encode_in`` call; with ``meet`` set, a thread's first call waits there."""

    meet: threading.Barrier | None = None


@pytest.fixture
def batch_shares(monkeypatch):
    """Records, for each ``_encode_in`` call, the thread it ran on and how many texts it had.

    Set ``meet`` to a barrier for that many threads to make each take a batch before any
    goes on (threads take batches as they come, so one could otherwise take them all).
    """
    calls = _Shares()

    def recorded(torch, model, texts, precision, encode=embeddings._encode_in):
        name = threading.current_thread().name
        first = all(thread != name for thread, _ in calls)
        calls.append((name, len(texts)))
        if first and calls.meet is not None:
            calls.meet.wait()
        return encode(torch, model, texts, precision)

    monkeypatch.setattr(embeddings, "_encode_in", recorded)
    return calls


@pytest.mark.parametrize("threads", [2, 3])
def test_a_large_batch_is_shared_between_threads_in_whole_batches(minilm, settings, batch_shares, threads):
    texts = [text * (1 + number % 4) for number, text in enumerate(_varied_texts(4 * BFLOAT16_MIN_TEXTS + 5))]
    settings.MEMORY_EMBED_PRECISION = "float32"
    settings.MEMORY_EMBED_BATCH_THREADS = 1
    alone = minilm.embed(texts)
    assert batch_shares == [(threading.current_thread().name, len(texts))]
    batch_shares.clear()

    settings.MEMORY_EMBED_BATCH_THREADS = threads
    batch_shares.meet = threading.Barrier(threads, timeout=60)
    shared = minilm.embed(texts)

    assert len({thread for thread, _ in batch_shares}) == threads
    assert sorted(count for _, count in batch_shares) == [5] + [BFLOAT16_MIN_TEXTS] * 4  # each text once
    assert shared.flags.c_contiguous and shared.dtype == np.float32
    np.testing.assert_allclose(shared, alone, rtol=0, atol=1e-6)  # each text in its own row, as one call gives


def test_a_batch_shared_in_bfloat16_stays_within_rounding(minilm, settings, batch_shares):
    texts = _varied_texts(2 * BFLOAT16_MIN_TEXTS)
    settings.MEMORY_EMBED_PRECISION = "float32"
    exact = minilm.embed(texts)
    settings.MEMORY_EMBED_PRECISION = "bfloat16"
    settings.MEMORY_EMBED_BATCH_THREADS = 2
    batch_shares.clear()
    batch_shares.meet = threading.Barrier(2, timeout=60)

    rounded = minilm.embed(texts)

    assert [count for _, count in batch_shares] == [BFLOAT16_MIN_TEXTS, BFLOAT16_MIN_TEXTS]
    assert len({thread for thread, _ in batch_shares}) == 2
    assert np.abs(rounded - exact).max() > 1e-5  # bfloat16 products did run, on both threads
    assert np.sum(rounded * exact, axis=1).min() >= 0.9999


def test_fewer_texts_than_two_batches_stay_on_one_thread(minilm, settings, batch_shares):
    settings.MEMORY_EMBED_PRECISION = "bfloat16"
    settings.MEMORY_EMBED_BATCH_THREADS = 4

    minilm.embed(_varied_texts(2 * BFLOAT16_MIN_TEXTS - 1))

    assert batch_shares == [(threading.current_thread().name, 2 * BFLOAT16_MIN_TEXTS - 1)]


def test_an_import_embedded_in_bfloat16_recalls_by_meaning(minilm, settings, db):
    settings.MEMORY_EMBEDDER = "minilm"
    settings.MEMORY_EMBED_PRECISION = "bfloat16"
    facts = _varied_texts(BFLOAT16_MIN_TEXTS) + ["Invoices are emailed to customers on the first of each month"]
    document = {"format": "memory-export", "version": 1,
                "memories": [{"namespace": "facts", "key": f"fact-{number}", "revisions": [{"content": fact}]}
                             for number, fact in enumerate(facts)]}
    services.memories_import(document=json.dumps(document), trusted=False, **ACTOR)

    _, stored = vectors.load_matrix()
    np.testing.assert_array_equal(stored, minilm.embed([revision_text("", fact) for fact in facts]))
    hits = recall(query="When are customers sent their invoices?", namespace="facts", mode="semantic").hits
    assert hits[0].memory.key == f"fact-{len(facts) - 1}"


def _facts_document(facts: list[str]) -> str:
    """A trusted import's document: one memory per fact."""
    revision = {"known_at": "2026-01-05T10:00:00Z"}
    return json.dumps({"format": "memory-export", "version": 1,
                       "memories": [{"namespace": "facts", "key": f"fact-{number}",
                                     "revisions": [{**revision, "content": fact}]}
                                    for number, fact in enumerate(facts)]})


@pytest.fixture
def ahead_starts(monkeypatch):
    """(texts, revisions already written) of each ``indexing.embed_ahead_of_batch`` call."""
    calls = []

    def recorded(texts, start=indexing.embed_ahead_of_batch):
        texts = list(texts)
        calls.append((len(texts), Revision.objects.count()))
        return start(texts)

    monkeypatch.setattr(indexing, "embed_ahead_of_batch", recorded)
    return calls


@pytest.fixture
def shared_batches(minilm, settings):
    settings.MEMORY_EMBEDDER = "minilm"
    settings.MEMORY_EMBED_PRECISION = "bfloat16"
    settings.MEMORY_EMBED_BATCH_THREADS = 2


@pytest.mark.usefixtures("shared_batches")
def test_texts_embedded_ahead_are_each_embedded_once_as_a_shared_batch_would_be(minilm, settings):
    texts = _varied_texts(2 * BFLOAT16_MIN_TEXTS)

    ahead = minilm.embed_ahead(iter(texts + texts[:10]))

    assert ahead.texts == texts
    np.testing.assert_array_equal(ahead.vectors(), minilm.embed(texts))
    assert minilm.embed_ahead(texts[:-1]) is None  # under two batches: embed keeps them on one thread
    settings.MEMORY_EMBED_BATCH_THREADS = 1
    assert minilm.embed_ahead(texts) is None
    assert HashEmbedder().embed_ahead(texts) is None


@pytest.mark.usefixtures("shared_batches")
def test_an_import_embeds_its_new_texts_before_writing_them(minilm, db, batch_shares, ahead_starts):
    facts = _varied_texts(3 * BFLOAT16_MIN_TEXTS)
    batch_shares.meet = threading.Barrier(2, timeout=60)  # the helper takes a batch, then this thread

    services.memories_import(document=_facts_document(facts), trusted=True, **ACTOR)

    assert ahead_starts == [(len(facts), 0)]  # every new text, before any row was written
    # Each text embedded once, in whole batches, by the helper and by this thread.
    assert sorted(count for _, count in batch_shares) == [BFLOAT16_MIN_TEXTS] * 3
    assert len({thread for thread, _ in batch_shares}) == 2
    _, stored = vectors.load_matrix()
    np.testing.assert_array_equal(stored, minilm.embed([revision_text("", fact) for fact in facts]))


@pytest.mark.usefixtures("shared_batches")
def test_a_dry_run_or_an_unchanged_import_embeds_nothing_ahead(db, batch_shares, ahead_starts):
    document = _facts_document(_varied_texts(3 * BFLOAT16_MIN_TEXTS))

    services.memories_import(document=document, trusted=True, dry_run=True, **ACTOR)
    assert batch_shares == [] and not Revision.objects.exists()

    services.memories_import(document=document, trusted=True, **ACTOR)
    batch_shares.clear()
    report = services.memories_import(document=document, trusted=True, **ACTOR)
    assert report.unchanged == 3 * BFLOAT16_MIN_TEXTS
    assert batch_shares == [] and ahead_starts[-1] == (0, 3 * BFLOAT16_MIN_TEXTS)


@pytest.mark.usefixtures("shared_batches")
def test_an_import_that_fails_stops_embedding_ahead_and_writes_nothing(db, batch_shares, monkeypatch):
    def failing(self, items):
        raise RuntimeError("disk full")

    monkeypatch.setattr(imports._NewMemories, "_write", failing)

    with pytest.raises(RuntimeError, match="disk full"):
        services.memories_import(document=_facts_document(_varied_texts(8 * BFLOAT16_MIN_TEXTS)), trusted=True,
                                 **ACTOR)

    embedded = len(batch_shares)
    time.sleep(0.5)
    assert len(batch_shares) == embedded < 8  # the batch under way ended, and no other began
    assert not Revision.objects.exists() and vectors.load_matrix()[1].shape[0] == 0


@pytest.mark.parametrize("kind", [_OnnxPipeline, _TracedPipeline])
def test_one_text_runs_through_a_compiled_pipeline_with_the_models_numbers(minilm, kind):
    model = minilm._load()
    compiled = minilm._compiled(kind, model)
    assert isinstance(compiled, kind)
    # Lengths other than the compiled text's, up to the model's limit (the last is cut there).
    for text in ["Ok", "坐标系统使用 WGS84, und die Straße ist gesperrt.", "release notes " * 300]:
        features = model.preprocess([text])
        assert compiled.takes(features)
        with torch.inference_mode():
            modules = _pipeline(torch, model, features).numpy()[0]
        np.testing.assert_allclose(compiled(features)[0], modules, rtol=0, atol=1e-6)
    assert not compiled.takes(model.preprocess(["two texts", "padded to one length"]))
    assert minilm.embeds_beside and not HashEmbedder().embeds_beside


def test_a_longer_text_in_bfloat16_is_padded_masked_and_within_rounding(minilm):
    model = minilm._load()
    compiled = minilm._compiled(_PaddedBfloat16Trace, model)
    assert isinstance(compiled, _PaddedBfloat16Trace)
    for text in ["Ok", "坐标系统使用 WGS84, und die Straße ist gesperrt.", "release notes " * 300]:
        features = model.preprocess([text])
        padded = compiled.padded(torch, features)
        tokens = features["input_ids"].shape[1]
        assert padded["input_ids"].shape[1] == -(-tokens // BFLOAT16_PAD_TOKENS) * BFLOAT16_PAD_TOKENS
        with torch.inference_mode():
            modules = _pipeline(torch, model, features).numpy()[0]
        vector = compiled(features)[0]
        assert vector.dtype == np.float32 and abs(np.linalg.norm(vector) - 1) < 1e-6
        assert 1e-5 < np.abs(vector - modules).max() < 3e-3  # bfloat16 products did run
        assert vector @ modules >= 0.9999
    # The mask keeps the padding out: "Ok" is 3 tokens and 13 of padding, which unmasked move it far.
    features = compiled.padded(torch, model.preprocess(["Ok"]))
    unmasked = {**features, "attention_mask": torch.ones_like(features["attention_mask"])}
    with torch.inference_mode():
        modules = _pipeline(torch, model, model.preprocess(["Ok"])).numpy()[0]
        ignored = compiled.compiled(*(unmasked[key] for key in compiled.keys)).float().numpy()[0]
    assert ignored @ modules / np.linalg.norm(ignored) < 0.99


def test_longer_single_texts_follow_the_precision_setting(minilm, settings):
    longer, short = "release notes " * 40, "what did we decide about the release"
    settings.MEMORY_EMBED_PRECISION = "float32"
    exact, exact_short = minilm.embed_query(longer), minilm.embed_query(short)
    assert minilm._for_longer(minilm._load()) in (_OnnxPipeline, _TracedPipeline)
    settings.MEMORY_EMBED_PRECISION = "bfloat16"
    rounded, rounded_short = minilm.embed_query(longer), minilm.embed_query(short)

    assert minilm._for_longer(minilm._load()) is _PaddedBfloat16Trace
    assert 1e-5 < np.abs(rounded - exact).max() < 3e-3 and rounded @ exact >= 0.9999
    np.testing.assert_array_equal(rounded_short, exact_short)  # queries of up to 32 tokens: float32 always


def test_short_texts_go_to_onnx_runtime_and_longer_ones_to_the_pipeline_timed_quicker(minilm, monkeypatch):
    model = minilm._load()
    longer = minilm._for_longer(model)
    assert longer in (_OnnxPipeline, _TracedPipeline, _PaddedBfloat16Trace)
    assert minilm._for_longer(model) is longer  # timed once
    used = []
    for kind in (_OnnxPipeline, _TracedPipeline, _PaddedBfloat16Trace):
        monkeypatch.setattr(kind, "__call__", lambda self, features, call=kind.__call__: used.append(type(self))
                            or call(self, features))
    for text in ["what did we decide about the release", "release notes " * 40]:
        features = model.preprocess([text])
        want = _OnnxPipeline if features["input_ids"].shape[1] <= ONNX_MAX_TOKENS else longer
        used.clear()
        np.testing.assert_array_equal(minilm.embed_query(text), minilm._compiled(want, model)(features)[0])
        assert used[0] is want  # (then the direct call above)
    assert used[0] is longer  # both lengths were tried


@pytest.mark.parametrize(("onnx_ms", "trace_ms", "chosen"), [(2, 20, _OnnxPipeline), (20, 2, _TracedPipeline),
                                                             (10, 10, _TracedPipeline)])
def test_longer_texts_go_to_onnx_runtime_only_when_it_was_clearly_quicker(minilm, onnx_ms, trace_ms, chosen):
    model = minilm._load()

    assert _quicker_for_longer(model, _taking(onnx_ms), _taking(trace_ms)) is chosen
    assert _quicker_for_longer(model, None, _taking(trace_ms)) is _TracedPipeline  # the one that could be built
    assert _quicker_for_longer(model, _taking(onnx_ms), None) is _OnnxPipeline


def _taking(ms, vector=None):
    """A pipeline that takes ``ms`` and gives ``vector`` (by default the same unit vector as every other)."""
    vector = np.full((1, 384), 384 ** -0.5, dtype=np.float32) if vector is None else vector
    return lambda features: time.sleep(ms / 1000) or vector


@pytest.mark.parametrize(("onnx_ms", "trace_ms", "bfloat16_ms", "close", "chosen"), [
    (15, 16, 11, True, _PaddedBfloat16Trace),  # this Xeon (AMX): 1.36 times the quicker float32 one
    (15, 16, 14, True, _OnnxPipeline),  # within the timing's noise
    (15, 16, 11, False, _OnnxPipeline),  # quicker, but the vector drifts
])
def test_longer_texts_take_bfloat16_only_when_clearly_quicker_and_close(minilm, onnx_ms, trace_ms, bfloat16_ms,
                                                                       close, chosen):
    model = minilm._load()
    drifted = np.zeros((1, 384), dtype=np.float32)
    drifted[0, :2] = 0.5 ** 0.5
    bfloat16 = _taking(bfloat16_ms, None if close else drifted)

    assert _quicker_for_longer(model, _taking(onnx_ms), _taking(trace_ms), bfloat16) is chosen
    assert _quicker_for_longer(model, _taking(onnx_ms), _taking(trace_ms), bfloat16,
                               always_bfloat16=True) is _PaddedBfloat16Trace  # the setting says bfloat16


def test_texts_go_through_the_modules_when_the_compilers_fail_or_differ(minilm, monkeypatch, settings):
    texts = ["Releases ship every Tuesday", "release notes " * 40]  # one for each compiler
    settings.MEMORY_EMBED_PRECISION = "float32"
    expected = [minilm.embed_query(text) for text in texts]
    settings.MEMORY_EMBED_PRECISION = "auto"  # the bfloat16 trace is tried too

    def broken(*args, **kwargs):
        raise RuntimeError("the compiler is gone")

    monkeypatch.setattr(torch.onnx, "export", broken)
    monkeypatch.setattr(torch.jit, "trace", broken)
    uncompiled = MiniLMEmbedder()
    for text, want in zip(texts, expected):
        np.testing.assert_allclose(uncompiled.embed_query(text), want, rtol=0, atol=1e-6)
    assert set(uncompiled._compiled_pipelines.values()) == {False}
    assert not uncompiled.embeds_beside  # run from Python: no helper thread
    monkeypatch.undo()

    settings.MEMORY_EMBED_PRECISION = "float32"
    for kind in (_OnnxPipeline, _TracedPipeline):
        monkeypatch.setattr(kind, "__call__", lambda self, features, call=kind.__call__: call(self, features) + 1e-4)
    drifted = MiniLMEmbedder()
    for text, want in zip(texts, expected):
        np.testing.assert_allclose(drifted.embed_query(text), want, rtol=0, atol=1e-6)
    assert set(drifted._compiled_pipelines.values()) == {False, None}  # the bfloat16 trace: not tried in float32
    assert drifted._compiled_pipelines[_PaddedBfloat16Trace] is None


def test_warming_up_builds_the_compiled_pipelines_and_never_raises(settings, tmp_path):
    settings.MEMORY_EMBEDDER = "minilm"
    warm_up()
    compiled = get_embedder()._compiled_pipelines
    assert isinstance(compiled[_OnnxPipeline], _OnnxPipeline) and isinstance(compiled[_TracedPipeline], _TracedPipeline)
    assert isinstance(compiled[_PaddedBfloat16Trace], _PaddedBfloat16Trace)  # with its shapes warmed
    settings.MEMORY_EMBEDDER = str(tmp_path / "no-model-here")
    warm_up()  # reported by the first write or semantic recall instead
    assert not get_embedder().available()


def test_linear_weights_are_held_transposed_with_the_files_values(minilm):
    from safetensors.torch import load_file

    model = minilm._load()
    stored = load_file(str(minilm_model_dir() / "model.safetensors"))
    linears = {name: module for name, module in model[0].auto_model.named_modules()
               if isinstance(module, torch.nn.Linear)}
    assert len(linears) == 37  # six layers of six, and the pooler
    for name, module in linears.items():
        assert module.weight.t().is_contiguous()  # what the product reads
        weight = stored.get(f"{name}.weight", stored.get(f"bert.{name}.weight"))
        assert torch.equal(module.weight, weight)


def test_a_model_directory_is_named_after_itself_and_gives_the_models_dimension(minilm):
    by_path = PathEmbedder(minilm_model_dir())

    assert by_path.available()
    assert by_path.name == "path:model"
    assert by_path.dim == 384
    np.testing.assert_allclose(by_path.embed(["Releases ship every Tuesday"]),
                               minilm.embed(["Releases ship every Tuesday"]), atol=1e-6)


def test_a_model_that_cannot_load_is_unavailable_and_says_why(tmp_path):
    missing = PathEmbedder(tmp_path / "gone")

    assert not missing.available()
    assert "no sentence-transformers model" in missing.load_error and "gone" in missing.load_error
    with pytest.raises(EmbedderUnavailable, match="cannot be loaded"):
        missing.embed(["anything"])


def test_the_configured_embedder_is_built_once_per_setting(settings):
    settings.MEMORY_EMBEDDER = "hash"
    first = get_embedder()
    settings.MEMORY_EMBEDDER = "minilm"
    second = get_embedder()
    settings.MEMORY_EMBEDDER = "hash"

    assert isinstance(first, HashEmbedder) and isinstance(second, MiniLMEmbedder)
    assert get_embedder() is first


def test_the_hash_embedding_is_lexical_and_unit_length():
    embedder = HashEmbedder()
    deploy, deploys, billing, empty, punctuation = embedder.embed(
        ["deploy the billing service on Tuesday", "deployments of the billing service happen on Tuesdays",
         "my cat likes fish", "", "?!"]
    )

    assert embedder.name == "hash-v1" and embedder.dim == 384
    np.testing.assert_allclose(np.linalg.norm([deploy, deploys, billing, punctuation], axis=1), 1.0, atol=1e-6)
    assert _cos(deploy, deploys) > 0.4
    assert _cos(deploy, deploys) > _cos(deploy, billing) + 0.3
    assert not empty.any()
    assert _cos(*embedder.embed(["Deploy, deploy!", "deploy deploy"])) == pytest.approx(1.0)


def test_the_hash_embedding_is_the_same_in_another_process(tmp_path):
    texts = ["The deploy happens on Tuesdays.", "Grüße aus München", "坐标系统", "ACME's dark-mode"]
    code = ("import json, sys; from search.embeddings import HashEmbedder; "
            "print(HashEmbedder().embed(json.loads(sys.argv[1])).tobytes().hex())")

    done = python(code, json.dumps(texts), env=clean_env(tmp_path, MEMORY_EMBEDDER="hash", PYTHONHASHSEED="12345"))

    assert done.returncode == 0, done.stderr
    assert bytes.fromhex(done.stdout.strip()) == HashEmbedder().embed(texts).tobytes()


def test_revision_text_puts_the_title_before_the_content():
    assert revision_text("Deploys", "They happen on Tuesdays.") == "Deploys. They happen on Tuesdays."
    assert revision_text("Why deploys?", "Tuesdays.") == "Why deploys? Tuesdays."
    assert revision_text("  ", "Tuesdays.") == "Tuesdays."
    assert revision_text("", "Tuesdays.") == "Tuesdays."


# The embedding space


def test_the_first_vectors_record_the_embedder_and_its_dimension(db, no_model_writes, remember):
    revision_id = remember("The deploy happens on Tuesdays.").memory.revision_id
    assert vectors.current_space() is None

    added = vectors.store_vectors([revision_id], ["The deploy happens on Tuesdays."], embedder=HashEmbedder())

    space = vectors.current_space()
    assert added == 1
    assert (space.embedder, space.dim) == ("hash-v1", 384)
    assert vectors.vector_count() == 1


def test_vectors_of_another_model_are_refused_with_the_reembed_hint(db, hash_writes, remember, minilm):
    revision_id = remember("The deploy happens on Tuesdays.").memory.revision_id
    assert vectors.current_space().embedder == "hash-v1"

    with pytest.raises(SpaceConflict, match=r"hash-v1 \(384 dimensions\).*all-MiniLM-L6-v2.*manage.py backfill --reembed"):
        vectors.ensure_space(minilm)
    with pytest.raises(SpaceConflict, match="backfill --reembed"):
        vectors.insert_vectors([revision_id], minilm.embed(["x"]), embedder=minilm)
    with pytest.raises(SpaceConflict, match="backfill --reembed"):
        vectors.ensure_space(HashEmbedder(dim=64))
    assert vectors.vector_count() == 1


def test_an_empty_space_switches_to_another_embedder_without_asking(db):
    vectors.ensure_space(HashEmbedder(dim=64))

    space = vectors.ensure_space(HashEmbedder())

    assert (space.embedder, space.dim) == ("hash-v1", 384)
    assert space.generation == 1


def test_writes_while_another_models_vectors_are_stored_stay_pending(db, no_model_writes, settings, remember):
    other = HashEmbedder(dim=64)
    first = remember("The office opens at nine.").memory.revision_id
    vectors.insert_vectors([first], other.embed(["The office opens at nine."]), embedder=other)
    settings.MEMORY_EMBEDDER = "hash"

    second = remember("The deploy happens on Tuesdays.").memory.revision_id

    assert vectors.pending_revision_ids() == [second]


# Storing and loading


def test_stored_vectors_load_back_in_id_order_with_the_same_bytes(db, no_model_writes, remember):
    embedder = HashEmbedder()
    texts = ["The deploy happens on Tuesdays.", "Releases ship every Tuesday.", "My cat likes fish."]
    ids = [remember(text).memory.revision_id for text in texts]

    assert vectors.store_vectors(list(reversed(ids)), list(reversed(texts)), embedder=embedder, batch_size=2) == 3

    loaded_ids, matrix = vectors.load_matrix()
    assert loaded_ids.dtype == np.int64 and loaded_ids.tolist() == ids
    assert matrix.dtype == np.float32 and matrix.tobytes() == embedder.embed(texts).tobytes()
    tail_ids, tail = vectors.load_matrix(after_id=ids[0])
    assert tail_ids.tolist() == ids[1:] and tail.tobytes() == matrix[1:].tobytes()
    assert vectors.load_matrix(after_id=ids[-1])[1].shape == (0, 384)


def test_sqlite_vec_finds_the_same_neighbours_and_cosines_as_the_matrix(db, settings, remember, minilm):
    settings.MEMORY_EMBEDDER = "minilm"
    texts = ["The deploy happens on Tuesdays", "My cat likes fish", "The office opens at nine",
             "Releases ship every Tuesday"]
    for text in texts:
        remember(text)
    query = minilm.embed_query("When do we ship a release?")

    nearest = vectors.vec0_knn(query, k=3)

    ids, matrix = vectors.load_matrix()
    cosines = matrix @ query
    by_matrix = sorted(zip(cosines.tolist(), ids.tolist()), reverse=True)[:3]
    assert [hit.revision_id for hit in nearest] == [revision_id for _, revision_id in by_matrix]
    np.testing.assert_allclose([hit.cosine for hit in nearest], [cosine for cosine, _ in by_matrix], atol=1e-5)
    best = Revision.objects.get(pk=nearest[0].revision_id).content
    assert best in ("Releases ship every Tuesday", "The deploy happens on Tuesdays")
    assert Revision.objects.get(pk=nearest[2].revision_id).content != "My cat likes fish"


def test_a_vector_is_stored_once_and_tombstones_and_unknown_ids_get_none(db, no_model_writes, remember):
    embedder = HashEmbedder()
    memory = remember("The deploy happens on Tuesdays.").memory
    services.memory_forget(memory_id=memory.id, **ACTOR)
    tombstone = Revision.objects.get(memory_id=memory.id, tombstone=True).pk
    start = vectors.ensure_space(embedder).generation

    added = vectors.store_vectors([memory.revision_id, memory.revision_id, tombstone, 999_999],
                                  ["first", "second", "tombstone", "unknown"], embedder=embedder)
    again = vectors.store_vectors([memory.revision_id], ["third"], embedder=embedder)

    assert (added, again) == (1, 0)
    ids, matrix = vectors.load_matrix()
    assert ids.tolist() == [memory.revision_id]
    assert matrix.tobytes() == embedder.embed(["first"]).tobytes()
    assert vectors.current_space().generation == start + 1


def test_pending_revisions_are_those_with_text_and_no_vector_in_id_order(db, no_model_writes, remember):
    first = remember("The deploy happens on Tuesdays.", key="deploy").memory
    services.memory_revise(memory_id=first.id, content="The deploy happens on Wednesdays.", **ACTOR)
    second = remember("My cat likes fish.").memory
    services.memory_forget(memory_id=second.id, **ACTOR)
    third = remember("The office opens at nine.").memory
    with_text = _text_revision_ids()
    assert len(with_text) == 4

    assert vectors.pending_revision_ids() == with_text
    assert vectors.pending_count() == 4
    vectors.store_vectors([with_text[1]], ["Wednesdays"], embedder=HashEmbedder())

    assert vectors.pending_revision_ids() == [with_text[0], with_text[2], third.revision_id]
    assert vectors.pending_revision_ids(after_id=with_text[0], limit=1) == [with_text[2]]
    assert vectors.pending_count() == 3 and vectors.pending_count(reembed=True) == 4


def test_deleting_a_revision_deletes_its_vector_and_moves_the_generation(db, hash_writes, remember):
    kept = remember("The office opens at nine.").memory
    erased = remember("The vault combination is 31-7-42.").memory
    before = vectors.current_space().generation

    services.memory_erase(memory_id=erased.id, **ACTOR)

    assert vectors.load_matrix()[0].tolist() == [kept.revision_id]
    assert vectors.current_space().generation == before + 1
    assert vectors.vector_drift() == []


def test_reembedding_starts_an_empty_space_with_a_later_generation(db, hash_writes, remember):
    remember("The office opens at nine.")
    before = vectors.current_space().generation

    space = vectors.reset_space(HashEmbedder(dim=64))

    assert (space.embedder, space.dim, vectors.vector_count()) == ("hash-v1", 64, 0)
    assert space.generation == before + 1
    assert vectors.pending_count() == 1


# The backfill command


def test_backfill_refuses_a_batch_size_out_of_range(db):
    with pytest.raises(CommandError, match="--batch-size must be from 1 to 10000"):
        call_command("backfill", batch_size=0)


def test_backfill_dry_run_counts_and_changes_nothing(db, no_model_writes, remember, settings, capsys):
    remember("The office opens at nine.")
    remember("The deploy happens on Tuesdays.")
    settings.MEMORY_EMBEDDER = "hash"

    call_command("backfill", dry_run=True)

    assert capsys.readouterr().out == (
        "Dry run, nothing written: 2 revision(s) would be embedded with hash-v1 (384 dimensions).\n"
    )
    assert vectors.pending_count() == 2 and vectors.current_space() is None


def test_backfill_says_when_the_model_cannot_load(db, no_model_writes):
    with pytest.raises(CommandError, match="cannot be loaded .*no sentence-transformers model"):
        call_command("backfill")


def test_the_progress_line_shows_the_rate_and_the_time_left():
    assert progress_text("Embedding", 250, 1000, 2.0) == "Embedding: 250/1000 (25%), 125/s, ETA 0:06"
    assert progress_text("Embedding", 10, 100_000, 1.0) == "Embedding: 10/100000 (0%), 10/s, ETA 2:46:39"
    assert progress_text("Embedding", 0, 5, 0.0) == "Embedding: 0/5 (0%), 0/s, ETA ?"


@pytest.fixture
def hash_instance(instance):
    instance.env["MEMORY_EMBEDDER"] = "hash"
    return instance


_SETUP_PENDING = """
import json
from django.test import override_settings
from search import vectors
embedded = services.memory_remember(namespace="acme", content="The deploy happens on Tuesdays.", **ACTOR)
with override_settings(MEMORY_EMBEDDER="/no/model/here"):  # as when the model cannot load
    pending = [services.memory_remember(namespace="acme", title=f"Fact {i}", content=f"Billing detail {i}.",
                                        **ACTOR).memory for i in range(4)]
    services.memory_forget(memory_id=pending[0].id, **ACTOR)
    services.memory_revise(memory_id=pending[1].id, content="Billing detail 1, revised.", **ACTOR)
ids, matrix = vectors.load_matrix()
print(json.dumps({"stored": ids.tolist(), "bytes": matrix.tobytes().hex(), "pending": vectors.pending_revision_ids()}))
"""

_SHOW_VECTORS = """
import json
from memories.models import Revision
from memories.services import imports
from search import vectors
from search.embeddings import HashEmbedder, revision_text
ids, matrix = vectors.load_matrix()
rows = dict((r.pk, revision_text(r.title, r.content)) for r in Revision.objects.filter(tombstone=False))
space = vectors.current_space()
print(json.dumps({
    "space": [space.embedder, space.dim], "ids": ids.tolist(), "with_text": sorted(rows),
    "bytes": matrix.tobytes().hex(), "pending": vectors.pending_revision_ids(),
    "expected": HashEmbedder().embed([rows[i] for i in ids.tolist()]).tobytes().hex(),
}))
"""


@pytest.mark.slow
def test_backfill_fills_exactly_the_missing_vectors_and_a_rerun_does_nothing(hash_instance):
    before = json.loads(hash_instance.run(_SETUP_PENDING))
    # Four remembered and one revised; the tombstone of the forgotten one gets no vector.
    assert len(before["stored"]) == 1 and len(before["pending"]) == 5

    dry = hash_instance.manage("backfill", "--dry-run")
    done = hash_instance.manage("backfill", "--batch-size", "3")
    again = hash_instance.manage("backfill")

    assert dry.returncode == 0 and "5 revision(s) would be embedded with hash-v1" in dry.stdout
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Embedded 5 revision(s) with hash-v1 (384 dimensions) in ")
    assert done.stderr == ""
    assert again.returncode == 0 and again.stdout.startswith("Embedded 0 revision(s)")
    after = json.loads(hash_instance.run(_SHOW_VECTORS))
    assert after["ids"] == after["with_text"] == sorted(before["stored"] + before["pending"])
    assert after["pending"] == []
    assert after["bytes"] == after["expected"]  # each revision got the vector of its own text
    assert after["bytes"][:len(before["bytes"])] == before["bytes"]  # the stored one was kept


@pytest.mark.slow
def test_backfill_refuses_another_models_vectors_until_reembed(hash_instance):
    hash_instance.run("""
from search import vectors
from search.embeddings import HashEmbedder
texts = ["The deploy happens on Tuesdays.", "My cat likes fish.", "The office opens at nine."]
ids = [services.memory_remember(namespace="acme", content=text, **ACTOR).memory.revision_id for text in texts]
other = HashEmbedder(dim=64)
other.name = "other-v1"
vectors.reset_space(other)  # as if another model had embedded them
vectors.store_vectors(ids, texts, embedder=other)
services.memory_remember(namespace="acme", content="Releases ship every Tuesday.", **ACTOR)  # stays pending
""")

    refused = hash_instance.manage("backfill")
    dry = hash_instance.manage("backfill", "--reembed", "--dry-run")
    done = hash_instance.manage("backfill", "--reembed")

    assert refused.returncode == 1
    assert "other-v1 (64 dimensions)" in refused.stderr and "manage.py backfill --reembed" in refused.stderr
    assert dry.stdout.strip() == ("Dry run, nothing written: --reembed would drop 3 vector(s) of other-v1 and "
                                  "embed 4 revision(s) with hash-v1 (384 dimensions).")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Embedded 4 revision(s) with hash-v1 (384 dimensions) "
                                  "(replacing the vectors of other-v1) in ")
    after = json.loads(hash_instance.run(_SHOW_VECTORS))
    assert after["space"] == ["hash-v1", 384]
    assert after["ids"] == after["with_text"] and len(after["ids"]) == 4
    assert after["bytes"] == after["expected"]


# Erasure


_FILE_BYTES = """
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
connection.close()
"""


@pytest.mark.slow
def test_an_erased_memory_leaves_no_vector_bytes_in_the_database_file(hash_instance):
    stored = json.loads(hash_instance.run("""
import json
from search import vectors
services.memory_remember(namespace="acme", content="The office opens at nine.", **ACTOR)
secret = services.memory_remember(namespace="acme", content=(
    "The vault combination is 31-7-42, turned left twice, then right past zero; the spare key hangs behind "
    "the boiler in the basement, and the alarm code for the side entrance is 9-1-3-3 since the March audit."
), **ACTOR).memory
services.memory_remember(namespace="acme", content="Releases ship every Tuesday.", **ACTOR)
ids, matrix = vectors.load_matrix()
print(json.dumps({"id": secret.id, "vector": matrix[ids.tolist().index(secret.revision_id)].tobytes().hex()}))
""" + _FILE_BYTES))
    vector = bytes.fromhex(stored["vector"])
    # Quarters of the vector that are distinctive on their own (a run of zeros would match any free page).
    pieces = [piece for piece in (vector[start:start + 384] for start in range(0, len(vector), 384))
              if np.count_nonzero(np.frombuffer(piece, dtype=np.float32)) >= 16]
    assert len(pieces) == 4

    def file_bytes() -> bytes:
        wal = hash_instance.db_path.with_name("memory.db-wal")
        return hash_instance.db_path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")

    data = file_bytes()
    assert vector in data and all(piece in data for piece in pieces)  # the scan does find a stored vector
    hash_instance.run(f"services.memory_erase(memory_id={stored['id']}, **ACTOR)\n" + _FILE_BYTES)

    data = file_bytes()
    assert vector not in data
    assert not [piece for piece in pieces if piece in data]
    remaining = json.loads(hash_instance.run(_SHOW_VECTORS))
    assert len(remaining["ids"]) == 2 and remaining["bytes"] == remaining["expected"]


# Settings


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("MEMORY_EMBEDDER", "bogus", "minilm, hash, or the directory of a local sentence-transformers model"),
        ("MEMORY_EMBEDDER", "MiniLM", "minilm, hash, or the directory of a local sentence-transformers model"),
        ("MEMORY_TORCH_THREADS", "0", "an integer from 1 to 64"),
        ("MEMORY_EMBED_PRECISION", "bf16", "one of auto, float32, bfloat16"),
        ("MEMORY_EMBED_BATCH_THREADS", "0", "an integer from 1 to 64"),
    ],
)
def test_a_bad_embedding_setting_stops_start_up_with_one_line(tmp_path, name, value, accepted):
    done = manage("check", env=clean_env(tmp_path, **{name: value}))

    assert done.returncode != 0
    assert done.stderr.splitlines() == [f"Bad setting {name}={value!r}: expected {accepted}."]


@pytest.mark.slow
def test_the_former_precision_setting_stops_start_up_naming_the_new_one(tmp_path):
    done = manage("check", env=clean_env(tmp_path, MEMORY_EMBED_BATCH_PRECISION="float32"))

    assert done.returncode != 0
    assert done.stderr.splitlines() == ["MEMORY_EMBED_BATCH_PRECISION is now MEMORY_EMBED_PRECISION (it covers "
                                        "longer single texts too); set that instead."]


@pytest.mark.slow
def test_a_model_directory_is_accepted_as_the_embedder(tmp_path):
    show = "from django.conf import settings; print(settings.MEMORY_EMBEDDER, settings.MEMORY_TORCH_THREADS)"

    done = python(show, env=clean_env(tmp_path, MEMORY_EMBEDDER=str(minilm_model_dir()), MEMORY_TORCH_THREADS="2"))

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(minilm_model_dir()), "2"]
