"""The ``memory`` command, run as people run it: a process, JSON on stdout, JSON errors and status 2."""

import getpass

import pytest

pytestmark = pytest.mark.slow


def test_a_memory_goes_through_remember_get_history_forget_and_restore(instance):
    made = instance.memory(
        "remember",
        "The deploy window is Tuesday 14:00 UTC.",
        "--namespace",
        "acme",
        "--key",
        "deploy-window",
        "--kind",
        "decision",
        "--tag",
        "Ops",
        "--tag",
        "release",
        "--title",
        "Deploy window",
        "--source",
        "standup",
    )
    assert made["created"] is True
    assert (made["namespace"], made["key"], made["kind"]) == ("acme", "deploy-window", "decision")
    assert made["tags"] == ["Ops", "release"]
    memory_id = made["id"]

    got = instance.memory("get", str(memory_id))
    assert got["content"] == "The deploy window is Tuesday 14:00 UTC."
    assert got["revision_id"] == made["revision_id"]
    assert instance.memory("get", "--namespace", "acme", "--key", "deploy-window")["id"] == memory_id

    revised = instance.memory(
        "remember",
        "The deploy window is Thursday 14:00 UTC.",
        "--namespace",
        "acme",
        "--key",
        "deploy-window",
        "--kind",
        "decision",
    )
    assert (revised["id"], revised["revised"]) == (memory_id, True)
    history = instance.memory("history", str(memory_id))
    assert [revision["content"] for revision in history["revisions"]] == [
        "The deploy window is Tuesday 14:00 UTC.",
        "The deploy window is Thursday 14:00 UTC.",
    ]
    assert {(revision["author"], revision["interface"]) for revision in history["revisions"]} == {
        (f"cli:{getpass.getuser()}", "cli")
    }
    # What was known when the first revision was written is still answerable.
    before = instance.memory("get", str(memory_id), "--as-of", made["known_at"])
    assert before["content"] == "The deploy window is Tuesday 14:00 UTC."

    forgotten = instance.memory("forget", str(memory_id), "--reason", "superseded by the release calendar")
    assert (forgotten["changed"], forgotten["state"]) == (True, "forgotten")
    error = instance.memory_error("get", str(memory_id))
    assert error["code"] == "not_found"
    assert error["field"] == "id"
    assert str(memory_id) in error["message"]
    tombstone = instance.memory("history", str(memory_id))["revisions"][-1]
    assert tombstone["tombstone"] is True
    assert tombstone["reason"] == "superseded by the release calendar"

    restored = instance.memory("restore", str(memory_id))
    assert (restored["changed"], restored["state"]) == (True, "active")
    assert instance.memory("get", str(memory_id))["content"] == "The deploy window is Thursday 14:00 UTC."


def test_a_bad_date_exits_2_and_names_the_value(instance):
    error = instance.memory_error("remember", "Budget approved.", "--valid-from", "2024-02-30")
    assert error["code"] == "invalid"
    assert error["field"] == "valid_from"
    assert "'2024-02-30'" in error["message"]

    error = instance.memory_error("get", "1", "--as-of", "yesterday")
    assert error["field"] == "as_of"
    assert "'yesterday'" in error["message"]


def test_an_unknown_kind_is_refused_with_the_kinds_that_exist(instance):
    error = instance.memory_error("remember", "Use tabs.", "--kind", "opinion")
    assert (error["code"], error["field"]) == ("invalid", "kind")
    assert "'opinion'" in error["message"]
    assert "preference" in error["message"]
    assert instance.memory("stats")["memories"] == 0


def test_argument_mistakes_are_json_errors_with_status_2(instance):
    error = instance.memory_error("remember", "Note.", "--ttl-days", "soon")
    assert (error["code"], error["field"]) == ("invalid", "ttl_days")
    assert "'soon'" in error["message"]

    error = instance.memory_error("remember")
    assert error["field"] == "content"

    error = instance.memory_error("summon")
    assert error["field"] == "command"

    error = instance.memory_error("get", "1", "--colour", "blue")
    assert "--colour" in error["message"]


def test_list_pages_through_every_memory_with_the_cursor(instance):
    instance.run("""
        for number in range(5):
            services.memory_remember(namespace="pages", content=f"Fact number {number}.", tags=["paged"], **ACTOR)
        services.memory_remember(namespace="elsewhere", content="Other.", tags=["paged"], **ACTOR)
    """)

    seen, cursor, pages = [], None, 0
    while True:
        page = instance.memory(
            "list", "--namespace", "pages", "--tag", "PAGED", "--limit", "2", *(["--cursor", cursor] if cursor else [])
        )
        pages += 1
        assert len(page["items"]) <= 2
        seen += [item["content"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == [f"Fact number {number}." for number in reversed(range(5))]

    error = instance.memory_error("list", "--cursor", "not-a-cursor")
    assert error["field"] == "cursor"


def test_stats_counts_memories_revisions_and_namespaces(instance):
    kept = instance.memory("remember", "Kept.", "--namespace", "one", "--key", "kept", "--ttl-days", "7")
    instance.memory("remember", "Kept, revised.", "--namespace", "one", "--key", "kept", "--ttl-days", "7")
    gone = instance.memory("remember", "Gone.", "--namespace", "two", "--kind", "fact")
    instance.memory("forget", str(gone["id"]))

    stats = instance.memory("stats")
    assert (stats["memories"], stats["visible"], stats["forgotten"], stats["revisions"]) == (2, 1, 1, 4)
    assert stats["with_ttl"] == 1
    assert stats["namespaces"] == {"one": {"memories": 1, "visible": 1}, "two": {"memories": 1, "visible": 0}}
    assert stats["kinds"]["note"] == 1 and stats["kinds"]["fact"] == 0
    # Where the data is: the file, or on PostgreSQL (make test-postgres) user@host:port/name.
    assert stats["database_path"] == instance.env.get("MEMORY_DATABASE_URL", str(instance.db_path)).replace(
        "postgresql://", ""
    )
    assert instance.memory("stats", "--namespace", "two")["memories"] == 1
    assert kept["expires_at"] is not None


def test_content_dash_is_read_from_stdin(instance):
    text = "Line one of a long note.\nLine two — with non-ASCII: café, 東京.\n"
    made = instance.memory("remember", "-", "--namespace", "piped", "--key", "from-stdin", stdin=text)
    assert made["content"] == text.strip()
    assert instance.memory("get", "--namespace", "piped", "--key", "from-stdin")["content"] == text.strip()

    error = instance.memory_error("remember", "-", stdin="   \n")
    assert (error["field"], error["code"]) == ("content", "invalid")


def test_learn_reads_text_from_an_argument_or_stdin_and_stores_each_item(instance):
    learned = instance.memory(
        "learn",
        "The billing API runs on Kubernetes. Is it fast?",
        "--namespace",
        "ops",
        "--source",
        "notes.md",
        "--tag",
        "infra",
    )
    (fact,) = learned["stored"]
    assert (fact["subject"], fact["predicate"], fact["object"]) == ("billing API", "runs on", "Kubernetes")
    assert learned["skipped"] == [{"text": "Is it fast?", "start": 36, "end": 47, "reason": "question"}]
    got = instance.memory("get", str(fact["memory_id"]))
    assert (got["stated_confidence"], got["confidence"], got["source"], got["tags"]) == (
        0.5,
        0.5,
        "learn: notes.md chars 0-35",
        ["infra"],
    )

    piped = instance.memory(
        "learn",
        "--namespace",
        "ops",
        stdin="To release:\n1. Tag it.\n2. Push the tag.\nThe billing API runs on Kubernetes.\n",
    )
    assert [item["kind"] for item in piped["stored"]] == ["skill"]
    assert piped["deduplicated"][0]["memory_id"] == fact["memory_id"]

    error = instance.memory_error("learn", "-", stdin="  \n")
    assert (error["field"], error["code"]) == ("text", "invalid")
    error = instance.memory_error("learn", "x" * 20001)
    assert (error["field"], error["code"]) == ("text", "too_large")


def test_recall_finds_what_was_remembered_and_time_travels(instance):
    first = instance.memory("remember", "The deploy window opens at 09:00", "--namespace", "ops", "--key", "window")
    instance.memory("remember", "The deploy window opens at 11:00", "--namespace", "ops", "--key", "window")

    now = instance.memory("recall", "deploy window", "--namespace", "ops", "--explain")
    assert [hit["content"] for hit in now["hits"]] == ["The deploy window opens at 11:00"]
    assert now["hits"][0]["explain"]["ranks"]["keyword"] == 1
    before = instance.memory("recall", "deploy window", "--namespace", "ops", "--as-of", first["known_at"])
    assert [hit["content"] for hit in before["hits"]] == ["The deploy window opens at 09:00"]
    error = instance.memory_error("recall", "deploy", "--limit", "0")
    assert error["field"] == "limit"
    held = instance.memory("recall", "deploy window", "--namespace", "ops", "--min-score", "9")
    assert held["hits"] == [] and held["note"] == "1 hit held back: below min_score 9."
