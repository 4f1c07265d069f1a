"""The engine's storage side: batched indexing, the snapshot's incremental refresh and caches, the vector copy.

These are shortcuts taken for speed (benchmarks/latency.py, write_costs.py); each test
checks that a shortcut gives what the plain way would.
"""

import datetime as dt
import json

import numpy as np
import pytest
from django.db import connection, transaction

from memories import validation
from memories.models import Memory
from memories.selectors import memory_recall as recall
from memories.services import memory_erase
from memories.services.revisions import append_revision
from search import caches, cosines, indexing, postings, snapshot, vectors

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
DAY = dt.timedelta(days=1)


def write(memory, content, known, **fields):
    return append_revision(
        memory=memory,
        content=content,
        content_hash=validation.content_hash(content),
        known_at=known,
        valid_from=fields.pop("valid_from", known),
        author="test",
        interface="cli",
        **fields,
    )


def new_memory(key, namespace="acme"):
    return Memory.objects.create(namespace=namespace, key=key, created_at=T0)


def K(term, namespace="acme"):
    return postings.key(namespace, term)


def posted(term, namespace="acme"):
    """The revision ids and counts the postings hold for one term (every id, whatever was written after)."""
    return postings.read_terms([[(postings.key(namespace, term), None)]], max_id=2**31)[0]


def columns_of(view):
    return {name: getattr(view.columns, name).tolist() for name in snapshot._COLUMNS}


def test_a_batch_indexes_what_survived_its_savepoints_with_the_text_stored(db):
    with transaction.atomic(), indexing.batched():
        memory = new_memory("m")
        with pytest.raises(RuntimeError), transaction.atomic():
            write(memory, "apple orchard", T0)
            raise RuntimeError  # the savepoint rolls back; its revision id may be given out again
        kept = write(memory, "banana plantation", T0 + DAY)
        # Nothing is indexed until the block ends.
        assert posted("banana")[0].tolist() == []
    assert posted("appl")[0].tolist() == []
    assert posted("banana")[0].tolist() == [kept.pk]
    assert [hit.memory.id for hit in recall(query="banana", mode="keyword").hits] == [memory.pk]
    assert recall(query="apple", mode="keyword").hits == []
    assert vectors.vector_count() == 1


def test_a_batch_marked_for_rollback_indexes_nothing(db):
    with transaction.atomic():
        with indexing.batched():
            write(new_memory("m"), "cherry", T0)
            transaction.set_rollback(True)
    assert posted("cherri")[0].tolist() == []


def test_a_large_batch_folds_straight_into_the_packed_postings(db, monkeypatch):
    monkeypatch.setattr(postings, "COMPACT_AFTER", 3)
    with transaction.atomic():
        small = write(new_memory("a"), "delta", T0)  # one tail row
        with indexing.batched():
            first = write(new_memory("b"), "delta echo", T0)
            second = write(new_memory("c"), "delta foxtrot golf", T0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_posting_tail")
        assert cursor.fetchone()[0] == 0
    ids, tfs = posted("delta")
    assert ids.tolist() == [small.pk, first.pk, second.pk]
    assert tfs.tolist() == [1.0, 1.0, 1.0]


def test_a_fold_keeps_each_term_s_ids_ascending_and_caps_counts_whatever_order_they_come_in(db, monkeypatch):
    monkeypatch.setattr(postings, "COMPACT_AFTER", 4)
    tail = write(new_memory("t"), "delta", T0)  # a tail row, folded with the batch below
    later = [tail.pk + 1, tail.pk + 2, tail.pk + 3]  # ids of revisions to come (the postings do not look)
    documents = [
        postings.DocumentTerms(revision_id, terms, ntok=1, nbigram=0)
        for revision_id, terms in zip(
            later, [{K("delta"): 2}, {K("echo"): postings.TF_MAX + 9, K("delta"): 1}, {K("delta"): 5, K("golf"): 1}]
        )
    ]
    with transaction.atomic():
        postings.add(documents[::-1])  # newest first: not id order
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_posting_tail")
        assert cursor.fetchone()[0] == 0  # folded
    ids, tfs = posted("delta")
    assert ids.tolist() == [tail.pk, *later]
    assert tfs.tolist() == [1.0, 2.0, 1.0, 5.0]
    assert posted("echo")[1].tolist() == [float(postings.TF_MAX)]
    assert posted("golf")[0].tolist() == [later[2]]


@pytest.mark.parametrize("sizes", [(400, 30, 20, 5), (300, 250), (50, 40, 30), (60, 3), (0, 7), (9,)])
def test_the_union_of_a_prefix_s_terms_counts_each_revision_once_with_its_counts_summed(sizes):
    # Both ways of merging (binary search into the largest term, a dense scratch array) must
    # give what summing by hand gives; the scratch must come back clean for the next call.
    rng = np.random.default_rng(sum(sizes))
    parts, expected = [], {}
    for size in sizes:
        ids = np.sort(rng.choice(1000, size, replace=False)).astype(np.int64)
        tfs = rng.integers(1, 5, size).astype(np.float64)
        parts.append((ids, tfs))
        for revision_id, tf in zip(ids.tolist(), tfs.tolist()):
            expected[revision_id] = expected.get(revision_id, 0.0) + tf
    for _ in range(2):
        ids, tfs = postings._union(list(parts))
        assert len(set(ids.tolist())) == len(ids)
        assert dict(zip(ids.tolist(), tfs.tolist())) == expected
    counts, seen = postings.scratch_arrays(1000)
    assert not counts.any() and not seen.any()


def test_a_prefix_counts_a_revision_once_across_its_terms_packed_and_tail(db, monkeypatch):
    monkeypatch.setattr(postings, "COMPACT_AFTER", 10_000)
    memory = new_memory("m")
    old = write(memory, "deploy deployment deployments", T0)
    postings.compact()  # the first revision's terms are packed, the later ones sit in the tail
    new = write(new_memory("n"), "deployment deploys deployed", T0 + DAY)
    later = write(new_memory("o"), "deployment", T0 + 2 * DAY)
    ranges = postings.term_ranges("acme", "deploi", "deploy")  # the query word "deploy": its stem and its root
    ids, tfs = postings.read_terms([ranges], max_id=new.pk)[0]
    assert sorted(zip(ids.tolist(), tfs.tolist())) == [(old.pk, 3.0), (new.pk, 3.0)]  # later: after max_id
    ids, _ = postings.read_terms([ranges], max_id=later.pk)[0]
    assert sorted(ids.tolist()) == [old.pk, new.pk, later.pk]


def test_packed_postings_are_kept_until_a_fold_or_an_erasure_changes_them(db, monkeypatch):
    monkeypatch.setattr(postings, "COMPACT_AFTER", 10_000)
    first = write(new_memory("a"), "kiwi kiwi", T0)
    postings.compact()
    assert posted("kiwi")[1].tolist() == [2.0]
    # The process keeps what it read while the packed rows' version stands: a change made
    # behind the version's back (no writer does this) is not read...
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE search_posting SET tfs = %s WHERE term = %s", [np.array([7], "<u2").tobytes(), K("kiwi")]
        )
    assert posted("kiwi")[1].tolist() == [2.0]
    # ...while the tail is read every time...
    second = write(new_memory("b"), "kiwi", T0 + DAY)
    ids, tfs = posted("kiwi")
    assert (ids.tolist(), tfs.tolist()) == ([first.pk, second.pk], [2.0, 1.0])
    # ...and a fold draws a new version, so the packed rows are read again (the 7 with them).
    postings.compact()
    ids, tfs = posted("kiwi")
    assert (ids.tolist(), tfs.tolist()) == ([first.pk, second.pk], [7.0, 1.0])
    assert postings.read_terms([[(postings.key("acme", "kiwi"), None)]], max_id=first.pk)[0][0].tolist() == [first.pk]
    # A fold that rolls back takes its version with it: what was read inside is not used after.
    with transaction.atomic():
        third = write(new_memory("c"), "kiwi", T0 + 2 * DAY)
        postings.compact()
        assert posted("kiwi")[0].tolist() == [first.pk, second.pk, third.pk]
        transaction.set_rollback(True)
    assert posted("kiwi")[0].tolist() == [first.pk, second.pk]
    # Erasure rewrites packed rows too.
    memory_erase(memory_id=second.memory_id, actor="test", interface="cli")
    assert posted("kiwi")[0].tolist() == [first.pk]


def test_a_fold_between_reading_the_tail_and_the_packed_rows_is_read_again(db, monkeypatch):
    monkeypatch.setattr(postings, "COMPACT_AFTER", 10_000)
    first = write(new_memory("a"), "lime", T0)
    second = write(new_memory("b"), "lime lime", T0 + DAY)  # both in the tail, nothing cached for "lime"
    select, folded = postings._select, []

    def fold_after_the_tail(ranges, table):
        found = select(ranges, table)
        if table == "search_posting_tail" and not folded:
            folded.append(postings.compact())  # another writer's fold, right after the tail was read
        return found

    monkeypatch.setattr(postings, "_select", fold_after_the_tail)
    ids, tfs = posted("lime")
    assert folded and (ids.tolist(), tfs.tolist()) == ([first.pk, second.pk], [1.0, 2.0])  # each once


def test_a_fold_moves_a_few_terms_per_transaction_and_reads_between_them_answer_the_same(db, monkeypatch):
    monkeypatch.setattr(postings, "COMPACT_AFTER", 10_000)
    monkeypatch.setattr(postings, "FOLD_TERMS", 2)
    write(new_memory("a"), "apple banana cherry", T0)
    postings.compact()  # some terms already packed: the fold appends to them
    for number, content in enumerate(["apple banana delta", "cherry echo golf", "apple golf hotel"]):
        write(new_memory(f"b{number}", namespace=("acme", "home")[number % 2]), content, T0 + DAY)
    terms = [
        (namespace, term)
        for namespace in ("acme", "home")
        for term in ("appl", "banana", "cherri", "delta", "echo", "golf", "hotel")
    ]

    def everything():
        return [(ids.tolist(), tfs.tolist()) for ids, tfs in (posted(term, namespace) for namespace, term in terms)]

    expected = everything()
    test_blocks = len(connection.atomic_blocks)
    fold, seen = postings._fold, []

    def watched(cursor, new, **bounds):
        assert len(connection.atomic_blocks) == test_blocks + 1  # a transaction of its own per range
        rewritten = fold(cursor, new, **bounds)
        seen.append((rewritten, everything()))
        return rewritten

    monkeypatch.setattr(postings, "_fold", watched)
    assert postings.compact() == 8  # the tail's terms, of both namespaces
    assert [rewritten for rewritten, _ in seen] == [2, 2, 2, 2]
    assert all(answers == expected for _, answers in seen)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), (SELECT tail_rows FROM search_state) FROM search_posting_tail")
        assert cursor.fetchone() == (0, 0)


def test_the_packed_cache_keeps_the_most_recently_read_within_its_bytes():
    cache = caches.LeastRecentlyUsed(3 * 800, cost=lambda entry: entry.ids.nbytes + entry.tfs.nbytes)  # three entries

    def entry(version):
        return postings._Packed(version, np.arange(50, dtype=np.int64), np.ones(50), 49)

    for name in "abc":
        cache.put(name, entry(1))
    assert cache.get("a").version == 1  # now the most recently read
    cache.put("d", entry(1))
    assert cache.get("b") is None and [cache.get(name) is not None for name in "acd"] == [True] * 3
    cache.put("a", entry(2))  # replaced, not counted twice
    assert cache.get("a").version == 2 and cache.size == 3 * 800
    cache.put("huge", postings._Packed(1, np.arange(1000, dtype=np.int64), np.ones(1000), 999))
    assert cache.get("huge") is None and cache.get("a") is not None


def test_a_snapshot_extended_by_later_writes_equals_a_fresh_load(db):
    one, two = new_memory("one"), new_memory("two")
    write(one, "first text", T0 + 5 * DAY)
    write(two, "second text", T0 + 3 * DAY)
    before = snapshot._extend(snapshot._EMPTY, after=0)
    before.visible_rows(as_of=0, valid_at=0)  # computes the sorted times the extension then merges into
    # Later revisions of known memories, a new memory: each goes after its memory's rows.
    write(one, "first text again", T0 + 9 * DAY)
    write(new_memory("three"), "third text", T0 + DAY)
    extended = snapshot._extend(before, after=before.max_id)
    fresh = snapshot._extend(snapshot._EMPTY, after=0)
    assert columns_of(extended) == columns_of(fresh)
    assert extended.position.tolist() == fresh.position.tolist()
    for name in snapshot._EVENT_COLUMNS:
        assert getattr(extended.events[0], name).tolist() == sorted(getattr(fresh.columns, name).tolist())
    # A trusted import can add a revision learned before one already held: that re-sorts.
    write(two, "second text, older news", T0 + 2 * DAY)
    assert columns_of(snapshot._extend(extended, after=extended.max_id)) == columns_of(
        snapshot._extend(snapshot._EMPTY, after=0)
    )


def same_as_a_fresh_load(view):
    fresh = snapshot._extend(snapshot._EMPTY, after=0)
    assert columns_of(view) == columns_of(fresh)
    assert view.position.tolist() == fresh.position.tolist()
    for name in snapshot._EVENT_COLUMNS:
        assert getattr(view.events[0], name).tolist() == sorted(getattr(fresh.columns, name).tolist())


def frozen(view):
    return (
        columns_of(view),
        view.position.tolist(),
        [getattr(view.events[0], name).tolist() for name in snapshot._EVENT_COLUMNS],
    )


def test_views_that_grow_into_a_shared_room_stay_exact_and_never_change_an_earlier_view(db):
    first = new_memory("first")
    write(first, "first text", T0)
    base = snapshot._extend(snapshot._EMPTY, after=0, shared=True)
    base.visible_rows(as_of=0, valid_at=0)  # the sorted times, which the room carries too
    seen = [(base, frozen(base))]
    view = base
    # New memories append (the first into a new room, the next into the same one); a
    # later revision of the last memory appends too; an expiry earlier than the open
    # ones held is merged into the times; an older memory's new revision re-sorts.
    steps = [
        lambda: write(new_memory("second"), "second text", T0 + DAY),
        lambda: write(new_memory("third"), "third text", T0 + 2 * DAY),
        lambda: write(Memory.objects.get(key="third"), "third text again", T0 + 3 * DAY),
        lambda: write(new_memory("fourth"), "fourth text", T0 + 4 * DAY, expires_at=T0 + 9 * DAY),
        lambda: write(new_memory("fifth"), "fifth text", T0 + 5 * DAY),
        lambda: write(first, "first text, revised", T0 + 6 * DAY),
        lambda: write(new_memory("sixth"), "sixth text", T0 + 7 * DAY),
    ]
    rooms = []
    for step in steps:
        step()
        view = snapshot._extend(view, after=view.max_id, shared=True)
        same_as_a_fresh_load(view)
        rooms.append(view.room)
        for earlier, arrays in seen:
            assert frozen(earlier) == arrays
        seen.append((view, frozen(view)))
    assert rooms[0] is not None and rooms[1] is rooms[0] and rooms[2] is rooms[0]  # grown in place
    assert rooms[5] is None  # the re-sorted view copies, and has no room until the next append
    # Two views grown from the same one: the second finds the room taken and copies.
    write(new_memory("seventh"), "seventh text", T0 + 8 * DAY)
    left = snapshot._extend(view, after=view.max_id, shared=True)
    right = snapshot._extend(view, after=view.max_id, shared=True)
    assert right.room is not left.room
    assert frozen(left) == frozen(right)
    same_as_a_fresh_load(right)
    for earlier, arrays in seen:
        assert frozen(earlier) == arrays


def test_cached_visible_rows_follow_the_clock_without_a_write(db):
    memory = new_memory("m")
    write(memory, "ephemeral note", T0, expires_at=T0 + 10 * DAY)
    write(memory, "a correction for three days", T0 + 20 * DAY, valid_from=T0 + 2 * DAY, valid_to=T0 + 5 * DAY)
    view = snapshot._extend(snapshot._EMPTY, after=0)

    def visible(as_of, valid_at=None):
        return view.visible_rows(
            as_of=snapshot.to_micros(as_of), valid_at=snapshot.to_micros(valid_at or as_of)
        ).tolist()

    assert visible(T0 + DAY) == [0]
    assert visible(T0 + 10 * DAY) == []  # the TTL ends visibility at the instant
    assert visible(T0 + 2 * DAY) == [0]
    assert visible(T0 - DAY) == []
    assert visible(T0 + 30 * DAY, T0 + 3 * DAY) == [1]
    assert visible(T0 + 30 * DAY, T0 + 5 * DAY) == []
    assert visible(T0 + 19 * DAY, T0 + 3 * DAY) == []
    assert [hit.memory.id for hit in recall(query="ephemeral", mode="keyword", as_of="2024-01-05").hits] == [memory.pk]
    assert recall(query="ephemeral", mode="keyword", as_of="2024-01-12").hits == []


def test_a_namespaces_vectors_grow_in_place_without_changing_what_was_handed_out():
    rng = np.random.default_rng(0)
    ids, matrix = np.arange(1, 4), rng.random((3, 8), dtype=np.float32)
    partition = cosines.Partition(vectors.VectorRows(ids, ids * 10, matrix))
    handed_out, rooms = [], set()
    for start in range(4, 5000, 7):
        new_ids, new_rows = np.arange(start, start + 7), rng.random((7, 8), dtype=np.float32)
        ids, matrix = np.concatenate([ids, new_ids]), np.concatenate([matrix, new_rows])
        partition.append(vectors.VectorRows(new_ids, new_ids * 10, new_rows))
        rooms.add(id(partition.room.matrix))
        handed_out.append((partition.stored, partition.stored.ids.copy(), partition.stored.matrix.copy()))
        assert partition.stored.ids.tolist() == ids.tolist()
        assert np.array_equal(partition.stored.matrix, matrix)
    assert len(rooms) < 20  # grown in place, not copied on every write
    assert partition.members == set((ids * 10).tolist())
    assert all(
        np.array_equal(stored.ids, kept_ids) and np.array_equal(stored.matrix, kept_rows)
        for stored, kept_ids, kept_rows in handed_out
    )


# Both caches are shared by a process's threads and only kept outside transactions, so
# these run in a process of their own against a committed database.
_RACES = """
import json
from memories.models import Revision
from memoryproject import dialect
from search import cosines, snapshot, vectors

def write(number):
    services.memory_remember(namespace="acme", content=f"Note {number} about the deploy.", look_for_near_twin=False,
                             **ACTOR)

def counted(module, name, calls):
    real = getattr(module, name)
    setattr(module, name, lambda *args, **kwargs: calls.append(kwargs.get("after_id", kwargs.get("after")))
            or real(*args, **kwargs))

for number in range(3):
    write(number)
cosines.namespace_vectors(snapshot.current(), ["acme"])
copy = cosines._copies[dialect.database_key()]
loads = []
counted(vectors, "poll_vectors", loads)
counted(vectors, "vector_state", loads)
stale = vectors.current_space()
write(3)
fresh = vectors.current_space()
write(4)  # lands between a caller's read of the space and the copy's load
view = snapshot.current()
grown = sorted(copy.current(fresh, view, ["acme"]).parts[0].ids.tolist())
again = sorted(copy.current(stale, view, ["acme"]).parts[0].ids.tolist())  # read before the copy moved on
loaded = list(loads)

# A refresh whose lock is taken just after another thread's refresh brought the view further.
snapshot.current()
write(5)
shared = snapshot._snapshots[dialect.database_key()]
real_lock = shared.lock

class Meddling:
    meddle = True

    def __enter__(self):
        if Meddling.meddle:
            Meddling.meddle = False
            snapshot.current()  # the other thread's refresh, done where this one waits for the lock
        return real_lock.__enter__()

    def __exit__(self, *exc):
        return real_lock.__exit__(*exc)

extends = []
counted(snapshot, "_extend", extends)
shared.lock = Meddling()
view = snapshot.current()
print(json.dumps({"loads": loaded, "grown": grown, "again": again, "stored": vectors.load_matrix()[0].tolist(),
                  "extends": extends, "view": sorted(view.columns.revision.tolist()),
                  "revisions": sorted(Revision.objects.values_list("id", flat=True))}))
"""


@pytest.mark.slow
def test_refreshes_racing_other_threads_extend_the_caches_instead_of_reloading_them(instance):
    instance.env["MEMORY_EMBEDDER"] = "hash"
    seen = json.loads(instance.run(_RACES))
    last_of_first_three = seen["stored"][2]
    # One load past the copy's last row, reading both new vectors with the space's generation
    # (not a reload from 0, which a write landing between the two reads used to cause).
    assert seen["loads"] == [last_of_first_three]
    assert seen["grown"] == seen["stored"][:5] and seen["again"] == seen["grown"]
    # The view grew by the one new row once, by the refresh that came first; the late one
    # found it current (its check, read before the lock, used to send it to a full reload).
    assert seen["extends"] == [seen["view"][-2]]
    assert seen["view"] == seen["revisions"]


def segments_of(term):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT segment, length(revision_ids) / 4, revision_ids FROM search_posting WHERE term = %s "
            "ORDER BY segment",
            [postings.key("acme", term)],
        )
        return cursor.fetchall()


def fold(first_id, count, term="kiwi"):
    """Fold ``count`` postings of ``term`` (ids from ``first_id`` on, each counted id % 7 + 1 times)."""
    postings.add(
        [
            postings.DocumentTerms(revision_id, {postings.key("acme", term): revision_id % 7 + 1}, ntok=1, nbigram=0)
            for revision_id in range(first_id, first_id + count)
        ]
    )
    postings.compact()
    return first_id + count


def test_a_fold_appends_a_segment_and_joins_only_the_last_small_ones(db, monkeypatch):
    monkeypatch.setattr(postings, "COMPACT_AFTER", 10**6)
    with transaction.atomic():
        next_id = fold(1, 100)
        big = segments_of("kiwi")[0][2]
        next_id = fold(next_id, 1)
        assert [row[:2] for row in segments_of("kiwi")] == [(0, 100), (1, 1)]
        assert segments_of("kiwi")[0][2] == big  # the long segment was not written again
        next_id = fold(next_id, 1)  # 1 <= 2 * 1: joined
        assert [row[:2] for row in segments_of("kiwi")] == [(0, 100), (1, 2)]
        next_id = fold(next_id, 10)  # 2 <= 20 joined; 100 > 2 * 12 stays
        assert [row[:2] for row in segments_of("kiwi")] == [(0, 100), (1, 12)]
        next_id = fold(next_id, 50)  # 12 <= 100, then 100 <= 2 * 62: one segment again
        assert [row[:2] for row in segments_of("kiwi")] == [(0, 162)]
        ids, tfs = posted("kiwi")
        assert ids.tolist() == list(range(1, next_id))
        assert tfs.tolist() == [float(revision_id % 7 + 1) for revision_id in range(1, next_id)]


def test_segments_stay_few_and_read_as_one_term_whatever_the_fold_sizes(db, monkeypatch):
    monkeypatch.setattr(postings, "COMPACT_AFTER", 10**6)
    rng = np.random.default_rng(3)
    next_id = 1
    with transaction.atomic():
        for size in rng.integers(1, 60, 40).tolist():
            next_id = fold(next_id, size)
            sizes = [row[1] for row in segments_of("kiwi")]
            # Each segment more than twice the next: at most log2(n) + 1 of them.
            assert all(earlier > 2 * later for earlier, later in zip(sizes, sizes[1:]))
            assert len(sizes) <= np.log2(next_id - 1) + 1
            ids, tfs = posted("kiwi")
            assert ids.tolist() == list(range(1, next_id))
            assert tfs.tolist() == [float(revision_id % 7 + 1) for revision_id in range(1, next_id)]
        # A prefix range reads every segment of each of its terms once.
        fold(next_id, 3, term="kiwis")
        ids, tfs = postings.read_terms([[(postings.key("acme", "kiwi"), postings.key("acme", "kiwj"))]], max_id=2**31)[
            0
        ]
        assert sorted(ids.tolist()) == list(range(1, next_id + 3))


def test_erasure_takes_ids_out_of_every_segment_and_drops_the_emptied_ones(db, monkeypatch):
    monkeypatch.setattr(postings, "COMPACT_AFTER", 10**6)
    with transaction.atomic():
        fold(fold(1, 100), 1)
        assert [row[:2] for row in segments_of("kiwi")] == [(0, 100), (1, 1)]
        postings.remove([(5, "acme", "", "kiwi"), (101, "acme", "", "kiwi")])
        assert [row[:2] for row in segments_of("kiwi")] == [(0, 99)]
        assert posted("kiwi")[0].tolist() == [revision_id for revision_id in range(1, 101) if revision_id != 5]
        postings.remove([(revision_id, "acme", "", "kiwi") for revision_id in range(1, 101)])
        assert segments_of("kiwi") == []


def test_migrating_back_joins_each_term_s_segments_and_forward_splits_nothing(instance):
    read = """
        import json
        from memories.selectors import memory_recall
        from search import postings
        kiwi = postings.read_terms([[(postings.key("acme", "kiwi"), None)]], max_id=2**31)[0][0].tolist()
        print(json.dumps({"kiwi": kiwi,
                          "hits": [hit.memory.key for hit in memory_recall(query="kiwi", mode="keyword").hits]}))
    """
    instance.run("""
        from search import postings
        postings.COMPACT_AFTER = 1  # every write folds: a segment per write, joined as they go
        for number in range(7):
            services.memory_remember(namespace="acme", key=f"k{number}", content="kiwi " * (number + 1), **ACTOR)
    """)
    segmented = json.loads(instance.run(read))
    assert len(segmented["kiwi"]) == 7 and len(segmented["hits"]) == 7

    def rows_and_terms():
        return [
            int(value)
            for value in instance.run("""
            from django.db import connection
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*), count(DISTINCT term) FROM search_posting")
                print(*cursor.fetchone())
        """).split()
        ]

    rows, terms = rows_and_terms()
    assert rows > terms  # some term has several segments
    done = instance.manage("migrate", "search", "0004", "-v", "0")
    assert done.returncode == 0, done.stderr
    rows, terms = rows_and_terms()
    assert rows == terms  # one row per term: kiwi's ids joined in order
    joined = instance.run("""
        import numpy as np
        from django.db import connection
        with connection.cursor() as cursor:
            cursor.execute("SELECT revision_ids FROM search_posting WHERE term = 'kiwi'")
            print(*np.frombuffer(cursor.fetchone()[0], dtype="<u4").tolist())
    """)
    assert [int(value) for value in joined.split()] == segmented["kiwi"]
    done = instance.manage("migrate", "-v", "0")
    assert done.returncode == 0, done.stderr
    assert json.loads(instance.run(read)) == segmented
