"""Secrets from files, and the names `serve` warns about: what an operator sets, read through a real start-up."""

import json
import re

import pytest

from tests.subprocesses import BASE_DIR, clean_env, manage, python

pytestmark = pytest.mark.slow

SHOW_DATABASE = """
import json
from django.conf import settings
fields = settings.DATABASES["default"]
print(json.dumps({name: fields[name] for name in ("NAME", "USER", "PASSWORD", "HOST", "PORT")}))
"""


def sqlite_env(data_dir, **extra: str) -> dict:
    """``clean_env`` without the database URL `make test-postgres` adds: these tests give their own."""
    env = clean_env(data_dir)
    env.pop("MEMORY_DATABASE_URL", None)
    return {**env, **extra}


def settings_of(env: dict, code: str) -> str:
    done = python(code, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_secret_key_is_read_from_its_file_and_none_is_generated(tmp_path):
    (tmp_path / "key").write_text("s" * 40 + "\n")
    env = clean_env(tmp_path, MEMORY_SECRET_KEY_FILE=str(tmp_path / "key"))

    shown = settings_of(env, "from django.conf import settings; print(settings.SECRET_KEY)")

    assert shown == "s" * 40 + "\n"
    assert not (tmp_path / "secret_key").exists()


def test_the_database_url_and_its_password_are_read_from_files_the_password_as_it_is(tmp_path):
    (tmp_path / "url").write_text("postgresql://memory@db.example:6543/memories\n")
    (tmp_path / "password").write_text("p@ss:w/o%rd x\n")  # a file needs no percent-encoding
    env = sqlite_env(
        tmp_path, MEMORY_DATABASE_URL_FILE=str(tmp_path / "url"), MEMORY_DB_PASSWORD_FILE=str(tmp_path / "password")
    )

    fields = json.loads(settings_of(env, SHOW_DATABASE))

    assert fields == {
        "NAME": "memories",
        "USER": "memory",
        "PASSWORD": "p@ss:w/o%rd x",
        "HOST": "db.example",
        "PORT": "6543",
    }


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        (
            {"MEMORY_DATABASE_URL": "postgresql://memory@db/m", "MEMORY_DATABASE_URL_FILE": "url"},
            "Both MEMORY_DATABASE_URL and MEMORY_DATABASE_URL_FILE are set: set only one of them.",
        ),
        (
            {"MEMORY_DB_PASSWORD": "hunter2-Qz", "MEMORY_DB_PASSWORD_FILE": "password"},
            "Both MEMORY_DB_PASSWORD and MEMORY_DB_PASSWORD_FILE are set: set only one of them.",
        ),
        (
            {"MEMORY_DATABASE_URL": "postgresql://memory:hunter2-Qz@db/m", "MEMORY_DB_PASSWORD_FILE": "password"},
            "The database password is given twice, in MEMORY_DATABASE_URL and in MEMORY_DB_PASSWORD: leave it out "
            "of the URL.",
        ),
        (
            {"MEMORY_DB_PASSWORD_FILE": "password"},
            "MEMORY_DB_PASSWORD is set but MEMORY_DATABASE_URL is not: the password is for the PostgreSQL server "
            "that URL names.",
        ),
        (
            {"MEMORY_SECRET_KEY_FILE": "missing"},
            "Bad setting MEMORY_SECRET_KEY_FILE='{dir}/missing': cannot read {dir}/missing "
            "(No such file or directory).",
        ),
        (
            {"MEMORY_SECRET_KEY_FILE": "empty"},
            "Bad setting MEMORY_SECRET_KEY_FILE='{dir}/empty': {dir}/empty is empty.",
        ),
    ],
    ids=["url-twice", "password-twice", "password-in-url-and-file", "password-without-url", "missing", "empty"],
)
def test_a_secret_given_twice_or_a_file_that_cannot_be_read_stops_start_up_in_one_line(tmp_path, given, refusal):
    (tmp_path / "url").write_text("postgresql://memory@db/m\n")
    (tmp_path / "password").write_text("hunter2-Qz\n")
    (tmp_path / "empty").write_text("\n")
    files = {name: str(tmp_path / value) if name.endswith("_FILE") else value for name, value in given.items()}

    done = manage("check", env=sqlite_env(tmp_path, **files))

    assert done.returncode != 0
    assert done.stderr.splitlines() == [refusal.format(dir=tmp_path)]
    assert "hunter2-Qz" not in done.stderr


def test_every_memory_variable_the_docs_and_integrations_name_is_known_so_none_is_warned_about(tmp_path):
    named = set()
    for folder in ("docs", "integrations"):
        for path in (BASE_DIR / folder).rglob("*"):
            if path.is_file() and "node_modules" not in path.parts and path.suffix in (".md", ".py", ".ts", ".mjs"):
                named |= set(re.findall(r"\bMEMORY_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")))
    named |= set(re.findall(r"\bMEMORY_[A-Z0-9_]*[A-Z0-9]\b", (BASE_DIR / "README.md").read_text(encoding="utf-8")))
    named.discard("MEMORY_SERVER_LISTENING")  # the line `serve` prints, not a variable
    named.discard("MEMORY_SERVER_THREDS")  # configuration.md's example of a misspelt name
    assert {"MEMORY_URL", "MEMORY_API_KEY", "MEMORY_DB_POOL_SIZE", "MEMORY_SECRET_KEY_FILE", "MEMORY_HTTPS"} <= named

    code = (
        "import json\nfrom memoryproject.env import unknown_variables\n"
        f"print(json.dumps(unknown_variables(dict.fromkeys({sorted(named)!r}, 'x'))))\n"
        "print(json.dumps(unknown_variables(dict.fromkeys(['MEMORY_PROT', 'MEMORY_DB_POOLSIZE', 'MEMORY_COLOUR']))))"
    )
    documented, misspelt = (json.loads(line) for line in settings_of(clean_env(tmp_path), code).splitlines())

    assert documented == []
    assert misspelt == [
        "MEMORY_COLOUR is set but is not a setting of this server: It is ignored.",
        "MEMORY_DB_POOLSIZE is set but is not a setting of this server: did you mean MEMORY_DB_POOL_SIZE? It is "
        "ignored.",
        "MEMORY_PROT is set but is not a setting of this server: did you mean MEMORY_PORT? It is ignored.",
    ]
