"""The records services and selectors return, each field declared once with its description.

A record is a frozen pydantic model, and its fields are the response shapes of every
interface (the shapes docs/rest.md and docs/mcp.md show): REST sends ``as_json()`` and the CLI
prints ``as_dict()``, MCP tools return the record itself (FastMCP makes the tool's
outputSchema from it), and OpenAPI reads the same models (``api.schema``).

Beyond the fields, ``OmittedWhenEmpty`` keys (``memoryproject.records``: a memory's
triple, a hit's explain, recall's note and hint) are left out by REST and the CLI when
empty and sent as null by MCP, and a ``MemoryPlus`` record (a hit, a write's result)
holds a memory whose keys come first in its output.

Each module of this package holds the records of one subject; the doors import them from
here, and the modules of ``memories`` from the module that declares them.
"""

from memories.records.audit_report import AuditFinding, AuditReport
from memories.records.conflict_records import ConflictList, ConflictRecord, ConflictSide, ResolveResult
from memories.records.graph_records import GraphEntity, GraphHop, GraphNeighbourhood, GraphRelation, GraphResult
from memories.records.import_export import ExportDocument, ImportReport, ImportResult
from memories.records.learn_results import EndedFact, LearnedItem, LearnResult, SkippedSentence, UnmatchedChange
from memories.records.memory_record import ConflictWith, MemoryPlus, MemoryRecord, Page, Provenance
from memories.records.recall_results import Hit, RecallResult
from memories.records.revision_history import AttributesRecord, History, RevisionRecord
from memories.records.route_result import RouteResult
from memories.records.store_stats import NamespaceCount, Stats, StoreStats, TagCount
from memories.records.write_results import ChangeResult, CorrectionRecord, NearTwinRecord, RememberResult
from memoryproject.records import Record

__all__ = [
    "AttributesRecord",
    "AuditFinding",
    "AuditReport",
    "ChangeResult",
    "ConflictList",
    "ConflictRecord",
    "ConflictSide",
    "ConflictWith",
    "CorrectionRecord",
    "EndedFact",
    "ExportDocument",
    "GraphEntity",
    "GraphHop",
    "GraphNeighbourhood",
    "GraphRelation",
    "GraphResult",
    "Hit",
    "History",
    "ImportReport",
    "ImportResult",
    "LearnResult",
    "LearnedItem",
    "MemoryPlus",
    "MemoryRecord",
    "NamespaceCount",
    "NearTwinRecord",
    "Page",
    "Provenance",
    "RecallResult",
    "Record",
    "RememberResult",
    "ResolveResult",
    "RevisionRecord",
    "RouteResult",
    "SkippedSentence",
    "Stats",
    "StoreStats",
    "TagCount",
    "UnmatchedChange",
]
