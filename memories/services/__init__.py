"""The only write path. Admin, REST, MCP and commands call these; nothing else writes models."""

from memories.services.lifecycle import (
    memory_forget,
    memory_remember,
    memory_restore,
    memory_retag,
    memory_revise,
)

__all__ = [
    "memory_forget",
    "memory_remember",
    "memory_restore",
    "memory_retag",
    "memory_revise",
]
