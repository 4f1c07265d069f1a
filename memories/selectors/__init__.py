"""Reads that carry rules: visibility, the shape of prefetches, ordering, pagination, and the aggregates pages show.

One module per kind of read; the doors call them through this package's names:

- ``memory_records``: memory records built from revision rows (tags and attributes as of a time, confidence);
- ``recall``: the engine's hits for a query as memory records, within namespaces, states and confidence;
- ``listing``: one memory, its history, pages of memories, the visible duplicates a write checks for;
- ``stats``: the store's totals and the aggregates the dashboard shows;
- ``graph``: the knowledge graph of a namespace as of a time;
- ``conflicts``, ``routing``, ``audit``: the review list of conflicts, query routing, the store's audit;
- ``unfinished_imports``: import batches still writing, and whether their writer is gone.

The last four are imported by module, not through this package's names.
"""

from memories.selectors.graph import GRAPH_LIMIT_DEFAULT, GRAPH_LIMIT_MAX, memory_graph
from memories.selectors.listing import (
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    LIST_STATES,
    attribute_history,
    latest_content_revision,
    memories_reading,
    memory_get,
    memory_history,
    memory_list,
    visible_duplicate,
    visible_duplicates,
    visible_revision,
    visible_same_triple,
    visible_same_triples,
)
from memories.selectors.memory_records import GONE, memory_labels, records_for_revisions, records_with_confidence
from memories.selectors.recall import (
    RECALL_LIMIT_DEFAULT,
    RECALL_MATCH_DEFAULT,
    RECALL_MODE_DEFAULT,
    held_memories,
    memory_recall,
)
from memories.selectors.stats import (
    EXPIRING_DAYS,
    EXPIRING_SHOWN,
    memories_with_revision_totals,
    memory_activity_per_day,
    memory_stats,
    namespace_kind_totals,
    revisions_expiring_soon,
    schema_version,
    search_mode,
    store_counts,
)

__all__ = [
    "EXPIRING_DAYS",
    "EXPIRING_SHOWN",
    "GONE",
    "GRAPH_LIMIT_DEFAULT",
    "GRAPH_LIMIT_MAX",
    "LIST_LIMIT_DEFAULT",
    "LIST_LIMIT_MAX",
    "LIST_STATES",
    "RECALL_LIMIT_DEFAULT",
    "RECALL_MATCH_DEFAULT",
    "RECALL_MODE_DEFAULT",
    "attribute_history",
    "held_memories",
    "latest_content_revision",
    "memories_reading",
    "memories_with_revision_totals",
    "memory_activity_per_day",
    "memory_get",
    "memory_graph",
    "memory_history",
    "memory_labels",
    "memory_list",
    "memory_recall",
    "memory_stats",
    "namespace_kind_totals",
    "records_for_revisions",
    "records_with_confidence",
    "revisions_expiring_soon",
    "schema_version",
    "search_mode",
    "store_counts",
    "visible_duplicate",
    "visible_duplicates",
    "visible_revision",
    "visible_same_triple",
    "visible_same_triples",
]
