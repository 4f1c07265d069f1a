"""Admission: a new memory that is only a pleasantry or an acknowledgement is refused, unless forced."""

import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from memories import services
from memories.admission import refusal
from memories.models import Memory, Revision
from memories.services.keys import api_key_create
from memoryproject.exceptions import NotAdmitted
from tests.helpers import error_of

REFUSED = [
    ("thanks", "thanks"),
    ("Thank you!", "thanks"),
    ("Thanks so much for the help!", "thanks"),
    ("You’re welcome", "thanks"),
    ("谢谢", "thanks"),
    ("ok, got it", "acknowledgement"),
    ("Sounds good.", "acknowledgement"),
    ("OK 👍", "acknowledgement"),
    ("Got it, will do.", "acknowledgement"),
    ("great, thanks a lot!", "acknowledgement"),
    ("LGTM", "acknowledgement"),
    ("yes", "acknowledgement"),
    ("好的", "acknowledgement"),
    ("Hi there", "greeting"),
    ("Good morning, everyone!", "greeting"),
    ("👍", "no-words"),
    ("...", "no-words"),
]
ADMITTED = [
    "OK is the default status code for a GET",
    "Thanks to the Redis cache, p99 fell to 20 ms",
    "No deploys on Fridays",
    "Yes: the staging database is Postgres 16",
    "Done: migrated the DB to Postgres 16",
    "Hello World is the sample app's name",
    "The user says thanks in French: merci",
    "42",
    "so then",
    "谢谢你的帮助，数据库迁移已经完成",
    "thanks " * 13,  # longer than any pleasantry
]


@pytest.mark.parametrize(("text", "rule"), REFUSED)
def test_pleasantries_and_acknowledgements_are_refused_by_a_named_rule(text, rule):
    assert refusal(text).name == rule


@pytest.mark.parametrize("text", ADMITTED)
def test_text_with_anything_else_in_it_passes(text):
    assert refusal(text) is None


def test_the_service_refuses_without_writing_and_stores_when_forced(db):
    with pytest.raises(NotAdmitted, match=r"'ok, got it' is an acknowledgement, .*pass force=true") as refused:
        services.memory_remember(namespace="acme", content="ok, got it", actor="tester", interface="cli")
    assert refused.value.field == "content"
    assert not Memory.all_objects.exists() and not Revision.all_objects.exists()
    forced = services.memory_remember(
        namespace="acme", content="ok, got it", actor="tester", interface="cli", force=True
    )
    assert forced.created and forced.memory.content == "ok, got it"


def test_rest_answers_400_not_admitted_and_the_cli_takes_force(db, capsys):
    _, secret = api_key_create(
        name="writer", scopes=["read", "write"], namespaces=["acme"], actor="tester", interface="cli"
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    error = error_of(client.post("/api/v1/memories/", {"content": "Thanks!", "namespace": "acme"}, format="json"), 400)
    assert (error["code"], error["field"]) == ("not_admitted", "content")
    assert "admission rule 'thanks'" in error["message"]
    assert not Memory.all_objects.exists()
    call_command("memory", "remember", "Thanks!", "--namespace", "acme", "--force")
    assert json.loads(capsys.readouterr().out)["content"] == "Thanks!"
