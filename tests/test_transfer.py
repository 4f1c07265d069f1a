"""JSON export and import: streaming, whole-batch validation, one transaction, trusted replay."""

import datetime as dt
import json
import subprocess
import sys

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories import selectors, services
from memories.models import AuditEvent, Memory, Revision, Tag
from memories.selectors import memory_recall
from memories.services import batches
from memories.services.export import EXPORT_FORMAT, EXPORT_VERSION
from memoryproject import dialect
from memoryproject.exceptions import Conflict, InvalidInput, NotFound, TooLarge
from tests.helpers import clock_reads
from tests.subprocesses import BASE_DIR, Instance, clean_env, copy_migrated

UTC = dt.timezone.utc


def export(**options) -> dict:
    return json.loads("".join(services.memories_export(**options)))


def import_(document, *, trusted, **options):
    return services.memories_import(document=document, actor="importer", interface="cli", trusted=trusted, **options)


def rows() -> dict:
    return {model.__name__: model.objects.count() for model in (Memory, Revision, Tag, AuditEvent)}


def revision(content, known_at, **fields) -> dict:
    return {"content": content, "known_at": known_at, **fields}


def item(key, *revisions, namespace="acme", **fields) -> dict:
    return {"namespace": namespace, "key": key, "revisions": list(revisions), **fields}


def document(*items) -> dict:
    return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "memories": list(items)}


def answers(keys, points) -> dict:
    """What memory_get says for every key at every (as_of, valid_at), with ids left out."""
    found = {}
    for key in keys:
        for as_of, valid_at in points:
            try:
                record = selectors.memory_get(namespace="acme", key=key, as_of=as_of, valid_at=valid_at).as_dict()
            except NotFound:
                record = None
            else:
                del record["id"], record["revision_id"]
            found[key, as_of, valid_at] = record
    return found


def histories(keys) -> dict:
    """memory_history of every key, with ids replaced by positions."""
    found = {}
    for key in keys:
        records = selectors.memory_history(memory_id=Memory.objects.get(namespace="acme", key=key).pk)
        position = {record.id: index for index, record in enumerate(records)}
        found[key] = [
            {
                **{name: value for name, value in record.as_dict().items() if name not in ("revision_id", "memory_id")},
                "hides": position.get(record.hides),
            }
            for record in records
        ]
    return found


def build_history(remember, actor) -> list:
    """Revisions, a bounded correction, TTLs, forgetting and restoring; return the moments between steps."""
    moments = [timezone.now()]
    lead = remember(
        "Alice leads the platform team.",
        key="lead",
        kind="fact",
        tags=["People", "org"],
        subject="alice",
        predicate="leads",
        object="platform team",
        source="standup",
    ).memory.id
    moments.append(timezone.now())
    services.memory_revise(
        memory_id=lead,
        content="Bob leads the platform team.",
        subject="bob",
        predicate="leads",
        object="platform team",
        **actor,
    )
    moments.append(timezone.now())
    services.memory_revise(
        memory_id=lead,
        content="Carol led the platform team in March.",
        valid_from="2024-03-01",
        valid_to="2024-04-01T00:00:00+02:00",
        **actor,
    )
    moments.append(timezone.now())
    window = remember(
        "The deploy window is Tuesday.", key="window", ttl_days=30, valid_from="2023-01-01T09:00:00-05:00"
    ).memory.id
    linter = remember("Use ruff for linting.", key="linter", tags=["tooling"]).memory.id
    services.memory_forget(memory_id=linter, reason="moving to another linter", **actor)
    moments.append(timezone.now())
    services.memory_restore(memory_id=linter, **actor)
    services.memory_forget(memory_id=window, **actor)
    moments.append(timezone.now())
    remember("Kept for a day.", key="brief", ttl_days=1)
    moments.append(timezone.now())
    return moments


KEYS = ("lead", "window", "linter", "brief")


def test_a_trusted_round_trip_into_an_empty_database_gives_the_same_point_in_time_answers(remember, actor):
    with transaction.atomic():
        moments = build_history(remember, actor)
        points = [(as_of, valid_at) for as_of in [*moments, None] for valid_at in (None, "2024-03-15", "2023-06-01")]
        expected_answers, expected_histories = answers(KEYS, points), histories(KEYS)
        text = "".join(services.memories_export())
        transaction.set_rollback(True)
    assert rows() == {"Memory": 0, "Revision": 0, "Tag": 0, "AuditEvent": 0}

    report = import_(text, trusted=True)

    assert report.as_dict() == {
        "created": 4,
        "revised": 0,
        "unchanged": 0,
        "duplicates": 0,
        "forgotten": 1,
        "skipped": 0,
    }
    assert answers(KEYS, points) == expected_answers
    assert histories(KEYS) == expected_histories
    # The answers are not trivially empty: the grid sees revisions, the correction and the forgetting.
    assert expected_answers["lead", moments[2], None]["content"] == "Bob leads the platform team."
    assert expected_answers["lead", None, "2024-03-15"]["content"] == "Carol led the platform team in March."
    assert expected_answers["lead", moments[1], "2024-03-15"] is None  # valid only from its known_at on
    assert expected_answers["window", moments[4], "2023-06-01"]["content"] == "The deploy window is Tuesday."
    assert expected_answers["window", None, None] is None
    # Exporting the copy gives the same memories back.
    assert export()["memories"] == json.loads(text)["memories"]


def test_the_export_is_lazy_and_reads_memories_in_primary_key_batches(remember):
    ids = [remember(f"Fact number {n}.").memory.id for n in range(5)]
    with CaptureQueriesContext(connection) as reading:
        chunks = services.memories_export(batch_size=2)
    assert len(reading) == 0

    with CaptureQueriesContext(connection) as reading:
        text = "".join(chunks)
    # Three batches of (memories, their revisions, their attribute rows at the cutoff, those rows' tags, and three
    # for their confidence: the revisions shown then, their records' rows with provenance, attribute rows with
    # tags), then the empty batch that ends it; first, the clock's reading.
    assert len(reading) == clock_reads() + 3 * 7 + 1
    exported = json.loads(text)["memories"]
    assert [Memory.objects.get(key=entry["key"]).pk for entry in exported] == ids

    more = [remember(f"Another fact {n}.").memory.id for n in range(20)]
    with CaptureQueriesContext(connection) as reading:
        exported = export(batch_size=100)["memories"]
    # The number of queries depends on the batches, not on the memories in them.
    assert len(reading) == clock_reads() + 7 + 1
    assert len(exported) == len(ids) + len(more)


def test_the_export_carries_every_field_and_names_the_hidden_revision_by_position(remember, actor):
    made = remember(
        "The office is in Lyon.",
        key="office",
        kind="fact",
        tags=["Places"],
        title="Office",
        source="wiki",
        ttl_days=10,
        valid_from="2020-01-01",
        confidence=0.75,
    )
    services.memory_revise(memory_id=made.memory.id, content="The office is in Paris.", **actor)
    services.memory_forget(memory_id=made.memory.id, reason="closed", **actor)

    header = export()
    (entry,) = header["memories"]

    assert (header["format"], header["version"], header["namespace"]) == ("memory-export", 1, None)
    assert header["exported_at"].endswith("Z") and header["as_of"].endswith("Z")
    assert {name: entry[name] for name in ("namespace", "key", "kind", "tags", "state")} == {
        "namespace": "acme",
        "key": "office",
        "kind": "fact",
        "tags": ["Places"],
        "state": "forgotten",
    }
    first, second, tombstone = entry["revisions"]
    assert first["valid_from"] == "2020-01-01T00:00:00.000000Z"
    assert first["expires_at"] == made.memory.expires_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert (first["title"], first["source"], first["author"], first["interface"]) == ("Office", "wiki", "tester", "cli")
    assert second["content"] == "The office is in Paris."
    # A revise carries the stated confidence over, as it carries the triple.
    assert (first["confidence"], second["confidence"], tombstone["confidence"]) == (0.75, 0.75, None)
    assert (tombstone["tombstone"], tombstone["hides"], tombstone["reason"]) == (True, 1, "closed")
    assert set(first) == {
        "known_at",
        "valid_from",
        "valid_to",
        "expires_at",
        "tombstone",
        "hides",
        "title",
        "content",
        "subject",
        "predicate",
        "object",
        "source",
        "confidence",
        "content_hash",
        "reason",
        "author",
        "interface",
    }


def test_an_export_as_of_a_past_moment_leaves_out_what_was_learned_later(remember, actor):
    office = remember("The office is in Lyon.", key="office").memory.id
    remember("Elsewhere.", namespace="other")
    cutoff = timezone.now()
    services.memory_revise(memory_id=office, content="The office is in Paris.", **actor)
    services.memory_forget(memory_id=office, **actor)
    remember("Learned later.", key="later")

    (entry,) = export(as_of=cutoff, namespace="acme")["memories"]

    assert entry["key"] == "office"
    assert entry["state"] == "active"  # it was forgotten only after the cutoff
    assert [revision["content"] for revision in entry["revisions"]] == ["The office is in Lyon."]
    assert [entry["key"] for entry in export(namespace="acme")["memories"]] == ["office", "later"]


def test_a_bad_item_in_the_middle_writes_nothing(remember):
    remember("Already here.", key="here")
    before = rows()
    batch = document(
        item("first", revision("One.", "2024-01-01T00:00:00Z")),
        item("second", revision("Two.", "2024-01-02T00:00:00Z", valid_from="2024-13-01")),
        item("third", revision("Three.", "2024-01-03T00:00:00Z")),
    )
    for trusted in (True, False):
        with pytest.raises(InvalidInput) as raised:
            import_(batch, trusted=trusted)
        assert raised.value.field == "memories[1].revisions[0].valid_from"
        assert "memories[1].revisions[0].valid_from: '2024-13-01'" in raised.value.message
        assert rows() == before


def test_a_conflict_found_while_writing_rolls_back_the_items_written_before_it(remember):
    remember("Our own history.", key="taken")
    before = rows()
    batch = document(
        item("first", revision("One.", "2024-01-01T00:00:00Z")),
        item("taken", revision("Someone else's history.", "2024-01-02T00:00:00Z")),
        item("third", revision("Three.", "2024-01-03T00:00:00Z")),
    )

    with pytest.raises(Conflict) as raised:
        import_(batch, trusted=True)

    assert raised.value.field == "memories[1].key"
    assert "already exists with a different history" in raised.value.message
    assert rows() == before
    assert not Memory.objects.filter(key="first").exists()


def test_every_problem_is_reported_with_its_item_and_field(db):  # db: PostgreSQL reads the clock from it
    batch = document(
        item("ok", revision("Fine.", "2024-01-01T00:00:00Z")),
        item("unknown", revision("Text.", "2024-01-01T00:00:00Z", colour="red")),
        item("kind", revision("Text.", "2024-01-01T00:00:00Z"), kind="opinion"),
        item("naive", revision("Text.", "2024-01-01T09:30:00")),
        item("hash", revision("Text.", "2024-01-01T00:00:00Z", content_hash="0" * 64)),
        item(
            "tombstone",
            revision("Text.", "2024-01-01T00:00:00Z"),
            revision("", "2024-01-02T00:00:00Z", tombstone=True, hides=5),
        ),
        item("order", revision("Later.", "2024-02-01T00:00:00Z"), revision("Earlier.", "2024-01-01T00:00:00Z")),
        item("ok", revision("Twice.", "2024-01-01T00:00:00Z")),
        item("state", revision("Text.", "2024-01-01T00:00:00Z"), state="forgotten"),
        "not an object",
        item("empty", revision("   ", "2024-01-01T00:00:00Z")),
    )

    with pytest.raises(InvalidInput) as raised:
        import_(batch, trusted=True)

    message = raised.value.message
    assert message.startswith("Nothing was imported: 10 problem(s) in the document.")
    for expected in (
        "memories[1].revisions[0].colour: unknown field",
        "memories[2].kind: 'opinion' is not a kind",
        "memories[3].revisions[0].known_at: '2024-01-01T09:30:00'",
        "memories[4].revisions[0].content_hash: does not match the content",
        "memories[5].revisions[1].hides: 5 is not the position of an earlier revision",
        "memories[6].revisions[1].known_at: 2024-01-01T00:00:00.000000Z is earlier than the revision before it",
        "memories[7].key: 'ok' is already used by memories[0]",
        "memories[8].state: 'forgotten' contradicts the history",
        "memories[9]: expected an object, got str.",
        "memories[10].revisions[0].content: must not be empty.",
    ):
        assert expected in message
    assert raised.value.field == "memories[1].revisions[0].colour"


@pytest.mark.parametrize(
    "bad, expected",
    [
        ("{not json", "document: not valid JSON"),
        ('{"memories": {}}', "document: expected a JSON object with a 'memories' list"),
        ('{"memories": [], "version": 2}', "version: 2 is not a version this server reads"),
        (b'{"memories": ["\xff"]}', "document: not UTF-8 text"),
        # The parser REST and MCP use: a repeated key is not read as its last value, nesting is bounded.
        ('{"memories": [{"key": "dropped"}], "memories": []}', r"document: not valid JSON \(duplicate key 'memories'"),
        ("[" * 100_000 + "]" * 100_000, r"document: not valid JSON \(nested too deeply \(more than 64 levels\)\)"),
        ('{"memories": [], "version": NaN}', r"document: not valid JSON \(NaN is not JSON\)"),
    ],
)
def test_a_document_that_is_not_an_export_is_refused(db, bad, expected):
    with pytest.raises(InvalidInput, match=expected):
        import_(bad, trusted=False)


def test_trusted_import_requires_and_keeps_known_at_and_authorship(db):
    with pytest.raises(InvalidInput, match=r"memories\[0\].revisions\[0\].known_at: required"):
        import_(document(item("k", {"content": "No time."})), trusted=True)
    future = (timezone.now() + dt.timedelta(days=1)).isoformat()
    with pytest.raises(InvalidInput, match=r"memories\[0\].revisions\[0\].known_at: .* is in the future"):
        import_(document(item("k", revision("Too soon.", future))), trusted=True)

    import_(
        document(item("k", revision("Old news.", "2020-02-02T10:00:00Z", author="api:ci", interface="api"))),
        trusted=True,
    )

    (stored,) = Revision.objects.all()
    assert stored.known_at == dt.datetime(2020, 2, 2, 10, tzinfo=UTC)
    assert stored.valid_from == stored.known_at
    assert (stored.author, stored.interface) == ("api:ci", "api")
    assert AuditEvent.objects.filter(action="import", actor="importer", memory_id=stored.memory_id).exists()


def test_import_keeps_a_stated_confidence_and_refuses_one_out_of_range(db):
    for bad in (1.5, -0.1, "high", True):
        with pytest.raises(InvalidInput, match=r"memories\[0\].revisions\[0\].confidence: "):
            import_(document(item("k", revision("Sure.", "2020-02-02T10:00:00Z", confidence=bad))), trusted=True)
    assert Revision.objects.count() == 0

    import_(
        document(
            item("trusted", revision("Fairly sure.", "2020-02-02T10:00:00Z", confidence=0.5)),
            item("unstated", revision("Not said.", "2020-02-02T10:00:00Z")),
        ),
        trusted=True,
    )
    import_(document(item("untrusted", revision("Quite sure.", "2020-02-02T10:00:00Z", confidence=0.9))), trusted=False)

    stated = dict(Revision.objects.values_list("memory__key", "confidence"))
    assert stated == {"trusted": 0.5, "unstated": None, "untrusted": 0.9}
    # The same history again is unchanged; another confidence is another assertion.
    again = import_(
        document(item("trusted", revision("Fairly sure.", "2020-02-02T10:00:00Z", confidence=0.5))), trusted=True
    )
    assert (again.unchanged, again.created) == (1, 0)


def test_untrusted_import_ignores_known_at_and_remembers_only_the_current_text(db):
    started = timezone.now()
    batch = document(
        item(
            "current",
            revision("Old text.", "2020-01-01T00:00:00Z"),
            revision("New text.", "2021-01-01T00:00:00Z", author="someone", interface="api"),
            tags=["Imported"],
        ),
        item(
            "gone",
            revision("Forgotten text.", "2020-01-01T00:00:00Z"),
            revision("", "2020-06-01T00:00:00Z", tombstone=True, hides=0),
        ),
        item("expired", revision("Expired text.", "2020-01-01T00:00:00Z", expires_at="2020-02-01T00:00:00Z")),
        item(
            "expiring",
            revision(
                "Expires later.",
                "2020-01-01T00:00:00Z",
                expires_at=(started + dt.timedelta(days=2, hours=1)).isoformat(),
            ),
        ),
    )

    report = import_(batch, trusted=False)

    assert (report.created, report.skipped) == (2, 2)
    assert set(Memory.objects.values_list("key", flat=True)) == {"current", "expiring"}
    (stored,) = Revision.objects.filter(memory__key="current")
    assert stored.content == "New text."
    assert stored.known_at >= started
    assert (stored.author, stored.interface) == ("importer", "cli")
    assert list(Memory.objects.get(key="current").tags.values_list("name", flat=True)) == ["Imported"]
    expiring = Revision.objects.get(memory__key="expiring")
    # A TTL is whole days from now, rounded up so the text never disappears early.
    assert expiring.expires_at - expiring.known_at == dt.timedelta(days=3)


def test_offsets_are_converted_to_utc(db):
    batch = document(
        item(
            "k",
            revision(
                "Text.",
                "2024-05-01T11:30:00+02:00",
                valid_from="2024-05-01T06:00:00-03:00",
                valid_to="2024-06-01T00:00:00+05:30",
                expires_at="2099-01-01T00:30:00+01:00",
            ),
        ),
        item("u", revision("Other text.", None, valid_from="2024-05-01T11:30:00.25+02:00")),
    )

    import_(batch, trusted=False)
    untrusted = Revision.objects.get(memory__key="k")
    assert untrusted.valid_from == dt.datetime(2024, 5, 1, 9, tzinfo=UTC)
    assert Revision.objects.get(memory__key="u").valid_from == dt.datetime(2024, 5, 1, 9, 30, 0, 250000, tzinfo=UTC)

    batch["memories"] = batch["memories"][:1]
    batch["memories"][0]["key"] = "t"
    batch["memories"][0]["revisions"][0]["content"] = "Trusted text."
    import_(batch, trusted=True)
    trusted = Revision.objects.get(memory__key="t")
    assert trusted.known_at == dt.datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
    assert trusted.valid_from == dt.datetime(2024, 5, 1, 9, tzinfo=UTC)
    assert trusted.valid_to == dt.datetime(2024, 5, 31, 18, 30, tzinfo=UTC)
    assert trusted.expires_at == dt.datetime(2098, 12, 31, 23, 30, tzinfo=UTC)
    assert export()["memories"][-1]["revisions"][0]["known_at"] == "2024-05-01T09:30:00.000000Z"


def test_exact_duplicates_are_skipped_and_counted(remember, actor):
    remember("The build uses Bazel.", key="build")
    forgotten = remember("A forgotten fact.", key="old").memory.id
    services.memory_forget(memory_id=forgotten, **actor)
    text = "".join(services.memories_export())
    before = rows()

    again = import_(text, trusted=True)
    assert again.as_dict() == {
        "created": 0,
        "revised": 0,
        "unchanged": 2,
        "duplicates": 0,
        "forgotten": 0,
        "skipped": 0,
    }
    assert rows()["Revision"] == before["Revision"]

    batch = document(
        item("build", revision("The build uses Bazel.", None)),
        item("copy", revision("The build uses Bazel.", None)),
        item("other", revision("The build uses Bazel.", "2024-01-01T00:00:00Z"), namespace="other"),
    )
    untrusted = import_(batch, trusted=False)
    assert untrusted.as_dict() == {
        "created": 1,
        "revised": 0,
        "unchanged": 1,
        "duplicates": 1,
        "forgotten": 0,
        "skipped": 0,
    }
    assert not Memory.objects.filter(key="copy").exists()

    batch = document(item("copy", revision("The build uses Bazel.", "2024-01-01T00:00:00Z")))
    assert import_(batch, trusted=True).duplicates == 1
    assert not Memory.objects.filter(key="copy").exists()


def test_a_trusted_import_extends_a_history_it_continues(remember, actor):
    def copied(exported):
        for entry in exported["memories"]:
            entry["namespace"] = "copy"
        return exported

    office = remember("The office is in Lyon.", key="office").memory.id
    shorter = copied(export())
    services.memory_revise(memory_id=office, content="The office is in Paris.", **actor)
    services.memory_forget(memory_id=office, **actor)
    longer = copied(export())
    assert import_(shorter, trusted=True).created == 1

    report = import_(longer, trusted=True)

    assert (report.created, report.revised, report.forgotten) == (0, 1, 1)
    copy = Memory.objects.get(namespace="copy", key="office")
    assert copy.state == "forgotten"
    assert [revision.content for revision in copy.revisions.order_by("known_at")] == [
        "The office is in Lyon.",
        "The office is in Paris.",
        "",
    ]
    assert export(namespace="copy")["memories"] == longer["memories"]


def test_an_import_over_the_item_limit_is_refused(db, settings):
    settings.MEMORY_MAX_IMPORT_ITEMS = 2
    batch = document(*(item(f"k{n}", revision(f"Text {n}.", "2024-01-01T00:00:00Z")) for n in range(3)))

    with pytest.raises(TooLarge, match="3 items is over the limit of 2"):
        import_(batch, trusted=True)
    assert rows()["Memory"] == 0
    batch["memories"].pop()
    assert import_(batch, trusted=True).created == 2


def test_a_dry_run_counts_what_would_change_and_writes_nothing(remember):
    remember("Already here.", key="here")
    before = rows()
    batch = document(item("here", revision("Changed.", None)), item("new", revision("New.", None)))

    report = import_(batch, trusted=False, dry_run=True)

    assert (report.created, report.revised) == (1, 1)
    assert rows() == before


# New memories in a trusted import are written in bulk (imports._NewMemories); these check it
# writes what writing them one at a time wrote: rows, tags, audit events, indexes, outcomes.


def indexed_rows() -> dict:
    """Rows in each index of the revisions: the engine's postings documents, the vectors, and on SQLite FTS5's."""
    from search import vectors

    counts = {"vectors": vectors.vector_count()}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_document")
        counts["documents"] = cursor.fetchone()[0]
        if not dialect.is_postgresql():  # PostgreSQL has no FTS5 tables
            cursor.execute("SELECT count(*) FROM search_fts_words_docsize")
            counts["fts"] = cursor.fetchone()[0]
    return counts


def test_a_trusted_restore_writes_every_row_and_makes_every_revision_searchable(remember, actor):
    from search import indexing

    with transaction.atomic():
        build_history(remember, actor)
        for number in range(30):  # more memories than the tag and revision rows of one item
            remember(f"Plain imported fact {number} about zebras.", key=f"plain{number}", tags=["Bulk", "zoo"])
        text = "".join(services.memories_export())
        transaction.set_rollback(True)
    original = json.loads(text)["memories"]

    report = import_(text, trusted=True)

    assert report.as_dict() == {
        "created": 34,
        "revised": 0,
        "unchanged": 0,
        "duplicates": 0,
        "forgotten": 1,
        "skipped": 0,
    }
    # Memories, revisions, tombstones (by position), tags and states come back as exported.
    assert export()["memories"] == original
    assert sorted(Tag.objects.values_list("slug", "name")) == [
        ("bulk", "Bulk"),
        ("org", "org"),
        ("people", "People"),
        ("tooling", "tooling"),
        ("zoo", "zoo"),
    ]
    tombstone = Revision.objects.get(tombstone=True, memory__key="window")
    assert tombstone.hides.memory_id == tombstone.memory_id and not tombstone.hides.tombstone
    # One "import" event per memory created, naming it and its revision count, and the overall one.
    events = AuditEvent.objects.filter(action="import")
    per_memory = {event.memory_id: event.detail for event in events.exclude(memory_id=None)}
    assert per_memory == {
        memory.pk: {"trusted": True, "revisions": memory.revisions.count()} for memory in Memory.objects.all()
    }
    assert events.get(memory_id=None).detail["created"] == 34
    # Indexed: full-text rows and vectors for every revision with text, and recall finds the text.
    with_text = Revision.objects.filter(tombstone=False).count()
    assert set(indexed_rows().values()) == {with_text}  # each index, FTS5's too on SQLite
    assert indexing.index_drift() == []
    keyword = memory_recall(query="zebras", mode="keyword", limit=50)
    assert {hit.memory.key for hit in keyword.hits} == {f"plain{number}" for number in range(30)}
    semantic = memory_recall(query="Plain imported fact 7 about zebras.", mode="semantic", limit=1)
    assert semantic.hits[0].memory.key == "plain7"


def test_duplicates_within_one_trusted_document_count_as_written_one_at_a_time(db):
    old, new = "2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z"
    batch = document(
        item("first", revision("Shared text.", old), tags=["Twin"]),
        item("copy", revision("Shared text.", new), tags=["twin", "other"]),  # first shows it now
        item("elsewhere", revision("Shared text.", new), namespace="other"),  # another namespace
        item("revised", revision("Earlier text.", old), revision("Later text.", new)),
        item("earlier", revision("Earlier text.", new)),  # "revised" no longer shows it
        item("later", revision("Later text.", new)),  # "revised" shows it
        item("gone", revision("Forgotten text.", old), revision("", new, tombstone=True, hides=0)),
        item("after-gone", revision("Forgotten text.", new)),
        item("expired", revision("Expired text.", old, expires_at="2024-01-15T00:00:00Z")),
        item("after-expired", revision("Expired text.", new)),
        item("expired-copy", revision("Shared text.", old, expires_at="2024-01-15T00:00:00Z")),  # not current
    )

    report = import_(batch, trusted=True)

    assert report.as_dict() == {
        "created": 9,
        "revised": 0,
        "unchanged": 0,
        "duplicates": 2,
        "forgotten": 1,
        "skipped": 0,
    }
    assert not Memory.objects.filter(key__in=["copy", "later"]).exists()
    assert set(Memory.objects.values_list("key", flat=True)) == {
        "first",
        "elsewhere",
        "revised",
        "earlier",
        "gone",
        "after-gone",
        "expired",
        "after-expired",
        "expired-copy",
    }
    # A duplicate's tags are not created, as one at a time: "other" only came with "copy".
    assert sorted(Tag.objects.values_list("name", flat=True)) == ["Twin"]
    assert AuditEvent.objects.filter(action="import").exclude(memory_id=None).count() == 9


def test_an_existing_memory_revised_earlier_in_the_document_is_seen_by_the_new_ones_after_it(db):
    import_(document(item("kept", revision("Version one.", "2024-01-01T00:00:00Z"))), trusted=True)
    batch = document(
        item("new-before", revision("Version two.", "2024-01-05T00:00:00Z")),  # nothing shows it yet
        item(
            "kept", revision("Version one.", "2024-01-01T00:00:00Z"), revision("Version three.", "2024-01-10T00:00:00Z")
        ),
        item("new-after", revision("Version three.", "2024-01-20T00:00:00Z")),  # "kept" shows it now
    )

    report = import_(batch, trusted=True)

    assert (report.created, report.revised, report.duplicates) == (1, 1, 1)
    assert set(Memory.objects.values_list("key", flat=True)) == {"kept", "new-before"}


def test_new_memories_are_written_with_a_number_of_queries_that_does_not_grow_with_them(db, monkeypatch):
    # Each import in one transaction: the counts compare the writes, not how many chunks they took.
    monkeypatch.setattr(batches, "STAGED_CHUNK", 200)

    def queries(count, prefix):
        batch = document(
            *(
                item(
                    f"{prefix}{n}",
                    revision(f"Fact {prefix} {n}.", "2024-01-01T00:00:00Z"),
                    revision(f"Fact {prefix} {n}, revised.", "2024-02-01T00:00:00Z"),
                )
                for n in range(count)
            )
        )
        with CaptureQueriesContext(connection) as captured:
            assert import_(batch, trusted=True).created == count
        return len(captured)

    few, many = queries(3, "a"), queries(120, "b")
    # Multi-row INSERTs of at most 999 parameters: 120 revisions of 18 columns take 3 statements
    # where 3 take one, at each of the 2 positions in the histories (one at a time: 734 queries).
    assert many <= few + 2 * 2
    assert Revision.objects.count() == 2 * 123


def test_a_trusted_dry_run_of_new_memories_counts_them_and_writes_and_indexes_nothing(remember):
    remember("Already here.", key="here")
    before, indexed = rows(), indexed_rows()
    batch = document(
        item("one", revision("One.", "2024-01-01T00:00:00Z")),
        item("copy", revision("Already here.", "2024-01-01T00:00:00Z")),
        item(
            "two",
            revision("Two.", "2024-01-01T00:00:00Z"),
            revision("", "2024-02-01T00:00:00Z", tombstone=True, hides=0),
        ),
    )

    report = import_(batch, trusted=True, dry_run=True)

    assert report.as_dict() == {
        "created": 2,
        "revised": 0,
        "unchanged": 0,
        "duplicates": 1,
        "forgotten": 1,
        "skipped": 0,
    }
    assert (rows(), indexed_rows()) == (before, indexed)
    assert import_(batch, trusted=True) == report


@pytest.mark.slow
def test_the_export_and_import_commands_copy_a_store_into_an_empty_one(instance, migrated_db, tmp_path):
    source = tmp_path / "source.json"
    source.write_text(
        json.dumps(
            document(
                item(
                    "lead",
                    revision("Alice leads.", "2024-01-01T09:00:00+01:00"),
                    revision("Bob leads.", "2024-02-01T00:00:00Z", valid_from="2024-02-01"),
                ),
                item(
                    "gone",
                    revision("Gone.", "2024-01-01T00:00:00Z"),
                    revision("", "2024-03-01T00:00:00Z", tombstone=True, hides=0, reason="wrong"),
                ),
            )
        )
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document(item("x", revision("Text.", "2024-01-01")), item("y", revision("", "2024")))))

    checked = instance.manage("import_memories", str(source), "--trusted", "--dry-run")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("Dry run, nothing written; would be: 2 created")
    refused = instance.manage("import_memories", str(bad))
    assert refused.returncode == 1
    assert "memories[1].revisions[0]" in refused.stderr
    loaded = instance.manage("import_memories", str(source), "--trusted")
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "Imported: 2 created, 0 revised, 0 unchanged, 0 duplicates, 1 forgotten, 0 skipped."

    output = tmp_path / "export.json"
    written = instance.manage("export_memories", "--output", str(output), "--namespace", "acme")
    assert written.returncode == 0, written.stderr
    assert written.stdout.startswith("Exported 2 memories known at ")
    exported = output.read_text()
    kept = instance.manage("export_memories", "--output", str(output))
    assert kept.returncode == 1
    assert "already exists" in kept.stderr
    assert output.read_text() == exported
    streamed = instance.manage("export_memories", "--as-of", "2024-02-15")
    assert streamed.returncode == 0, streamed.stderr
    assert "Exported 2 memories known at 2024-02-15T00:00:00.000000Z to stdout." in streamed.stderr
    assert json.loads(streamed.stdout)["memories"][1]["state"] == "active"

    # The command parses as strictly as REST: a repeated key or a deep nesting is refused in one line.
    for text, expected in [
        (
            json.dumps(document(item("x", revision("Text.", "2024-01-01"))))[:-1] + ', "memories": []}',
            "duplicate key 'memories'",
        ),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ]:
        bad.write_text(text)
        refused = instance.manage("import_memories", str(bad))
        assert refused.returncode == 1 and expected in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr

    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    copy_migrated(migrated_db, empty_dir)
    empty = Instance(data_dir=empty_dir, env=clean_env(empty_dir))
    copied = empty.manage("import_memories", "-", "--trusted", stdin=exported)
    assert copied.returncode == 0, copied.stderr
    again = empty.manage("export_memories")
    assert json.loads(again.stdout)["memories"] == json.loads(exported)["memories"]
    assert json.loads(exported)["memories"][0]["revisions"][0]["known_at"] == "2024-01-01T08:00:00.000000Z"


def test_export_into_a_reader_that_stops_early_ends_quietly(instance):
    instance.run("""
        for number in range(150):
            services.memory_remember(namespace="acme", content=f"Note {number}: " + "words " * 200, **ACTOR)
    """)
    exporting = subprocess.Popen(
        [sys.executable, "manage.py", "export_memories"],
        cwd=BASE_DIR,
        env=instance.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert exporting.stdout.read(100).startswith(b"{")
    exporting.stdout.close()  # as `| head -c 100` does: the export is far larger than the pipe's buffer
    stderr = exporting.stderr.read()
    assert (exporting.wait(timeout=60), stderr) == (0, b"")
