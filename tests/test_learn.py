"""Learning from text: the rules (table-driven, sentence by sentence), the service that stores what they find, and
the REST door (MCP and the CLI are in test_mcp.py and test_cli.py, beside their servers and processes)."""

from pathlib import Path

import pytest
from django.core.cache import cache
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

from knowledge import extraction, findings, verb_forms, vocabulary
from memories import selectors, services, validation
from memories.models import Memory, Revision
from memories.services.keys import api_key_create
from memories.services.learn import LEARNED_CONFIDENCE
from memoryproject.exceptions import InvalidInput, TooLarge
from tests.helpers import error_of

ACTOR = {"actor": "tester", "interface": "cli"}

# --- the rules, sentence by sentence -----------------------------------------------------------------------------

# (sentence, the triples it states, in order)
FACTS = [
    ("The billing API runs on Kubernetes.", [("billing API", "runs on", "Kubernetes")]),
    ("The billing API runs on Kubernetes in production.", [("billing API", "runs on", "Kubernetes")]),
    ("The website is hosted on Netlify.", [("website", "hosted on", "Netlify")]),
    ("Our docs are hosted at readthedocs.io.", [("docs", "hosted on", "readthedocs.io")]),
    (
        "The payments service depends on Redis and Postgres.",
        [("payments service", "depends on", "Redis"), ("payments service", "depends on", "Postgres")],
    ),
    (
        "The data pipeline uses Kafka, Spark, and Airflow.",
        [("data pipeline", "uses", "Kafka"), ("data pipeline", "uses", "Spark"), ("data pipeline", "uses", "Airflow")],
    ),
    ("The worker relies on RabbitMQ.", [("worker", "depends on", "RabbitMQ")]),
    ("The payments team owns the billing API.", [("billing API", "owned by", "payments team")]),
    ("Billing is owned by the payments team.", [("Billing", "owned by", "payments team")]),
    ("The auth service is maintained by Alice.", [("auth service", "owned by", "Alice")]),
    ("Alice prefers dark mode.", [("Alice", "prefers", "dark mode")]),
    ("We prefer tabs over spaces.", [("We", "prefers", "tabs")]),
    ("We use Terraform for infrastructure.", [("We", "uses", "Terraform")]),
    ("The API runs on Kubernetes and uses Redis.", [("API", "runs on", "Kubernetes"), ("API", "uses", "Redis")]),
    ("The API now runs on ECS.", [("API", "runs on", "ECS")]),
    ("Please remember that the frontend is deployed to Vercel.", [("frontend", "runs on", "Vercel")]),
    ("Node.js runs on V8.", [("Node.js", "runs on", "V8")]),
    # People and roles, copulas, places and tastes (issue 40's examples)
    ("Bob is the tech lead of Payments.", [("Bob", "leads", "Payments")]),
    ("Carol manages the SRE team.", [("Carol", "manages", "SRE team")]),
    ("Dana works on billing.", [("Dana", "works on", "billing")]),
    ("Lena reports to Omar.", [("Lena", "reports to", "Omar")]),
    ("The Berlin office is in Kreuzberg.", [("Berlin office", "located in", "Kreuzberg")]),
    ("Sofia lives in Lisbon.", [("Sofia", "lives in", "Lisbon")]),
    ("Kafka is our message broker.", [("Kafka", "is", "message broker")]),
    ("Postgres runs on host pg-3.", [("Postgres", "runs on", "pg-3")]),
    ("Olga's manager is Pieter.", [("Pieter", "manages", "Olga")]),
    ("Ravi is the product owner for Checkout.", [("Checkout", "owned by", "Ravi")]),
    ("Beatriz is a staff engineer on the payments team.", [("Beatriz", "member of", "payments team")]),
    ("The default region for staging is us-east-2.", [("staging", "default region", "us-east-2")]),
    ("Mei runs the data science team.", [("Mei", "leads", "data science team")]),
    ("The Android app is maintained by Team Falcon.", [("Android app", "owned by", "Team Falcon")]),
    ("Anika loves pair programming.", [("Anika", "likes", "pair programming")]),
    ("Luis hates long meetings.", [("Luis", "dislikes", "long meetings")]),
    ("Mark can't stand YAML.", [("Mark", "dislikes", "YAML")]),
    ("Oskar would rather use Vim than VS Code.", [("Oskar", "prefers", "Vim")]),
    ("Ana speaks Portuguese.", [("Ana", "speaks", "Portuguese")]),
    ("Anna mentors Ben.", [("Anna", "mentors", "Ben")]),
    (
        "Alice and Bob maintain the billing service.",
        [("billing service", "owned by", "Alice"), ("billing service", "owned by", "Bob")],
    ),
    ("Priya leads Atlas, and Omar leads Orion.", [("Priya", "leads", "Atlas"), ("Omar", "leads", "Orion")]),
    ("Camille likes Go but hates Java.", [("Camille", "likes", "Go"), ("Camille", "dislikes", "Java")]),
    ("The export pushes events to the audit bucket.", [("export", "writes to", "audit bucket")]),
    ("Alerts go to PagerDuty.", [("Alerts", "writes to", "PagerDuty")]),
    ("Kibana is reachable at logs.example.local.", [("Kibana", "hosted on", "logs.example.local")]),
    ("The reminders are sent through Twilio.", [("reminders", "uses", "Twilio")]),
    ("The nightly backups are stored on the NAS.", [("nightly backups", "stored in", "NAS")]),
    ("Our CTO, Ngozi, lives in Lagos.", [("Ngozi", "lives in", "Lagos"), ("Ngozi", "is", "CTO")]),
    (
        "The refunds API is owned by Team Otter, and Farid is its tech lead.",
        [("refunds API", "owned by", "Team Otter"), ("Farid", "leads", "refunds API")],
    ),
    (
        "The API gateway sits behind Envoy, which runs on host edge-01.",
        [("API gateway", "sits behind", "Envoy"), ("Envoy", "runs on", "edge-01")],
    ),
]

# (sentence, what was chosen, the alternatives named, the reason)
DECISIONS = [
    (
        "We decided to use PostgreSQL over MySQL because it supports JSON columns.",
        "use PostgreSQL",
        ("MySQL",),
        "it supports JSON columns",
    ),
    ("We chose Go instead of Rust and Java because the team knows it.", "Go", ("Rust", "Java"), "the team knows it"),
    ("The team went with Stripe rather than Adyen.", "Stripe", ("Adyen",), ""),
    (
        "Decision: adopt trunk-based development because releases were slow.",
        "adopt trunk-based development",
        (),
        "releases were slow",
    ),
    ("We decided not to use Redis because it is expensive.", "not use Redis", (), "it is expensive"),
    ("We opted for weekly releases.", "weekly releases", (), ""),
    # A "might" in the reason does not make the decision a hypothetical.
    ("We chose Go because it might scale better.", "Go", (), "it might scale better"),
]

# (text, the skill's content, its steps)
SKILLS = [
    (
        "To deploy the API:\n1. Build the image.\n2. Push it to the registry.\n3. Restart the service.",
        "To deploy the API:\n1. Build the image.\n2. Push it to the registry.\n3. Restart the service.",
        ("Build the image.", "Push it to the registry.", "Restart the service."),
    ),
    (
        "How to rotate keys: 1. Create a new key. 2. Update the clients. 3. Revoke the old key.",
        "How to rotate keys:\n1. Create a new key.\n2. Update the clients.\n3. Revoke the old key.",
        ("Create a new key.", "Update the clients.", "Revoke the old key."),
    ),
    (
        "How to rotate keys:\n- Create a new key\n- Revoke the old key",
        "How to rotate keys:\n1. Create a new key\n2. Revoke the old key",
        ("Create a new key", "Revoke the old key"),
    ),
    (
        "Steps to release:\n1) Tag the commit\n2) Push the tag",
        "To release:\n1. Tag the commit\n2. Push the tag",
        ("Tag the commit", "Push the tag"),
    ),
]

# (sentence, the start of the reason it is skipped for)
NOTHING = [
    ("Does the API run on Kubernetes?", "question"),
    ("Should we switch to Rust", "question"),
    ("Which database do we use?", "question"),
    ("The API does not use Redis.", "negation"),
    ("The API doesn't use Redis.", "negation"),
    ("The worker never runs on Lambda.", "negation"),
    ("We never decided to use Kafka.", "negation"),
    ("If we used Kafka, the queue would scale.", "hypothetical"),
    ("We might move to AWS next year.", "hypothetical"),
    ("The API will run on GCP.", "hypothetical"),
    ("Maybe the API uses Redis.", "hypothetical"),
    ("I think the API uses Redis.", "hypothetical"),
    ("We are planning to use Kafka.", "hypothetical"),
    ("If we decided to use Kafka, we would need ops.", "hypothetical"),
    ("We used to use Jenkins.", "past"),
    ("Thanks, sounds good!", "pleasantry"),
    ("Got it.", "pleasantry"),
    ("Hi!", "pleasantry"),
    ("It runs on Kubernetes.", "vague"),
    ("The API uses a lot of memory.", "vague"),
    ("Stuff happens sometimes.", "vague"),
    ("We decided to do it.", "vague"),
    ("To deploy: run make.", "vague"),  # one step is no skill
    ("Sounds like a plan.", "vague"),
    ("I'm heading out for lunch.", "vague"),
    ("We need more tests.", "vague"),
    ("Themes like sisterhood are moving.", "vague"),
    ("Congrats on opening your own car shop!", "pleasantry"),
    ("The standup moved to 10am.", "vague"),
    ("Paul previously ran the team.", "past"),
    ("Ines led the mobile team.", "past"),
    ("Once Kenji replaces Nadia as lead, things will change.", "hypothetical"),
    ("I guess the exporter might use Prometheus, not sure.", "hypothetical"),
    ("Who's on call next week?", "question"),
]


# (text, the triples it states, each fact's content)
CONVERSATIONS = [
    ("Alice: Alice leads the Atlas project", [("Alice", "leads", "Atlas project")], ["Alice leads the Atlas project."]),
    ("[10:42] mei: I prefer tabs", [("Mei", "prefers", "tabs")], ["Mei: I prefer tabs."]),
    (
        "Human: My preferred editor is Neovim.\nAI: Got it.",
        [("user", "prefers", "Neovim")],
        ["User: My preferred editor is Neovim."],
    ),
    ("I prefer tabs.", [("user", "prefers", "tabs")], ["I prefer tabs."]),
    (
        "User: I'm based in Lisbon and I work at Initech.",
        [("user", "located in", "Lisbon"), ("user", "works at", "Initech")],
        ["User: I'm based in Lisbon.", "User: I work at Initech."],
    ),
    (
        "Assistant: Noted, you prefer dark mode.",
        [("user", "prefers", "dark mode")],
        ["Assistant: Noted, you prefer dark mode."],
    ),
    (
        "Sam: The API runs on ECS. It uses Redis.",
        [("API", "runs on", "ECS"), ("API", "uses", "Redis")],
        ["The API runs on ECS.", "It uses Redis."],
    ),
    (
        "Standup:\n- Hiro: the webhook runs on Lambda\n- Lucia owns the rules engine",
        [("webhook", "runs on", "Lambda"), ("rules engine", "owned by", "Lucia")],
        ["The webhook runs on Lambda.", "Lucia owns the rules engine."],
    ),
    ("Mei doesn't prefer Jira anymore. She prefers Linear.", [("Mei", "prefers", "Linear")], ["She prefers Linear."]),
    (
        "<dave> the build server runs on Jenkins",
        [("build server", "runs on", "Jenkins")],
        ["The build server runs on Jenkins."],
    ),
]


@pytest.mark.parametrize(("text", "triples", "contents"), CONVERSATIONS, ids=[case[0] for case in CONVERSATIONS])
def test_speakers_pronouns_and_lists_give_each_fact_to_whom_it_belongs(text, triples, contents):
    found = extraction.extract(text)
    facts = [item for item in found.items if item.kind == extraction.FACT]
    assert [(item.subject, item.predicate, item.object) for item in facts] == triples
    assert [item.content for item in facts] == contents


def test_a_decision_or_a_skill_is_found_after_a_speaker_or_a_lead_in():
    found = extraction.extract(
        "Marco: We decided to use Caddy over nginx because it does TLS for us.\n"
        "Notes from Monday. To rotate the certificates: 1. Issue new certs. 2. Reload nginx.\n"
        "Runbook: failing over the database\n- Promote the replica\n- Point the app at it"
    )
    assert [(item.kind, item.title or item.choice) for item in found.items] == [
        ("decision", "use Caddy"),
        ("skill", "How to rotate the certificates"),
        ("skill", "Failing over the database"),
    ]
    assert found.items[0].alternatives == ("nginx",)


@pytest.mark.parametrize(("sentence", "triples"), FACTS, ids=[case[0] for case in FACTS])
def test_a_fact_sentence_gives_its_triples(sentence, triples):
    found = extraction.extract(sentence)
    assert [(item.subject, item.predicate, item.object) for item in found.items] == triples
    assert {item.kind for item in found.items} == {extraction.FACT} and found.skipped == ()
    for item in found.items:
        assert item.content[0].isupper() and item.content.endswith(".")
        assert 0 <= item.start < item.end <= len(sentence) and sentence[item.start].isalpha()


@pytest.mark.parametrize(
    ("sentence", "choice", "alternatives", "reason"), DECISIONS, ids=[case[0] for case in DECISIONS]
)
def test_a_decision_sentence_gives_what_was_chosen_over_what_and_why(sentence, choice, alternatives, reason):
    (item,) = extraction.extract(sentence).items
    assert (item.kind, item.content, item.choice, item.alternatives, item.reason) == (
        findings.DECISION,
        sentence,
        choice,
        alternatives,
        reason,
    )
    assert not item.subject


@pytest.mark.parametrize(("text", "content", "steps"), SKILLS, ids=[case[0].split(":")[0] for case in SKILLS])
def test_numbered_or_bulleted_steps_under_a_goal_give_one_skill(text, content, steps):
    found = extraction.extract(text)
    (item,) = found.items
    assert (item.kind, item.content, item.steps) == (findings.SKILL, content, steps)
    assert (item.start, item.end) == (0, len(text)) and found.skipped == ()
    assert item.title.startswith("How to ")


@pytest.mark.parametrize(("sentence", "reason"), NOTHING, ids=[case[0] for case in NOTHING])
def test_questions_negations_hypotheticals_pleasantries_and_vague_text_give_nothing(sentence, reason):
    found = extraction.extract(sentence)
    assert found.items == ()
    (skipped,) = found.skipped
    assert skipped.reason.split(":")[0] == reason
    assert (skipped.text, skipped.start, skipped.end) == (sentence, 0, len(sentence))


PARAGRAPH = """Thanks for the call! Notes:
- The billing API runs on Kubernetes.
- Does it need Redis?
We decided to use Postgres over MySQL because of JSON support.
To deploy the API:
1. Build the image.
2. Restart the service.
The API does not use Kafka."""


def test_a_paragraph_gives_each_item_and_each_skip_in_order_with_its_span():
    found = extraction.extract(PARAGRAPH)
    assert [(item.kind, PARAGRAPH[item.start : item.end]) for item in found.items] == [
        ("fact", "The billing API runs on Kubernetes."),
        ("decision", "We decided to use Postgres over MySQL because of JSON support."),
        ("skill", "To deploy the API:\n1. Build the image.\n2. Restart the service."),
    ]
    assert [(PARAGRAPH[entry.start : entry.end], entry.reason.split(":")[0]) for entry in found.skipped] == [
        ("Thanks for the call!", "pleasantry"),
        ("Notes:", "vague"),
        ("Does it need Redis?", "question"),
        ("The API does not use Kafka.", "negation"),
    ]


def test_a_clause_that_goes_on_about_a_name_is_read_on_its_own():
    found = extraction.extract(
        "OK, the API uses Redis for caching, which is fast. Marisol reports to Idris, who heads up customer success."
    )
    assert [(item.subject, item.predicate, item.object) for item in found.items] == [
        ("API", "uses", "Redis"),
        ("Marisol", "reports to", "Idris"),
        ("Idris", "leads", "customer success"),
    ]
    assert [(entry.text, entry.reason.split(":")[0]) for entry in found.skipped] == [("which is fast.", "vague")]


def test_the_rules_need_no_django_and_read_an_empty_text_as_nothing():
    assert extraction.extract("") == extraction.Extraction(items=(), skipped=())
    assert extraction.extract("   \n\n ") == extraction.Extraction(items=(), skipped=())


# --- the service -------------------------------------------------------------------------------------------------


def learn_text(text, namespace="acme", **options):
    return services.memory_learn(text=text, namespace=namespace, **ACTOR, **options)


@pytest.mark.django_db
def test_learn_stores_each_item_with_its_kind_triple_confidence_and_span():
    result = learn_text(PARAGRAPH, source="call-notes.md", tags=["meeting"])

    assert [(item.kind, item.subject, item.predicate, item.object) for item in result.stored] == [
        ("fact", "billing API", "runs on", "Kubernetes"),
        ("decision", None, None, None),
        ("skill", None, None, None),
    ]
    assert result.stored[1].alternatives == ["MySQL"] and result.deduplicated == []
    assert len(result.skipped) == 4
    fact, decision, skill = result.stored
    memory = selectors.memory_get(memory_id=fact.memory_id)
    assert (memory.kind, memory.content, memory.subject, memory.predicate, memory.object) == (
        "fact",
        "The billing API runs on Kubernetes.",
        "billing API",
        "runs on",
        "Kubernetes",
    )
    assert memory.stated_confidence == LEARNED_CONFIDENCE == 0.5
    # Extracted (reliability 0.5) and stated 0.5, learned just now: computed 0.5 too.
    assert memory.confidence == 0.5
    assert memory.source == f"learn: call-notes.md chars {fact.start}-{fact.end}"
    assert PARAGRAPH[fact.start : fact.end] == "The billing API runs on Kubernetes."
    assert memory.tags == ["meeting"] and memory.revision_id == fact.revision_id
    # Extracted by rule, so a candidate until a person, a trusted caller or corroboration vouches for it.
    assert memory.state == "candidate"
    assert selectors.memory_get(memory_id=decision.memory_id).kind == "decision"
    stored_skill = selectors.memory_get(memory_id=skill.memory_id)
    assert (stored_skill.kind, stored_skill.title) == ("skill", "How to deploy the API")
    assert selectors.memory_history(memory_id=skill.memory_id)[0].confidence == 0.5
    # Learned facts are found like any memory, and show their confidence there too.
    (hit,) = selectors.memory_recall(query="billing kubernetes", namespace=["acme"], mode="keyword").hits
    assert (hit.memory.id, hit.memory.stated_confidence, hit.memory.confidence) == (fact.memory_id, 0.5, 0.5)


@pytest.mark.django_db
def test_a_source_is_named_text_when_the_caller_gives_none():
    (item,) = learn_text("  The API uses Redis.").stored
    assert (item.start, item.end) == (2, 21)
    assert selectors.memory_get(memory_id=item.memory_id).source == "learn: text chars 2-21"


@pytest.mark.django_db
def test_a_fact_whose_triple_the_namespace_holds_is_not_stored_again(remember):
    held = remember(
        "Billing lives on our Kubernetes cluster.",
        kind="fact",
        subject="The Billing API",
        predicate="Runs-On",
        object="kubernetes",
    ).memory
    elsewhere = remember(
        "Elsewhere it runs on Kubernetes.",
        namespace="other",
        subject="billing API",
        predicate="runs on",
        object="Kubernetes",
    ).memory

    result = learn_text("The billing  API runs on Kubernetes in production. The billing API uses Redis.")

    (duplicate,) = result.deduplicated
    assert (duplicate.memory_id, duplicate.revision_id, duplicate.matched_by) == (held.id, held.revision_id, "triple")
    assert [item.object for item in result.stored] == ["Redis"]
    assert Memory.objects.filter(namespace="acme").count() == 2 and elsewhere.id != duplicate.memory_id


@pytest.mark.django_db
def test_an_item_whose_content_the_namespace_holds_names_that_memory(remember):
    held = remember("We decided to use Postgres over MySQL.").memory
    (duplicate,) = learn_text("We decided to use Postgres over MySQL.").deduplicated
    assert (duplicate.memory_id, duplicate.matched_by) == (held.id, "content")


@pytest.mark.django_db
def test_the_same_fact_twice_in_one_text_is_stored_once():
    result = learn_text("The API uses Redis. The API uses Redis for caching.")
    (stored,) = result.stored
    (again,) = result.deduplicated
    assert (again.memory_id, again.matched_by, again.start) == (stored.memory_id, "triple", 20)


@pytest.mark.django_db
def test_a_forgotten_fact_is_no_duplicate_and_is_learned_anew():
    (first,) = learn_text("The API uses Redis.").stored
    services.memory_forget(memory_id=first.memory_id, **ACTOR)
    (second,) = learn_text("The API uses Redis.").stored
    assert second.memory_id != first.memory_id


@pytest.mark.django_db
def test_an_item_the_store_refuses_is_skipped_whole_and_the_others_are_stored(settings):
    settings.MEMORY_MAX_CONTENT_BYTES = 256
    text = "The API uses Redis.\nTo migrate the database:\n" + "\n".join(
        f"{number}. Run the migration step number {number} and check its output twice." for number in range(1, 6)
    )
    result = learn_text(text)

    assert [item.kind for item in result.stored] == ["fact"]
    (refused,) = result.skipped
    assert refused.reason.startswith("refused: content: ") and "over the limit of 256 bytes" in refused.reason
    assert refused.text.startswith("To migrate the database:") and refused.end == len(text)
    assert Memory.objects.count() == 1 and Revision.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        (
            {"text": "x" * (extraction.TEXT_MAX_CHARS + 1)},
            TooLarge,
            "text: 20001 characters is over the limit of 20000",
        ),
        ({"text": "   \n"}, InvalidInput, "text: must not be empty"),
        ({"text": 5}, InvalidInput, "text: expected text, got int"),
        ({"text": "The API uses Redis.\x00"}, InvalidInput, "text: NUL characters are not allowed"),
        ({"text": "The API uses Redis.", "namespace": "Not A Slug"}, InvalidInput, "namespace: 'Not A Slug' is not"),
        (
            {"text": "The API uses Redis.", "source": "s" * 461},
            TooLarge,
            "source: 461 characters is over the limit of 460",
        ),
        ({"text": "The API uses Redis.", "tags": ["has space"]}, InvalidInput, "tags: 'has space' is not a valid tag"),
        ({"text": "The API uses Redis.", "interface": "telnet"}, InvalidInput, "interface: 'telnet' is not one of"),
    ],
)
def test_bad_input_is_refused_whole_and_nothing_is_stored(arguments, error, message):
    fields = {"namespace": "acme", **ACTOR, **arguments}
    with pytest.raises(error, match=message):
        services.memory_learn(**fields)
    assert Memory.objects.count() == 0


@pytest.mark.django_db
def test_text_at_the_limit_is_read_whole():
    sentence = "The API uses Redis. "
    text = (sentence * (extraction.TEXT_MAX_CHARS // len(sentence)))[: extraction.TEXT_MAX_CHARS]
    result = learn_text(text)
    assert len(result.stored) == 1 and len(result.deduplicated) == extraction.TEXT_MAX_CHARS // len(sentence) - 1


# --- confidence --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [-0.01, 1.01, float("nan"), float("inf"), True, "0.5", [0.5]])
def test_a_confidence_outside_zero_to_one_or_not_a_number_is_refused(value):
    with pytest.raises(InvalidInput, match="^confidence: ") as refused:
        validation.confidence(value)
    assert refused.value.field == "confidence"


def test_a_confidence_from_zero_to_one_is_kept_and_none_means_not_stated():
    assert [validation.confidence(value) for value in (0, 1, 0.25, None)] == [0.0, 1.0, 0.25, None]


@pytest.mark.django_db
def test_a_stated_confidence_is_carried_by_revisions_and_shown_by_get_and_history(remember):
    made = remember("The office is in Lyon.", key="office", confidence=0.9).memory
    assert made.stated_confidence == 0.9 and made.as_dict()["stated_confidence"] == 0.9
    plain = remember("The office has a garden.").memory
    assert plain.stated_confidence is None and "stated_confidence" not in plain.as_dict()
    services.memory_update(memory_id=made.id, title="Office", **ACTOR)
    assert [revision.confidence for revision in selectors.memory_history(memory_id=made.id)] == [0.9, 0.9]
    # Another confidence under the same key is another assertion: a new revision.
    again = remember("The office is in Lyon.", key="office", confidence=0.6)
    assert again.revised and selectors.memory_get(memory_id=made.id).stated_confidence == 0.6


@pytest.mark.django_db
def test_the_append_only_triggers_refuse_changing_a_confidence_after_migration_0010(remember):
    made = remember("Immutable.", confidence=0.5).memory
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Revision.objects.filter(pk=made.revision_id).update(confidence=0.9)
    with pytest.raises(IntegrityError, match="append-only"), transaction.atomic():
        Revision.objects.filter(pk=made.revision_id).delete()
    assert Revision.objects.get(pk=made.revision_id).confidence == 0.5


# --- REST --------------------------------------------------------------------------------------------------------

LEARN = "/api/v1/learn/"


@pytest.fixture
def api(db):
    cache.clear()  # throttle counts
    tokens = {
        name: api_key_create(name=name, actor="tester", interface="cli", **spec)[1]
        for name, spec in {
            "writer": {"scopes": ["read", "write"]},
            "reader": {"scopes": ["read"]},
            "acme": {"scopes": ["read", "write"], "namespaces": ["acme"]},
        }.items()
    }

    def client(name="writer") -> APIClient:
        made = APIClient()
        made.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens[name]}")
        return made

    yield client
    cache.clear()


def test_rest_learn_answers_what_was_stored_deduplicated_and_skipped(api):
    response = api().post(
        LEARN,
        {"text": "The API uses Redis. The API uses Redis. Is it fast?", "namespace": "acme", "source": "chat"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"namespace", "stored", "deduplicated", "ended", "unmatched_changes", "skipped"}
    (stored,) = body["stored"]
    assert {key: stored[key] for key in ("kind", "subject", "predicate", "object", "start", "end")} == {
        "kind": "fact",
        "subject": "API",
        "predicate": "uses",
        "object": "Redis",
        "start": 0,
        "end": 19,
    }
    assert "matched_by" not in stored and "alternatives" not in stored
    assert body["deduplicated"][0]["matched_by"] == "triple"
    assert body["skipped"] == [{"text": "Is it fast?", "start": 40, "end": 51, "reason": "question"}]
    memory = api().get(f"/api/v1/memories/{stored['memory_id']}/").json()
    assert (memory["stated_confidence"], memory["confidence"], memory["source"]) == (0.5, 0.5, "learn: chat chars 0-19")


@pytest.mark.parametrize(
    ("body", "status", "field", "message"),
    [
        ({}, 400, "text", "text: required"),
        ({"text": ""}, 400, "text", "text: String should have at least 1 character"),
        ({"text": 5}, 400, "text", "text: Input should be a valid string"),
        ({"text": "x" * 20001}, 413, "text", "text: String should have at most 20000 characters"),
        ({"text": "The API uses Redis.", "confidence": 1}, 400, "confidence", "confidence: unknown field"),
        ({"text": "The API uses Redis.", "namespace": "Bad Name"}, 400, "namespace", "namespace: String should match"),
    ],
)
def test_rest_learn_refuses_bad_input_naming_the_field(api, body, status, field, message):
    error = error_of(api().post(LEARN, body, format="json"), status)
    assert error["field"] == field and error["message"].startswith(message)
    assert Memory.objects.count() == 0


def test_rest_learn_needs_the_write_scope_and_a_namespace_the_key_may_write(api):
    assert (
        error_of(api("reader").post(LEARN, {"text": "The API uses Redis."}, format="json"), 403)["code"] == "forbidden"
    )
    assert (
        error_of(api("acme").post(LEARN, {"text": "The API uses Redis.", "namespace": "beta"}, format="json"), 403)[
            "code"
        ]
        == "forbidden"
    )
    assert api("acme").post(LEARN, {"text": "The API uses Redis."}, format="json").json()["namespace"] == "acme"
    assert error_of(api().get(LEARN), 405)["code"] == "method_not_allowed"


def test_rest_remember_takes_a_confidence_within_bounds(api):
    made = api().post("/api/v1/memories/", {"content": "The office is in Lyon.", "confidence": 0.8}, format="json")
    assert made.status_code == 201 and made.json()["stated_confidence"] == 0.8
    error = error_of(api().post("/api/v1/memories/", {"content": "Sure.", "confidence": 1.5}, format="json"), 400)
    assert error["field"] == "confidence" and "less than or equal to 1" in error["message"]


# --- the admin ---------------------------------------------------------------------------------------------------


def test_the_admin_history_shows_a_learned_revisions_confidence_and_span(admin_client):
    (item,) = learn_text("The API uses Redis.", source="wiki").stored
    page = admin_client.get(f"/admin/memories/memory/{item.memory_id}/change/").content.decode()
    assert "· confidence 0.5" in page and "source learn: wiki chars 0-19" in page


def test_the_revision_admin_lists_and_shows_the_confidence(admin_client):
    (item,) = learn_text("The API uses Redis.").stored
    listing = admin_client.get("/admin/memories/revision/").content.decode()
    assert "column-confidence" in listing
    page = admin_client.get(f"/admin/memories/revision/{item.revision_id}/change/").content.decode()
    assert "field-confidence" in page and "0.5" in page


# --- the tables, entry by entry ----------------------------------------------------------------------------------


def _said(verb: str, predicate) -> str:
    """A sentence saying ``verb`` of the present between two names that fit the predicate's constraints."""
    subject = "The alpha logs" if predicate.subjects else "Alpha"
    obj = "the beta team" if predicate.objects else "Beta"
    head, _, rest = verb.partition(" ")
    if predicate.passive:
        said = f"is {verb}"
    elif head == "be":
        said = f"is {rest}"
    elif head in ("can't", "cannot", "would", "'d", "don't", "doesn't", "do", "does") or verb in vocabulary.EVENTS:
        said = verb
    else:
        said = f"{verb_forms.inflections(head)[0]} {rest}".strip()
    return f"{subject} {said} {obj}."


VERBS = [(predicate, verb) for predicate in vocabulary.PREDICATES for verb in predicate.verbs]


@pytest.mark.parametrize(("predicate", "verb"), VERBS, ids=[f"{predicate.name}: {verb}" for predicate, verb in VERBS])
def test_every_verb_of_the_table_says_its_predicate(predicate, verb):
    sentence = _said(verb, predicate)
    # The first entry of the table that has this verb and whose constraints the sentence meets is the one read.
    first = next(
        entry
        for entry in vocabulary.PREDICATES
        if verb in entry.verbs
        and entry.passive == predicate.passive
        and (not entry.objects or predicate.objects)
        and (not entry.subjects or predicate.subjects)
    )
    (item,) = extraction.extract(sentence).items
    names = {"alpha logs" if predicate.subjects else "Alpha", "beta team" if predicate.objects else "Beta"}
    assert (item.predicate, {item.subject, item.object}) == (first.name, names), sentence
    said_first = item.object if first.reverse else item.subject
    assert said_first.startswith(("Alpha", "alpha")), sentence


def test_the_docs_name_every_canonical_predicate_role_and_change_rule():
    page = (Path(__file__).resolve().parent.parent / "docs" / "learning.md").read_text()
    for name in {predicate.name for predicate in vocabulary.PREDICATES}:
        assert f"| `{name}` |" in page, name
    for role in vocabulary.ROLES:
        assert role in page.casefold(), role
    rules = {
        "moved from",
        "moved to",
        "as",
        "took over",
        "with",
        "by",
        "handed",
        "left",
        "dropped",
        "no longer",
        "instead of",
        "now",
    }
    for rule in rules:
        assert f"| `{rule}`" in page or f"`{rule}`" in page, rule
