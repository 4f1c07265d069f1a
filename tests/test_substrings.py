"""The proof that a word occurs in no text, which lets recall skip its trigram search (search.substrings)."""

import string

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pysqlite3 import dbapi2 as sqlite3

from memories import services
from memories.selectors import memory_recall
from search import snapshot, substrings
from tests.helpers import Committed


@pytest.fixture
def committed(monkeypatch):
    monkeypatch.setattr(substrings, "connection", Committed())


def trigram_table(texts: list[tuple[str, str]]):
    """An in-memory FTS5 trigram table of (title, content) rows, tokenised as the store's is."""
    database = sqlite3.connect(":memory:")
    database.execute("CREATE VIRTUAL TABLE t USING fts5(title, content, tokenize='trigram')")
    database.executemany("INSERT INTO t(title, content) VALUES (?, ?)", texts)
    return database


def matches(database, word: str) -> bool:
    quoted = '"' + word.replace('"', '""') + '"'
    return database.execute("SELECT count(*) FROM t WHERE t MATCH ?", [quoted]).fetchone()[0] > 0


def test_the_fold_is_the_trigram_tokenizers_wherever_it_gives_ascii():
    # Every code point (but NUL and surrogates) in a row of its own, then each ASCII character
    # asked for: the rows it finds are the code points the tokenizer folds to that character.
    database = sqlite3.connect(":memory:")
    database.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
    database.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)",
                         ((code, chr(code) + "qz") for code in range(1, 0x110000) if not 0xD800 <= code < 0xE000))
    folds_to = {}
    for character in (chr(code) for code in range(1, 128) if not "A" <= chr(code) <= "Z"):
        quoted = '"' + (character + "qz").replace('"', '""') + '"'
        for (code,) in database.execute("SELECT rowid FROM t WHERE t MATCH ?", [quoted]):
            folds_to[code] = character
    expected = {code: chr(code) for code in range(1, 128)}
    expected.update({code: chr(folded) for code, folded in substrings._FOLD.items()})
    assert folds_to == expected


tricky = string.ascii_letters + string.digits + " -_.\"'" + "\u212a\u017fé\u00dfİ坐标ÅΣ"


@hypothesis_settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.tuples(st.text(tricky, max_size=12), st.text(tricky, max_size=40)), min_size=1, max_size=6),
       others=st.lists(st.text(string.ascii_letters + string.digits + "\"'", min_size=5, max_size=10), max_size=8),
       cuts=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 50), st.integers(5, 12)), max_size=8))
def test_no_word_a_text_holds_is_ever_proven_absent(texts, others, cuts):
    database = trigram_table(texts)
    table = substrings._built([substrings.folded([part for row in texts for part in row])], 0)
    # Words cut from the texts (as typed: any case), and words made up.
    words = [texts[row % len(texts)][1][start:start + size] for row, start, size in cuts] + others
    for word in words:
        if word.isascii() and len(word) >= 3 and matches(database, word):
            assert table.holds(word.lower().encode()), word


def test_a_word_made_up_is_proven_absent_and_one_inside_a_word_is_not():
    texts = [("Deploy notes", "The Kubernetes deployment failed on Friday; ACME's dark-mode rollout waits."),
             ("", "Kelvin: 300\u212a and the long \u017fong")]
    table = substrings._built([substrings.folded([part for row in texts for part in row])], 0)
    database = trigram_table(texts)
    # Inside words, across punctuation, and through the two characters that fold into ASCII.
    for word in ("ubernet", "ploymen", "rollout", "k-mode", "acme's", "300k and", "e long song"):
        assert matches(database, word) and table.holds(word.encode()), word
    for word in ("qwxyzzy", "kubernetez", "deploymentx", "flurbinax"):
        assert not matches(database, word) and not table.holds(word.encode()), word


def remember(content, number):
    services.memory_remember(namespace="acme", content=content, key=f"m{number}", actor="tester", interface="cli")


def test_a_recall_skips_the_substring_search_of_a_word_no_text_holds(db, committed):
    for number, content in enumerate(["The Kubernetes deployment failed on Friday",
                                      "Quarterly budget review with finance", "Dark mode ships next sprint"]):
        remember(content, number)
    with CaptureQueriesContext(connection) as queries:
        result = memory_recall(query="friday qwxyzzyplonk", namespace="acme", mode="keyword")
    assert [hit.memory.key for hit in result.hits] == ["m0"]
    assert not [query for query in queries.captured_queries if "search_fts_trigram" in query["sql"]]
    # A word found only inside another word still goes to the trigram index, and is found there.
    with CaptureQueriesContext(connection) as queries:
        result = memory_recall(query="ubernete", namespace="acme", mode="keyword")
    assert [hit.memory.key for hit in result.hits] == ["m0"]
    assert [query for query in queries.captured_queries if "search_fts_trigram" in query["sql"]]


def test_answers_are_the_same_with_the_proof_and_without_it(db, monkeypatch):
    texts = ["Kubernetes deployment failed on Friday after the rollout", "Quarterly budget review with finance",
             "Dark-mode ships next sprint, says ACME's design lead", "Postgres vacuum tuning for the ledger",
             "The on-call rotation moves to Mondays"]
    for number, content in enumerate(texts):
        remember(content, number)
    queries = ["friday flurbinax", "ubernetes rollout", "zzyzx qwerty", "ledger acuum", "sprint esign plonkers",
               "ondays rotation"]

    def answers():
        found = []
        for query in queries:
            for mode in ("keyword", "hybrid"):
                result = memory_recall(query=query, namespace="acme", mode=mode, limit=10, explain=True)
                found.append([(hit.memory.key, hit.score, hit.matched_terms, hit.explain) for hit in result.hits])
        return found

    without = answers()  # the test's transaction: the table is never built, every word is searched
    monkeypatch.setattr(substrings, "connection", Committed())
    proven = []
    real = substrings.absent
    monkeypatch.setattr(substrings, "absent", lambda view, words: proven.append(real(view, words)) or proven[-1])
    assert answers() == without
    assert any(proven)  # the proof was used


def test_the_table_grows_with_writes_and_is_built_again_larger_when_its_text_doubles(db, committed, monkeypatch):
    keeper = substrings._Filter()
    remember("First note about the Kubernetes deployment", 0)
    view = snapshot.current()
    table = keeper.table_for(view)
    assert table.covered == view.max_id and table.bits == substrings.MIN_BITS
    assert not table.holds(b"zebrafish")
    remember("Second note: a zebrafish tank in the lab", 1)
    view = snapshot.current()
    assert keeper.table_for(view) is table and table.covered == view.max_id  # grown in place, bit by bit
    assert table.holds(b"zebrafish")
    # Much new text at once goes through the unpacked table; enough of it builds a larger one.
    monkeypatch.setattr(substrings, "_SCATTER_MAX_BYTES", 1)
    remember("Third note: the narwhal migration", 2)
    view = snapshot.current()
    assert keeper.table_for(view) is table and table.holds(b"narwhal") and table.holds(b"zebrafish")
    for number in range(3, 100):
        remember(f"Note {number}: " + " ".join(f"word{number}x{index}" for index in range(120)), number)
    view = snapshot.current()
    bigger = keeper.table_for(view)
    assert bigger is not table and bigger.bits > table.bits and bigger.covered == view.max_id
    assert bigger.holds(b"narwhal") and bigger.holds(b"word99x119") and not bigger.holds(b"word999x1")


def test_inside_a_transaction_the_table_is_neither_built_nor_grown(db):
    # The test's own transaction: its rows may roll back, and their ids be taken by other rows.
    keeper = substrings._Filter()
    remember("A note about the Kubernetes deployment", 0)
    assert keeper.table_for(snapshot.current()) is None and keeper.table is None
    assert substrings.absent(snapshot.current(), ["qwxyzzyplonk"]) == set()


def test_a_copy_loaded_from_scratch_starts_without_the_table(db):
    remember("A note about the Kubernetes deployment", 0)
    first = snapshot._extend(snapshot._EMPTY, after=0)
    remember("Another note", 1)
    later = snapshot._extend(first, after=first.max_id)
    assert later.max_id > first.max_id and later.carried is first.carried
    again = snapshot._extend(snapshot._EMPTY, after=0)
    assert again.carried is not first.carried and again.carried == {}
