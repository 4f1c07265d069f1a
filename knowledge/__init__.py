"""The knowledge layer: facts (revisions with a triple) read as entities, edges and conflicts.

Everything here is derived from the append-only store and answers as of (as_of, valid_at);
nothing here is a second source of truth. It sits beside search, on the store: it may read
search's visibility snapshot, and memories' services and selectors call it, never the reverse.
"""
