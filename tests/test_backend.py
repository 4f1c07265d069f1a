import pytest
from django.db import connection

from memoryproject.sqlite_backend.base import DatabaseWrapper
from memoryproject.sqlite_backend.capabilities import probe

pytestmark = pytest.mark.sqlite_only("the SQLite backend's pragmas, memory map and extension")


def test_every_connection_loads_sqlite_vec_and_sets_the_pragmas(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT vec_version()")
        assert cursor.fetchone()[0].startswith("v")
        cursor.execute("PRAGMA foreign_keys")
        assert cursor.fetchone()[0] == 1
        cursor.execute("PRAGMA secure_delete")
        assert cursor.fetchone()[0] == 1
        cursor.execute("PRAGMA busy_timeout")
        assert cursor.fetchone()[0] >= 1000


@pytest.mark.parametrize("megabytes", [0, 64, None])
def test_a_file_is_read_through_a_memory_map_as_large_as_the_setting(db, tmp_path, settings, megabytes):
    if megabytes is not None:
        settings.MEMORY_DB_MMAP_MB = megabytes
    # A file of its own: the test database lives in memory, where there is nothing to map.
    wrapper = DatabaseWrapper({**connection.settings_dict, "NAME": str(tmp_path / "mapped.db")}, alias="mapped")
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("PRAGMA mmap_size")
            mapped = cursor.fetchone()[0]
    finally:
        wrapper.close()

    assert mapped == (settings.MEMORY_DB_MMAP_MB if megabytes is None else megabytes) * 2**20
    assert megabytes is not None or mapped > 0  # on unless turned off


def test_probe_finds_fts5_and_sqlite_vec(db):
    found = probe()
    assert found.fts5 and found.sqlite_vec
    assert found.problems == []
