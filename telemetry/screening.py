"""The screen captured text passes before it is stored: common prompt-injection shapes.

Text a hook captures (a transcript being compacted, a tool's output) is stored and
later injected into prompts; text written to steer a model would be replayed to it
as memory. Each pattern below is matched against the text as a lenient reader sees it
(``telemetry.reading``), so case, entity encoding and invisible characters do not hide
it. The list is deliberately narrow: ``tests/test_hooks_screening.py`` holds, next to
the attacks each pattern must catch, ordinary engineering notes (a flaky test to
ignore, "you are now in the repo", "System: Ubuntu 22.04") that must pass.
"""

import re
from dataclasses import dataclass

from telemetry.reading import read


@dataclass(frozen=True)
class Pattern:
    name: str
    description: str
    regex: re.Pattern


def _pattern(name: str, description: str, regex: str) -> Pattern:
    return Pattern(name=name, description=description, regex=re.compile(regex, re.MULTILINE))


_EARLIER = r"(?:previous|prior|above|earlier|preceding|former|original|initial|system|developer)"
_ORDERS = r"(?:instructions?|prompts?|directions?|directives?|rules|guidelines|guidance|commands?|messages?|context)"

PATTERNS: tuple[Pattern, ...] = (
    _pattern(
        "ignore_instructions",
        "tells the reader to ignore or override its earlier instructions",
        rf"\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|every|each|of|the|your|my|"
        rf"these|those|its)\s+)*{_EARLIER}\s+(?:\w+\s+)?{_ORDERS}\b",
    ),
    _pattern(
        "disregard_above",
        "tells the reader to disregard what came before",
        r"\b(?:ignore|disregard|forget)\s+(?:(?:all|everything|anything)\s+)?(?:of\s+)?(?:what\s+(?:was|is)\s+"
        r"(?:said|written)\s+)?(?:the\s+)?(?:above|before\s+this|prior\s+to\s+this)\b",
    ),
    _pattern(
        "role_reassignment",
        "tells the reader it is now someone else",
        r"\byou\s+are\s+(?:now|no\s+longer)\s+(?:(?:a|an|the|my|in)\s+)?(?:(?:\w+[\s-]+){0,3}(?:assistant|ai|bot|"
        r"model|persona|character|agent)\b|(?:developer|god|dan|jailbreak|unrestricted)\s+mode\b|dan\b|jailbroken|"
        r"unrestricted|unfiltered|uncensored|free\s+from|bound\s+by|restricted\s+by|an?\s+ai)"
        r"|\bfrom\s+now\s+on,?\s+you\s+(?:are|will|must|shall|should)\s+(?:act|behave|respond|answer|obey|"
        r"ignore|pretend|only)\b",
    ),
    _pattern(
        "new_instructions",
        "announces new or hidden instructions",
        r"\b(?:new|updated|revised|real|actual|true|hidden|secret|override)\s+(?:system\s+)?"
        r"(?:instructions?|directives?|system\s+prompt)\s*:"
        r"|\b(?:reveal|print|show|repeat|output|leak)\s+(?:\w+\s+)?(?:your|the)\s+(?:system\s+prompt|hidden\s+"
        r"instructions|initial\s+instructions)\b",
    ),
    _pattern(
        "role_marker",
        "carries a fake system, user or assistant turn marker",
        r"<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id)\s*\|>"
        r"|\[/?inst\]|<</?sys>>"
        r"|<\s*/?\s*(?:system|assistant|user|human|developer|system[_-]reminder|system[_-]message|"
        r"instructions?)\s*>"
        r"|^\s*(?:#+\s*)?(?:system|developer)\s+(?:prompt|message|instructions?)\s*:"
        r"|^\s*(?:system|assistant|developer)\s*:\s*(?:you\s|ignore\b|disregard\b|from\s+now\s+on\b|new\s+"
        r"instructions\b)"
        r"|^\s*(?:human|assistant)\s*:\s*\S",
    ),
    _pattern(
        "memory_context_tag",
        "carries the memory wrapper's own tag",
        r"[<‹〈⟨«˂ᐸ❮⧼]\s*/?\s*memory[\s_\-.:]*context|memory[_\-.:]context",
    ),
    _pattern(
        "conceal_from_user",
        "asks the reader to hide something from the user",
        r"\b(?:without|before)\s+(?:telling|informing|alerting|notifying)\s+the\s+user\b"
        r"|\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|alert|notify|mention\s+(?:this|it)\s+to|reveal\s+(?:this|"
        r"it)\s+to)\s+the\s+user\s+(?:about\s+)?(?:this\s+instruction|these\s+instructions|that\s+you|what\s+you"
        r"|you\s+(?:are|were|did|have))",
    ),
)


def suspected_injection(text: str) -> Pattern | None:
    """Return the first pattern ``text`` matches, or None."""
    seen = read(text)
    flat = "\n".join(" ".join(line.split()) for line in seen.split("\n"))
    for pattern in PATTERNS:
        if pattern.regex.search(flat):
            return pattern
    return None
