"""Embeddings and stored vectors: the models, the embedding space, pending revisions, backfill and erasure.

Semantic tests use the real all-MiniLM-L6-v2 from the wheel (loaded once per process, its
ONNX export kept in the tests' model cache); the rest use the hash embedder, and so do
subprocesses, to stay fast, except the one that loads MiniLM's export without torch.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from memories import services
from memories.management.commands.backfill import progress_text
from memories.models import Revision
from memories.selectors import memory_recall as recall
from search import embeddings, vectors
from search.embeddings import (
    EXPORT_TOLERANCE,
    PROBES,
    EmbedderUnavailable,
    HashEmbedder,
    MiniLMEmbedder,
    PathEmbedder,
    _OnnxModel,
    _TorchModel,
    get_embedder,
    minilm_model_dir,
    revision_text,
    warm_up,
)
from search.errors import SpaceConflict
from tests.subprocesses import clean_env, manage, python

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
    endings = [
        "runs every Friday",
        "moved to the ops wiki",
        "failed after the outage in March",
        "likes fish more than rice",
        "is due before the board meeting",
        "needs a new node pool",
    ]
    return [f"{subjects[number % 6]} {endings[number // 6 % 6]} (note {number})" for number in range(count)]


@pytest.fixture(scope="module")
def torch_minilm():
    """all-MiniLM-L6-v2 run by sentence-transformers, as the export is checked against."""
    return _TorchModel(minilm_model_dir())


def test_minilm_runs_through_onnx_runtime_with_the_torch_models_vectors(minilm, torch_minilm):
    texts = [*PROBES, "", "release notes " * 300, *_varied_texts(40)]  # more than one batch, of mixed lengths

    assert isinstance(minilm._load(), _OnnxModel) and minilm.embeds_beside
    batched, alone = minilm.embed(texts), np.stack([minilm.embed_query(text) for text in texts])
    want = torch_minilm.embed(texts)

    np.testing.assert_allclose(batched, want, rtol=0, atol=EXPORT_TOLERANCE)
    np.testing.assert_allclose(alone, want, rtol=0, atol=EXPORT_TOLERANCE)
    assert np.sum(batched * want, axis=1).min() >= 0.99999


def test_an_import_embedded_in_batches_recalls_by_meaning(minilm, settings, db):
    settings.MEMORY_EMBEDDER = "minilm"
    facts = _varied_texts(40) + ["Invoices are emailed to customers on the first of each month"]
    document = {
        "format": "memory-export",
        "version": 1,
        "memories": [
            {"namespace": "facts", "key": f"fact-{number}", "revisions": [{"content": fact}]}
            for number, fact in enumerate(facts)
        ],
    }
    services.memories_import(document=json.dumps(document), trusted=False, **ACTOR)

    _, stored = vectors.load_matrix()
    np.testing.assert_array_equal(stored, minilm.embed([revision_text("", fact) for fact in facts]))
    hits = recall(query="When are customers sent their invoices?", namespace="facts", mode="semantic").hits
    assert hits[0].memory.key == f"fact-{len(facts) - 1}"


def _exported_file(cache) -> Path:
    [path] = Path(cache).glob("all-MiniLM-L6-v2-*.onnx")
    return path


@pytest.fixture
def exported(minilm, settings):
    """The directory holding MiniLM's export, made by the in-process embedder when it was not there."""
    assert minilm.available(), minilm.load_error
    return Path(settings.MEMORY_MODEL_CACHE)


_ONE_TEXT = """
import json, sys
from search.embeddings import get_embedder
vector = get_embedder().embed_query("what did we decide about the release")
heavy = sorted(name for name in ("torch", "transformers", "sentence_transformers") if name in sys.modules)
print(json.dumps({"vector": vector.tolist(), "heavy": heavy}))
"""


@pytest.mark.slow
def test_a_process_embeds_one_text_from_the_cached_export_without_importing_torch(exported, minilm, tmp_path):
    path = _exported_file(exported)
    before = path.stat()

    done = python(_ONE_TEXT, env=clean_env(tmp_path, MEMORY_EMBEDDER="minilm", MEMORY_MODEL_CACHE=str(exported)))

    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["heavy"] == []
    np.testing.assert_allclose(
        answer["vector"], minilm.embed_query("what did we decide about the release"), rtol=0, atol=1e-6
    )
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # reused, not made again


def _with_one_weight_scaled(source: Path, target: Path) -> None:
    """A copy of the export whose first attention weight is 1% larger: it loads, but gives other vectors."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    weight = next(tensor for tensor in model.graph.initializer if "attention" in tensor.name and tensor.dims[0] > 1)
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.01, weight.name))
    onnx.save(model, str(target))


def _truncated(source: Path, target: Path) -> None:
    target.write_bytes(source.read_bytes()[:1_000_000])


@pytest.mark.parametrize("damage", [_with_one_weight_scaled, _truncated])
def test_a_damaged_cached_export_is_made_again_and_stale_ones_are_removed(
    exported, minilm, settings, tmp_path, caplog, damage
):
    cache = tmp_path / "cache"
    cache.mkdir()
    good = _exported_file(exported)
    damage(good, cache / good.name)
    stale = cache / "all-MiniLM-L6-v2-0123456789abcdef0123.onnx"  # for other model files
    stale.write_bytes(b"an export of other model files")
    settings.MEMORY_MODEL_CACHE = cache

    with caplog.at_level("WARNING", logger="search.embeddings"):
        embedder = MiniLMEmbedder()
        assert embedder.available(), embedder.load_error

    assert any("cannot be used" in record.getMessage() for record in caplog.records)
    assert isinstance(embedder._load(), _OnnxModel)
    assert sorted(path.name for path in cache.iterdir()) == [good.name]  # replaced; no temporary file left
    np.testing.assert_allclose(embedder.embed(PROBES), minilm.embed(PROBES), rtol=0, atol=1e-6)


def test_a_model_whose_export_fails_runs_through_torch_with_the_same_vectors(
    minilm, torch_minilm, settings, tmp_path, monkeypatch, caplog
):
    import torch

    def broken(*args, **kwargs):
        raise RuntimeError("the exporter is gone")

    monkeypatch.setattr(torch.onnx, "export", broken)
    settings.MEMORY_MODEL_CACHE = tmp_path / "cache"
    with caplog.at_level("WARNING", logger="search.embeddings"):
        embedder = MiniLMEmbedder()
        assert embedder.available()

    assert isinstance(embedder._load(), _TorchModel) and not embedder.embeds_beside
    assert any(
        "runs through torch" in record.getMessage() and "the exporter is gone" in record.getMessage()
        for record in caplog.records
    )
    np.testing.assert_allclose(embedder.embed(PROBES), minilm.embed(PROBES), rtol=0, atol=EXPORT_TOLERANCE)
    assert not list((tmp_path / "cache").iterdir())  # no temporary file left


def test_an_export_that_differs_from_the_torch_model_is_refused(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "EXPORT_TOLERANCE", 0.0)  # as if the export had drifted by any rounding
    settings.MEMORY_MODEL_CACHE = tmp_path / "cache"

    embedder = MiniLMEmbedder()

    assert embedder.available() and isinstance(embedder._load(), _TorchModel)
    assert not list((tmp_path / "cache").iterdir())


def test_warming_up_loads_the_model_and_never_raises(settings, tmp_path):
    settings.MEMORY_EMBEDDER = "minilm"
    warm_up()
    assert isinstance(get_embedder()._load(), _OnnxModel)
    settings.MEMORY_EMBEDDER = str(tmp_path / "no-model-here")
    warm_up()  # reported by the first write or semantic recall instead
    assert not get_embedder().available()


def test_a_model_directory_is_named_after_itself_and_gives_the_models_dimension(minilm):
    by_path = PathEmbedder(minilm_model_dir())

    assert by_path.available()
    assert by_path.name == "path:model"
    assert by_path.dim == 384
    np.testing.assert_allclose(
        by_path.embed(["Releases ship every Tuesday"]), minilm.embed(["Releases ship every Tuesday"]), atol=1e-6
    )


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
        [
            "deploy the billing service on Tuesday",
            "deployments of the billing service happen on Tuesdays",
            "my cat likes fish",
            "",
            "?!",
        ]
    )

    assert embedder.name == "hash-v1" and embedder.dim == 384
    np.testing.assert_allclose(np.linalg.norm([deploy, deploys, billing, punctuation], axis=1), 1.0, atol=1e-6)
    assert _cos(deploy, deploys) > 0.4
    assert _cos(deploy, deploys) > _cos(deploy, billing) + 0.3
    assert not empty.any()
    assert _cos(*embedder.embed(["Deploy, deploy!", "deploy deploy"])) == pytest.approx(1.0)


def test_the_hash_embedding_is_the_same_in_another_process(tmp_path):
    texts = ["The deploy happens on Tuesdays.", "Grüße aus München", "坐标系统", "ACME's dark-mode"]
    code = (
        "import json, sys; from search.embeddings import HashEmbedder; "
        "print(HashEmbedder().embed(json.loads(sys.argv[1])).tobytes().hex())"
    )

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

    with pytest.raises(
        SpaceConflict, match=r"hash-v1 \(384 dimensions\).*all-MiniLM-L6-v2.*manage.py backfill --reembed"
    ):
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
    texts = [
        "The deploy happens on Tuesdays",
        "My cat likes fish",
        "The office opens at nine",
        "Releases ship every Tuesday",
    ]
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

    added = vectors.store_vectors(
        [memory.revision_id, memory.revision_id, tombstone, 999_999],
        ["first", "second", "tombstone", "unknown"],
        embedder=embedder,
    )
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
    assert after["bytes"][: len(before["bytes"])] == before["bytes"]  # the stored one was kept


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
    assert dry.stdout.strip() == (
        "Dry run, nothing written: --reembed would drop 3 vector(s) of other-v1 and "
        "embed 4 revision(s) with hash-v1 (384 dimensions)."
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "Embedded 4 revision(s) with hash-v1 (384 dimensions) (replacing the vectors of other-v1) in "
    )
    after = json.loads(hash_instance.run(_SHOW_VECTORS))
    assert after["space"] == ["hash-v1", 384]
    assert after["ids"] == after["with_text"] and len(after["ids"]) == 4
    assert after["bytes"] == after["expected"]


# Erasure


def _distinctive_pieces(vector: bytes) -> list[bytes]:
    """Quarters of the vector that are distinctive on their own (a run of zeros would match any free page)."""
    pieces = [
        piece
        for piece in (vector[start : start + 384] for start in range(0, len(vector), 384))
        if np.count_nonzero(np.frombuffer(piece, dtype=np.float32)) >= 16
    ]
    assert len(pieces) == 4
    return pieces


_FILE_BYTES = """
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
connection.close()
"""


@pytest.mark.slow
@pytest.mark.sqlite_only(
    "reads the SQLite file and its WAL for the bytes secure_delete overwrote; PostgreSQL keeps "
    "them until VACUUM FULL (docs/postgresql.md)"
)
def test_an_erased_memory_leaves_no_vector_bytes_in_the_database_file(hash_instance):
    stored = json.loads(
        hash_instance.run(
            """
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
"""
            + _FILE_BYTES
        )
    )
    vector = bytes.fromhex(stored["vector"])
    pieces = _distinctive_pieces(vector)

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


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MEMORY_DATABASE_URL"), reason="PostgreSQL's VACUUM FULL (make test-postgres)")
def test_an_erased_memory_leaves_no_vector_bytes_in_the_database_files_after_purge_vacuum_on_postgresql(hash_instance):
    # The secret written last, so that a plain VACUUM's compaction of its page moves no row over its bytes.
    stored = json.loads(
        hash_instance.run("""
import json
from search import vectors
services.memory_remember(namespace="acme", content="The office opens at nine.", **ACTOR)
services.memory_remember(namespace="acme", content="Releases ship every Tuesday.", **ACTOR)
secret = services.memory_remember(namespace="acme", content=(
    "The vault combination is 31-7-42, turned left twice, then right past zero; the spare key hangs behind "
    "the boiler in the basement, and the alarm code for the side entrance is 9-1-3-3 since the March audit."
), **ACTOR).memory
ids, matrix = vectors.load_matrix()
print(json.dumps({"id": secret.id, "vector": matrix[ids.tolist().index(secret.revision_id)].tobytes().hex()}))
""")
    )
    vector = bytes.fromhex(stored["vector"])
    pieces = _distinctive_pieces(vector)

    def file_bytes() -> bytes:
        """The files of the instance's database (the test cluster's, which this user may read)."""
        hash_instance.sql("CHECKPOINT")  # the changed pages leave shared buffers for the files
        [(folder,)] = hash_instance.sql(
            "SELECT current_setting('data_directory') || '/base/' || oid "
            "FROM pg_database WHERE datname = current_database()"
        )
        return b"".join(path.read_bytes() for path in Path(folder).iterdir() if path.is_file())

    data = file_bytes()
    assert vector in data and all(piece in data for piece in pieces)  # the scan does find a stored vector
    hash_instance.run(f"services.memory_erase(memory_id={stored['id']}, **ACTOR)")
    # The erasure's plain VACUUM leaves the bytes in the page; VACUUM FULL writes the tables anew.
    vacuumed = hash_instance.manage("purge", "--vacuum")
    assert vacuumed.returncode == 0, vacuumed.stderr

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
    ],
)
def test_a_bad_embedding_setting_stops_start_up_with_one_line(tmp_path, name, value, accepted):
    done = manage("check", env=clean_env(tmp_path, **{name: value}))

    assert done.returncode != 0
    assert done.stderr.splitlines() == [f"Bad setting {name}={value!r}: expected {accepted}."]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["MEMORY_EMBED_PRECISION", "MEMORY_EMBED_BATCH_PRECISION", "MEMORY_EMBED_BATCH_THREADS"]
)
def test_a_removed_embedding_setting_stops_start_up_naming_it(tmp_path, name):
    done = manage("check", env=clean_env(tmp_path, **{name: "float32"}))

    assert done.returncode != 0
    assert done.stderr.splitlines() == [
        f"{name} is no longer read: models run in float32 through ONNX Runtime, one batch at a time; unset it."
    ]


@pytest.mark.slow
def test_a_model_directory_is_accepted_as_the_embedder(tmp_path):
    show = "from django.conf import settings; print(settings.MEMORY_EMBEDDER, settings.MEMORY_TORCH_THREADS)"

    done = python(show, env=clean_env(tmp_path, MEMORY_EMBEDDER=str(minilm_model_dir()), MEMORY_TORCH_THREADS="2"))

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(minilm_model_dir()), "2"]
