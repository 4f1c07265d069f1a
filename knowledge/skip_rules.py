"""The skip rules: why a clause teaches nothing lasting (a question, a hypothetical, a negation, the past, small talk).

Each is (reason, pattern); ``knowledge.extraction`` tries them in the order its docstring gives,
and the reason is what the learn answer says of the sentence it skipped.
"""

import re

# (reason, pattern), tried in this order; see ``knowledge.extraction``'s docstring for when each applies.
QUESTION = (
    "question",
    re.compile(
        r"\?\s*$|^(?:who|whom|whose|what|when|where|why|which|how|should|shall|could|would|can|do|does|did|is|are|"
        r"will|won't|isn't|aren't|doesn't|don't|am|was|were|has|have|anyone|anybody)\b(?!\s*:)",
        re.I,
    ),
)
HYPOTHETICAL = (
    "hypothetical: a possibility, plan, wish or guess, not something that holds",
    re.compile(
        r"\b(?:if|unless|might|may|could|would(?!\s+rather)|should|shall|will|maybe|perhaps|possibly|probably|suppose|"
        r"supposing|"
        r"assuming|whether|hopefully|wish|wishes|consider|considering|let's|let us|ought|eventually|someday|"
        r"think|believe|guess|seems?|apparently|must|soon|tomorrow|later|once|"
        r"next\s+(?:week|month|quarter|year|sprint|release|time)|"
        r"(?:plan|plans|planning|want|wants|wanted|going|intend|intends|hope|hopes|need|needs|have|has|try|trying|"
        r"would like|'d like) to|\w+'ll|\w+'d(?!\s+rather))\b",
        re.I,
    ),
)
NEGATION = (
    "negation: says what does not hold",
    re.compile(r"\b(?:not|no|never|none|nor|neither|cannot|nobody|nothing)\b|n't\b", re.I),
)
PAST = (
    "past: says what held before, not what holds",
    re.compile(r"\b(?:used to|formerly|previously|in the past|back then|at the time|anymore|any more)\b", re.I),
)
PLEASANTRY = (
    "pleasantry: nothing to learn",
    re.compile(
        r"^(?:thanks|thank you|thx|ty|cheers|great|good|nice|cool|awesome|perfect|ok|okay|sure|yes|yep|yeah|no problem|"
        r"got it|sounds good|lgtm|hello|hi|hey|good morning|good night|bye|see you|welcome|you're welcome|will do|"
        r"done|noted|understood|agreed|right|indeed|exactly|haha|lol|wow|oops|sorry|congrats|congratulations)\b",
        re.I,
    ),
)
FUTURE = "hypothetical: the time it states ({when}) is still to come"
