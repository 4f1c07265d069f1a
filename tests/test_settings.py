"""Settings come from the environment, strictly: a bad value stops start-up with one clear line."""

import stat

import pytest

from tests.subprocesses import clean_env, manage, python

pytestmark = pytest.mark.slow


PUBLIC_URL = "https://host[:port] (http only for localhost or 127.0.0.1), without a path, '?' or '#'"


@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("MEMORY_DEBUG", "maybe", "one of 1/0, true/false, yes/no, on/off"),
        ("MEMORY_DB_BUSY_TIMEOUT", "abc", "an integer from 1 to 600"),
        ("MEMORY_DB_MMAP_MB", "-1", "an integer from 0 to 1048576"),
        ("MEMORY_MAX_CONTENT_BYTES", "10", "an integer from 256 to 1048576"),
        ("MEMORY_LOG_LEVEL", "loud", "one of DEBUG, INFO, WARNING, ERROR"),
        ("MEMORY_LOG_FORMAT", "xml", "one of plain, json"),
        ("MEMORY_FUSION", "borda", "one of weighted, rrf"),
        ("MEMORY_INJECTION_BOOST", "2", "a number from 0.0 to 1.0"),
        ("MEMORY_API_MAX_BODY_BYTES", "12", "an integer from 65536 to 67108864"),
        # The budget for all bodies at once must hold the largest one a door takes (an import's, by default).
        ("MEMORY_BODY_BUFFER_BYTES", "1048576", "an integer from 67108864 to 68719476736"),
        ("MEMORY_BODY_TIMEOUT", "0", "an integer from 1 to 3600"),
        # OAuth sends codes and tokens to the public URL: plain http only on loopback.
        ("MEMORY_PUBLIC_URL", "http://memory.example.com", PUBLIC_URL),
        ("MEMORY_PUBLIC_URL", "https://memory.example.com/memory", PUBLIC_URL),
        ("MEMORY_PUBLIC_URL", "memory.example.com", PUBLIC_URL),
        ("MEMORY_PUBLIC_URL", "https://memory.example.com:port", PUBLIC_URL),
        ("MEMORY_OAUTH_ACCESS_TOKEN_SECONDS", "10", "an integer from 60 to 86400"),
        (
            "MEMORY_STALE_AFTER_DAYS",
            "note=0",
            "'none', or comma-separated key=days pairs with keys from fact, "
            "preference, decision, skill, note, artifact, event, each once, and whole days from 1 to 36500",
        ),
    ],
)
def test_a_bad_value_stops_start_up_with_one_line_naming_it(tmp_path, name, value, accepted):
    done = manage("check", env=clean_env(tmp_path, **{name: value}))

    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.splitlines() == [f"Bad setting {name}={value!r}: expected {accepted}."]


def test_the_secret_key_is_generated_once_kept_private_and_reused(tmp_path):
    env = clean_env(tmp_path)
    show_key = "from django.conf import settings; print(settings.SECRET_KEY)"
    path = tmp_path / "secret_key"
    assert not path.exists()

    first = python(show_key, env=env)
    second = python(show_key, env=env)

    assert first.returncode == second.returncode == 0
    key = path.read_text().strip()
    assert len(key) >= 50
    assert first.stdout.strip() == second.stdout.strip() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"short", "it holds 5 characters, fewer than 32"),
        (b"\xff\xfe" * 40, "it is not text"),  # a binary file written over it
    ],
)
def test_a_secret_key_file_that_is_short_or_not_text_stops_start_up_with_one_line(tmp_path, content, what):
    path = tmp_path / "secret_key"
    path.write_bytes(content)

    done = manage("check", env=clean_env(tmp_path))

    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"The secret key file {path} is not a usable key ({what}): delete it to generate a new one (admin logins "
        "then sign in again), or set MEMORY_SECRET_KEY."
    ]
    assert path.read_bytes() == content


def test_a_given_secret_key_is_used_and_nothing_is_written(tmp_path):
    given = "k" * 40
    done = python(
        "from django.conf import settings; print(settings.SECRET_KEY)", env=clean_env(tmp_path, MEMORY_SECRET_KEY=given)
    )

    assert done.stdout.strip() == given
    assert not (tmp_path / "secret_key").exists()


def test_debug_is_off_unless_asked_for(tmp_path):
    show_debug = "from django.conf import settings; print(settings.DEBUG)"

    assert python(show_debug, env=clean_env(tmp_path)).stdout.strip() == "False"
    assert python(show_debug, env=clean_env(tmp_path, MEMORY_DEBUG="yes")).stdout.strip() == "True"
