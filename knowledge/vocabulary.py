"""The tables learning reads text by: canonical predicates and the verbs that say them, roles, changes.

Every rule of ``knowledge.extraction`` that is a list of cases lives here as data, so a reader
can scan what the rules know and a test can walk each entry; the words that tell a name from
the words around it are ``knowledge.name_words``', and the labels that say who speaks
``knowledge.speaker_labels``'. docs/learning.md shows each table with examples.
"""

from dataclasses import dataclass

# Predicates ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Predicate:
    """A canonical predicate and the verbs that say it, each in its base form with the words that follow it.

    ``reverse``: the sentence names the object first ("The payments team owns billing" is
    (billing, owned by, payments team)). ``objects``: the object must end with one of these
    words for the verbs to mean this predicate ("Mei runs the data team": leads; "the job
    runs nightly": nothing); ``subjects``: the same of the subject ("Alerts go to PagerDuty").
    ``passive``: the verbs are participles said after "is" or "are".
    """

    name: str
    verbs: tuple[str, ...]
    reverse: bool = False
    objects: tuple[str, ...] = ()
    passive: bool = False
    subjects: tuple[str, ...] = ()


# Words data ends with: "Alerts go to PagerDuty", "the export pushes events to S3".
DATA_WORDS = (
    "alerts",
    "logs",
    "metrics",
    "events",
    "backups",
    "traces",
    "emails",
    "notifications",
    "messages",
    "reports",
    "data",
    "errors",
    "pages",
    "exceptions",
    "webhooks",
    "records",
    "files",
    "updates",
    "results",
    "payloads",
    "snapshots",
    "dumps",
    "artifacts",
    "builds",
    "invoices",
    "orders",
    "metadata",
    "documents",
    "objects",
    "blobs",
    "images",
    "assets",
    "secrets",
    "configs",
    "sessions",
)
# Words a group of people ends with: "the SRE team", "the infrastructure group".
GROUP_WORDS = (
    "team",
    "teams",
    "group",
    "squad",
    "crew",
    "department",
    "org",
    "organisation",
    "organization",
    "guild",
    "chapter",
    "division",
    "unit",
    "office",
    "lab",
    "committee",
    "project",
    "program",
    "programme",
    "initiative",
    "effort",
    "workstream",
    "tribe",
)

PREDICATES = (
    Predicate(
        "uses",
        (
            "use",
            "utilize",
            "utilise",
            "build on",
            "standardize on",
            "standardise on",
            "run with",
            "code in",
            "program in",
            "develop in",
            "cache in",
            "store in",
            "keep in",
            "persist to",
            "save to",
            "save in",
        ),
    ),
    Predicate(
        "uses",
        (
            "built with",
            "built on",
            "built using",
            "built in",
            "written in",
            "implemented in",
            "powered by",
            "backed by",
            "based on",
            "sent through",
            "sent via",
            "delivered through",
            "delivered via",
            "routed through",
            "routed via",
        ),
        passive=True,
    ),
    Predicate("runs on", ("run on", "run in", "live on", "deploy to", "deploy on")),
    Predicate(
        "runs on",
        ("deployed on", "deployed to", "deployed in", "scheduled on", "installed on", "handled by", "processed by"),
        passive=True,
    ),
    Predicate(
        "hosted on",
        (
            "hosted on",
            "hosted at",
            "hosted in",
            "hosted by",
            "served from",
            "served by",
            "served at",
            "reachable at",
            "available at",
            "accessible at",
        ),
        passive=True,
    ),
    Predicate(
        "stored in",
        (
            "stored in",
            "stored on",
            "kept in",
            "kept on",
            "saved in",
            "saved to",
            "backed up to",
            "backed up in",
            "archived in",
            "archived to",
            "persisted in",
            "persisted to",
        ),
        passive=True,
    ),
    Predicate("depends on", ("depend on", "rely on", "require", "need")),
    Predicate("calls", ("call", "talk to", "connect to", "query", "invoke", "send requests to", "integrate with")),
    Predicate(
        "writes to",
        (
            "write to",
            "write into",
            "publish to",
            "push to",
            "log to",
            "send to",
            "emit to",
            "stream to",
            "export to",
            "forward to",
            "upload to",
            "sync to",
            "ship to",
        ),
    ),
    Predicate("writes to", ("go to", "land in", "end up in"), subjects=DATA_WORDS),
    Predicate(
        "writes to", ("sent to", "shipped to", "exported to", "forwarded to", "streamed to", "synced to"), passive=True
    ),
    Predicate(
        "reads from",
        ("read from", "consume", "consume from", "subscribe to", "pull from", "fetch from", "ingest from", "poll"),
    ),
    Predicate("owned by", ("owned by", "maintained by", "managed by", "looked after by", "supported by"), passive=True),
    Predicate("owned by", ("own", "maintain", "look after", "take care of", "be responsible for"), reverse=True),
    Predicate("owned by", ("belong to",)),
    Predicate("leads", ("lead", "head", "head up", "be in charge of", "chair", "direct", "coordinate")),
    Predicate("leads", ("run",), objects=GROUP_WORDS),
    Predicate("leads", ("led by", "headed by", "run by", "chaired by", "directed by"), reverse=True, passive=True),
    Predicate("manages", ("manage", "supervise", "oversee")),
    Predicate("reports to", ("report to", "work under", "answer to")),
    Predicate("works on", ("work on", "contribute to", "started working on", "began working on")),
    Predicate(
        "member of",
        ("work in", "be in", "be on", "sit in", "sit on", "sit with", "belong to", "join", "joined"),
        objects=GROUP_WORDS,
    ),
    Predicate("works at", ("work at", "work for", "join", "joined")),
    Predicate("works at", ("employed by", "employed at"), passive=True),
    Predicate("member of", ("member of", "part of"), passive=True),
    Predicate("located in", ("sit in", "sit at", "be in", "be at", "work from", "work out of")),
    Predicate(
        "located in",
        ("located in", "located at", "based in", "based at", "based out of", "headquartered in", "situated in"),
        passive=True,
    ),
    Predicate("lives in", ("live in", "reside in")),
    Predicate(
        "prefers",
        (
            "prefer",
            "favour",
            "favor",
            "prefer using",
            "prefer to use",
            "would rather use",
            "would rather",
            "'d rather use",
            "'d rather",
        ),
    ),
    Predicate(
        "likes", ("like", "love", "enjoy", "adore", "be a fan of", "be a big fan of", "be a huge fan of", "be into")
    ),
    Predicate(
        "dislikes",
        (
            "dislike",
            "hate",
            "detest",
            "loathe",
            "can't stand",
            "cannot stand",
            "be not a fan of",
            "be not a big fan of",
            "be no fan of",
            "don't like",
            "doesn't like",
            "do not like",
            "does not like",
        ),
    ),
    Predicate("speaks", ("speak",)),
)

# Canonical predicates that hold one value per subject: conflicts count them (``knowledge.contradictions``), and "now"
# before one of them ends the value it replaces ("The API now runs on ECS" ends "The API runs on Lambda").
SINGLE_VALUED = ("runs on", "hosted on", "stored in", "located in", "lives in", "reports to", "owned by")
# Predicates that say nearly the same, so that a change said with one ends a fact said with another: "Imani is no
# longer responsible for the contracts" ends "Imani manages the contracts".
FAMILIES = (
    ("owned by", "leads", "manages"),
    ("works on", "member of", "works at"),
    ("runs on", "hosted on", "stored in", "located in"),
    ("uses", "depends on", "calls"),
)
# Where something is: "Kai moved to Amsterdam" and "The API moved to ECS" give these facts their new value.
PLACES = ("runs on", "hosted on", "stored in", "located in", "lives in")
# Predicates whose object holds one subject at a time: "Kenji now leads Orion" ends "Nadia leads Orion".
ONE_HOLDER = ("leads", "is")

# Past forms that say a state holds now: "Noah joined the infra team" (he is a member), "started working on".
EVENTS = ("joined", "started working on", "began working on")
# Irregular verbs: base -> (third person, past, past participle, -ing form).
IRREGULAR = {
    "be": ("is", "was", "been", "being"),
    "have": ("has", "had", "had", "having"),
    "do": ("does", "did", "done", "doing"),
    "run": ("runs", "ran", "run", "running"),
    "lead": ("leads", "led", "led", "leading"),
    "write": ("writes", "wrote", "written", "writing"),
    "sit": ("sits", "sat", "sat", "sitting"),
    "build": ("builds", "built", "built", "building"),
    "take": ("takes", "took", "taken", "taking"),
    "leave": ("leaves", "left", "left", "leaving"),
    "oversee": ("oversees", "oversaw", "overseen", "overseeing"),
    "stand": ("stands", "stood", "stood", "standing"),
    "send": ("sends", "sent", "sent", "sending"),
    "speak": ("speaks", "spoke", "spoken", "speaking"),
    "read": ("reads", "read", "read", "reading"),
    "set": ("sets", "set", "set", "setting"),
    "put": ("puts", "put", "put", "putting"),
    "get": ("gets", "got", "got", "getting"),
    "go": ("goes", "went", "gone", "going"),
    "stop": ("stops", "stopped", "stopped", "stopping"),
    "drop": ("drops", "dropped", "dropped", "dropping"),
    "plan": ("plans", "planned", "planned", "planning"),
    "ship": ("ships", "shipped", "shipped", "shipping"),
    "chair": ("chairs", "chaired", "chaired", "chairing"),
    "quit": ("quits", "quit", "quit", "quitting"),
    "swap": ("swaps", "swapped", "swapped", "swapping"),
    "log": ("logs", "logged", "logged", "logging"),
}

# Roles -----------------------------------------------------------------------------------------------------------

# A role named in "X is the <role> of Y", "Y's <role> is X", "X is a <role> on Y": the predicate it gives and
# whether the holder X is the subject. The last words of a role decide ("tech lead", "engineering manager").
ROLES = {
    "lead": ("leads", True),
    "leader": ("leads", True),
    "head": ("leads", True),
    "chair": ("leads", True),
    "director": ("leads", True),
    "captain": ("leads", True),
    "owner": ("owned by", False),
    "maintainer": ("owned by", False),
    "manager": ("manages", True),
    "boss": ("manages", True),
    "supervisor": ("manages", True),
    "ceo": ("leads", True),
    "cto": ("leads", True),
    "cfo": ("leads", True),
    "vp": ("leads", True),
    "em": ("manages", True),
    "pm": ("owned by", False),
    "dri": ("owned by", False),
    "contact": ("owned by", False),
    "report": ("reports to", True),
    "direct report": ("reports to", True),
    "member": ("member of", True),
}
# "My preferred editor is Neovim", "Her favourite tool is jq": a preference, not an attribute.
PREFERENCE_WORDS = ("preferred", "favorite", "favourite")

# Changes ---------------------------------------------------------------------------------------------------------

# Verbs that say a subject went from one value to another: "The ledger switched from Oracle to Postgres".
# When no current fact names the old value, the new one is stored with this predicate (None: the verb as said).
CHANGE_VERBS = {
    "moved": None,
    "switched": "uses",
    "migrated": "uses",
    "changed": None,
    "transitioned": "uses",
    "upgraded": "uses",
    "converted": "uses",
    "ported": "uses",
    "relocated": None,
    "transferred": None,
}
# Verbs that end whatever links their subject and object: "Pieter left the billing service".
LEAVING_VERBS = (
    "stepped down as",
    "resigned as",
    "left",
    "quit",
    "has left",
    "have left",
    "stepped down from",
    "stepped away from",
    "moved off",
    "rolled off",
    "is off",
    "got off",
    "resigned from",
)
# Verbs that hand a thing from its holder to another: "Hugo handed the team over to Esther".
HANDING_VERBS = ("handed", "passed", "transferred", "gave", "has handed", "has passed", "has transferred")
# Verbs that end every current fact naming their object: "We dropped Redis", "host-7 was decommissioned".
DROPPING_VERBS = (
    "dropped",
    "stopped using",
    "stopped relying on",
    "removed",
    "retired",
    "decommissioned",
    "deprecated",
    "got rid of",
    "phased out",
    "sunsetted",
    "turned off",
    "shut down",
    "ditched",
    "abandoned",
    "no longer use",
    "no longer uses",
)
