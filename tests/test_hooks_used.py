"""hooks/used: the answer after an injection marks the injected memories it used; the answer is never kept, and a
key reads only its own reports."""

import functools

import pytest
from django.db import connection
from rest_framework.test import APIClient

from memories.access import Caller
from memories.services.hooks import answer_uses, hook_report, hook_used
from memories.services.keys import api_key_create
from memoryproject.exceptions import InvalidInput, NotFound, TooLarge
from search import text
from telemetry.models import InjectedMemory
from tests.helpers import error_of, key_caller

caller = functools.partial(key_caller, scopes=("read",))


@pytest.mark.parametrize(
    "memory, answer, expected",
    [
        # The answer carries the memory's facts.
        ("The staging database runs on db-7.internal, port 5433.", "Staging is on db-7.internal:5433.", True),
        ("Caroline went to the LGBTQ support group yesterday.", "Caroline attended an LGBTQ support group.", True),
        # A short answer made of the memory's words.
        ("Melanie signed up for a pottery class on 2 July 2023 with her kids.", "Pottery class", True),
        # One word in common is not use: neither a third of the memory nor half of the answer.
        ("Caroline likes painting sunsets by the lake.", "Caroline attended an LGBTQ support group.", False),
        ("Deploys go out on Fridays after the release review.", "I fixed the failing test in the parser.", False),
        # A one-word memory is used when the answer says that word.
        ("Kestrel", "The cluster is kestrel.", True),
        # Filler words never count.
        ("What is it about?", "What is it about?", False),
    ],
)
def test_an_answer_uses_a_memory_when_it_carries_enough_of_its_words(memory, answer, expected):
    assert answer_uses(text.content_stems(memory), text.content_stems(answer)) is expected


@pytest.fixture
def injected(remember):
    """Two memories injected for one prompt in session s-1 by the acme key."""
    deploys = remember("The billing service deploys on Fridays from the kestrel cluster.").memory
    owner = remember("The billing service owner is Priya Raman.").memory
    record = hook_report(
        caller=caller("acme"),
        harness="claude-code",
        hook="UserPromptSubmit",
        session="s-1",
        characters=100,
        memories=[{"memory_id": memory.id, "revision_id": memory.revision_id} for memory in (deploys, owner)],
    )
    return {"deploys": deploys, "owner": owner, "injection": record.id}


def marked() -> dict[int, bool]:
    return {
        memory_id: used_at is not None
        for memory_id, used_at in InjectedMemory.objects.values_list("memory_id", "used_at")
    }


def test_the_answer_marks_the_memories_it_used_in_the_sessions_newest_injection(injected):
    deploys, owner = injected["deploys"].id, injected["owner"].id
    record = hook_used(caller=caller("acme"), session="s-1", answer="It deploys on Fridays, from kestrel.")
    assert (record.injection, record.used, record.unused) == (injected["injection"], [deploys], [owner])
    assert marked() == {deploys: True, owner: False}
    first = InjectedMemory.objects.get(memory_id=deploys).used_at

    # A second answer may mark more; a memory keeps the time it was first marked.
    again = hook_used(
        caller=caller("acme"), injection=injected["injection"], answer="Priya Raman owns it, and it deploys on Fridays."
    )
    assert again.used == [deploys, owner]
    assert InjectedMemory.objects.get(memory_id=deploys).used_at == first
    assert marked() == {deploys: True, owner: True}


def test_words_of_the_prompt_are_no_sign_of_use(remember):
    memory = remember("Deploys go out on Fridays after the release review.").memory
    record = hook_report(
        caller=caller("acme"),
        harness="shell",
        hook="prompt",
        session="s-3",
        query="When do deploys go out for the release?",
        characters=60,
        memories=[{"memory_id": memory.id, "revision_id": memory.revision_id}],
    )
    echo = hook_used(caller=caller("acme"), injection=record.id, answer="When do deploys go out for the release?")
    assert echo.used == []
    assert hook_used(
        caller=caller("acme"), injection=record.id, answer="On Fridays, once the review is done."
    ).used == [memory.id]


def test_nothing_to_mark_when_the_session_reported_no_injection(injected):
    record = hook_used(caller=caller("acme"), session="s-2", answer="It deploys on Fridays, from kestrel.")
    assert (record.injection, record.used, record.unused) == (None, [], [])
    assert not any(marked().values())


def test_another_keys_injection_is_not_found_nor_its_session_read(injected):
    other = Caller(actor="key:other", interface="api", scopes=frozenset({"read"}), namespaces=("acme",))
    with pytest.raises(NotFound):
        hook_used(caller=other, injection=injected["injection"], answer="Fridays kestrel")
    assert hook_used(caller=other, session="s-1", answer="Fridays kestrel").injection is None
    assert not any(marked().values())


@pytest.mark.parametrize(
    "fields, error, field",
    [
        ({"session": ""}, InvalidInput, "injection"),
        ({"injection": 0}, InvalidInput, "injection"),
        ({"injection": True}, InvalidInput, "injection"),
        ({"answer": None, "session": "s-1"}, InvalidInput, "answer"),
        ({"answer": "x" * 50_001, "session": "s-1"}, TooLarge, "answer"),
        ({"session": "s" * 201}, TooLarge, "session"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_marks_nothing(injected, fields, error, field):
    arguments = {"answer": "It deploys on Fridays, from kestrel."}
    with pytest.raises(error) as raised:
        hook_used(caller=caller("acme"), **{**arguments, **fields})
    assert raised.value.field == field
    assert not any(marked().values())


def test_over_http_the_answer_is_read_and_not_kept(db, remember):
    memory = remember("The billing service deploys on Fridays from the kestrel cluster.").memory
    _, token = api_key_create(name="hooks", scopes=["read"], namespaces=["acme"], actor="tester", interface="cli")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    report = client.post(
        "/api/v1/hooks/report/",
        {
            "harness": "claude-code",
            "hook": "UserPromptSubmit",
            "session": "s-9",
            "characters": 50,
            "memories": [{"memory_id": memory.id, "revision_id": memory.revision_id}],
        },
        format="json",
    ).json()
    secret = "It deploys on Fridays from kestrel; the answer's own words: zanzibar-quokka."
    response = client.post("/api/v1/hooks/used/", {"session": "s-9", "answer": secret}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {"injection": report["id"], "used": [memory.id], "unused": []}
    assert (
        error_of(client.post("/api/v1/hooks/used/", {"answer": "x" * 50_001, "session": "s-9"}, format="json"), 413)[
            "field"
        ]
        == "answer"
    )
    with connection.cursor() as cursor:
        tables = [name for name in connection.introspection.table_names(cursor) if name.startswith("telemetry_")]
        for table in tables:
            cursor.execute(f'SELECT * FROM "{table}"')
            assert "zanzibar" not in repr(cursor.fetchall())
