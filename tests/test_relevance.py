"""Recall that stays quiet when nothing is relevant (min_score, the relevance decision, hooks), and exact words
first in every language: the vector channel weighed by what an English-only model can read, CJK snippets."""

import pytest
from rest_framework.test import APIClient

from memories.selectors import memory_recall as recall
from memories.services.hooks import hook_recall
from memories.services.keys import api_key_create
from memoryproject.exceptions import InvalidInput
from search import hits, text
from tests.helpers import error_of
from tests.helpers import key_caller as caller

TECH_FACTS = [
    "Production runs PostgreSQL 16 on two replicas in Frankfurt.",
    "The deploy pipeline runs the smoke tests, then the canary.",
    "API tokens expire after ninety days and must be rotated.",
    "The staging cluster is rebuilt from Terraform every night.",
    "Grafana alerts page the on-call engineer through PagerDuty.",
]
# Where most text is English, a CJK memory is long by BM25's measure (its bigrams against an average near 0).
MORE_FACTS = [
    "The design review happens every second Thursday.",
    "Lunch orders go in before eleven.",
    "The VPN drops connections idle for an hour.",
    "Backups of the wiki run on Sundays.",
    "The support rota is in the shared calendar.",
    "Laptops are replaced every three years.",
    "The build cache is cleared on Mondays.",
    "The style guide prefers short sentences.",
    "Release notes are written by the team lead.",
    "Visitors sign in at the front desk.",
]
COORDINATES = "坐标系统使用WGS84，所有位置数据都以经纬度保存，地图服务在导出报表时再转换成各地的本地投影。"
TEST_DATABASE = "測試環境的資料庫每天晚上重新建立一次。"
BACKUPS = "数据库备份保存在上海机房。"


@pytest.fixture
def tech(remember):
    return [remember(content).memory for content in TECH_FACTS]


@pytest.fixture
def mixed(remember):
    """Tech facts and CJK memories: one holds the word 坐标, the others share no word with it."""
    for content in MORE_FACTS:
        remember(content)
    return {
        "facts": [remember(content).memory for content in TECH_FACTS],
        "coordinates": remember(COORDINATES).memory,
        "test_database": remember(TEST_DATABASE).memory,
        "backups": remember(BACKUPS).memory,
    }


def contents(result):
    return [hit.memory.content for hit in result.hits]


# --- exact words first -----------------------------------------------------------------------------------------


def test_an_exact_cjk_word_is_not_outvoted_by_a_memory_only_the_vectors_found(db, minilm, mixed):
    assert contents(recall(query="坐标", mode="hybrid"))[0] == COORDINATES
    # Nor is any other CJK memory a hit by its cosine alone, whatever min_score keeps.
    assert contents(recall(query="坐标", mode="hybrid", min_score=0)) == [COORDINATES]
    semantic = recall(query="坐标", mode="semantic")  # meaning alone keeps the model's own cosines
    assert TEST_DATABASE in contents(semantic)


def test_a_nonsense_query_finds_no_cjk_memory_by_vectors(db, minilm, mixed):
    assert recall(query="xyzzy frobnicate", mode="hybrid").hits == []
    everything = recall(query="xyzzy frobnicate", mode="hybrid", min_score=0)
    assert not any(text.has_cjk(content) for content in contents(everything))


def test_the_model_reads_english_latin_script_and_no_cjk():
    assert text.english_share("where is our source code kept") == 1.0
    assert text.english_share("Sofia's birthday") == 1.0  # a lone letter is no language's evidence
    assert text.english_share("坐标") == 0.0
    assert text.english_share("Quel est le plus long fleuve de France ?") == 0.0
    assert 0.5 < text.english_share("Meeting with 王伟 about the budget") < 1.0


def test_a_snippet_brackets_cjk_words_inside_a_run(db, remember):
    remember(COORDINATES)
    result = recall(query="坐标", mode="keyword")
    assert result.hits[0].snippet == "[坐标]" + COORDINATES.removeprefix("坐标")
    terms = text.clean_query("备份 deploy").terms
    assert hits.snippet("数据库备份保存在上海机房, we deploy at night.", terms) == (
        "数据库[备份]保存在上海机房, we [deploy] at night."
    )


# --- relevance and min_score -----------------------------------------------------------------------------------


def test_nothing_relevant_holds_every_hit_back_and_says_how_many(db, minilm, tech):
    quiet = recall(query="write a haiku about the night", mode="hybrid")
    assert quiet.hits == []
    everything = recall(query="write a haiku about the night", mode="hybrid", min_score=0)
    assert contents(everything)[0] == TECH_FACTS[3]  # "night", one word of three: the decision held it back
    count = len(everything.hits)
    assert quiet.note == (
        f"{count} hit{'s' if count > 1 else ''} held back: none matched enough of the query's words "
        "or came close enough in meaning; min_score=0 shows them."
    )


def test_a_related_question_is_still_answered(db, minilm, tech):
    by_meaning = recall(query="which database do we use in production", mode="hybrid")
    assert by_meaning.hits[0].memory.content == TECH_FACTS[0]
    by_words = recall(query="Grafana PagerDuty", mode="hybrid")
    assert by_words.hits[0].memory.content == TECH_FACTS[4]


def test_min_score_holds_back_lower_hits_and_the_note_says_how_many(db, tech):
    everything = recall(query="pipeline tokens staging", mode="keyword", match="any", min_score=0)
    scores = [hit.score for hit in everything.hits]
    assert len(scores) == 3 and scores[0] > scores[-1]
    bar = (scores[0] + scores[-1]) / 2
    kept = recall(query="pipeline tokens staging", mode="keyword", match="any", min_score=bar)
    assert [hit.score for hit in kept.hits] == [score for score in scores if score >= bar]
    held = sum(score < bar for score in scores)
    assert f"{held} hit{'s' if held > 1 else ''} held back: below min_score {bar:g}." in kept.note


@pytest.mark.parametrize("min_score", [-0.1, 11, True, "high"])
def test_a_min_score_out_of_range_is_refused(db, min_score):
    with pytest.raises(InvalidInput) as raised:
        recall(query="deploy", min_score=min_score)
    assert raised.value.field == "min_score"


def test_min_score_reaches_rest_with_the_bounds_declared_once(db, tech):
    from memories.arguments import HookRecallArgs, RecallArgs

    def declared(model):
        field = model.model_fields["min_score"]
        return field.annotation, field.default, field.description, field.metadata

    assert declared(HookRecallArgs) == declared(RecallArgs)
    _, token = api_key_create(name="reader", scopes=["read"], actor="tester", interface="cli")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert error_of(client.get("/api/v1/recall/", {"query": "deploy", "min_score": "11"}), 400)["field"] == "min_score"
    high = client.get("/api/v1/recall/", {"query": "deploy pipeline", "mode": "keyword", "min_score": "9"}).json()
    assert high["hits"] == [] and high["note"] == "1 hit held back: below min_score 9."


# --- hooks -----------------------------------------------------------------------------------------------------


def test_a_hook_injects_nothing_for_an_unrelated_prompt_and_still_injects_for_a_related_one(db, minilm, mixed):
    tech = mixed["facts"]
    acme = caller("acme")
    unrelated = hook_recall(caller=acme, query="write a haiku about autumn")
    assert (unrelated.block, unrelated.hits) == ("", [])
    related = hook_recall(caller=acme, query="when do our API tokens expire?")
    assert related.hits[0].memory_id == tech[2].id and TECH_FACTS[2] in related.block


def test_the_decision_uses_only_what_was_visible_at_the_point_asked(db, minilm, tech, remember):
    before = recall(query="write a haiku about the night", mode="hybrid").as_of
    remember("Our team writes a haiku about the night shift every Friday.")
    assert contents(recall(query="write a haiku about the night", mode="hybrid"))[0].startswith("Our team")
    assert recall(query="write a haiku about the night", mode="hybrid", as_of=before).hits == []
