"""The only write path. Admin, REST, MCP and commands call these; nothing else writes models."""

from memories.services.audit import audit_fix
from memories.services.batches import purge_dead_imports
from memories.services.curation import memory_move
from memories.services.erasure import database_release_free_pages, database_vacuum, memory_erase, purge_expired
from memories.services.export import memories_export
from memories.services.hooks import hook_ingest, hook_recall, hook_report, hook_used
from memories.services.imports import memories_import
from memories.services.learn import memory_learn
from memories.services.lifecycle import (
    memory_archive,
    memory_end,
    memory_forget,
    memory_promote,
    memory_restore,
    memory_retag,
    memory_revise,
    memory_unarchive,
    memory_update,
)
from memories.services.markdown import markdown_import
from memories.services.remember import memories_remember_new, memory_remember
from memories.services.resolution import conflict_memory_ids, conflict_resolve

__all__ = [
    "audit_fix",
    "conflict_memory_ids",
    "conflict_resolve",
    "markdown_import",
    "memories_export",
    "memories_import",
    "database_release_free_pages",
    "database_vacuum",
    "purge_dead_imports",
    "hook_ingest",
    "hook_recall",
    "hook_report",
    "hook_used",
    "memory_erase",
    "purge_expired",
    "memories_remember_new",
    "memory_archive",
    "memory_end",
    "memory_forget",
    "memory_learn",
    "memory_move",
    "memory_promote",
    "memory_remember",
    "memory_restore",
    "memory_retag",
    "memory_revise",
    "memory_unarchive",
    "memory_update",
]
