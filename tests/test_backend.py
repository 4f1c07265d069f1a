from django.db import connection

from memoryproject.sqlite_backend.capabilities import probe


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


def test_probe_finds_fts5_trigram_and_sqlite_vec(db):
    found = probe()
    assert found.fts5 and found.trigram and found.sqlite_vec
    assert found.problems == []
