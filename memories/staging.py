"""Which import batch the current thread writes: its own unpublished rows count as visible to it, and only to it.

An import writes in short transactions, so other writers get the lock between them;
its rows carry the batch's id and stay invisible to everyone else until the batch is
published (``memories.services.batches``). Inside the import the rows it has written
must count, as in one transaction a writer sees its own writes: the duplicate checks
and key lookups of later items depend on them. The models' managers and the
visibility rule read this.
"""

import contextvars
from contextlib import contextmanager

_writing: contextvars.ContextVar[int | None] = contextvars.ContextVar("import_batch", default=None)


def own_batch_id() -> int | None:
    """The id of the import batch this thread is writing, or None."""
    return _writing.get()


@contextmanager
def writing(batch_id: int):
    """Run the block as the writer of batch ``batch_id``: rows it writes carry the id, and it sees them."""
    token = _writing.set(batch_id)
    try:
        yield
    finally:
        _writing.reset(token)
