"""audit --fix: repair what the audit found that is safe to repair, then audit again.

Safe means derived from the history and rebuilt from it: the full-text index and missing
postings, the fact rows, and each memory's state (the history says whether it is
forgotten). Nothing here appends to or deletes from the history itself; what needs that
(purge, erasure, a re-embedding) is left to its own command, which the finding names.
"""

from django.db import transaction

from knowledge import facts
from memories.models import State
from memories.records.audit_report import AuditReport
from memories.selectors.audit import memories_against_history, run_audit
from memories.services.revisions import audit, check_interface
from memoryproject import dialect
from search.indexing import repair_indexes


def _repair_states() -> dict:
    with transaction.atomic():
        wrong = list(memories_against_history())
        for memory in wrong:
            memory.state = State.FORGOTTEN if memory.newest_is_tombstone else State.ACTIVE
            memory.save(update_fields=["state"])
    return {"states_set": len(wrong)}


_REPAIRS = {
    "indexes": repair_indexes,
    "graph": lambda: {"fact_rows": facts.rebuild_facts()},
    "states": _repair_states,
}


def audit_fix(*, actor: str, interface: str) -> tuple[AuditReport, dict]:
    """Repair every fixable finding, then return the audit after it and what was done."""
    check_interface(interface)
    done = {}
    for finding in run_audit().findings:
        if finding.fixable:
            done.update(_REPAIRS[finding.check]())
    if done:
        audit(actor=actor, interface=interface, action="audit_fix", memory_id=None, at=dialect.now(), **done)
    return run_audit(), done
