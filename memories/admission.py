"""Admission: a new memory that is only a pleasantry or an acknowledgement is refused.

"thanks", "ok, got it" and "sounds good" carry nothing an agent could use later, yet a
model told to remember things stores them, and each one then competes in every recall.
A write is refused when its text, once case-folded and stripped of punctuation and emoji,
is nothing but phrases of the table below (with a few trailing softeners such as "very
much" or "again"), or has no letter or digit at all. Anything else passes: "Thanks to
the cache, p99 fell" and "OK is the default status" are facts. The caller may store
refused text anyway with ``force``; imports store what their file holds without asking.
The rules are documented in docs/concepts.md#admission.
"""

import re
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    name: str
    says: str  # what the text is, for the refusal message
    phrases: tuple[str, ...]


RULES = (
    Rule(
        "acknowledgement",
        "an acknowledgement",
        (
            "ok",
            "okay",
            "k",
            "kk",
            "got it",
            "gotcha",
            "sounds good",
            "sounds great",
            "sure",
            "yes",
            "yeah",
            "yep",
            "yup",
            "no",
            "nope",
            "alright",
            "all right",
            "fine",
            "noted",
            "understood",
            "will do",
            "done",
            "agreed",
            "makes sense",
            "that works",
            "works for me",
            "cool",
            "great",
            "nice",
            "perfect",
            "awesome",
            "good",
            "right",
            "correct",
            "exactly",
            "indeed",
            "lgtm",
            "i see",
            "roger",
            "roger that",
            "of course",
            "wow",
            "hmm",
            "好的",
            "收到",
            "了解",
            "明白",
            "はい",
            "わかりました",
            "了解です",
            "d'accord",
            "vale",
            "genau",
        ),
    ),
    Rule(
        "thanks",
        "a thank-you",
        (
            "thanks",
            "thank you",
            "thx",
            "ty",
            "tysm",
            "cheers",
            "much appreciated",
            "appreciate it",
            "appreciated",
            "you're welcome",
            "youre welcome",
            "np",
            "no problem",
            "no worries",
            "merci",
            "danke",
            "gracias",
            "谢谢",
            "ありがとう",
            "ありがとうございます",
        ),
    ),
    Rule(
        "greeting",
        "a greeting",
        (
            "hi",
            "hello",
            "hey",
            "good morning",
            "good afternoon",
            "good evening",
            "good night",
            "bye",
            "goodbye",
            "see you",
            "see you later",
            "ttyl",
            "hola",
            "bonjour",
            "你好",
            "こんにちは",
        ),
    ),
)
NO_WORDS = Rule("no-words", "only punctuation or symbols", ())
# Words that soften a phrase ("thanks so much", "ok then", "hi there") and never stand alone.
SOFTENERS = (
    "very much",
    "so much",
    "a lot",
    "again",
    "for that",
    "for the help",
    "for your help",
    "then",
    "there",
    "all",
    "everyone",
    "guys",
    "now",
    "and",
    "so",
    "oh",
    "ah",
    "well",
    "really",
    "too",
    "it",
    "that",
)
# Longer text is not a pleasantry, whatever words it uses.
MAX_WORDS = 12

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_PHRASES = sorted(
    ((tuple(phrase.split()), rule) for rule in RULES for phrase in rule.phrases), key=lambda pair: -len(pair[0])
)
_SOFTENERS = sorted((tuple(phrase.split()) for phrase in SOFTENERS), key=len, reverse=True)


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    return _WORD.findall(folded)


def refusal(text: str) -> Rule | None:
    """The rule that refuses ``text`` as a new memory, or None when it is admitted."""
    words = _words(text)
    if not words:
        return NO_WORDS
    if len(words) > MAX_WORDS:
        return None
    matched, at = None, 0
    while at < len(words):
        for phrase, rule in _PHRASES:
            if tuple(words[at : at + len(phrase)]) == phrase:
                matched, at = matched or rule, at + len(phrase)
                break
        else:
            softener = next((phrase for phrase in _SOFTENERS if tuple(words[at : at + len(phrase)]) == phrase), None)
            if softener is None:
                return None
            at += len(softener)
    return matched


def message(rule: Rule, text: str) -> str:
    """The refusal, naming the rule and what to do."""
    shown = text if len(text) <= 60 else text[:57] + "..."
    return (
        f"content: {shown!r} is {rule.says}, not something to remember (admission rule {rule.name!r}). "
        "Write the fact itself, or pass force=true to store it anyway."
    )
