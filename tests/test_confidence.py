"""Confidence per memory (memories.confidence): the formula on a table of cases, then through the store."""

import datetime as dt
import json

import pytest
from rest_framework.test import APIClient

from memories import selectors, services
from memories.confidence import Inputs, confidence, source_of
from memories.services.keys import api_key_create
from memoryproject.exceptions import InvalidInput
from memoryproject.timeparse import format_instant


def inputs(source="person", stated=None, age_days=0.0, half_life_days=None, corroborating_authors=0, conflicts=0):
    return Inputs(
        source=source,
        stated=stated,
        age_days=age_days,
        half_life_days=half_life_days,
        corroborating_authors=corroborating_authors,
        conflicts=conflicts,
    )


# The worked cases of docs/concepts.md, Confidence: the same table.
CASES = [
    # what it shows                                   inputs                                           confidence
    ("a person's note, just written", inputs(), 0.9),
    ("an agent's memory", inputs("agent"), 0.7),
    ("an untrusted import", inputs("import"), 0.6),
    ("learned from text (stated 0.5)", inputs("extracted", stated=0.5), 0.5),
    ("a person stating 0.4", inputs(stated=0.4), 0.4),
    ("an agent stating 1: no higher than an agent", inputs("agent", stated=1.0), 0.7),
    ("a person's note, one half-life old", inputs(age_days=365, half_life_days=365), 0.45),
    ("two half-lives old", inputs(age_days=730, half_life_days=365), 0.225),
    ("a kind without decay, ten years old", inputs(age_days=3650), 0.9),
    ("an agent's fact, one other author agrees", inputs("agent", corroborating_authors=1), 0.85),
    ("three other authors", inputs("agent", corroborating_authors=3), 0.963),
    ("five other authors count as three", inputs("agent", corroborating_authors=5), 0.963),
    ("an agent's fact in an open conflict", inputs("agent", conflicts=1), 0.35),
    ("two conflicts halve it once", inputs("agent", conflicts=2), 0.35),
    (
        "learned, a year old (fact: 730 days), corroborated once, in a conflict",
        inputs("extracted", stated=0.5, age_days=365, half_life_days=730, corroborating_authors=1),
        0.677,
    ),
    (
        "the same in a conflict",
        inputs("extracted", stated=0.5, age_days=365, half_life_days=730, corroborating_authors=1, conflicts=1),
        0.338,
    ),
    ("stated 0", inputs(stated=0.0, corroborating_authors=1), 0.5),
]


@pytest.mark.parametrize(("case", "given", "expected"), CASES, ids=[case for case, _, _ in CASES])
def test_the_formula_gives_each_worked_case(case, given, expected):
    assert confidence(given) == expected


@pytest.mark.parametrize(
    ("interface", "source", "untrusted_import", "expected"),
    [
        ("admin", "", False, "person"),
        ("cli", "notes", False, "person"),
        ("api", "", False, "agent"),
        ("mcp", "", False, "agent"),
        ("cli", "", True, "import"),
        ("mcp", "learn: chat chars 0-9", False, "extracted"),
        ("api", "learn: chat chars 0-9", True, "extracted"),
        ("api", "learned it", False, "agent"),
    ],
)
def test_the_source_class_comes_from_the_interface_an_import_and_learn(interface, source, untrusted_import, expected):
    assert source_of(interface=interface, source=source, untrusted_import=untrusted_import) == expected


# Through the store -------------------------------------------------------------------------------------------------


def write(content, *, author="tester", interface="cli", namespace="acme", **fields):
    return services.memory_remember(
        namespace=namespace, content=content, actor=author, interface=interface, **fields
    ).memory


def later(record, days):
    return format_instant(record.known_at + dt.timedelta(days=days))


@pytest.mark.django_db
def test_get_shows_the_source_reliability_and_a_stated_confidence_only_lowers_it():
    person = write("The office is in Lyon.", interface="admin")
    agent = write("The office has a garden.", interface="mcp")
    doubtful = write("The office has a gym.", interface="api", confidence=0.3)
    sure = write("The office has a bar.", interface="api", confidence=0.95)
    got = {record.id: selectors.memory_get(memory_id=record.id) for record in (person, agent, doubtful, sure)}
    assert [got[record.id].confidence for record in (person, agent, doubtful, sure)] == [0.9, 0.7, 0.3, 0.7]
    assert (got[sure.id].stated_confidence, got[agent.id].stated_confidence) == (0.95, None)
    assert got[person.id].as_dict()["confidence"] == 0.9


@pytest.mark.django_db
def test_confidence_decays_by_the_kinds_half_life_as_of_the_read(settings):
    settings.MEMORY_CONFIDENCE_HALF_LIFE_DAYS = {"note": 10}
    note = write("The deploy window is Tuesday.")
    decision = write("We chose Postgres.", kind="decision")
    assert selectors.memory_get(memory_id=note.id, as_of=later(note, 10)).confidence == 0.45
    assert selectors.memory_get(memory_id=note.id, as_of=later(note, 20)).confidence == 0.225
    assert selectors.memory_get(memory_id=decision.id, as_of=later(decision, 1000)).confidence == 0.9
    # A new revision is new text: its age starts again.
    services.memory_update(
        memory_id=note.id, content="The deploy window is Wednesday.", actor="tester", interface="cli"
    )
    assert selectors.memory_get(memory_id=note.id).confidence == 0.9


@pytest.mark.django_db
def test_the_same_fact_from_another_author_raises_it_from_then_on_and_the_same_author_does_not():
    fact = dict(kind="fact", subject="Billing API", predicate="uses", object="Redis")
    first = write("The billing API uses Redis.", author="key:aaaa", interface="api", **fact)
    alone = selectors.memory_get(memory_id=first.id).confidence
    write(
        "billing api uses redis (seen in the config)",
        author="key:aaaa",
        interface="api",
        **{**fact, "subject": "the billing  API"},
    )
    assert alone == 0.7 and selectors.memory_get(memory_id=first.id).confidence == 0.7
    other = write("Billing uses Redis for sessions.", author="key:bbbb", interface="mcp", **fact)
    assert selectors.memory_get(memory_id=first.id).confidence == 0.85
    # Point in time: before the other author wrote it, nothing corroborated it.
    before = format_instant(other.known_at - dt.timedelta(microseconds=1))
    assert selectors.memory_get(memory_id=first.id, as_of=before).confidence == 0.7
    # Another namespace never corroborates.
    write("Billing API uses Redis.", author="key:cccc", interface="api", namespace="beta", **fact)
    assert selectors.memory_get(memory_id=first.id).confidence == 0.85
    services.memory_forget(memory_id=other.id, actor="tester", interface="cli")
    assert selectors.memory_get(memory_id=first.id).confidence == 0.7


@pytest.mark.django_db
def test_an_open_conflict_halves_it_and_only_while_it_is_open():
    host = dict(kind="fact", subject="Payments API", predicate="runs on")
    seven = write("Payments API runs on host-7.", interface="api", object="host-7", **host)
    nine = write("Payments API runs on host-9.", interface="api", object="host-9", **host)
    got = selectors.memory_get(memory_id=seven.id)
    assert (got.confidence, len(got.conflicts)) == (0.35, 1)
    before = format_instant(nine.known_at - dt.timedelta(microseconds=1))
    assert selectors.memory_get(memory_id=seven.id, as_of=before).confidence == 0.7
    services.memory_forget(memory_id=nine.id, actor="tester", interface="cli")
    assert selectors.memory_get(memory_id=seven.id).confidence == 0.7


@pytest.mark.django_db
def test_learned_and_imported_memories_read_their_source_class():
    services.memory_learn(text="The billing API runs on Kubernetes.", namespace="acme", actor="tester", interface="cli")
    learned = selectors.memory_list(namespace="acme").items[0]
    assert (learned.stated_confidence, learned.confidence) == (0.5, 0.5)
    person = write("The office is in Lyon.", namespace="source")
    document = json.loads("".join(services.memories_export(namespace="source")))
    assert document["memories"][0]["confidence"] == 0.9

    def imported(namespace, *, trusted):
        copy = {
            **document,
            "memories": [{**memory, "namespace": namespace, "confidence": 0.01} for memory in document["memories"]],
        }
        services.memories_import(document=copy, actor="tester", interface="cli", trusted=trusted)
        return selectors.memory_get(namespace=namespace, key=person.key).confidence

    # An untrusted import writes on the server clock, as an import: 0.6. A trusted one restores the recorded
    # history, so the revision keeps its recorded interface (cli: a person). Both ignore the exported confidence.
    assert imported("copy", trusted=False) == 0.6
    assert imported("restored", trusted=True) == 0.9


@pytest.mark.django_db
def test_recall_leaves_out_hits_below_min_confidence_and_says_how_many():
    sure = write("The cache is Redis on host-3.", interface="admin")
    write("The cache is Redis, maybe.", interface="api", confidence=0.2)
    write("The cache is Redis, says a rumour.", interface="api", confidence=0.3)
    everything = selectors.memory_recall(query="cache redis", mode="keyword", explain=True)
    assert len(everything.hits) == 3 and all(hit.memory.confidence is not None for hit in everything.hits)
    explained = next(hit for hit in everything.hits if hit.memory.id == sure.id).explain["confidence"]
    assert explained["source"] == "person" and explained["corroborating_authors"] == 0
    confident = selectors.memory_recall(query="cache redis", mode="keyword", min_confidence=0.5, limit=1)
    assert [hit.memory.id for hit in confident.hits] == [sure.id]
    # The others rank above it or not: the note counts those above it.
    assert confident.note is None or "held back: confidence below min_confidence 0.5." in confident.note
    none = selectors.memory_recall(query="cache redis", mode="keyword", min_confidence=0.95)
    assert none.hits == [] and "3 hits held back: confidence below min_confidence 0.95" in none.note
    with pytest.raises(InvalidInput, match="^min_confidence: "):
        selectors.memory_recall(query="cache", min_confidence=1.5)


@pytest.mark.django_db
def test_min_confidence_ranks_more_candidates_when_the_first_ones_fall_below_it():
    for number in range(12):
        write(f"Doubtful cache note {number}: redis cache redis cache.", interface="api", confidence=0.1)
    sure = write("The cache is redis.", interface="admin")
    found = selectors.memory_recall(query="redis cache", mode="keyword", limit=1, min_confidence=0.8)
    assert [hit.memory.id for hit in found.hits] == [sure.id]
    assert "12 hits held back" in found.note


@pytest.mark.django_db
def test_rest_and_mcp_arguments_take_min_confidence():
    token = api_key_create(name="reader", actor="tester", interface="cli", scopes=["read", "write"])[1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    write("The cache is Redis.", interface="admin")
    write("The cache is Redis, perhaps.", interface="api", confidence=0.2)
    answer = client.get("/api/v1/recall/", {"query": "cache redis", "mode": "keyword", "min_confidence": "0.5"})
    assert answer.status_code == 200
    body = answer.json()
    assert [hit["confidence"] for hit in body["hits"]] == [0.9] and "held back" in body["note"]
    bad = client.get("/api/v1/recall/", {"query": "cache", "min_confidence": "2"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "min_confidence"


@pytest.mark.django_db
def test_the_audit_reports_the_computed_confidence_and_the_stated_one():
    from django.utils import timezone

    from memories.selectors.audit import confidence_distribution

    write("The office is in Lyon.", interface="admin")
    write("The office has a garden.", interface="api", confidence=0.3)
    write("Forgotten text.", interface="api")
    services.memory_forget(memory_id=selectors.memory_list().items[0].id, actor="tester", interface="cli")
    finding = confidence_distribution(timezone.now())
    assert finding.ok and finding.check == "confidence"
    assert finding.detail == (
        "confidence of the memories visible now: 0 from 0, 1 from 0.25, 0 from 0.5, "
        "1 from 0.75; stated confidence of their revisions: 1 unstated, 0 from 0, "
        "1 from 0.25, 0 from 0.5, 0 from 0.75"
    )


@pytest.mark.django_db
def test_the_admin_list_and_change_page_show_the_confidence(admin_client):
    person = write("The office is in Lyon.", interface="admin")
    agent = write("The office has a garden.", interface="api", confidence=0.3)
    listing = admin_client.get("/admin/memories/memory/")
    rows = {row.pk: row.confidence_now for row in listing.context["cl"].result_list}
    assert rows == {person.id: 0.9, agent.id: 0.3}
    assert '<th scope="col" class="column-confidence_value">' in listing.content.decode()
    page = admin_client.get(f"/admin/memories/memory/{agent.id}/change/").content.decode()
    assert (
        "0.3 (source agent, stated 0.3, 0 days old, half-life 365 days, 0 other author(s), 0 open conflict(s))"
    ) in page


@pytest.mark.django_db
def test_recall_with_min_confidence_as_of_a_time_gives_the_same_answer_after_later_writes():
    fact = dict(kind="fact", subject="Search", predicate="uses", object="Postgres")
    first = write("Search uses Postgres.", author="key:aaaa", interface="api", **fact)
    cutoff = format_instant(first.known_at)

    def recalled():
        found = selectors.memory_recall(query="search postgres", mode="keyword", as_of=cutoff, min_confidence=0.8)
        return [hit.memory.id for hit in found.hits], found.note

    before = recalled()
    assert before == ([], "1 hit held back: confidence below min_confidence 0.8.")
    # Another author states the same fact later: from then on it passes, but not as of the cutoff.
    write("Search is backed by Postgres.", author="key:bbbb", interface="mcp", **fact)
    now = selectors.memory_recall(query="search postgres", mode="keyword", min_confidence=0.8)
    assert first.id in [hit.memory.id for hit in now.hits]
    assert recalled() == before


@pytest.mark.django_db
def test_the_cli_recall_takes_min_confidence(capsys):
    from django.core.management import call_command

    write("The cache is Redis.", interface="admin")
    write("The cache is Redis, perhaps.", interface="api", confidence=0.2)
    call_command("memory", "recall", "cache redis", "--mode", "keyword", "--min-confidence", "0.5")
    answer = json.loads(capsys.readouterr().out)
    assert [hit["confidence"] for hit in answer["hits"]] == [0.9]
