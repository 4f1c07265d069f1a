"""The store's statistics: memories, revisions, namespaces and tags counted, and what only its operator sees."""

from typing import Any

from pydantic import ConfigDict, Field

from memoryproject.records import OmittedWhenEmpty, Record


class NamespaceCount(Record):
    memories: int
    visible: int


class TagCount(Record):
    tag: str
    namespace: str = Field(description="Tags belong to a namespace: the same word in two namespaces is two tags.")
    count: int


class Stats(Record):
    memories: int = Field(description="Memories stored, visible or not.")
    visible: int = Field(description="Memories visible now.")
    forgotten: int
    revisions: int
    with_ttl: int = Field(description="Visible memories that will expire.")
    kinds: dict[str, int] = Field(description="Visible memories per kind.")
    namespaces: dict[str, NamespaceCount]
    top_tags: list[TagCount]
    embedder: str = Field(description="The embedding model recall uses for meaning.")

    @classmethod
    def of(cls, stats: dict) -> "Stats":
        """The record of ``selectors.memory_stats()``'s counts, with the fields this class declares."""
        keys = [field.alias or name for name, field in cls.model_fields.items()]
        return cls.model_validate(
            {**{key: stats[key] for key in keys if key in stats}, "embedder": stats["search_mode"]["embedder"]}
        )


class StoreStats(Stats):
    """Statistics, and for keys that may use every namespace, what only the operator of the whole store sees."""

    # "schema" would shadow BaseModel.schema(): the attribute is schema_, the key "schema".
    model_config = ConfigDict(validate_by_name=True)

    database_bytes: OmittedWhenEmpty[int] = Field(None, description="The database's size on disk.")
    database_engine: OmittedWhenEmpty[str] = Field(
        None, description=("The engine and its version, e.g. 'sqlite 3.46.1' or 'postgresql 15.18'.")
    )
    sqlite_version: OmittedWhenEmpty[str] = Field(None, description="On SQLite, its version.")
    schema_: OmittedWhenEmpty[dict[str, str]] = Field(None, alias="schema", description="Latest migration per app.")
    search_mode: OmittedWhenEmpty[dict[str, Any]] = Field(
        None,
        description=("The embedder configured, the one the stored vectors come from, and the vectors still to make."),
    )
