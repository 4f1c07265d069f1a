from dataclasses import dataclass

from django.db import transaction

from memories import selectors, services
from memories.management.cli import ProjectCommand
from memoryproject.timeparse import parse_instant

NAMESPACE = "demo"
ACTOR = "cli:load_demo"


@dataclass(frozen=True)
class DemoMemory:
    """One memory of the demo and its story: learned on ``known_at``, then maybe revised, corrected, forgotten."""

    key: str
    kind: str
    content: str
    tags: tuple[str, ...]
    known_at: str | None = None  # the fictional date the company learned it; None means now
    title: str = ""
    source: str = ""
    valid_from: str | None = None
    triple: tuple[str, str, str] | None = None
    ttl_days: int | None = None
    revised_to: str | None = None
    correction: tuple[str, str, str] | None = None  # (valid_from, valid_to, content)
    forget_reason: str | None = None


DEMO = (
    DemoMemory(
        "company-overview",
        "fact",
        "Northwind Robotics builds autonomous warehouse robots: the NR-7 picker and the NR-9 pallet mover. "
        "It is headquartered in Tacoma, Washington.",
        ("company",),
        known_at="2025-01-06",
        title="What Northwind Robotics does",
    ),
    DemoMemory(
        "ceo",
        "fact",
        "Dana Okafor is the CEO of Northwind Robotics.",
        ("people",),
        known_at="2025-01-06",
        triple=("Northwind Robotics", "has CEO", "Dana Okafor"),
    ),
    DemoMemory(
        "dana-communication",
        "preference",
        "Dana prefers status updates in writing, and no recurring meetings before 10:00 Pacific.",
        ("people", "communication"),
        known_at="2025-01-13",
    ),
    DemoMemory(
        "firmware-pull-requests",
        "preference",
        "The firmware team prefers small pull requests (under 400 changed lines) with a hardware-in-the-loop "
        "test run attached.",
        ("engineering", "firmware"),
        known_at="2025-02-03",
    ),
    DemoMemory(
        "docs-style",
        "preference",
        "Customer-facing documentation uses US English and gives metric units first, imperial in parentheses.",
        ("docs",),
        known_at="2025-02-10",
    ),
    DemoMemory(
        "adr-012-fleet-messaging",
        "decision",
        "ADR-012: robots talk to the fleet server over MQTT 5 with TLS; ROS 2 stays inside each robot.",
        ("architecture", "fleet"),
        known_at="2025-02-24",
        title="ADR-012 fleet messaging",
        source="https://git.example/northwind/adr/012-fleet-messaging.md",
    ),
    DemoMemory(
        "battery-supplier",
        "decision",
        "Battery packs for the NR-7 and NR-9 come from Voltaic Cells Ltd.",
        ("supply-chain", "hardware"),
        known_at="2025-03-10",
        revised_to="Battery packs for the NR-7 and NR-9 come from Helio Power. Voltaic Cells Ltd. is no longer "
        "approved after its cell recall.",
    ),
    DemoMemory(
        "nr9-launch",
        "event",
        "The NR-9 pallet mover launched at ProMat in Chicago on 2025-03-17; 40 pre-orders were signed that week.",
        ("launch", "nr-9"),
        known_at="2025-03-21",
        valid_from="2025-03-17",
    ),
    DemoMemory(
        "demo-lab-address",
        "fact",
        "The customer demo lab is at 14 Mill Road, Tacoma.",
        ("facilities",),
        known_at="2025-01-20",
        correction=(
            "2025-06-01",
            "2025-07-01",
            "During June 2025 the customer demo lab was at the Harbor Street warehouse while Mill Road was renovated.",
        ),
    ),
    DemoMemory(
        "support-hours",
        "fact",
        "Customer support is staffed 06:00-18:00 Pacific on weekdays; critical fleet outages page the on-call "
        "engineer at any hour.",
        ("support",),
        known_at="2025-04-07",
    ),
    DemoMemory(
        "largest-customer",
        "fact",
        "Pinecrest Grocers runs 60 NR-7 pickers across 3 distribution centres and is the largest customer.",
        ("customers",),
        known_at="2025-05-12",
    ),
    DemoMemory(
        "reset-stuck-nr7",
        "skill",
        "To reset a stuck NR-7 picker: hold the E-stop for 5 seconds, power-cycle the base, then run "
        "`nwctl calibrate --arm` before returning it to the fleet.",
        ("runbook", "nr-7"),
        known_at="2025-05-26",
        title="Reset a stuck NR-7",
    ),
    DemoMemory(
        "fleet-api-spec",
        "artifact",
        "The fleet API specification (OpenAPI, version 3) is docs/fleet-api/openapi.yaml in the fleet repository.",
        ("architecture", "api"),
        known_at="2025-06-16",
        source="https://git.example/northwind/fleet",
    ),
    DemoMemory(
        "vpn-gateway",
        "note",
        "Engineers reach the lab network through the vpn1.northwind.example gateway.",
        ("it",),
        known_at="2025-01-08",
        forget_reason="vpn1 was decommissioned; access now goes through the zero-trust proxy.",
    ),
    DemoMemory(
        "staging-freeze",
        "note",
        "The staging fleet server is frozen for the v4.2 release; ask in #release before deploying to it.",
        ("release",),
        ttl_days=14,
    ),
)


class Command(ProjectCommand):
    help = "Load the fictional Northwind Robotics sample into the 'demo' namespace (safe to re-run)."

    def handle(self, *args, **options):
        added = 0
        # One transaction (BEGIN IMMEDIATE): two loaders started at once cannot both
        # find a key missing, and a failed load leaves nothing half-told.
        with transaction.atomic():
            present = _keys(NAMESPACE)
            for item in DEMO:
                # A demo memory already there is left alone: re-running its story would
                # add revisions (a TTL restarts, a forgotten memory comes back) and would
                # undo whatever a person has since changed in it.
                if item.key not in present:
                    _load(item)
                    added += 1
        self.stdout.write(
            f"Demo namespace '{NAMESPACE}': {added} memories added, {len(DEMO) - added} already there. "
            f"Try: manage.py memory list --namespace {NAMESPACE}"
        )


def _keys(namespace: str) -> set[str]:
    keys, cursor = set(), None
    while True:
        page = selectors.memory_list(namespace=namespace, state="all", limit=selectors.LIST_LIMIT_MAX, cursor=cursor)
        keys.update(memory.key for memory in page.items)
        if page.next_cursor is None:
            return keys
        cursor = page.next_cursor


def _load(item: DemoMemory) -> None:
    subject, predicate, object_ = item.triple or (None, None, None)
    memory = services.memory_remember(
        namespace=NAMESPACE,
        key=item.key,
        kind=item.kind,
        content=item.content,
        title=item.title,
        tags=list(item.tags),
        source=item.source,
        ttl_days=item.ttl_days,
        valid_from=item.valid_from,
        subject=subject,
        predicate=predicate,
        object=object_,
        actor=ACTOR,
        interface="cli",
        force=True,
        known_at=parse_instant(item.known_at, field="known_at") if item.known_at else None,
    ).memory
    if item.revised_to:
        services.memory_revise(memory_id=memory.id, content=item.revised_to, actor=ACTOR, interface="cli")
    if item.correction:
        valid_from, valid_to, content = item.correction
        services.memory_revise(
            memory_id=memory.id, content=content, valid_from=valid_from, valid_to=valid_to, actor=ACTOR, interface="cli"
        )
    if item.forget_reason:
        services.memory_forget(memory_id=memory.id, reason=item.forget_reason, actor=ACTOR, interface="cli")
