"""A claim said in plain words before the fact rules read it: contractions said in full, adverbs and the data
between a verb and its particle left out, roles and doings said in several words brought to one.
"""

import re

from knowledge import name_words, vocabulary

# Contractions after a pronoun, said in full so the verb table reads them: "I'm based in Lyon".
_CONTRACTIONS = (
    (re.compile(r"\b(I)['’]m\b", re.I), r"\1 am"),
    (re.compile(r"\b(we|you|they)['’]re\b", re.I), r"\1 are"),
    (re.compile(r"\b(he|she|it|that|who)['’]s\b", re.I), r"\1 is"),
    (re.compile(r"\b(I|we|you|they)['’]ve\b", re.I), r"\1 have"),
)
# Adverbs anywhere in a claim: "Elena works remotely from Porto" reads as "Elena works from Porto".
_ADVERBS = re.compile(
    rf"(?<![\w-])(?:{'|'.join(re.escape(word) for word in name_words.ADVERBS + ('now',))})"
    rf"(?![\w-])\s*"
)


# Data between a verb and its particle: "pushes events to S3" says what "pushes to S3" says.
_CARRIED = re.compile(
    r"\b((?:push|send|write|ship|stream|export|forward|upload|sync|emit|publish|pull|fetch|read|"
    r"ingest|load|copy|post|dump|cache|store|save|persist|keep)(?:e?s|d|ed|ing)|sent|wrote|written|"
    r"kept)\s+(?:(?:the|its|all|our|their|some)\s+)?"
    r"(?:(?:push|audit|access|error|usage|app|raw|daily|nightly|system)\s+)?"
    rf"(?:{'|'.join(vocabulary.DATA_WORDS)})\s+(to|from|into|in|on)\b",
    re.I,
)


# What someone likes doing with a thing is a liking of the thing: "Leilani likes working with TypeScript".
_DOING = re.compile(
    r"\b((?:like|love|enjoy|prefer|hate|dislike)s?)\s+(?:working|coding|programming|writing|building|"
    r"developing)\s+(?:with|in|on)\s+|\b((?:like|love|enjoy|prefer|hate|dislike)s?)\s+using\s+",
    re.I,
)
# The job between "work" and where: "I work as a data engineer at Brightwave" says "I work at Brightwave".
_WORK_AS = re.compile(r"\b(work(?:s|ed|ing)?)\s+as\s+(?:a|an|the|our)\s+[\w -]{1,40}?\s+(at|for|on|in)\b", re.I)
# Coding said as a doing: "I do all my coding in VS Code" says "I code in VS Code".
_CODING_IN = re.compile(
    r"\bdo(?:es)?\s+(?:all|most)?\s*(?:of\s+)?(?:my|our|his|her|their)\s+(?:coding|programming|"
    r"development|dev\s+work)\s+in\s+",
    re.I,
)
# Roles said in several words that mean the one to ask: "Felix is the point of contact for the vendor API".
_CONTACT = re.compile(r"\b(?:point\s+of\s+contact|go-to\s+(?:person|contact))\b", re.I)
# A participle after a comma says a fact of the subject: "Siobhan is fully remote, based out of Galway".
_PARTICIPLE = re.compile(
    r"^(?P<subject>[^,]+?)\s+(?:is|are)\s+[^,]{1,40},\s+(?P<participle>(?:based|located|hosted|"
    r"deployed|owned|maintained|written|built|led|run)\s+.+)$",
    re.I,
)
# An adverb that opens the claim, capital and all: "Honestly, I'm not a fan of YAML".
_OPENING_ADVERB = re.compile(rf"^(?:{'|'.join(re.escape(word) for word in name_words.ADVERBS)}),?\s+", re.I)


def plain(claim: str) -> str:
    """The claim with contractions said in full, adverbs and data between a verb and its particle left out: what
    the fact rules read."""
    for pattern, full in _CONTRACTIONS:
        claim = pattern.sub(full, claim)
    claim = _CARRIED.sub(r"\1 \2", claim)
    claim = _DOING.sub(lambda match: f"{match[1] or match[2]} ", claim)
    claim = _WORK_AS.sub(r"\1 \2", claim)
    claim = _CODING_IN.sub("code in ", claim)
    claim = _CONTACT.sub("contact", claim)
    claim = _PARTICIPLE.sub(r"\g<subject> is \g<participle>", claim)
    claim = _OPENING_ADVERB.sub("", claim)
    return _ADVERBS.sub("", claim).strip()
