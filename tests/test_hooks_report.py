"""hooks/report: a harness records that a block was injected; bad reports are refused whole, and a report
cannot name (or probe for) memories outside the caller's namespaces."""

import functools

import pytest

from memories.services.hooks import hook_recall, hook_report
from memoryproject.exceptions import InvalidInput, NotFound, TooLarge
from telemetry.models import InjectedMemory, Injection
from tests.helpers import clock_reads, key_caller

caller = functools.partial(key_caller, scopes=("read",))


@pytest.fixture
def acme():
    return caller("acme")


@pytest.fixture
def stored(remember):
    return {
        "deploy": remember("Deploys go out on Fridays.").memory,
        "canary": remember("The canary runs for an hour before a deploy.").memory,
        "hidden": remember("Deploys in the other team happen on Mondays.", namespace="other").memory,
    }


def item(memory) -> dict:
    return {"memory_id": memory.id, "revision_id": memory.revision_id}


def report(who, **fields):
    arguments = {"harness": "claude-code", "hook": "UserPromptSubmit", "characters": 420, "memories": []}
    arguments.update(fields)
    return hook_report(caller=who, **arguments)


def test_a_report_records_the_injection_and_the_revisions_it_carried(acme, stored):
    record = report(
        acme,
        query="when do we deploy",
        session="s-1",
        characters=1234,
        memories=[item(stored["canary"]), item(stored["deploy"])],
    )

    injection = Injection.objects.get()
    assert (
        record.id,
        record.at,
        record.harness,
        record.hook,
        record.session,
        record.characters,
        record.tokens_estimate,
        record.memories,
    ) == (injection.pk, injection.at, "claude-code", "UserPromptSubmit", "s-1", 1234, 309, 2)
    assert (injection.actor, injection.query, injection.characters) == ("key:hooks", "when do we deploy", 1234)
    assert list(injection.items.values_list("memory_id", "revision_id")) == [
        (stored["canary"].id, stored["canary"].revision_id),
        (stored["deploy"].id, stored["deploy"].revision_id),
    ]
    assert record.as_dict()["at"].endswith("Z")


def test_a_recall_answer_reports_as_is(acme, stored):
    block = hook_recall(caller=acme, query="deploy")

    record = report(
        acme,
        query=block.query,
        characters=block.characters,
        memories=[{"memory_id": hit.memory_id, "revision_id": hit.revision_id} for hit in block.hits],
    )

    assert record.memories == len(block.hits) == 2


def test_an_empty_report_is_recorded(acme, db):
    record = report(acme, characters=0)
    assert record.memories == 0 and Injection.objects.count() == 1 and not InjectedMemory.objects.exists()


def test_a_memory_outside_the_callers_namespaces_is_refused_as_if_it_did_not_exist(acme, stored):
    with pytest.raises(NotFound) as hidden:
        report(acme, memories=[item(stored["deploy"]), item(stored["hidden"])])
    missing_id = stored["hidden"].id + 1000
    with pytest.raises(NotFound) as missing:
        acme.check_memory(missing_id)

    assert hidden.value.message == missing.value.message.replace(str(missing_id), str(stored["hidden"].id))
    assert hidden.value.field == missing.value.field
    assert not Injection.objects.exists() and not InjectedMemory.objects.exists()


def test_a_missing_memory_is_refused_for_a_key_of_every_namespace(stored):
    with pytest.raises(NotFound):
        report(caller(), memories=[{"memory_id": 99_999, "revision_id": 1}])
    assert report(caller(), memories=[item(stored["hidden"])]).memories == 1


def test_a_revision_must_belong_to_its_memory(acme, stored):
    with pytest.raises(InvalidInput) as raised:
        report(acme, memories=[{"memory_id": stored["deploy"].id, "revision_id": stored["hidden"].revision_id}])
    assert raised.value.message.startswith("memories[0].revision_id:")
    assert f"not a revision of memory {stored['deploy'].id}" in raised.value.message
    assert not Injection.objects.exists()


@pytest.mark.parametrize(
    "fields, error, words",
    [
        ({"harness": ""}, InvalidInput, "harness: required"),
        ({"harness": None}, InvalidInput, "harness: required"),
        ({"hook": ""}, InvalidInput, "hook: required"),
        ({"harness": 7}, InvalidInput, "harness: 7 is not a name"),
        ({"hook": "x" * 65}, InvalidInput, "is not a name"),
        ({"hook": "Pre\nCompact"}, InvalidInput, "is not a name"),
        ({"session": "s" * 201}, TooLarge, "session: 201 characters"),
        ({"query": "q" * 2001}, TooLarge, "query: 2001 characters"),
        ({"query": ["q"]}, InvalidInput, "query: expected text"),
        ({"characters": -1}, InvalidInput, "characters: -1 is out of range"),
        ({"characters": 1_000_001}, InvalidInput, "out of range 0..1000000"),
        ({"characters": True}, InvalidInput, "characters: True"),
        ({"characters": "400"}, InvalidInput, "characters: '400'"),
        ({"characters": 4.5}, InvalidInput, "characters: 4.5"),
        ({"memories": None}, InvalidInput, "memories: expected a list"),
        ({"memories": {"memory_id": 1}}, InvalidInput, "memories: expected a list"),
        ({"memories": [1, 2]}, InvalidInput, "memories[0]: expected an object"),
        ({"memories": [{"memory_id": 1}]}, InvalidInput, "exactly memory_id and revision_id"),
        ({"memories": [{"memory_id": 1, "revision_id": 1, "score": 3}]}, InvalidInput, "exactly memory_id"),
        ({"memories": [{"memory_id": 0, "revision_id": 1}]}, InvalidInput, "memories[0].memory_id: 0"),
        ({"memories": [{"memory_id": "1", "revision_id": 1}]}, InvalidInput, "memories[0].memory_id: '1'"),
        ({"memories": [{"memory_id": 1, "revision_id": None}]}, InvalidInput, "memories[0].revision_id: None"),
        ({"memories": [{"memory_id": 1, "revision_id": 1}] * 101}, TooLarge, "101 items is over the limit of 100"),
    ],
)
def test_bad_reports_are_refused_whole_with_a_message_naming_the_problem(acme, stored, fields, error, words):
    with pytest.raises(error) as raised:
        report(acme, **fields)
    assert words in raised.value.message
    assert not Injection.objects.exists()


def test_a_memory_listed_twice_is_refused(acme, stored):
    with pytest.raises(InvalidInput) as raised:
        report(acme, memories=[item(stored["deploy"]), item(stored["deploy"])])
    assert "listed twice" in raised.value.message


def test_a_report_costs_a_fixed_number_of_queries(acme, stored, remember, django_assert_num_queries):
    many = [item(remember(f"Runbook entry number {number}.").memory) for number in range(20)]
    # The memories' namespaces, the revisions' owners; then a savepoint holding the injection (stamped by the
    # clock) and its items.
    with django_assert_num_queries(6 + clock_reads()):
        report(acme, memories=many)
