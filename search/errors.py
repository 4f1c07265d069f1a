"""What search raises. It knows nothing of the domain's errors: memories turns these into them."""


class SearchError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Unavailable(SearchError):
    """Semantic search cannot run here: the embedding model cannot load, or the stored vectors are another model's."""


class SpaceConflict(SearchError):
    """The database holds vectors of an embedder other than the configured one."""
