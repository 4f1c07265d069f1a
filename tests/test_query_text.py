"""The text side of search (search.text), checked against FTS5 itself.

Pure functions: no Django database. The reference tables use the tokenizers of the
project's own FTS5 tables (search migration 0001), in the same SQLite library that
search.text uses, so a difference is the code's and not two libraries'.
"""

import importlib
import re
import string
import threading
from collections import Counter
from contextlib import closing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from search import text
from search.text import (
    cjk_bigrams,
    clean_query,
    document_terms,
    documents_terms,
    fts5_quote,
    has_cjk,
    query_tokens,
)

INDEX_TOKENIZERS = importlib.import_module("search.migrations.0001_fts_indexes").TABLES

TRICKY_TEXTS = [
    "dark-mode is state-of-the-art; re-deploy e-mail",
    "ACME's deploy? don't l'équipe rock'n'roll ACME’s O’Brien",
    "café naïve Ærø Straße résumé ÉCOLE cafe\u0301 façade Tiếng Việt người ǖ",
    "v2.3.1 on 2024-03-01 costs 3.14 or 1,000 or ½ x² ①",
    "ship it 🚀🚀 👍🏽 ok ✨done✨",
    "坐标系统 東京タワー・スカイツリー 한국어 text混合テキスト",
    "Deploy DEPLOYED deployMent dePloying deploys",
    "a" * 100 + " " + "x" * 5000 + "ing " + "supercalifragilisticexpialidocious" * 3,
    "the the the The THE",
    "",
    "   \t\n  ",
    "...!? --- ''' \"\" ** ()",
    "nul\x00inside and\x00\x00more",
    "Ελληνικά Русский текст مرحبا بالعالم हिन्दी",
    "ＦＵＬＬＷＩＤＴＨ ｆｕｌｌ 123",
    "tab\tseparated\nnew line\r\nwindows",
    "mixed42words and 42 and 4.2 and x86_64 and C++ and C#",
    'AND OR NOT NEAR( col: "quoted" * ^prefix',
]


def fts5_reference():
    """Return a connection with tables built like the project's: (title, content), the index tokenizers."""
    connection = text.sqlite3.connect(":memory:", isolation_level=None)
    connection.execute(
        f"CREATE VIRTUAL TABLE words USING fts5(title, content, tokenize='{INDEX_TOKENIZERS['search_fts_words']}')"
    )
    connection.execute("CREATE VIRTUAL TABLE words_cols USING fts5vocab(words, col)")
    connection.execute(
        f"CREATE VIRTUAL TABLE trigram USING fts5(title, content, tokenize='{INDEX_TOKENIZERS['search_fts_trigram']}')"
    )
    return connection


@pytest.fixture
def reference():
    connection = fts5_reference()
    yield connection
    connection.close()


def indexed_terms(connection, body):
    """Return FTS5's own term counts and token count for ``body`` stored as a row's content."""
    connection.execute("INSERT INTO words(rowid, title, content) VALUES (1, '', ?)", [body])
    # The vocab 'col' table, one row per term and column; the table holds this row only.
    counts = dict(connection.execute("SELECT term, cnt FROM words_cols WHERE col = 'content'"))
    # The token count as FTS5 stores it for bm25(): one varint per column in the docsize blob.
    (blob,) = connection.execute("SELECT sz FROM words_docsize WHERE id = 1").fetchone()
    connection.execute("DELETE FROM words WHERE rowid = 1")
    return counts, read_varints(blob)[1]


def read_varints(blob):
    values, value = [], 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            values.append(value)
            value = 0
    return values


def matches(connection, table, query):
    return [
        row[0]
        for row in connection.execute(f"SELECT content FROM {table} WHERE {table} MATCH ? ORDER BY rowid", [query])
    ]


# --- Documents ---------------------------------------------------------------------------


@pytest.mark.parametrize("body", TRICKY_TEXTS)
def test_document_terms_equal_what_fts5_indexes(reference, body):
    assert document_terms(body) == indexed_terms(reference, body)


# Letters, accents, scripts and separators that tokenizers disagree on.
TRICKY_CHARACTERS = list("aeiouysnrtldkAEÉéèçñüößæøếệǖ坐标系统東京タ한국🚀½²0123456789 -'’._,:\"*()\t\n\x00")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(TRICKY_CHARACTERS), max_size=80))
def test_document_terms_equal_what_fts5_indexes_for_any_text(body):
    with closing(fts5_reference()) as connection:
        assert document_terms(body) == indexed_terms(connection, body)


def test_documents_terms_matches_one_at_a_time_across_batches(reference):
    # More than two scratch batches, with empty and tricky texts in between.
    bodies = [f"{TRICKY_TEXTS[i % len(TRICKY_TEXTS)]} memory {i}" if i % 7 else "" for i in range(2500)]
    batch = documents_terms(bodies)
    assert len(batch) == len(bodies)
    assert batch == [indexed_terms(reference, body) for body in bodies]
    assert batch[0] == ({}, 0)


def test_a_failed_batch_leaves_nothing_behind_for_the_next_call():
    with pytest.raises(text.sqlite3.Error):
        documents_terms(["alpha beta", object()])
    assert document_terms("gamma") == ({"gamma": 1}, 1)


def test_each_thread_tokenizes_on_its_own_connection():
    # An SQLite connection refuses use from a thread other than its creator's.
    results = []
    worker = threading.Thread(target=lambda: results.append(document_terms("deployed kubernetes")))
    worker.start()
    worker.join()
    assert results == [document_terms("deployed kubernetes")] == [({"deploi": 1, "kubernet": 1}, 2)]


# --- Query tokens ------------------------------------------------------------------------


def test_query_tokens_pair_each_folded_word_with_its_stem_in_order():
    tokens = query_tokens("Deploys café-bar ACME's deploys")
    assert [(t.raw, t.stem) for t in tokens] == [
        ("deploys", "deploi"),
        ("cafe", "cafe"),
        ("bar", "bar"),
        ("acme", "acm"),
        ("s", "s"),
        ("deploys", "deploi"),
    ]


def test_query_tokens_fold_like_the_index_and_stem_like_it():
    # remove_diacritics 2 also strips letters with two marks (Vietnamese ế), which 1 keeps.
    tokens = query_tokens("Tiếng Việt RÉSUMÉS")
    assert [(t.raw, t.stem) for t in tokens] == [("tieng", "tieng"), ("viet", "viet"), ("resumes", "resum")]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(string.ascii_letters + string.digits + " -'_.,?\"*()")), max_size=60))
def test_query_tokens_split_ascii_on_everything_but_letters_and_digits(query):
    tokens = query_tokens(query)
    assert [t.raw for t in tokens] == re.findall("[a-z0-9]+", query.lower())
    # Stems are the index's terms, occurrence for occurrence.
    assert (dict(Counter(t.stem for t in tokens)), len(tokens)) == document_terms(query)


def test_query_tokens_read_the_nfkc_form_and_keep_the_typed_form_the_index_may_hold():
    tokens = query_tokens("ｃａｆé ＡＰＩ deploy")
    assert [(t.raw, t.stem) for t in tokens] == [("cafe", "cafe"), ("api", "api"), ("deploy", "deploi")]
    typed = [t.typed and (t.typed.raw, t.typed.stem) for t in tokens]
    assert typed == [("ｃａｆe", "ｃａｆe"), ("ａｐｉ", "ａｐｉ"), None]
    # NFKC turns "½" (one word) into "1⁄2" (two): the typed forms cannot be paired with the words read.
    assert [(t.raw, t.typed) for t in query_tokens("½ ①")] == [("1", None), ("2", None), ("1", None)]


def test_query_tokens_survive_nul_and_lone_surrogates():
    assert [t.raw for t in query_tokens("alpha\x00beta \ud800 gamma")] == ["alpha", "beta", "gamma"]


# --- Query cleanup -----------------------------------------------------------------------


def terms(query):
    return [t.raw for t in clean_query(query).terms]


def test_possessives_and_punctuation_leave_only_the_words():
    cleaned = clean_query("ACME's deploy?")
    assert [(t.raw, t.stem) for t in cleaned.terms] == [("acme", "acm"), ("deploy", "deploi")]
    assert cleaned.dropped == ["s"]
    assert not cleaned.only_filler


def test_filler_is_dropped_and_hyphenated_words_split():
    cleaned = clean_query("what did we decide about dark-mode")
    assert [t.raw for t in cleaned.terms] == ["decide", "dark", "mode"]
    assert cleaned.dropped == ["what", "did", "we", "about"]


def test_chat_filler_is_dropped():
    assert terms("Please tell me, do you remember anything about the Berlin offsite?") == ["berlin", "offsite"]


def test_a_query_of_only_filler_keeps_all_its_words():
    cleaned = clean_query("what is it")
    assert [t.raw for t in cleaned.terms] == ["what", "is", "it"]
    assert cleaned.dropped == []
    assert cleaned.only_filler


def test_an_empty_query_has_no_terms_and_is_not_filler():
    for query in ("", "   ", "?!...", "🚀"):
        assert clean_query(query) == text.CleanQuery(terms=[], dropped=[], only_filler=False)


@pytest.mark.parametrize(
    "query, kept, dropped",
    [
        ("¿Cuándo es la reunión?", ["reunion"], ["cuando", "es", "la"]),
        ("Quand est la réunion ?", ["reunion"], ["quand", "est", "la"]),
        ("Wann ist das Treffen?", ["treffen"], ["wann", "ist", "das"]),
        ("Quando é a reunião?", ["reuniao"], ["quando", "e", "a"]),
        ("When is the meeting?", ["meeting"], ["when", "is", "the"]),
        ("¿Dónde vive mi hermana?", ["vive", "hermana"], ["donde", "mi"]),
        (
            "Qu'est-ce que Marie a dit sur le budget ?",
            ["marie", "budget"],
            ["qu", "est", "ce", "que", "a", "dit", "sur", "le"],
        ),
        ("Was hat Jonas über die Miete gesagt?", ["jonas", "miete", "gesagt"], ["was", "hat", "uber", "die"]),
        ("Onde fica o escritório da empresa?", ["fica", "escritorio", "empresa"], ["onde", "o", "da"]),
    ],
)
def test_filler_of_five_languages_is_dropped_on_the_folded_form(query, kept, dropped):
    cleaned = clean_query(query)
    assert [t.raw for t in cleaned.terms] == kept
    assert cleaned.dropped == dropped


def test_english_content_words_that_are_filler_elsewhere_are_kept():
    assert terms("my son's car by the sea") == ["son", "car", "sea"]


def test_terms_are_deduplicated_by_stem_keeping_the_first_word():
    cleaned = clean_query("deploy deploys Deployed DEPLOY kube")
    assert [(t.raw, t.stem) for t in cleaned.terms] == [("deploy", "deploi"), ("kube", "kube")]


def test_lone_latin_letters_are_dropped_but_digits_and_cjk_characters_stay():
    cleaned = clean_query("plan B for l'équipe: 5 東 x")
    assert [t.raw for t in cleaned.terms] == ["plan", "equipe", "5", "東"]
    assert cleaned.dropped == ["b", "for", "l", "x"]


# --- Light-root prefixes -----------------------------------------------------------------


@pytest.mark.parametrize(
    "word, family",
    [
        ("deploys", "deployment deploying deployed deploy deploys"),
        ("deploy", "deployment deploying deployed deploys"),
        ("kube", "Kubernetes kubectl kubes"),
        ("happy", "happiness happily happier happy"),
        ("relational", "relation relations relate relating"),
        ("studies", "study studying studied"),
        ("hoping", "hope hoped hopes hopeful"),
        ("café", "cafés Café cafeteria"),
        ("connections", "connect connected connecting connection"),
    ],
)
def test_light_root_is_a_prefix_of_the_stems_fts5_indexes_for_the_family(word, family):
    (token,) = query_tokens(word)
    stems, _ = document_terms(family)
    assert all(stem.startswith(token.prefix) for stem in stems), (token, stems)


def test_the_bare_stem_would_miss_part_of_the_family():
    # Why the root is cut back to where the stem agrees with the word: porter turns the
    # y of "deploys" into i but leaves "deployment" alone.
    (deploys,) = query_tokens("deploys")
    (deployment,) = query_tokens("deployment")
    assert (deploys.stem, deployment.stem) == ("deploi", "deploy")
    assert not deployment.stem.startswith(deploys.stem)
    assert deploys.prefix == "deplo"


def test_only_latin_words_with_roots_of_three_letters_get_a_prefix():
    prefixes = {t.raw: t.prefix for t in query_tokens("kube use ab k8s 2024 坐标 Ελληνικά Straße ærø")}
    assert prefixes == {
        "kube": "kube",
        "use": None,
        "ab": None,
        "k8s": None,
        "2024": None,
        "坐标": None,
        "ελληνικά": None,
        "straße": "straß",
        "ærø": "ærø",
    }


# --- CJK ---------------------------------------------------------------------------------


def test_cjk_bigrams_cover_every_two_character_word_of_a_run():
    assert cjk_bigrams("坐标系统") == ["坐标", "标系", "系统"]
    assert cjk_bigrams("坐标") == ["坐标"]
    assert cjk_bigrams("東") == ["東"]


def test_cjk_bigrams_keep_runs_apart_and_skip_other_scripts():
    assert cjk_bigrams("用kubernetes部署 と スカイ・ツリー 한국어!") == [
        "用",
        "部署",
        "と",
        "スカ",
        "カイ",
        "ツリ",
        "リー",
        "한국",
        "국어",
    ]
    assert cjk_bigrams("no cjk here, café 123") == []


def test_a_two_character_word_is_found_by_bigrams_where_trigrams_cannot(reference):
    reference.execute("INSERT INTO trigram(rowid, title, content) VALUES (1, '', '坐标系统的设计')")
    assert matches(reference, "trigram", fts5_quote("坐标")) == []
    assert "坐标" in cjk_bigrams("坐标系统的设计")


def test_has_cjk_finds_han_kana_and_hangul():
    assert [has_cjk(s) for s in ("坐", "ひらがな", "カタカナ", "한글", "café ½ 🚀", "")] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]


# --- Quoting for MATCH -------------------------------------------------------------------

HOSTILE = [
    '"',
    '""',
    "'",
    "*",
    "AND",
    "OR",
    "NOT",
    "NEAR(",
    "NEAR(a b, 2)",
    "col:",
    "content:",
    "title: x",
    "{title content}: x",
    "^start",
    "a OR b",
    "-x",
    "+x",
    "(",
    ")",
    'a"b',
    '"unbalanced',
    "x*",
    "\x00",
    "a\x00b",
    "\ud800",
    "",
    "   ",
    "é" * 5000,
]


@pytest.mark.parametrize("query", HOSTILE)
def test_quoted_hostile_input_never_raises_in_either_index(reference, query):
    reference.execute("INSERT INTO words(rowid, title, content) VALUES (1, 'title', 'content')")
    reference.execute("INSERT INTO trigram(rowid, title, content) VALUES (1, 'title', 'content')")
    for table in ("words", "trigram"):
        matches(reference, table, fts5_quote(query))


def test_the_hostile_inputs_would_break_an_unquoted_match(reference):
    # Guards the list above: these really are FTS5 syntax, not harmless text.
    for query in ('"', "*", "AND", "NEAR(", "col:", '"a\x00b"'):
        with pytest.raises(text.sqlite3.OperationalError):
            matches(reference, "words", query)


def test_quoted_operators_and_quotes_are_matched_as_text(reference):
    rows = ["the NEAR( operator", "cats AND dogs", "col: value", 'say "hi" now', "5 * 3", "plain words"]
    for rowid, row in enumerate(rows, start=1):
        for table in ("words", "trigram"):
            reference.execute(f"INSERT INTO {table}(rowid, title, content) VALUES (?, '', ?)", [rowid, row])
    assert matches(reference, "trigram", fts5_quote("NEAR(")) == ["the NEAR( operator"]
    assert matches(reference, "words", fts5_quote("AND")) == ["cats AND dogs"]
    assert matches(reference, "words", fts5_quote("col:")) == ["col: value"]
    assert matches(reference, "trigram", fts5_quote('"hi"')) == ['say "hi" now']
    assert matches(reference, "trigram", fts5_quote("5 * 3")) == ["5 * 3"]
    # A column filter in user text is text too: the words "content plain", which no row holds.
    assert matches(reference, "words", fts5_quote("content: plain")) == []


def test_quoting_doubles_embedded_quotes():
    assert fts5_quote('say "hi"') == '"say ""hi"""'
    assert fts5_quote("") == '""'
