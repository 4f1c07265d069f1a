"""Strict readers for settings that come from environment variables.

A bad value stops start-up with one line that names the variable and what it
accepts: a server that silently falls back to a default on a typo is worse than
one that refuses to start.
"""

import difflib
import os
import re
import sys
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from memoryproject.loopback import https_or_loopback

# Where a relative path is taken from, as for the path settings: the folder of manage.py.
_CHECKOUT = Path(__file__).resolve().parent.parent
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# Every MEMORY_* variable the settings have asked for, so a misspelt one can be named at start (unknown_variables).
_READ: set[str] = set()
# Read by the hooks and plugins of integrations/, not by the server: set in the same shell, they are not misspelt.
CLIENT_VARIABLES = (
    "MEMORY_URL",
    "MEMORY_API_KEY",
    "MEMORY_NAMESPACE",
    "MEMORY_TIMEOUT",
    "MEMORY_BUDGET",
    "MEMORY_TOOLS",
    "MEMORY_HARNESS",
    "MEMORY_TURNS_DIR",
    "MEMORY_TEST_PYTHON",
)


class SettingError(SystemExit):
    """Stop start-up with a one-line message (SystemExit prints it without a traceback)."""

    def __init__(self, name: str, value: str, accepted: str):
        super().__init__(f"Bad setting {name}={value!r}: expected {accepted}.")


def _raw(name: str) -> str | None:
    _READ.add(name)
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def env_str(name: str, default: str = "") -> str:
    value = _raw(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise SettingError(name, value, "one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value = _raw(name)
    if value is None:
        return default
    bounds = (
        f"an integer from {minimum if minimum is not None else '-inf'} to {maximum if maximum is not None else 'inf'}"
    )
    try:
        number = int(value, 10)
    except ValueError:
        raise SettingError(name, value, bounds) from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise SettingError(name, value, bounds)
    return number


def env_float(name: str, default: float, *, minimum: float, maximum: float) -> float:
    value = _raw(name)
    if value is None:
        return default
    accepted = f"a number from {minimum} to {maximum}"
    try:
        number = float(value)
    except ValueError:
        raise SettingError(name, value, accepted) from None
    if not minimum <= number <= maximum:
        raise SettingError(name, value, accepted)
    return number


def env_weights(name: str, default: dict[str, float], *, keys: tuple[str, ...]) -> dict[str, float]:
    """Read ``key=number,key=number``; keys not given keep their defaults."""
    value = _raw(name)
    if value is None:
        return dict(default)
    accepted = "comma-separated key=number pairs with keys from " + ", ".join(keys) + " and numbers from 0 to 100"
    weights = dict(default)
    for item in value.split(","):
        key, _, number = item.partition("=")
        try:
            weight = float(number)
        except ValueError:
            raise SettingError(name, value, accepted) from None
        if key.strip() not in keys or not 0 <= weight <= 100:
            raise SettingError(name, value, accepted)
        weights[key.strip()] = weight
    return weights


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = _raw(name)
    if value is None:
        return default
    if value not in choices:
        raise SettingError(name, value, "one of " + ", ".join(choices))
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None:
        return list(default)
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise SettingError(name, value, "a comma-separated list without empty items")
    return items


def env_path(name: str, default: Path, *, base: Path) -> Path:
    value = _raw(name)
    path = default if value is None else Path(value).expanduser()
    if not path.is_absolute():
        path = base / path
    if path.exists() and path.is_dir():
        raise SettingError(name, str(value), "a file path, not a directory")
    return path


def env_secret(name: str) -> str:
    """Return ``name``'s value, or the text of the file ``name``_FILE names (its ends stripped); "" if neither is set.

    The file keeps a secret out of the environment, which ``ps e`` and /proc show to its owner and which crash
    reporters copy. Both set is refused: which one wins would be a guess.
    """
    value, path = _raw(name), _raw(f"{name}_FILE")
    if value is not None and path is not None:
        fail(f"Both {name} and {name}_FILE are set: set only one of them.")
    if path is None:
        return value or ""
    file = Path(path).expanduser()
    if not file.is_absolute():
        file = _CHECKOUT / file
    try:
        text = file.read_text(encoding="utf-8").strip()
    except OSError as error:
        fail(f"Bad setting {name}_FILE={path!r}: cannot read {file} ({error.strerror}).")
    except UnicodeDecodeError:
        fail(f"Bad setting {name}_FILE={path!r}: {file} is not UTF-8 text.")
    if not text:
        fail(f"Bad setting {name}_FILE={path!r}: {file} is empty.")
    return text


def unknown_variables(environ=os.environ) -> list[str]:
    """Return a warning for each MEMORY_* variable in ``environ`` that neither the settings nor a client reads."""
    known = sorted(_READ | set(CLIENT_VARIABLES))
    warnings = []
    for name in sorted(environ):
        if not name.startswith("MEMORY_") or name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        guess = f"did you mean {close[0]}? " if close else ""
        warnings.append(f"{name} is set but is not a setting of this server: {guess}It is ignored.")
    return warnings


def fail(message: str) -> None:
    """Stop start-up with one line (used for checks that are not about one variable)."""
    sys.exit(message)


def env_days(name: str, default: dict[str, int], *, keys: tuple[str, ...]) -> dict[str, int]:
    """Read ``key=days,key=days`` (each key once, days from 1 to 36500), or ``none`` for no key at all."""
    value = _raw(name)
    if value is None:
        return dict(default)
    if value.lower() == "none":
        return {}
    accepted = (
        "'none', or comma-separated key=days pairs with keys from "
        + ", ".join(keys)
        + ", each once, and whole days from 1 to 36500"
    )
    days = {}
    for item in value.split(","):
        key, _, number = (part.strip() for part in item.partition("="))
        if key not in keys or key in days or not number.isdigit() or not 1 <= int(number) <= 36500:
            raise SettingError(name, value, accepted)
        days[key] = int(number)
    return days


# The libpq parameters a database URL may carry after "?", passed on as they are, and "schema" (ours).
_SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_URL_PARAMETERS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name", "schema")
# An unquoted PostgreSQL name, so it is spelt the same in the search path, the catalogue and CREATE SCHEMA.
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def env_database_url(name: str) -> dict | None:
    """Read ``postgresql://user:password@host[:port]/dbname[?sslmode=...]`` into Django's database fields.

    User, password and database name are percent-decoded. After "?" only the parameters in
    ``_URL_PARAMETERS`` are accepted, each once; ``schema`` becomes the field SCHEMA, the others
    OPTIONS for libpq. Return None when neither the variable nor its _FILE is set.
    """
    value = env_secret(name) or None
    if value is None:
        return None
    # The message repeats the value: never its password.
    shown = re.sub(r"(://[^:/@]*:).*@", r"\1***@", value)
    accepted = "postgresql://user:password@host[:port]/dbname (percent-encode special characters)"

    def refuse(why: str):
        raise SettingError(name, shown, f"{accepted}; {why}")

    # A '/', '?' or '#' as it is in the password ends the address early, and the rest would be read (and quoted in
    # the refusal) as a port, a path or a query; '@' and ':' as they are parse unambiguously.
    user_info = value.partition("://")[2].rpartition("@")[0]
    if any(character in user_info for character in "/?#"):
        refuse(
            "the user or password holds '/', '?' or '#' as it is: percent-encode them "
            "(/ as %2F, ? as %3F, # as %23, and @ as %40, : as %3A)"
        )
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as error:
        refuse(f"it does not parse ({error})")
    if parts.scheme not in ("postgresql", "postgres"):
        refuse("the scheme must be postgresql:// or postgres://")
    if not parts.hostname:
        refuse("the host is missing")
    if not parts.username:
        refuse("the user is missing")
    database = unquote(parts.path[1:])
    if not database or "/" in parts.path[1:]:
        refuse("the path must be one database name")
    if parts.fragment:
        refuse("a '#' part is not accepted")
    options = _url_options(parts.query, refuse)
    schema = options.pop("schema", None)
    return {
        "NAME": database,
        "USER": unquote(parts.username),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname,
        "PORT": str(port or 5432),
        "OPTIONS": options,
        **({"SCHEMA": schema} if schema else {}),
    }


def _url_options(query: str, refuse) -> dict:
    """The parameters after "?" of a database URL, each checked; ``refuse(why)`` stops start-up."""
    options = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        refuse("the part after '?' must be key=value pairs joined by '&'")
    for key, item in pairs:
        if key not in _URL_PARAMETERS or key in options:
            refuse("after '?' only " + ", ".join(_URL_PARAMETERS) + ", each once")
        if key == "sslmode" and item not in _SSL_MODES:
            refuse("sslmode must be one of " + ", ".join(_SSL_MODES))
        if key == "connect_timeout" and not item.isdigit():
            refuse("connect_timeout must be whole seconds")
        if key == "schema" and (not _SCHEMA_NAME.fullmatch(item) or item.startswith("pg_")):
            refuse("schema must be 1 to 63 lower-case letters, digits and _, not starting with a digit or pg_")
        options[key] = item
    return options


def env_public_url(name: str) -> str:
    """Read the URL clients reach the server at (``https://host[:port]``), without a trailing slash.

    http is accepted only for the loopback interface: OAuth sends codes and tokens through it.
    Return "" when the variable is unset.
    """
    value = _raw(name)
    if value is None:
        return ""
    accepted = "https://host[:port] (http only for localhost or 127.0.0.1), without a path, '?' or '#'"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        raise SettingError(name, value, accepted) from None
    if parts.path not in ("", "/") or parts.query or parts.fragment or not https_or_loopback(value):
        raise SettingError(name, value, accepted)
    return value.rstrip("/")


def env_database_password(fields: dict | None, name: str, *, url_name: str) -> dict | None:
    """Return ``fields`` with the password ``name`` (or ``name``_FILE) gives, for a URL written without one."""
    password = env_secret(name)
    if not password:
        return fields
    if fields is None:
        fail(f"{name} is set but {url_name} is not: the password is for the PostgreSQL server that URL names.")
    if fields["PASSWORD"]:
        fail(f"The database password is given twice, in {url_name} and in {name}: leave it out of the URL.")
    return {**fields, "PASSWORD": password}
