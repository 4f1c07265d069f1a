"""Skills: a goal ("To deploy the API:", "How to rotate keys:", "Runbook: failover") followed by two or more
numbered or bulleted steps, on its lines or inline; or one sentence, "To <goal>, <step>, then <step>".
"""

import re

from knowledge.findings import SKILL, Item

_GOAL_LEAD = (
    r"(?:(?:here['’]?s|here\s+is|this\s+is)\s+how\s+(?:to|we)|(?:(?:a\s+)?quick\s+)?how-to\s+(?:for|to)|"
    r"how\s+to|how\s+we|steps\s+to|steps\s+for|to)"
)
SKILL_HEADING = re.compile(
    rf"(?:^[ \t]*|(?<=[.!?] ))(?P<lead>{_GOAL_LEAD})\s+(?P<goal>[^:\n.]{{2,150}}?)\s*:[ \t]*"
    r"(?P<inline>[^\n]*)$",
    re.I | re.M,
)
# "Deploy checklist:", "Release process:", "Runbook for failover:"
SKILL_TITLED = re.compile(
    r"(?:^[ \t]*|(?<=[.!?] ))(?:(?P<goal>[A-Za-z][^:\n.]{1,60}?)\s+(?P<lead>checklist|runbook|"
    r"procedure|process|playbook|steps)|(?P<lead2>checklist|runbook|procedure|playbook)\s+"
    r"(?:for|to)\s+(?P<goal2>[^:\n.]{2,60}?))\s*:[ \t]*(?P<inline>[^\n]*)$",
    re.I | re.M,
)
# "Runbook: rotating the API keys", then the steps on the lines after it.
SKILL_LABELLED = re.compile(
    r"^[ \t]*(?P<lead>runbook|checklist|procedure|playbook|how-to|steps)\s*[:—–-]\s*"
    r"(?P<goal>[^\n:]{2,80}?)[ \t]*:?(?P<inline>)[ \t]*$",
    re.I | re.M,
)
SKILL_STEP = re.compile(r"^[ \t]*(?:\d{1,2}[.)]|[-*•]|step\s+\d{1,2}\s*[:.)-])\s+(?P<step>\S[^\n]*)$", re.I)
_INLINE_STEP = re.compile(r"(?:^|\s)(?:\d{1,2}[.)]|step\s+\d{1,2}\s*[:.)-])\s+", re.I)
# "To restart the worker, drain it, then restart it": a goal and steps joined by "then".
SKILL_THEN = re.compile(r"^(?P<lead>to|how to)\s+(?P<goal>[^,]{2,80}),\s+(?:first\s+)?(?P<steps>.+?\bthen\b.+)$", re.I)
_THEN = re.compile(r"\s*(?:,\s*and\s+then|,\s*then|;\s*then|\s+and\s+then|\s+then|,\s*finally|\s+finally)\s+", re.I)
SKILL_STEPS_MIN = 2


def _skill(lead: str, goal: str, steps: list[str], start: int, end: int) -> Item:
    lead = "How to" if lead.casefold().startswith(("how", "here", "this", "quick", "a quick")) else "To"
    goal = re.sub(r"^(?:here['’]?s|here\s+is|this\s+is)\s+how\s+(?:to|we)\s+", "", goal, flags=re.I)
    goal = " ".join(goal.split())
    body = "\n".join(f"{number}. {step}" for number, step in enumerate(steps, 1))
    if goal.split()[0].casefold().endswith("ing"):  # "how-to for onboarding a new engineer": the goal is a doing
        title = goal[0].upper() + goal[1:]
        return Item(kind=SKILL, content=f"{title}:\n{body}", start=start, end=end, title=title, steps=tuple(steps))
    return Item(
        kind=SKILL, content=f"{lead} {goal}:\n{body}", start=start, end=end, title=f"How to {goal}", steps=tuple(steps)
    )


def _headings(text: str) -> list[tuple[re.Match, str, str]]:
    """(match, lead, goal) of each line or sentence that names a goal before a colon, in the text's order."""
    found = [(heading, heading["lead"], heading["goal"]) for heading in SKILL_HEADING.finditer(text)]
    titled = [(heading, heading["goal"] or heading["goal2"]) for heading in SKILL_TITLED.finditer(text)]
    titled += [(heading, heading["goal"]) for heading in SKILL_LABELLED.finditer(text)]
    for heading, goal in titled:
        if not any(other.start() <= heading.start() < other.end() for other, _, _ in found):
            found.append((heading, "how to", goal[0].lower() + goal[1:]))
    return sorted(found, key=lambda entry: entry[0].start())


def _inline_steps(inline: str) -> list[str] | None:
    """The steps said after a goal on its line: numbered ("1. Build. 2. Push.") or joined by "then"."""
    parts = _INLINE_STEP.split(inline)
    if len(parts) > 1:
        return None if parts[0].strip() else [" ".join(part.split()) for part in parts[1:] if part.strip()]
    # Joined by "then", the steps before it may be joined by commas: "create the account, add them, then ...".
    pieces = _THEN.split(re.sub(r"^\s*first\s+", "", inline, flags=re.I))
    if len(pieces) > 1:
        pieces = [step for piece in pieces for step in re.split(r",\s+(?:and\s+)?", piece)]
    steps = [" ".join(step.split()).rstrip(" .") for step in pieces if step.strip()]
    return [step[0].upper() + step[1:] + "." for step in steps] if len(steps) > 1 else None


def skills_in(text: str) -> list[Item]:
    """The skills of a text: each goal before a colon with two or more steps after it, inline or on its lines."""
    items = []
    for heading, lead, goal in _headings(text):
        if lead.casefold() == "how we" and not goal.strip():
            continue
        if heading["inline"].strip():
            steps = _inline_steps(heading["inline"])
            if steps is None or len(steps) < SKILL_STEPS_MIN:
                continue
            end = heading.end()
        else:
            steps, end = [], heading.end()
            for line in re.finditer(r"\n([^\n]*)", text[heading.end() :]):
                step = SKILL_STEP.match(line[1])
                if not step:
                    if not line[1].strip() and not steps:
                        continue  # a blank line between the goal and its first step
                    break
                steps.append(" ".join(step["step"].split()))
                end = heading.end() + line.end()
            if len(steps) < SKILL_STEPS_MIN:
                continue
        # The heading starts at its first word, after any indent or masked speaker prefix.
        start = heading.start() + len(heading.group()) - len(heading.group().lstrip())
        items.append(_skill(lead, goal, steps, start, end))
    return items


def one_sentence_skill(claim: str, start: int, end: int) -> Item | None:
    """The skill of "To restart the worker, drain it, then restart it", or None when the claim says none."""
    match = SKILL_THEN.match(claim)
    if not match:
        return None
    steps = [" ".join(step.split()).rstrip(" .") for step in _THEN.split(match["steps"]) if step.strip()]
    if len(steps) < SKILL_STEPS_MIN:
        return None
    return _skill(match["lead"], match["goal"], [step[0].upper() + step[1:] + "." for step in steps], start, end)
