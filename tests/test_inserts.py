"""insert_all writes the rows bulk_create writes, and gives the objects their ids in order."""

import datetime as dt

import pytest
from django.db import connection

from memories.inserts import insert_all
from memories.models import AuditEvent, Interface, Kind, Memory, Revision, State, Tag

UTC = dt.timezone.utc
LATER = dt.timezone(dt.timedelta(hours=5, minutes=30))


def columns(model) -> list[str]:
    return [field.column for field in model._meta.concrete_fields if not field.primary_key]


def rows(model, ids):
    """The stored rows of ``ids`` (every column but the id, in ``columns`` order), as SQLite returns them."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(columns(model))} FROM {model._meta.db_table} "
            f"WHERE id IN ({','.join(['%s'] * len(ids))}) ORDER BY id",
            ids,
        )
        return cursor.fetchall()


def memories(prefix):
    return [
        Memory(
            namespace="acme",
            key=f"{prefix}-{number}",
            kind=kind,
            state=state,
            created_at=dt.datetime(2025, 3, 1, 12, 30, number, 250_000 * (number % 4), tzinfo=zone),
        )
        for number, (kind, state, zone) in enumerate(
            [(Kind.NOTE, State.ACTIVE, UTC), (Kind.FACT, State.FORGOTTEN, LATER), ("decision", "active", UTC)]
        )
    ]


def revisions(owners, hides=None):
    made = []
    for number, memory in enumerate(owners):
        made.append(
            Revision(
                memory=memory,
                content=f'text {number} ✓ "quoted"',
                title="" if number else "A title",
                content_hash=f"{number:064x}",
                known_at=dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=LATER),
                valid_from=dt.datetime(2024, 1, 1, tzinfo=UTC),
                valid_to=None if number else dt.datetime(2024, 6, 1, 0, 0, 0, 1, tzinfo=UTC),
                expires_at=dt.datetime(2030, 1, 1, tzinfo=UTC) if number == 2 else None,
                tombstone=hides is not None and number == 0,
                hides=hides if number == 0 else None,
                author="ana",
                interface=Interface.MCP,
                reason="",
                embedding_model="hash-v1" if number else "",
            )
        )
    return made


@pytest.mark.django_db
def test_insert_all_writes_the_rows_bulk_create_writes():
    fast, slow = insert_all(memories("fast")), Memory.objects.bulk_create(memories("slow"))
    assert [memory.pk for memory in fast] == sorted(memory.pk for memory in fast)
    key = columns(Memory).index("key")  # keys differ by prefix; every other column is the same
    assert [row[:key] + row[key + 1 :] for row in rows(Memory, [m.pk for m in fast])] == [
        row[:key] + row[key + 1 :] for row in rows(Memory, [m.pk for m in slow])
    ]
    assert all(not memory._state.adding and memory._state.db == "default" for memory in fast)

    first_fast, first_slow = insert_all(revisions(fast)), Revision.objects.bulk_create(revisions(slow))
    tomb_fast = insert_all(revisions(fast, hides=first_fast[1]))
    tomb_slow = Revision.objects.bulk_create(revisions(slow, hides=first_slow[1]))
    for fast_ones, slow_ones in ((first_fast, first_slow), (tomb_fast, tomb_slow)):
        fast_rows, slow_rows = rows(Revision, [r.pk for r in fast_ones]), rows(Revision, [r.pk for r in slow_ones])
        # Memory and hidden-revision ids differ; every other column is the same.
        memory_column, hides_column = columns(Revision).index("memory_id"), columns(Revision).index("hides_id")

        def without_ids(found):
            return [
                tuple(value for index, value in enumerate(row) if index not in (memory_column, hides_column))
                for row in found
            ]

        assert without_ids(fast_rows) == without_ids(slow_rows)
        assert [row[memory_column] for row in fast_rows] == [memory.pk for memory in fast]
    assert Revision.objects.get(pk=tomb_fast[0].pk).hides_id == first_fast[1].pk
    # The objects read back as they were written.
    stored = Revision.objects.get(pk=first_fast[0].pk)
    assert stored.valid_to == dt.datetime(2024, 6, 1, 0, 0, 0, 1, tzinfo=UTC)
    assert stored.known_at == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=LATER)

    events = [(fast[0].pk, {"trusted": True, "revisions": 2}), (None, {"nested": {"list": [1, "é"]}})]
    fast_events = insert_all(
        [
            AuditEvent(
                at=dt.datetime(2025, 1, 1, tzinfo=UTC),
                actor="ana",
                interface="cli",
                action="import",
                memory_id=memory_id,
                detail=detail,
            )
            for memory_id, detail in events
        ]
    )
    slow_events = AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                at=dt.datetime(2025, 1, 1, tzinfo=UTC),
                actor="ana",
                interface="cli",
                action="import",
                memory_id=memory_id,
                detail=detail,
            )
            for memory_id, detail in events
        ]
    )
    assert rows(AuditEvent, [e.pk for e in fast_events]) == rows(AuditEvent, [e.pk for e in slow_events])
    assert AuditEvent.objects.get(pk=fast_events[1].pk).detail == {"nested": {"list": [1, "é"]}}

    tag = Tag.objects.create(slug="ops", name="Ops")
    through = Memory.tags.through
    insert_all([through(memory_id=memory.pk, tag_id=tag.pk) for memory in fast])
    assert list(Memory.objects.filter(tags=tag).order_by("pk")) == fast


@pytest.mark.django_db
def test_insert_all_fills_statements_of_many_rows_and_keeps_the_order(monkeypatch):
    monkeypatch.setattr("memories.inserts._MAX_PARAMETERS", 5 * 7 + 3)  # 7 rows of 5 columns per statement
    made = insert_all(
        [
            Memory(namespace="acme", key=f"k{number:03}", created_at=dt.datetime(2025, 1, 1, tzinfo=UTC))
            for number in range(50)
        ]
    )
    assert [Memory.objects.get(pk=memory.pk).key for memory in made] == [f"k{number:03}" for number in range(50)]
    assert insert_all([]) == []


@pytest.mark.django_db
def test_insert_all_refuses_what_it_cannot_write_as_bulk_create_would():
    saved = Memory.objects.create(namespace="acme", key="saved", created_at=dt.datetime(2025, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="new objects of one model"):
        insert_all([saved])
    with pytest.raises(ValueError, match="new objects of one model"):
        insert_all([Memory(namespace="acme", key="x", created_at=saved.created_at), Tag(slug="a", name="a")])


@pytest.mark.django_db
def test_insert_all_fills_a_statement_to_sqlites_default_parameter_limit():
    # 6,553 memories of 5 columns make 32,765 parameters (SQLite's default limit is 32,766; this
    # build may allow more): one full statement, then the rest.
    made = insert_all(
        [
            Memory(namespace="acme", key=f"k{number}", created_at=dt.datetime(2025, 1, 1, tzinfo=UTC))
            for number in range(7000)
        ]
    )
    assert len({memory.pk for memory in made}) == 7000
    assert Memory.objects.get(pk=made[6552].pk).key == "k6552" and Memory.objects.get(pk=made[6553].pk).key == "k6553"
