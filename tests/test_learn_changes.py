"""Learning what changed: stated changes end the old fact as of when they were said, and stated times bound facts.

The rules first (sentence by sentence, no database), then the store: an ended fact is
current before the change and not after, as of every point in between; the graph answers
"who leads it now, and who led it then"; and as of before a change, graph, recall and get
answer what a fresh store that learned only the earlier text answers.
"""

import datetime as dt
import time

import pytest
from django.utils import timezone

from knowledge import extraction
from memories import selectors, services
from memories.models import AuditEvent, Memory
from memoryproject.exceptions import Conflict

ACTOR = {"actor": "tester", "interface": "cli"}
NOW = dt.datetime(2026, 12, 7, 10, 30, tzinfo=dt.UTC)

# --- the rules -------------------------------------------------------------------------------------------------

# (sentence, each ending as (rule, subject, predicates, object, the name that takes the old one's place),
#  the facts the sentence states beside them)
CHANGES = [
    ("Atlas moved from MySQL to Postgres in March.", [("moved from", "Atlas", (), "MySQL", "Postgres")], []),
    ("We moved the wiki from Confluence to Notion.", [("moved from", "wiki", (), "Confluence", "Notion")], []),
    (
        "The ledger switched from Oracle to Postgres last month.",
        [("moved from", "ledger", (), "Oracle", "Postgres")],
        [],
    ),
    ("We switched from Jenkins to GitHub Actions.", [("moved from", None, (), "Jenkins", "GitHub Actions")], []),
    (
        "Kai moved to Amsterdam.",
        [("moved to", "Kai", ("runs on", "hosted on", "stored in", "located in", "lives in"), None, "Amsterdam")],
        [],
    ),
    ("Kenji replaced Nadia as lead of Orion.", [("as", "Nadia", ("leads",), "Orion", "Kenji")], []),
    ("Tariq took over from Ines as lead of the mobile team.", [("as", "Ines", ("leads",), "mobile team", "Tariq")], []),
    ("Ines took over the mobile team from Tariq.", [("took over", "Tariq", (), "mobile team", "Ines")], []),
    ("Last month Tom took over the infra team.", [("took over", None, ("leads", "is"), "infra team", "Tom")], []),
    ("Pulsar replaced Kafka as our message broker.", [("as", "Kafka", ("is",), "message broker", "Pulsar")], []),
    ("We replaced Jira with Linear.", [("with", None, (), "Jira", "Linear")], []),
    ("Redis was replaced by Valkey.", [("by", None, (), "Redis", "Valkey")], []),
    ("Pieter left the billing service.", [("left", "Pieter", (), "billing service", "")], []),
    (
        "Omar left the company.",
        [("left", "Omar", ("works at", "member of", "works on", "leads", "manages", "reports to"), None, "")],
        [],
    ),
    ("Nadia stepped down as lead of Orion.", [("left", "Nadia", ("leads",), "Orion", "")], []),
    ("We stopped using Jenkins.", [("dropped", None, (), "Jenkins", "")], []),
    ("The old VM host-7 was decommissioned last week.", [("dropped", None, (), "host-7", "")], []),
    (
        "Hugo no longer works on the checkout service.",
        [("no longer", "Hugo", ("works on", "member of", "works at"), "checkout service", "")],
        [],
    ),
    (
        "The wiki is no longer hosted on Confluence.",
        [("no longer", "wiki", ("hosted on", "runs on", "stored in", "located in"), "Confluence", "")],
        [],
    ),
    ("The API doesn't use Redis anymore.", [("no longer", "API", ("uses", "depends on", "calls"), "Redis", "")], []),
    ("Tomasz has moved off the search team.", [("left", "Tomasz", (), "search team", "")], []),
    (
        "Leo is not on the SRE team any more.",
        [("no longer", "Leo", ("member of", "works on", "works at"), "SRE team", "")],
        [],
    ),
    (
        "The cache now runs on node-9, not node-4.",
        [("instead of", "cache", ("runs on",), "node-4", "")],
        [("cache", "runs on", "node-9")],
    ),
    (
        "Since March the billing job runs on Argo instead of cron.",
        [("instead of", "billing job", ("runs on",), "cron", "")],
        [("billing job", "runs on", "Argo")],
    ),
    (
        "Kafka is now our message broker instead of RabbitMQ.",
        [("instead of", "RabbitMQ", ("is",), "message broker", "")],
        [("Kafka", "is", "message broker")],
    ),
    (
        "The status page is now hosted on our own cluster.",
        [("now", "status page", ("hosted on",), None, "")],
        [("status page", "hosted on", "cluster")],
    ),
    ("Kenji is now the lead of Orion.", [("now", None, ("leads",), "Orion", "")], [("Kenji", "leads", "Orion")]),
]


@pytest.mark.parametrize(("sentence", "endings", "facts"), CHANGES, ids=[case[0] for case in CHANGES])
def test_a_change_names_the_facts_it_ends_and_what_takes_their_place(sentence, endings, facts):
    found = extraction.extract(sentence, now=NOW)
    assert [
        (ending.rule, ending.subject, ending.predicates, ending.object, ending.becomes) for ending in found.endings
    ] == endings
    assert [(item.subject, item.predicate, item.object) for item in found.items] == facts
    assert found.skipped == ()
    for ending in found.endings:
        assert (ending.start, ending.end) == (0, len(sentence)) and ending.content == sentence


@pytest.mark.parametrize(
    "text",
    [
        "Mei doesn't prefer Jira anymore; she prefers Linear.",
        "Mei doesn't like Jira anymore; these days she likes Linear.",
    ],
)
def test_a_second_clause_about_the_same_person_is_a_fact_of_its_own(text):
    found = extraction.extract(text, now=NOW)
    (ending,) = found.endings
    verb = "prefers" if "prefer" in text else "likes"
    assert (ending.subject, ending.predicates, ending.object) == ("Mei", (verb,), "Jira")
    assert [(item.subject, item.predicate, item.object) for item in found.items] == [("Mei", verb, "Linear")]


# (sentence, the time the fact holds from)
DATES = [
    ("From 15 June 2025 the search cluster runs on Hetzner.", dt.datetime(2025, 6, 15, tzinfo=dt.UTC)),
    ("Amara has managed the QA team since September 2023.", dt.datetime(2023, 9, 1, tzinfo=dt.UTC)),
    ("Since January the API has used GraphQL.", dt.datetime(2026, 1, 1, tzinfo=dt.UTC)),
    ("In March the API ran on ECS, and it still runs on ECS.", None),
    ("From last week on, the docs site is deployed on Vercel.", dt.datetime(2026, 11, 30, tzinfo=dt.UTC)),
    ("Noah joined the infra team last month.", dt.datetime(2026, 11, 1, tzinfo=dt.UTC)),
    ("As of today, Bob owns the pager.", NOW),
    ("From now on, the staging cluster is hosted on Hetzner.", NOW),
    ("On 3 March 2024 Priya started working on the search project.", dt.datetime(2024, 3, 3, tzinfo=dt.UTC)),
    ("Two weeks ago Dana joined Acme.", dt.datetime(2026, 11, 23, tzinfo=dt.UTC)),
]


@pytest.mark.parametrize(
    ("sentence", "since"), [case for case in DATES if case[1]], ids=[case[0] for case in DATES if case[1]]
)
def test_a_stated_time_becomes_the_time_the_fact_holds_from(sentence, since):
    (item,) = extraction.extract(sentence, now=NOW).items
    assert item.valid_from == since and item.valid_to is None


def test_until_bounds_the_end_and_a_time_still_to_come_is_a_plan():
    (item,) = extraction.extract("The API runs on Heroku until March 2027.", now=NOW).items
    assert (item.valid_from, item.valid_to) == (None, dt.datetime(2027, 3, 1, tzinfo=dt.UTC))
    for plan in ("From 1 January 2027 billing runs on Stripe.", "From next month, billing runs on Stripe."):
        found = extraction.extract(plan, now=NOW)
        assert found.items == () and found.skipped[0].reason.startswith("hypothetical")


def test_without_a_time_to_read_against_stated_times_are_left_in_the_text():
    (item,) = extraction.extract("Amara has managed the QA team since September 2023.").items
    assert item.valid_from is None and item.object == "QA team"


# --- the store -------------------------------------------------------------------------------------------------


def learn_text(text, namespace="acme"):
    result = services.memory_learn(text=text, namespace=namespace, **ACTOR)
    time.sleep(0.002)  # the next call's instant differs from this one's
    return result


def current(namespace="acme", **at) -> set[tuple[str, str, str]]:
    """The triples the namespace shows at a point, read back from the store."""
    return {
        (memory.subject, memory.predicate, memory.object)
        for memory in selectors.memory_list(namespace=namespace, limit=200, **at).items
        if memory.subject
    }


@pytest.mark.django_db
def test_a_change_ends_the_old_fact_now_and_leaves_it_current_as_of_before():
    (old,) = learn_text("The ledger uses Oracle.").stored
    between = timezone.now()
    time.sleep(0.002)
    result = learn_text("The ledger switched from Oracle to Postgres.")

    (ended,) = result.ended
    assert (ended.memory_id, ended.subject, ended.predicate, ended.object, ended.change) == (
        old.memory_id,
        "ledger",
        "uses",
        "Oracle",
        "moved from",
    )
    assert [(item.subject, item.predicate, item.object) for item in result.stored] == [("ledger", "uses", "Postgres")]
    assert result.unmatched_changes == [] and result.skipped == []
    assert current() == {("ledger", "uses", "Postgres")}
    assert current(as_of=between.isoformat()) == {("ledger", "uses", "Oracle")}
    # Known now, about a time before the change: the old fact held then.
    assert current(valid_at=between.isoformat()) == {("ledger", "uses", "Oracle")}
    # Ended, not forgotten: the memory keeps its state, and its history says why and from where.
    memory = Memory.objects.get(pk=old.memory_id)
    assert memory.state == "active"
    history = selectors.memory_history(memory_id=old.memory_id)
    assert history[-1].valid_to == ended.valid_to and history[-1].source == "learn: text chars 0-44"
    assert history[-1].reason == "ended by a stated change: The ledger switched from Oracle to Postgres."
    assert AuditEvent.objects.get(action="end").memory_id == old.memory_id


@pytest.mark.django_db
def test_the_graph_answers_who_leads_it_now_and_who_led_it_then():
    learn_text("Since January 2025 Nadia leads Orion.")
    learn_text("On 1 June 2025 Kenji replaced Nadia as lead of Orion.")

    def leads(**at):
        found = selectors.memory_graph(namespace="acme", entity="Orion", **at).entities[0]
        return [(relation.other.name, relation.predicate) for relation in found.relations]

    assert leads() == [("kenji", "leads")]
    assert leads(valid_at="2025-05-15") == [("nadia", "leads")]
    assert leads(valid_at="2025-07-01") == [("kenji", "leads")]
    assert leads(valid_at="2024-12-01") == []


@pytest.mark.django_db
def test_a_change_that_matches_nothing_current_says_so_and_stores_only_what_it_states():
    result = learn_text("Hugo no longer works on the checkout service. Kenji replaced Nadia as lead of Orion.")
    assert result.ended == []
    assert [change.reason for change in result.unmatched_changes] == [
        "change (no longer): no current fact matches 'Hugo works on (or member of, works at) checkout service'; "
        "nothing was ended",
        "change (as): no current fact matches 'Nadia leads Orion'; nothing was ended",
    ]
    assert [(item.subject, item.predicate, item.object) for item in result.stored] == [("Kenji", "leads", "Orion")]


@pytest.mark.django_db
def test_a_change_ends_only_the_facts_it_names():
    learn_text("Pieter works on the billing service. Pieter works on the ledger. Mei works on the billing service.")
    result = learn_text("Pieter left the billing service.")
    assert [(fact.subject, fact.object) for fact in result.ended] == [("Pieter", "billing service")]
    assert current() == {("Pieter", "works on", "ledger"), ("Mei", "works on", "billing service")}


@pytest.mark.django_db
def test_we_dropped_it_ends_every_current_use_but_no_one_s_taste():
    learn_text("The CI uses Jenkins. The release job depends on Jenkins. Omar likes Jenkins.")
    result = learn_text("We dropped Jenkins.")
    assert sorted(fact.subject for fact in result.ended) == ["CI", "release job"]
    assert current() == {("Omar", "likes", "Jenkins")}


@pytest.mark.django_db
def test_a_replaced_name_takes_the_old_one_s_place_in_every_fact_it_ended():
    learn_text("The CI uses Jenkins. The release job depends on Jenkins.")
    result = learn_text("We replaced Jenkins with GitHub Actions.")
    assert len(result.ended) == 2
    assert current() == {("CI", "uses", "GitHub Actions"), ("release job", "depends on", "GitHub Actions")}
    # One change restating two facts gives each its own content.
    assert len({item.content for item in result.stored}) == 2


@pytest.mark.django_db
def test_a_fact_stated_and_changed_in_one_text_ends_in_order():
    result = learn_text("The cache runs on node-4. Update: the cache now runs on node-9, not node-4.")
    assert [(fact.object, fact.change) for fact in result.ended] == [("node-4", "instead of")]
    assert current() == {("cache", "runs on", "node-9")}


@pytest.mark.django_db
def test_a_change_stated_before_the_old_fact_was_recorded_leaves_it_holding_at_no_time():
    learn_text("The payroll job runs on cron-1.")
    between = timezone.now()
    time.sleep(0.002)
    result = learn_text("On 2 May 2025 the payroll job moved from cron-1 to cron-2.")
    (ended,) = result.ended
    assert ended.valid_to == dt.datetime(2025, 5, 2, tzinfo=dt.UTC)
    assert current() == {("payroll job", "runs on", "cron-2")}
    assert current(valid_at="2025-06-01") == {("payroll job", "runs on", "cron-2")}
    # The store had it from the first call on; as of then it was current.
    assert current(as_of=between.isoformat()) == {("payroll job", "runs on", "cron-1")}


@pytest.mark.django_db
def test_a_change_naming_too_many_facts_ends_none(monkeypatch):
    from memories.services import learn as learning

    monkeypatch.setattr(learning, "ENDS_MAX", 2)
    learn_text("The API uses Redis. The worker uses Redis. The cron uses Redis.")
    result = learn_text("We dropped Redis.")
    assert result.ended == [] and "3 current facts match" in result.unmatched_changes[0].reason
    assert len(current()) == 3


@pytest.mark.django_db
def test_memory_end_refuses_a_memory_not_visible_now(remember):
    made = remember("The API uses Redis.", subject="API", predicate="uses", object="Redis").memory
    services.memory_forget(memory_id=made.id, **ACTOR)
    with pytest.raises(Conflict, match="not visible now"):
        services.memory_end(memory_id=made.id, valid_to=timezone.now(), **ACTOR)


# --- as of before a change: what a store that learned only the earlier text answers -----------------------------

# (the earlier text, the change)
HISTORIES = [
    (
        "The ledger uses Oracle. The ledger runs on db-1. Mei leads the ledger team.",
        "The ledger switched from Oracle to Postgres. Kenji replaced Mei as lead of the ledger team.",
    ),
    (
        "Pieter works on the billing service. The billing service depends on Redis.",
        "Pieter left the billing service. We replaced Redis with Valkey.",
    ),
    (
        "The cache runs on node-4. The wiki is hosted on Confluence.",
        "The cache now runs on node-9, not node-4. The wiki is no longer hosted on Confluence.",
    ),
]


def _answers(namespace: str, **at) -> dict:
    """What graph, recall and get answer at a point, by names and texts (ids and times differ between stores)."""
    facts = selectors.memory_list(namespace=namespace, limit=200, **at).items
    names = sorted({name for memory in facts for name in (memory.subject, memory.object)})
    graph = {
        name: sorted(
            (relation.predicate, relation.direction, relation.other.name)
            for relation in selectors.memory_graph(namespace=namespace, entity=name, **at).entities[0].relations
        )
        for name in names
    }
    recalled = selectors.memory_recall(
        query="ledger Oracle billing Redis cache wiki", namespace=[namespace], min_score=0, **at
    )
    got = sorted(
        (memory.content, memory.subject, memory.predicate, memory.object)
        for memory in (selectors.memory_get(memory_id=memory.id, **at) for memory in facts)
    )
    return {"graph": graph, "recall": [(hit.memory.content, round(hit.score, 9)) for hit in recalled.hits], "get": got}


@pytest.mark.django_db
@pytest.mark.parametrize(("earlier", "change"), HISTORIES, ids=[case[1] for case in HISTORIES])
def test_as_of_before_a_change_the_store_answers_as_one_that_learned_only_the_earlier_text(earlier, change):
    learn_text(earlier, namespace="changed")
    between = timezone.now()
    time.sleep(0.002)
    assert learn_text(change, namespace="changed").ended
    learn_text(earlier, namespace="fresh")

    assert _answers("changed", as_of=between.isoformat()) == _answers("fresh")
    assert _answers("changed") != _answers("fresh")
