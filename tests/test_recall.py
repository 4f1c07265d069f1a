"""recall's behaviour: query cleanup, match modes, channels, point-in-time answers, filters, hostile input."""

import datetime as dt
import threading

import numpy as np
import pytest
from django.utils import timezone

from memories import services
from memories.selectors import memory_history
from memories.selectors import memory_recall as recall
from memoryproject.exceptions import InvalidInput, Unavailable
from search import channels, context, postings, snapshot
from search.embeddings import EmbedderUnavailable, get_embedder

ACTOR = {"actor": "tester", "interface": "cli"}
MICRO = dt.timedelta(microseconds=1)


def contents(result):
    return [hit.memory.content for hit in result.hits]


@pytest.fixture
def corpus(remember):
    made = {}
    for key, content in {
        "deploy": "We deploy on Tuesdays after the standup.",
        "deployment": "The deployment to Kubernetes failed on Friday.",
        "theme": "Alice prefers dark-mode in every editor.",
        "acme": "ACME signed the contract in March.",
        "cjk": "坐标系统使用 WGS84。",
        "lunch": "Lunch is at noon in the big room.",
    }.items():
        made[key] = remember(content, key=key).memory
    return made


def test_an_empty_answer_hints_only_at_what_the_recall_did_not_try(corpus):
    keyword = recall(query="contract deploy", mode="keyword", match="all", kinds=["skill"])
    assert keyword.hits == []
    assert keyword.hint == (
        "No memory matched. Try other words, fewer filters (tags, kinds), mode='hybrid' for meaning or match='any'."
    )
    hybrid = recall(query="contract deploy", mode="hybrid", kinds=["skill"])
    assert hybrid.hits == [] and hybrid.hint == "No memory matched. Try other words or fewer filters (tags, kinds)."
    semantic = recall(query="contract deploy", mode="semantic", match="all", kinds=["skill"])
    assert semantic.hits == [] and semantic.hint == (
        "No memory matched. Try other words, fewer filters (tags, kinds), mode='hybrid' for exact words too "
        "or match='any'."
    )


def test_a_word_finds_its_family_by_light_root(corpus):
    assert set(contents(recall(query="deploys", mode="keyword"))) == {
        "We deploy on Tuesdays after the standup.",
        "The deployment to Kubernetes failed on Friday.",
    }
    assert contents(recall(query="kube", mode="keyword")) == ["The deployment to Kubernetes failed on Friday."]


def test_punctuation_and_filler_words_are_cleaned_from_questions(corpus):
    result = recall(query="What did we decide about dark-mode?", mode="keyword")
    assert result.terms == ["decide", "dark", "mode"]  # what, did, we, about: filler
    assert contents(result) == ["Alice prefers dark-mode in every editor."]
    result = recall(query="dark-mode?", mode="keyword")
    assert result.hits[0].snippet == "Alice prefers [dark]-[mode] in every editor."
    assert result.hits[0].matched_terms == ["dark", "mode"]
    possessive = recall(query="ACME's contract?", mode="keyword")
    assert possessive.terms == ["acme", "contract"] and contents(possessive) == ["ACME signed the contract in March."]
    spanish = recall(query="¿Cuándo es el lunch?", mode="keyword")
    assert spanish.terms == ["lunch"]


def test_a_query_of_only_filler_keeps_its_words(corpus):
    assert recall(query="what is it", mode="keyword").terms == ["what", "is", "it"]


def test_auto_falls_back_to_any_term_with_a_note_and_all_does_not(corpus):
    auto = recall(query="contract deploy", mode="keyword")
    assert auto.match_mode == "any" and "partial" in auto.note
    # More matched terms first: nothing matches both, so each hit matched one.
    assert {hit.memory.key for hit in auto.hits} == {"acme", "deploy", "deployment"}
    strict = recall(query="contract deploy", mode="keyword", match="all")
    assert strict.hits == [] and strict.hint
    both = recall(query="deploy Kubernetes", mode="keyword", match="any")
    assert both.hits[0].memory.key == "deployment" and both.hits[0].matched_terms == ["deploy", "kubernetes"]


def test_two_character_cjk_words_are_found_by_bigrams(corpus):
    result = recall(query="坐标", mode="keyword", explain=True)
    assert contents(result) == ["坐标系统使用 WGS84。"]
    assert result.hits[0].explain["ranks"]["bigram"] == 1


def test_substrings_the_keyword_channel_misses_are_found_by_trigrams(remember):
    remember("Ticket INC-20417 tracks the outage.")
    result = recall(query="20417", mode="keyword", explain=True)
    assert len(result.hits) == 1 and "INC-20417" in result.hits[0].memory.content
    partial = recall(query="utag", mode="keyword", explain=True)  # inside "outage"
    assert partial.hits and partial.hits[0].explain["ranks"].get("trigram") == 1
    postings.compact()  # the same, once the terms are packed
    assert [hit.memory.id for hit in recall(query="utag", mode="keyword").hits] == [partial.hits[0].memory.id]
    assert recall(query="utag", mode="keyword", namespace="elsewhere").hits == []


def test_full_width_letters_and_digits_find_the_words_they_stand_for_on_every_channel(remember):
    cafe = remember("The café opens at 8 on weekdays.").memory
    ticket = remember("Ticket INC-20417 tracks the outage.").memory
    wide = remember("ＡＰＩ keys rotate every ９０ days.").memory

    def found(query, mode="keyword"):
        return [hit.memory.id for hit in recall(query=query, mode=mode, explain=True).hits]

    assert found("ｃａｆé") == found("ＣＡＦＥ") == [cafe.id]
    assert found("ｕｔａｇ") == [ticket.id]  # trigram: inside "outage"
    assert recall(query="ｕｔａｇ", mode="keyword", explain=True).hits[0].explain["ranks"]["trigram"] == 1
    assert found("ｃａｆé", mode="semantic")[0] == found("café", mode="semantic")[0] == cafe.id
    # Text stored in full width is indexed as written: the query as typed still finds it.
    assert found("ＡＰＩ") == found("ＡＰＩ ９０") == [wide.id]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "*",
        "AND",
        "OR NOT",
        "NEAR(",
        "NEAR(a b)",
        "col:",
        "content:deploy",
        "'",
        'deploy"',
        "(",
        ")",
        "^",
        "deploy*",
        "-",
        "a" * 300,
    ],
)
def test_hostile_queries_are_searched_as_text_and_never_raise(corpus, query):
    for mode in ("keyword", "hybrid"):
        result = recall(query=query, mode=mode)
        assert isinstance(result.hits, list)
        assert result.hits or result.hint


def test_bad_arguments_name_the_field(db):
    for arguments, field in [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": 5}, "query"),
        ({"query": "nul\x00inside"}, "query"),  # PostgreSQL cannot hold NUL in text: refused on every engine
        ({"query": "x" * 2001}, "query"),
        ({"query": "x", "match": "some"}, "match"),
        ({"query": "x", "mode": "fuzzy"}, "mode"),
        ({"query": "x", "as_of": "yesterday"}, "as_of"),
        ({"query": "x", "valid_at": "2024-01-01T00:00:00"}, "valid_at"),
        ({"query": "x", "namespace": "Bad NS"}, "namespace"),
        ({"query": "x", "kinds": ["opinion"]}, "kind"),
        ({"query": "x", "tags": ["a b"]}, "tags"),
        ({"query": "x", "explain": "yes"}, "explain"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            recall(**arguments)
        assert caught.value.field == field, arguments


def test_recall_answers_as_of_a_moment_and_about_a_valid_time(remember):
    first = remember("The on-call phone is with Dana.", key="oncall").memory
    services.memory_revise(memory_id=first.id, content="The on-call phone is with Priya.", **ACTOR)
    assert contents(recall(query="on-call phone", mode="keyword")) == ["The on-call phone is with Priya."]
    assert contents(recall(query="on-call phone", mode="keyword", as_of=first.known_at)) == [
        "The on-call phone is with Dana."
    ]
    second_known = memory_history(memory_id=first.id)[-1].known_at
    assert contents(recall(query="on-call phone", mode="keyword", valid_at=second_known - MICRO)) == [
        "The on-call phone is with Dana."
    ]
    assert recall(query="on-call phone", mode="keyword", as_of=first.known_at - MICRO).hits == []


def test_forgotten_and_expired_memories_are_not_recalled_but_their_past_is(remember):
    learned = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=10)
    expiring = remember("Build 42 is broken on main.", ttl_days=2, known_at=learned).memory
    forgotten = remember("The wifi password is hunter2.").memory
    services.memory_forget(memory_id=forgotten.id, **ACTOR)
    assert recall(query="build broken", mode="keyword").hits == []
    assert contents(recall(query="build broken", mode="keyword", as_of=expiring.expires_at - MICRO)) == [
        "Build 42 is broken on main."
    ]
    assert recall(query="build broken", mode="keyword", as_of=expiring.expires_at).hits == []
    assert recall(query="wifi password", mode="keyword").hits == []
    assert contents(recall(query="wifi password", mode="keyword", as_of=forgotten.known_at)) == [
        "The wifi password is hunter2."
    ]


def test_another_namespace_cannot_move_a_score(remember):
    remember("Rotate the database credentials monthly.", namespace="team-a")
    remember("Credentials live in the vault.", namespace="team-a")
    before = recall(query="credentials", namespace="team-a", mode="keyword", explain=True)
    for number in range(20):
        remember(f"Credentials note {number} of another team.", namespace="team-b")
    after = recall(query="credentials", namespace="team-a", mode="keyword", explain=True)
    assert [(hit.memory.id, hit.explain["bm25"]) for hit in after.hits] == [
        (hit.memory.id, hit.explain["bm25"]) for hit in before.hits
    ]
    both = recall(query="credentials", namespace=["team-a", "team-b"], mode="keyword", limit=100)
    assert len(both.hits) == 22


def test_tags_and_kinds_filter_the_hits_but_not_the_statistics(remember):
    remember("Use pnpm for the web app.", tags=["web"], kind="decision")
    remember("Use poetry for the API.", tags=["api"], kind="decision")
    remember("Use pnpm workspaces.", tags=["web"], kind="note")
    assert set(contents(recall(query="use", tags=["WEB"], mode="keyword"))) == {
        "Use pnpm for the web app.",
        "Use pnpm workspaces.",
    }
    assert contents(recall(query="pnpm", kinds=["note"], mode="keyword")) == ["Use pnpm workspaces."]
    assert recall(query="pnpm", kinds="decision", tags=["api"], mode="keyword").hits == []


def test_a_narrowed_recall_takes_its_context_from_its_eligible_neighbours_only(remember):
    remember("Use pnpm for the web app.", kind="decision")
    remember("pnpm, pnpm workspaces and the pnpm lockfile.", kind="note")
    remember("Use poetry for the API.", kind="decision")

    def context(**filters):
        hits = recall(query="pnpm", mode="hybrid", explain=True, **filters).hits
        return {hit.memory.content: hit.explain["context"] for hit in hits}

    narrowed = context(kinds=["decision"])
    whole = context()
    assert narrowed == context(kinds=["decision"])  # the note is no neighbour here
    assert whole["Use pnpm for the web app."] > narrowed["Use pnpm for the web app."]


def test_neighbours_are_kept_with_the_visible_set_unless_kinds_or_tags_narrow_it(remember):
    for content, kind in [("Use pnpm.", "decision"), ("pnpm workspaces.", "note"), ("Use poetry.", "decision")]:
        remember(content, kind=kind)
    view = snapshot.current()
    now = snapshot.to_micros(timezone.now())
    visible = view.visible_rows(as_of=now, valid_at=now)
    every = view.visible_mask(visible)[: len(view.columns.revision)]

    def neighbours(eligible, narrowed):
        return context._table(
            channels.Scope(view, view.namespaces, visible, eligible, narrowed, attributes=view.attributes_at(now))
        )

    whole = neighbours(every, False)
    assert neighbours(every, False) is whole  # one per visible set
    decisions = every & (view.attributes_at(now).kind(np.arange(len(every))) == view.kinds.index("decision"))
    narrowed = neighbours(decisions, True)
    first, middle, last = np.flatnonzero(every)
    assert whole[first].tolist() == [-1, -1, middle, last] and whole[last].tolist() == [middle, first, -1, -1]
    assert narrowed is not whole and narrowed[first].tolist() == [-1, -1, last, -1]  # the note is no neighbour


def test_explain_shows_where_a_score_came_from(corpus):
    hit = recall(query="deploy Tuesdays", mode="keyword", explain=True).hits[0]
    assert hit.memory.key == "deploy"
    assert hit.explain["bm25"] > 0 and hit.explain["ranks"]["keyword"] == 1
    assert hit.explain["revision_id"] == hit.memory.revision_id
    assert hit.explain["content_hash"] == hit.memory.content_hash
    assert hit.age in ("just now", "1 minute ago") or hit.age.endswith("ago")
    data = recall(query="deploy", mode="keyword").as_dict()
    assert set(data) >= {"query", "terms", "match_mode", "hits"}
    assert set(data["hits"][0]) >= {
        "id",
        "key",
        "namespace",
        "kind",
        "title",
        "content",
        "tags",
        "revision_id",
        "known_at",
        "valid_from",
        "valid_to",
        "expires_at",
        "source",
        "content_hash",
        "score",
        "snippet",
        "matched_terms",
        "age",
    }
    assert "explain" not in data["hits"][0]


def test_explain_shows_the_bm25_of_a_hybrid_hit_holding_only_some_words(corpus):
    # "all" scores only rows holding every word; a hit the vectors bring that holds one word
    # still shows its BM25, the same number an "any" query gives it.
    hybrid = recall(query="deploy Tuesdays", mode="hybrid", limit=10, explain=True)
    partial = {hit.memory.key: hit.explain["bm25"] for hit in hybrid.hits}
    assert hybrid.match_mode == "all" and "deployment" in partial
    anyway = recall(query="deploy Tuesdays", mode="keyword", match="any", limit=10, explain=True)
    assert {hit.memory.key: hit.explain["bm25"] for hit in anyway.hits} == {
        key: score for key, score in partial.items() if score is not None
    }
    assert partial["deployment"] is not None


def test_a_snippet_brackets_whole_words_only_even_where_its_window_cuts_one(db):
    from search import hits as snippets
    from search.text import clean_query

    # The window is 240 characters from the start; "deployment" straddles its end so that
    # the cut leaves "deploy", itself a matching word elsewhere: it must not be bracketed.
    head = "We deploy daily. "
    content = head + "x" * (snippets.WINDOW_CHARS - len(head) - len("deploy") - 1) + " deployment and more"
    snippet = snippets.snippet(content, clean_query("deploy").terms)
    assert snippet.startswith("We [deploy] daily.") and snippet.endswith(" deploy…")
    assert snippets.snippet("nothing here", clean_query("deploy").terms) == "nothing here"


def test_a_snippet_window_opens_at_a_whole_word_and_brackets_no_part_of_one(db):
    from search import hits as snippets
    from search.text import clean_query

    # The first match is 130 characters in, so the window opens a third of its width before
    # it: at the "ship" that ends "xx...xship", a query word, but not a whole one.
    content = "x" * 50 + "ship " + "word " * 15 + "ship the deploy now"
    first = content.index(" ship ") + 1
    start = first - snippets.WINDOW_CHARS // 3
    assert content[start : start + 4] == "ship" and content[start - 1] == "x"
    snippet = snippets.snippet(content, clean_query("deploy ship").terms)
    assert snippet == "…" + "word " * 15 + "[ship] the [deploy] now"
    assert snippets.snippet("ship hardship ship", clean_query("ship").terms) == "[ship] hardship [ship]"


def test_a_snippet_is_right_when_its_word_cache_fills_up_mid_content(db, monkeypatch):
    from search import hits as snippets
    from search.text import clean_query

    terms = clean_query("deploy").terms
    assert snippets.snippet("we deploy", terms) == "we [deploy]"  # "we" and "deploy" are now cached
    monkeypatch.setattr(snippets, "_STEMS_MAX", len(snippets._stems))  # full: one new word empties it
    assert snippets.snippet("we deploy often", terms) == "we [deploy] often"


def test_a_full_word_cache_is_replaced_not_emptied_under_a_thread_reading_it(db, monkeypatch):
    from search import hits as snippets
    from search.text import clean_query

    terms = clean_query("deploy").terms
    snippets.snippet("we deploy", terms)
    held = snippets._stems  # what another thread's highlight may be reading right now
    words = dict(held)
    monkeypatch.setattr(snippets, "_STEMS_MAX", len(held))
    assert snippets.snippet("they deploy nightly", terms) == "they [deploy] nightly"
    assert held == words and snippets._stems is not held


def test_meaning_is_found_without_shared_words(db, minilm, remember):
    remember("We host all our repositories on GitHub.")
    remember("The office cat is called Miso.")
    remember("Invoices are paid within thirty days.")
    semantic = recall(query="where is our source code kept", mode="semantic", explain=True)
    assert semantic.hits[0].memory.content == "We host all our repositories on GitHub."
    hybrid = recall(query="where is our source code kept", mode="hybrid", explain=True)
    assert hybrid.hits[0].memory.content == "We host all our repositories on GitHub."
    assert hybrid.hits[0].explain["cosine"] > 0.3


def test_without_the_model_hybrid_falls_back_to_keywords_and_semantic_says_why(db, settings, tmp_path, remember):
    remember("Deploys happen on Tuesdays.")
    settings.MEMORY_EMBEDDER = str(tmp_path / "no-model")
    result = recall(query="deploys")
    assert contents(result) == ["Deploys happen on Tuesdays."] and "unavailable" in result.note
    with pytest.raises(Unavailable):
        recall(query="deploys", mode="semantic")


def test_the_query_is_embedded_on_a_helper_thread_whose_failure_reads_as_before(db, settings, remember, monkeypatch):
    settings.MEMORY_EMBEDDER = "hash"
    remember("Deploys happen on Tuesdays.")
    embedder = get_embedder()
    embed_query, threads = embedder.embed_query, []

    def watched(text):
        threads.append(threading.current_thread().name)
        return embed_query(text)

    monkeypatch.setattr(embedder, "embed_query", watched)
    assert contents(recall(query="deploys")) == ["Deploys happen on Tuesdays."]
    assert threads == [threading.current_thread().name]  # hashing holds the GIL: no helper
    monkeypatch.setattr(type(embedder), "embeds_beside", True)  # as MiniLM's traced pipeline does
    assert contents(recall(query="deploys", explain=True)) == ["Deploys happen on Tuesdays."]
    assert len(threads) == 2 and threads[1].startswith("query-embedding")
    recall(query="deploys", mode="keyword")
    assert len(threads) == 2  # keyword recalls embed nothing

    def out_of_memory(text):
        raise EmbedderUnavailable("the model ran out of memory")

    monkeypatch.setattr(embedder, "embed_query", out_of_memory)
    result = recall(query="deploys")
    assert contents(result) == ["Deploys happen on Tuesdays."] and "ran out of memory" in result.note
    with pytest.raises(Unavailable, match="ran out of memory"):
        recall(query="deploys", mode="semantic")


def test_rrf_fusion_scores_each_hit_by_its_channel_ranks(corpus, settings):
    settings.MEMORY_FUSION = "rrf"
    settings.MEMORY_RRF_K = 10
    settings.MEMORY_FUSION_CONTEXT = 0.0
    weights = settings.MEMORY_FUSION_WEIGHTS
    result = recall(query="deploy kubernetes", mode="hybrid", match="any", explain=True)
    assert result.hits
    for hit in result.hits:
        expected = sum(weights[name] / (10 + rank) for name, rank in hit.explain["ranks"].items() if rank is not None)
        assert hit.score == pytest.approx(expected, rel=1e-12)
    assert [hit.score for hit in result.hits] == sorted((hit.score for hit in result.hits), reverse=True)
    # The memory both words find ranks first in the keyword channel, and so first here.
    assert result.hits[0].memory.content == "The deployment to Kubernetes failed on Friday."


def test_rrf_fusion_with_neighbour_context_reports_the_context(corpus, settings):
    settings.MEMORY_FUSION = "rrf"
    settings.MEMORY_FUSION_CONTEXT = 0.5
    result = recall(query="deploy", mode="hybrid", explain=True)
    assert result.hits and all(hit.explain["context"] is not None for hit in result.hits)
