"""The text side of search: FTS5-exact tokenisation, query cleanup, CJK bigrams and MATCH quoting.

The engine scores with its own BM25 over postings keyed by the stems that FTS5 stores, so
every token here comes from FTS5 itself: text goes into a scratch in-memory FTS5 table with
the index's tokenizer and is read back through ``fts5vocab``. A Python re-implementation
would disagree with the index on hyphens, apostrophes, accents and scripts.

Pure functions: no Django and no project database; each thread keeps one private
in-memory SQLite connection for its scratch tables.
"""

import os
import re
import sqlite3
import threading
import unicodedata
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache

import numpy as np

if not hasattr(sqlite3.Connection, "enable_load_extension"):
    # The same rule as memoryproject.sqlite_backend, so the scratch tables tokenize with
    # the very SQLite library (and Unicode tables) that built the project's indexes.
    from pysqlite3 import dbapi2 as sqlite3

# Scratch tables: contentless (only the index is read back) and never holding anything
# between calls, because every use is a transaction that is rolled back. Both tokenizers
# share the unicode61 options, so their token offsets line up word for word.
_SCRATCH_SCHEMA = (
    # The tokenizer of search_fts_words (search migration 0001); the tests compare with it.
    "CREATE VIRTUAL TABLE stems USING fts5(body, content='', tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE VIRTUAL TABLE stems_instances USING fts5vocab(stems, instance)",
    # The same without porter: the folded word as the user typed it.
    "CREATE VIRTUAL TABLE raw USING fts5(body, content='', tokenize='unicode61 remove_diacritics 2')",
    "CREATE VIRTUAL TABLE raw_instances USING fts5vocab(raw, instance)",
)

# Documents per scratch transaction in documents_terms: bounds the memory a huge import
# takes; batches of 1,000 already run at full speed.
_BATCH_SIZE = 1000

# Light roots shorter than this match too much of the vocabulary to be worth it.
MIN_PREFIX_LENGTH = 3

_local = threading.local()


@contextmanager
def _scratch():
    """Yield this thread's scratch connection inside a transaction that is always rolled back."""
    connection = getattr(_local, "connection", None)
    if connection is None:
        # Autocommit mode, so BEGIN and ROLLBACK below are the only transaction control.
        connection = sqlite3.connect(":memory:", isolation_level=None)
        for statement in _SCRATCH_SCHEMA:
            connection.execute(statement)
        _local.connection = connection
    connection.execute("BEGIN")
    try:
        yield connection
    finally:
        # Rolling back empties the scratch tables: cheaper than a delete, and nothing leaks
        # from one call into the next.
        connection.execute("ROLLBACK")


def has_fts5() -> bool:
    """Whether the SQLite library this process tokenizes with has FTS5 (without it no text can be indexed)."""
    try:
        with _scratch():
            return True
    except sqlite3.Error:
        return False


# --- Documents ---------------------------------------------------------------------------


def document_terms(text: str) -> tuple[dict[str, int], int]:
    """Return the stems FTS5 indexes for ``text`` with their frequencies, and its token count."""
    return documents_terms([text])[0]


def documents_terms(texts: list[str]) -> list[tuple[dict[str, int], int]]:
    """Return ``document_terms`` for each text, in order, tokenizing each batch in one scratch insert."""
    results = []
    for start in range(0, len(texts), _BATCH_SIZE):
        batch = texts[start : start + _BATCH_SIZE]
        with _scratch() as connection:
            connection.executemany("INSERT INTO stems(rowid, body) VALUES (?, ?)", enumerate(batch))
            # One row per document instead of one per token: fetching Python rows is what
            # costs, not SQLite. unicode61 splits on spaces, so no term contains one.
            rows = connection.execute(
                "SELECT doc, group_concat(term, ' ') FROM stems_instances GROUP BY doc"
            ).fetchall()
        # A text without tokens has no instance rows, hence the default.
        terms = [({}, 0) for _ in batch]
        for doc, joined in rows:
            tokens = joined.split(" ")
            terms[doc] = (dict(Counter(tokens)), len(tokens))
        results += terms
    return results


# --- Queries -----------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryToken:
    raw: str  # folded as unicode61 remove_diacritics 2 outputs it: the form to quote into MATCH
    stem: str  # as porter unicode61 outputs it: the key of the postings; never put it into MATCH
    prefix: str | None  # light root matched against the index's stems as a prefix, or None
    # The word as typed, when NFKC changed it ("ｃａｆé" read as "cafe"): stored text is indexed as written.
    typed: "QueryToken | None" = None


@dataclass(frozen=True)
class CleanQuery:
    terms: list[QueryToken]  # one per distinct stem, in first-seen order
    dropped: list[str]  # raw forms of the filler words left out, in first-seen order
    only_filler: bool  # every word was filler, so all were kept


_SURROGATE = re.compile("[\ud800-\udfff]")


def _bindable(text: str) -> str:
    """Return ``text`` safe to bind as a query: no NUL, no lone surrogate."""
    # SQLite stops reading an FTS5 query at a NUL, leaving a quote open ("unterminated
    # string"); unicode61 separates words on NUL anyway, so a space tokenizes the same.
    # A lone surrogate (valid JSON: "\ud800") cannot be encoded as UTF-8 at all.
    return _SURROGATE.sub("\ufffd", text.replace("\x00", " "))


def normal_form(text: str) -> str:
    """``text`` as a query reads it: Unicode NFKC, so full-width and other compatibility forms ("ｃａｆé",
    "ＡＰＩ", "①") read as the letters and digits they stand for."""
    return unicodedata.normalize("NFKC", text)


def query_tokens(text: str) -> list[QueryToken]:
    """Return the words of ``text`` in order (repeats included) with their folded form, stem and light root.

    The words are those of ``text``'s normal form (``normal_form``). A word the normal form
    changed keeps the form typed as ``typed``, which text stored as written is indexed under;
    when the normal form splits or joins words, the typed forms cannot be paired and are left out.
    """
    text = _bindable(text)
    normal = normal_form(text)
    tokens = _tokens(normal)
    if normal == text:
        return tokens
    typed = _tokens(text)
    if len(typed) != len(tokens):
        return tokens
    return [
        token if as_typed.stem == token.stem else replace(token, typed=as_typed)
        for token, as_typed in zip(tokens, typed)
    ]


def _tokens(text: str) -> list[QueryToken]:
    """The words of ``text`` as FTS5 reads them, in order, each with its folded form, stem and light root."""
    with _scratch() as connection:
        connection.execute("INSERT INTO raw(rowid, body) VALUES (1, ?)", [text])
        connection.execute("INSERT INTO stems(rowid, body) VALUES (1, ?)", [text])
        # fts5vocab lists instances by term; the offset (token position) restores word order
        # and pairs each folded word with its stem, porter being a wrapper that drops none.
        raw = dict(connection.execute("SELECT offset, term FROM raw_instances"))
        stems = dict(connection.execute("SELECT offset, term FROM stems_instances"))
    return [QueryToken(raw=raw[at], stem=stems[at], prefix=light_root(raw[at], stems[at])) for at in sorted(raw)]


def light_root(raw: str, stem: str) -> str | None:
    """Return the prefix that finds the word's family among index stems, or None for no prefix matching.

    The root is the porter stem, cut back to where it stops agreeing with the folded word.
    Porter does not only cut endings, it rewrites them, and differently across a family:
    "deploys" and "deployed" stem to "deploi" (y becomes i) but "deployment" to "deploy", so
    the bare stem "deploi" would miss "deployment"; their common part "deplo" finds all
    three. Where porter only cuts ("kube", "kubernetes" -> "kubernet"), the root is the stem.

    Only words of Latin letters get one: porter knows English endings only, and digits
    ("2024", "k8s") or other scripts would turn into loose substring matches.
    """
    if not _is_latin_word(raw):
        return None
    root = stem if raw.startswith(stem) else os.path.commonprefix([raw, stem])
    return root if len(root) >= MIN_PREFIX_LENGTH else None


def _is_latin_word(word: str) -> bool:
    if word.isascii():  # the common case, without a Unicode name lookup per letter
        return word.isalpha()
    return all(char.isalpha() and unicodedata.name(char, "").startswith("LATIN ") for char in word)


def clean_query(text: str) -> CleanQuery:
    """Return the query's terms without filler words (unless it is all filler), one per stem."""
    tokens = query_tokens(text)
    is_filler = [_is_filler(token) for token in tokens]
    only_filler = bool(tokens) and all(is_filler)
    if only_filler:
        kept, dropped = tokens, []
    else:
        kept = [token for token, skip in zip(tokens, is_filler) if not skip]
        dropped = list(dict.fromkeys(token.raw for token, skip in zip(tokens, is_filler) if skip))
    # A repeated word would count twice in BM25; the first occurrence of each stem wins.
    terms = {}
    for token in kept:
        terms.setdefault(token.stem, token)
    return CleanQuery(terms=list(terms.values()), dropped=dropped, only_filler=only_filler)


def content_stems(text: str) -> set[str]:
    """The stems of ``text``'s words that are not filler, even when all of them are (unlike ``clean_query``)."""
    return {token.stem for token in query_tokens(text) if not _is_filler(token)}


def _is_filler(token: QueryToken) -> bool:
    # A lone Latin letter is what possessives and elisions leave behind ("ACME's",
    # "don't", "l'équipe") or a one-letter article or conjunction ("a", "e", "y"); as a
    # search term it matches nearly everything. Digits and CJK characters stay.
    return token.raw in _filler_words() or (len(token.raw) == 1 and _is_latin_word(token.raw))


# --- Filler words ------------------------------------------------------------------------
# Function words, question words and chat filler, written as people type them and folded
# through the raw scratch tokenizer on first use, so they compare exactly with query words.
# Words that are filler in one language but common English content words are left out:
# "car" (fr), "son" (es/fr), "sea" (es), "bin" (de), "num" (pt). German "die", "war", "man",
# "hat", "mit" and "über" (folded "uber") stay in: they are in most German questions and
# rarely carry an English query.

_FILLER = {
    "en": """
        a about above after again against all almost also am among an and another any anybody anyone
        anything are around as at be because been before being below between both but by can cannot
        could did do does doing down during each either else ever every everything few for from further
        had has have having he her here hers herself him himself his how however i if in into is it its
        itself just least less let lets many may maybe me might mine more most much must my myself
        neither no nor not now of off often on once only onto or other others ought our ours ourselves
        out over own perhaps quite rather really same shall she should since so some somebody someone
        something sometimes still such than that the their theirs them themselves then there therefore
        these they this those though through thus to too toward towards under until up upon us very was
        we were what whatever when whenever where wherever whether which while who whoever whom whose
        why will with within without would yet you your yours yourself yourselves
        ll re ve don doesn didn isn aren wasn weren haven hasn hadn shouldn wouldn couldn mustn needn
        please pls plz kindly hey hi hello thanks thank okay ok yes
        tell told say said know knew remember recall remind think mention mentioned
    """,
    "es": """
        a al algo alguien algún alguna algunas alguno algunos ante antes aquel aquella aquellas aquellos
        aquí así aún bajo cada casi como cómo con contra cual cuál cuales cuáles cualquier cuando cuándo
        cuanto cuánto cuánta cuántas cuántos de del desde donde dónde durante e el él ella ellas ellos en
        entre era eran eres es esa esas ese eso esos esta está estaba estaban estado estamos están estar
        estas este esto estos estoy fue fueron ha había habían hace han has hasta hay he hemos hizo la las
        le les lo los más mas me mi mí mis mucho muchos muy nada ni no nos nosotras nosotros nuestra
        nuestras nuestro nuestros o os otra otras otro otros para pero poco por porque puede pueden qué
        que quien quién quienes quiénes se ser si sí sido siempre sin sobre somos soy su sus también tan
        tanto te tener tengo tenía ti tiene tienen tu tú tus un una unas uno unos usted ustedes vosotras
        vosotros vuestra vuestro y ya yo
        favor dime dígame sabes sabe recuerdas recuerda recuerdo acuerdas acerca decir dijo hola gracias
    """,
    "fr": """
        à a afin ai ainsi alors as au aucun aucune auprès aussi autre autres aux avaient avais avait avant
        avec avez avions avoir avons ayant ce ceci cela celle celles celui ces cet cette ceux chaque chez
        ci comme comment d dans de depuis des donc dont du elle elles en encore entre es est et étaient
        étais était étant été êtes être eu eux fait faire fais il ils j je jusqu l la le les leur leurs
        lors lorsque lui m ma mais me même mes moi moins mon n ne ni non nos notre nous on ont ou où par
        parce pas pendant peu peut plus pour pourquoi qu quand que quel quelle quelles quels qui quoi s
        sa sans se sera seront ses si soit sommes sont sous suis sur t ta te tes toi ton tous tout toute
        toutes très tu un une vers vos votre vous y
        dis dites dit sais savez souviens souvenez rappelle rappelles rappelez plaît svp merci bonjour
        salut chose combien
    """,
    "de": """
        aber alle allem allen aller alles als also am an andere anderem anderen anderer anderes auch auf
        aus bei bis bist da damit dann das dass daß dein deine dem den denn der des dich die dies diese
        diesem diesen dieser dieses dir doch dort du durch ein eine einem einen einer eines einmal er es
        etwas euch euer eure für gegen gewesen gibt hab habe haben hast hat hatte hatten hier ich ihm ihn
        ihnen ihr ihre ihrem ihren ihrer ihres im in ins ist ja jede jedem jeden jeder jedes jene jetzt
        kann kannst können könnte mal man mein meine meinem meinen meiner mich mir mit muss müssen nach
        nicht nichts noch nun nur ob oder ohne schon sehr sein seine seinem seinen seiner seit sich sie
        sind so soll sollte sondern über um und uns unser unsere unter viel vom von vor war wann waren
        warst warum was weil welche welchem welchen welcher welches wem wen wenn wer werde werden wessen
        wie wieder wieso weshalb will wir wird wirst wo woher wohin wurde wurden würde zu zum zur zwischen
        bitte sag sage sagen sagte weißt weisst wisst erinnerst erinnere erinnern hallo danke
    """,
    "pt": """
        a à ao aos aquela aquelas aquele aqueles aquilo as às até com como da das de dela delas dele
        deles depois do dos e é ela elas ele eles em entre era eram essa essas esse esses esta está estão
        estas estava estavam este estes estou eu foi foram há havia isso isto já lhe lhes mais mas me
        mesmo meu meus minha minhas muito muitos na não nas nem no nos nós nossa nossas nosso nossos numa
        o onde os ou para pela pelas pelo pelos por porque porquê qual quais quando quanto quanta quantas
        quantos que quê quem se sem ser seu seus sido sobre sou sua suas também te tem têm tinha tu tua
        tuas teu teus um uma umas uns você vocês
        diga diz sabe sabes lembra lembras lembro lembrar obrigado obrigada olá
    """,
}


@cache
def _filler_words() -> frozenset[str]:
    return frozenset(token.raw for words in _FILLER.values() for token in query_tokens(words))


# --- CJK ---------------------------------------------------------------------------------
# unicode61 keeps a run of Han, kana or Hangul as one token, and the trigram tokenizer
# cannot match fewer than 3 characters, so a 2-character word inside a longer run (坐标 in
# 坐标系统) is found only through character bigrams.

_CJK_RUN = re.compile(
    "["
    "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff"  # Hangul jamo and syllables
    "\u3041-\u309f"  # Hiragana
    "\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f"  # Katakana, without the ・ word separator
    "\u3005\u3007\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U000323af"  # Han
    "]+"
)


def has_cjk(text: str) -> bool:
    """Return whether ``text`` holds any Han, kana or Hangul character."""
    return _CJK_RUN.search(text) is not None


def cjk_bigrams(text: str) -> list[str]:
    """Return the overlapping character bigrams of each CJK run, in order with repeats; a 1-character run is itself."""
    bigrams = []
    for run in _CJK_RUN.findall(text):
        bigrams += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    return bigrams


def script_share(ntok, nbigram) -> np.ndarray:
    """The share of a text written outside CJK scripts, from its FTS5 token count and CJK bigram count
    (numbers, or arrays of them).

    A CJK run is one token and holds about one character per bigram, so a text of ``ntok``
    tokens and ``nbigram`` bigrams has some ``ntok - 1`` other words beside ``nbigram + 1``
    CJK characters; a text without bigrams is read as wholly outside CJK.
    """
    ntok, nbigram = np.asarray(ntok), np.asarray(nbigram)
    return np.where(nbigram == 0, 1.0, np.maximum(ntok - 1, 0) / np.maximum(ntok + nbigram, 1))


def english_share(text: str) -> float:
    """How much of ``text`` an English-only model reads: its script share times the English share of its
    filler words (words filler in English only, against those filler only in another language; 1 without any)."""
    tokens = query_tokens(text)
    share = float(script_share(len(tokens), len(cjk_bigrams(text))))
    english, other = _filler_by_language()
    words = [token.raw for token in tokens if len(token.raw) > 1]  # a lone letter is any language's elision
    english_words = sum(word in english for word in words)
    other_words = sum(word in other for word in words)
    if english_words + other_words:
        share *= english_words / (english_words + other_words)
    return share


@cache
def _filler_by_language() -> tuple[frozenset[str], frozenset[str]]:
    """The filler words of English only, and those of the other languages only."""

    def folded(words):
        return frozenset(token.raw for token in query_tokens(words))

    english = folded(_FILLER["en"])
    other = frozenset().union(*(folded(words) for language, words in _FILLER.items() if language != "en"))
    return english - other, other - english


# --- MATCH -------------------------------------------------------------------------------


def fts5_quote(text: str) -> str:
    """Return ``text`` as one FTS5 string, so operators, columns and quotes in it are searched as text.

    The only way user text may reach MATCH. Quote a folded word (QueryToken.raw) rather than
    a stem: porter is not idempotent, so a quoted stem can be stemmed into another term.
    """
    return '"' + _bindable(text).replace('"', '""') + '"'
