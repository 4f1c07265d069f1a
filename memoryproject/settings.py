"""Settings for the memory server, read from environment variables (see README, Configuration)."""

import os
import secrets
import time
from pathlib import Path

from memoryproject.env import (
    env_bool,
    env_choice,
    env_database_password,
    env_database_url,
    env_days,
    env_float,
    env_int,
    env_list,
    env_path,
    env_public_url,
    env_secret,
    env_str,
    env_weights,
    fail,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = Path(env_str("MEMORY_DATA_DIR", str(BASE_DIR / "data"))).expanduser()
if not DATA_DIR.is_absolute():
    DATA_DIR = BASE_DIR / DATA_DIR
MEMORY_DB_PATH = env_path("MEMORY_DB_PATH", DATA_DIR / "memory.db", base=BASE_DIR)
# Where `serve` binds (port 0: any free port) and the file that tells local clients where it listens.
MEMORY_HOST = env_str("MEMORY_HOST", "127.0.0.1")
MEMORY_PORT = env_int("MEMORY_PORT", 8000, minimum=0, maximum=65535)
MEMORY_DISCOVERY_FILE = env_path("MEMORY_DISCOVERY_FILE", Path(f"{MEMORY_DB_PATH}.server.json"), base=BASE_DIR)

DEBUG = env_bool("MEMORY_DEBUG", False)


# The shortest secret key accepted, from MEMORY_SECRET_KEY or the secret_key file.
SECRET_KEY_MIN_LENGTH = 32


def _secret_key() -> str:
    """Return MEMORY_SECRET_KEY (or its _FILE's), or a generated key persisted under the data directory."""
    given = env_secret("MEMORY_SECRET_KEY")
    if given:
        if len(given) < SECRET_KEY_MIN_LENGTH:
            fail(f"Bad setting MEMORY_SECRET_KEY: expected at least {SECRET_KEY_MIN_LENGTH} characters.")
        return given
    path = DATA_DIR / "secret_key"
    key = secrets.token_urlsafe(50)
    try:
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        # O_EXCL: of two processes starting at once, one writes and both use its
        # key; mode 0600 from the start, never readable by others even briefly.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _stored_secret_key(path)
    except OSError as error:
        fail(
            f"Cannot create the secret key file {path}: {error.strerror}. Set MEMORY_SECRET_KEY, or make "
            f"{DATA_DIR} writable."
        )
    with os.fdopen(descriptor, "w") as handle:
        handle.write(key)
    return key


def _stored_secret_key(path: Path) -> str:
    """Return the key in the secret key file, which another process may be writing this instant."""
    what = "it is empty"
    for _ in range(50):  # the writer may not have finished its one write yet
        try:
            stored = path.read_bytes().decode().strip()
        except UnicodeDecodeError:
            what = "it is not text"
            break
        except OSError as error:
            fail(
                f"Cannot read the secret key file {path}: {error.strerror}. Make it readable, or set MEMORY_SECRET_KEY."
            )
        if len(stored) >= SECRET_KEY_MIN_LENGTH:
            return stored
        if stored:
            what = f"it holds {len(stored)} characters, fewer than {SECRET_KEY_MIN_LENGTH}"
        time.sleep(0.02)
    fail(
        f"The secret key file {path} is not a usable key ({what}): delete it to generate a new one (admin logins "
        "then sign in again), or set MEMORY_SECRET_KEY."
    )


SECRET_KEY = _secret_key()

ALLOWED_HOSTS = env_list("MEMORY_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("MEMORY_CSRF_TRUSTED_ORIGINS", [])
# Clients come over HTTPS (a proxy in front ends TLS): the admin's session and CSRF cookies are then never sent in
# clear. uvicorn takes the scheme from X-Forwarded-Proto of a loopback proxy (FORWARDED_ALLOW_IPS).
MEMORY_HTTPS = env_bool("MEMORY_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = MEMORY_HTTPS
# What `first_run` makes on an empty database, given by the operator instead of drawn (the password, or an API key
# in the form mem_<8 hex digits>_<43 or more URL-safe characters>); each may come from a file (..._FILE).
MEMORY_FIRST_ADMIN_PASSWORD = env_secret("MEMORY_FIRST_ADMIN_PASSWORD")
MEMORY_FIRST_API_KEY = env_secret("MEMORY_FIRST_API_KEY")

INSTALLED_APPS = [
    "memoryproject.admin_site.MemoryAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "memories",
    "search",
    "knowledge",
    "mcp_api",
    "telemetry",
    "api",
    "dashboard",
    # The OAuth 2.1 authorization server for remote MCP connectors; oauth (after it) replaces its admin pages.
    "oauth2_provider",
    "oauth",
]

MIDDLEWARE = [
    # First, so it times, counts and logs every answer, with the request id (memoryproject/requestlog.py).
    "memoryproject.requestlog.RequestLog",
    "django.middleware.security.SecurityMiddleware",
    # Serves the admin's and dashboard's static files from the app server, so
    # `make run` needs no web server in front (the server may run offline).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "memoryproject.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# How much of the SQLite file each connection reads through a memory map instead of read()
# calls into its own 2 MB page cache (PRAGMA mmap_size; 0 turns it off). Pages read this way
# are the operating system's file cache, shared between connections and processes.
MEMORY_DB_MMAP_MB = env_int("MEMORY_DB_MMAP_MB", 16384, minimum=0, maximum=1024 * 1024)

WSGI_APPLICATION = "memoryproject.wsgi.application"
ASGI_APPLICATION = "memoryproject.asgi.application"

# How long a transaction waits for the write lock (and any other lock) before giving up as busy.
MEMORY_DB_BUSY_TIMEOUT = env_int("MEMORY_DB_BUSY_TIMEOUT", 30, minimum=1, maximum=600)
# On PostgreSQL, how long opening a connection waits for the server (libpq's connect_timeout, unless the URL gives
# one; libpq's least is 2): a database that is down or unreachable is reported this soon, not after the busy timeout.
MEMORY_DB_CONNECT_TIMEOUT = env_int("MEMORY_DB_CONNECT_TIMEOUT", 3, minimum=2, maximum=600)

# Threads of the server process that run requests (memoryproject/wsgibridge.py): this many
# requests are handled at once, each thread with a database connection.
MEMORY_SERVER_THREADS = env_int("MEMORY_SERVER_THREADS", 8, minimum=1, maximum=64)
# On PostgreSQL, the most connections one process holds, shared by its threads (psycopg's pool); 0: no pool.
# The default lets every request thread hold one at once.
MEMORY_DB_POOL_SIZE = env_int("MEMORY_DB_POOL_SIZE", MEMORY_SERVER_THREADS, minimum=0, maximum=1000)
# On PostgreSQL, a statement a connection has run 5 times is prepared, so the server plans it once. Off for a pooler
# that cannot carry prepared statements (PgBouncer before 1.21 in transaction mode).
MEMORY_DB_PREPARED_STATEMENTS = env_bool("MEMORY_DB_PREPARED_STATEMENTS", True)

DATABASES = {
    "default": {
        "ENGINE": "memoryproject.sqlite_backend",
        "NAME": MEMORY_DB_PATH,
        "OPTIONS": {
            # Every atomic() block starts with BEGIN IMMEDIATE: a read-then-write
            # transaction takes the write lock up front, so two processes queue on
            # busy_timeout instead of one failing with "database is locked".
            "transaction_mode": "IMMEDIATE",
            "timeout": MEMORY_DB_BUSY_TIMEOUT,
        },
        # Each server thread keeps its connection (memoryproject/wsgibridge.py): opening one
        # and loading sqlite-vec costs more than most requests. Checked before reuse.
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"NAME": env_str("MEMORY_TEST_DB_PATH") or None},
    }
}

# Set, PostgreSQL holds the memories instead of the SQLite file (docs/postgresql.md); MEMORY_DB_PATH and
# MEMORY_DB_MMAP_MB are then not read for the database.
# Either may come from a file (MEMORY_DATABASE_URL_FILE, MEMORY_DB_PASSWORD_FILE), out of the environment.
_postgresql = env_database_password(
    env_database_url("MEMORY_DATABASE_URL"), "MEMORY_DB_PASSWORD", url_name="MEMORY_DATABASE_URL"
)
if _postgresql is not None:
    DATABASES["default"] = {
        "ENGINE": "memoryproject.pg_backend",
        **_postgresql,
        # lock_timeout bounds the wait for the write lock (memoryproject/pg_backend) as busy_timeout does on SQLite;
        # a schema in the URL is the only one the server's tables are made in and read from.
        "OPTIONS": {
            "connect_timeout": MEMORY_DB_CONNECT_TIMEOUT,
            **_postgresql["OPTIONS"],
            "options": f"-c lock_timeout={MEMORY_DB_BUSY_TIMEOUT * 1000:d}"
            + (f" -c search_path={_postgresql['SCHEMA']}" if "SCHEMA" in _postgresql else ""),
        },
        # Checked before reuse, as with SQLite.
        "CONN_HEALTH_CHECKS": True,
    }
    if MEMORY_DB_PREPARED_STATEMENTS:
        # psycopg prepares only statements whose parameters the server binds; a recall's planning was a third of its
        # time in the database.
        DATABASES["default"]["OPTIONS"].update(server_side_binding=True, prepare_threshold=5)
    if MEMORY_DB_POOL_SIZE:
        # A request takes a connection from the pool and gives it back at its end (so no persistent connections);
        # one idle for 5 minutes is closed, down to one. A wait for a free one is bounded like a wait for the lock.
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 1,
            "max_size": MEMORY_DB_POOL_SIZE,
            "max_idle": 300,
            "timeout": MEMORY_DB_BUSY_TIMEOUT,
        }
        DATABASES["default"]["CONN_MAX_AGE"] = 0
    else:
        # Each thread keeps its connection, as with SQLite.
        DATABASES["default"]["CONN_MAX_AGE"] = None

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# No collectstatic step: WhiteNoise serves the files where the staticfiles finders find them
# (static/ and the apps'), so there is no STATIC_ROOT for it to look in (and warn about).
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "/admin/login/"

# Limits of the store (README, Limits).
MEMORY_MAX_CONTENT_BYTES = env_int("MEMORY_MAX_CONTENT_BYTES", 32 * 1024, minimum=256, maximum=1024 * 1024)
MEMORY_MAX_TAGS = env_int("MEMORY_MAX_TAGS", 32, minimum=1, maximum=256)
MEMORY_MAX_IMPORT_ITEMS = env_int("MEMORY_MAX_IMPORT_ITEMS", 100_000, minimum=1, maximum=10_000_000)
MEMORY_DEFAULT_NAMESPACE = env_str("MEMORY_DEFAULT_NAMESPACE", "default")


def _embedder() -> str:
    """Return ``minilm``, ``hash``, or the absolute path of a local sentence-transformers model directory."""
    value = env_str("MEMORY_EMBEDDER", "minilm")
    if value in ("minilm", "hash"):
        return value
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = BASE_DIR / path
    # A model directory holds modules.json (sentence-transformers) or at least config.json
    # (a plain transformers model, mean-pooled); anything else would only fail at the first write.
    if not ((path / "modules.json").is_file() or (path / "config.json").is_file()):
        fail(
            f"Bad setting MEMORY_EMBEDDER={value!r}: expected minilm, hash, or the directory of a local "
            "sentence-transformers model."
        )
    return str(path)


# The model behind the vector channel (search/embeddings.py). The database records it;
# switching to another needs `manage.py backfill --reembed`.
MEMORY_EMBEDDER = _embedder()
# Threads that run the embedding model (ONNX Runtime, or torch where the export cannot run):
# two collapse when the other core is busy (docs/configuration.md).
MEMORY_TORCH_THREADS = env_int("MEMORY_TORCH_THREADS", 1, minimum=1, maximum=64)
# Where a model exported to ONNX is kept, so later processes load it without torch (search/embeddings.py).
MEMORY_MODEL_CACHE = Path(env_str("MEMORY_MODEL_CACHE", str(DATA_DIR / "models"))).expanduser()
if not MEMORY_MODEL_CACHE.is_absolute():
    MEMORY_MODEL_CACHE = BASE_DIR / MEMORY_MODEL_CACHE
for _removed in ("MEMORY_EMBED_PRECISION", "MEMORY_EMBED_BATCH_PRECISION", "MEMORY_EMBED_BATCH_THREADS"):
    if env_str(_removed):
        fail(
            f"{_removed} is no longer read: models run in float32 through ONNX Runtime, one batch at a time; unset it."
        )

# Fusion (search/fusion.py, docs/retrieval.md): the weight of each channel's score in the hybrid
# sum, the share of the best neighbouring memory's sum a memory gains as context, and the cosine
# a hit found only by vectors must reach in hybrid mode. Chosen by benchmarks/fusion_sweep.py
# on recall-dev and LoCoMo (its results, and the alternatives it tried, are in benchmarks/).
MEMORY_FUSION_WEIGHTS = env_weights(
    "MEMORY_FUSION_WEIGHTS",
    {"keyword": 0.8, "bigram": 0.8, "trigram": 0.4, "vector": 0.2},
    keys=("keyword", "bigram", "trigram", "vector"),
)
# The fusion method: the weighted sum above (chosen by measurement), or reciprocal rank fusion
# (each channel adds weight / (MEMORY_RRF_K + rank)), kept selectable.
MEMORY_FUSION = env_choice("MEMORY_FUSION", "weighted", ("weighted", "rrf"))
MEMORY_RRF_K = env_int("MEMORY_RRF_K", 60, minimum=1, maximum=1000)
MEMORY_FUSION_CONTEXT = env_float("MEMORY_FUSION_CONTEXT", 0.5, minimum=0.0, maximum=1.0)
MEMORY_COSINE_FLOOR = env_float("MEMORY_COSINE_FLOOR", 0.2, minimum=-1.0, maximum=1.0)
# A hybrid recall answers only when a candidate matched this share of the query's words (by idf)
# or reached this judged cosine (search/relevance.py); otherwise it holds its hits back.
MEMORY_RELEVANT_COVERAGE = env_float("MEMORY_RELEVANT_COVERAGE", 0.5, minimum=0.0, maximum=1.0)
MEMORY_RELEVANT_COSINE = env_float("MEMORY_RELEVANT_COSINE", 0.27, minimum=-1.0, maximum=1.0)

# Injection-aware ranking (docs/retrieval.md): a recall multiplies a memory's score by 1 + a*ln(1 + its injections
# reported by as_of); 0 is off.
MEMORY_INJECTION_BOOST = env_float("MEMORY_INJECTION_BOOST", 0.0, minimum=0.0, maximum=1.0)

# A write whose text has a cosine of at least this with a visible memory of its namespace
# reports that memory as its near twin (search/duplicates.py). Above 1: off.
MEMORY_NEAR_DUPLICATE_COSINE = env_float("MEMORY_NEAR_DUPLICATE_COSINE", 0.9, minimum=0.0, maximum=1.01)

# The stored vectors each process keeps, per namespace, loaded on first use (search/cosines.py): past this many
# MiB the namespaces used least recently are dropped, and read again when next asked for.
MEMORY_VECTOR_MEMORY_MB = env_int("MEMORY_VECTOR_MEMORY_MB", 384, minimum=16, maximum=1024 * 1024)
# A namespace of at least this many vectors keeps them also as int8, about 30% more memory (search/compact.py):
# a hybrid recall there scans those, then works out the exact cosine of the rows that can matter. 0: never.
MEMORY_COMPACT_MIN_ROWS = env_int("MEMORY_COMPACT_MIN_ROWS", 524_288, minimum=0, maximum=1 << 31)

# The kinds memories.models.Kind declares (settings load before the models; a test keeps the two equal).
MEMORY_KINDS = ("fact", "preference", "decision", "skill", "note", "artifact", "event")
# An active memory whose visible text was learned more than this many days before a read's as_of reads as
# stale (memories/states.py); a kind not named never goes stale. "none": no kind does.
MEMORY_STALE_AFTER_DAYS = env_days("MEMORY_STALE_AFTER_DAYS", {"note": 365, "artifact": 180}, keys=MEMORY_KINDS)
# A memory's computed confidence halves every this many days after its visible text was learned
# (memories/confidence.py); a kind not named does not decay. "none": no kind does.
MEMORY_CONFIDENCE_HALF_LIFE_DAYS = env_days(
    "MEMORY_CONFIDENCE_HALF_LIFE_DAYS", {"fact": 730, "note": 365, "artifact": 180}, keys=MEMORY_KINDS
)

MEMORY_TELEMETRY_DAYS = env_int("MEMORY_TELEMETRY_DAYS", 90, minimum=1, maximum=36500)
# Hooks (README, Hooks and telemetry): the size of a recalled block in characters, when the
# caller names none and at most, and how long captured text lives unless the caller says.
MEMORY_HOOK_BUDGET_MAX = env_int("MEMORY_HOOK_BUDGET_MAX", 16_000, minimum=300, maximum=200_000)
MEMORY_HOOK_BUDGET = env_int(
    "MEMORY_HOOK_BUDGET", min(4000, MEMORY_HOOK_BUDGET_MAX), minimum=300, maximum=MEMORY_HOOK_BUDGET_MAX
)
MEMORY_HOOK_TTL_DAYS = env_int("MEMORY_HOOK_TTL_DAYS", 30, minimum=0, maximum=36500)
MEMORY_LOG_LEVEL = env_choice("MEMORY_LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR"))
# json: one JSON object per log line, and a line per request at INFO (memoryproject/requestlog.py).
MEMORY_LOG_FORMAT = env_choice("MEMORY_LOG_FORMAT", "plain", ("plain", "json"))

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # The REST views set their own authentication, permissions, parser, rate limit and error
    # handler (api.views.ApiView), so the defaults here reach no other view (/mcp is one too).
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# The OpenAPI schema at /api/schema/ and the docs page at /api/docs/ (api/docs.py).
SPECTACULAR_SETTINGS = {
    "TITLE": "Memory server REST API",
    "DESCRIPTION": "Durable, point-in-time memory for agents. Send an API key as 'Authorization: Bearer <key>'. "
    'Errors: {"error": {"code", "message", "field"}}.',
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "PREPROCESSING_HOOKS": ["api.schema.only_rest_api"],
    # The values alone: the schemas come from pydantic, whose enums carry no labels.
    "ENUM_NAME_OVERRIDES": {"KindEnum": "memories.models.Kind.values"},
}

# REST API limits (README, REST API). A request body over this many bytes is refused with 413
# before it is parsed; imports take whole export files and have their own limit.
MEMORY_API_MAX_BODY_BYTES = env_int(
    "MEMORY_API_MAX_BODY_BYTES", 1024 * 1024, minimum=64 * 1024, maximum=64 * 1024 * 1024
)
MEMORY_API_MAX_IMPORT_BYTES = env_int(
    "MEMORY_API_MAX_IMPORT_BYTES", 64 * 1024 * 1024, minimum=64 * 1024, maximum=1024 * 1024 * 1024
)
# Requests and MCP tool calls a minute per API key (memories/ratelimit.py), reads and writes apart; 0: no limit.
MEMORY_API_READS_PER_MINUTE = env_int("MEMORY_API_READS_PER_MINUTE", 600, minimum=0, maximum=1_000_000)
MEMORY_API_WRITES_PER_MINUTE = env_int("MEMORY_API_WRITES_PER_MINUTE", 120, minimum=0, maximum=1_000_000)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "memoryproject.requestlog.JsonFormatter"},
    },
    "filters": {"client_errors_without_traceback": {"()": "memoryproject.requestlog.ClientErrorsWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": MEMORY_LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": MEMORY_LOG_LEVEL},
}

# MCP (README, MCP). Request bodies over this many bytes are refused before they are read;
# keep it well above MEMORY_MAX_CONTENT_BYTES (JSON escaping can grow text several times).
# Django's own DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB) caps it.
MEMORY_MCP_MAX_BODY_BYTES = env_int(
    "MEMORY_MCP_MAX_BODY_BYTES", 1024 * 1024, minimum=64 * 1024, maximum=2 * 1024 * 1024
)

# Every request body, at the ASGI layer before Django (memoryproject/bodygate.py): the bytes of bodies held at once
# across all connections, which must take the largest body a door accepts, and the seconds a body may take to arrive.
_LARGEST_BODY = max(MEMORY_API_MAX_BODY_BYTES, MEMORY_API_MAX_IMPORT_BYTES, MEMORY_MCP_MAX_BODY_BYTES)
MEMORY_BODY_BUFFER_BYTES = env_int(
    "MEMORY_BODY_BUFFER_BYTES",
    max(128 * 1024 * 1024, _LARGEST_BODY),
    minimum=_LARGEST_BODY,
    maximum=64 * 1024 * 1024 * 1024,
)
MEMORY_BODY_TIMEOUT = env_int("MEMORY_BODY_TIMEOUT", 30, minimum=1, maximum=3600)

# OAuth 2.1 for MCP clients that add the server by URL (docs/mcp.md, "Adding the server by URL"; oauth/).
# The URL clients reach the server at, behind any proxy: the issuer, and the base of the resources tokens are for.
# Unset, each request's own URL is used, which suits loopback; behind a reverse proxy set it.
MEMORY_PUBLIC_URL = env_public_url("MEMORY_PUBLIC_URL")
MEMORY_OAUTH_ACCESS_TOKEN_SECONDS = env_int("MEMORY_OAUTH_ACCESS_TOKEN_SECONDS", 3600, minimum=60, maximum=86400)
MEMORY_OAUTH_REFRESH_TOKEN_DAYS = env_int("MEMORY_OAUTH_REFRESH_TOKEN_DAYS", 30, minimum=1, maximum=365)
# Whether any client may register itself (RFC 7591); off, only clients an admin adds can connect.
MEMORY_OAUTH_REGISTRATION = env_bool("MEMORY_OAUTH_REGISTRATION", True)
# Whether a client may name itself by the https URL of its metadata document, which the server then fetches:
# off by default, for the server makes no outbound request unless told it may.
MEMORY_OAUTH_CLIENT_METADATA_DOCUMENTS = env_bool("MEMORY_OAUTH_CLIENT_METADATA_DOCUMENTS", False)
OAUTH2_PROVIDER = {
    "SCOPES": {"read": "Read memories", "write": "Write memories"},
    "DEFAULT_SCOPES": ["read"],
    # read and write, plus namespace:<name> for each namespace a person grants on the consent page.
    "SCOPES_BACKEND_CLASS": "oauth.scopes.NamespaceScopes",
    "OAUTH2_VALIDATOR_CLASS": "oauth.validator.MemoryValidator",
    "OIDC_ISS_ENDPOINT": MEMORY_PUBLIC_URL,
    "ACCESS_TOKEN_EXPIRE_SECONDS": MEMORY_OAUTH_ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": MEMORY_OAUTH_REFRESH_TOKEN_DAYS * 86400,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    # A rotated refresh token presented again revokes its whole family: it was stolen, or the client is broken.
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "PKCE_REQUIRED": True,
    # OAuth 2.1: S256 only; no implicit or password grant; tokens stored as hashes; the issuer in every redirect.
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_post", "client_secret_basic"],
    "DCR_ENABLED": MEMORY_OAUTH_REGISTRATION,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": MEMORY_OAUTH_CLIENT_METADATA_DOCUMENTS,
    "OAUTH2_PROTECTED_RESOURCE_NAME": "Memory server",
}
# The consent page sends people who are not signed in to the admin's sign-in.
LOGIN_URL = "admin:login"

# django-mcp-server adds a get_server_instructions tool unless told not to; the instructions
# already reach clients in initialize.
DJANGO_MCP_GET_SERVER_INSTRUCTIONS_TOOL = False
LOGGING.setdefault("loggers", {}).update(
    {
        # The MCP SDK logs every request at INFO.
        "mcp": {"level": "WARNING"},
        # django-mcp-server logs a traceback for every tool error, including a refused argument;
        # mcp_api logs the unexpected ones itself.
        "mcp_server.djangomcp": {"level": "CRITICAL"},
        # A refused request is one line, without the traceback of the exception that refused it.
        "django.request": {"filters": ["client_errors_without_traceback"]},
        # A Host not in MEMORY_ALLOWED_HOSTS too (scanners send them all day); named, as filters act where logged.
        "django.security.DisallowedHost": {"filters": ["client_errors_without_traceback"]},
        # The pool warns of each failed connect; the request or command it failed says why, once (pg_backend/pool.py).
        "psycopg.pool": {"level": "ERROR"},
    }
)

if not DEBUG:
    SESSION_COOKIE_HTTPONLY = True
    X_FRAME_OPTIONS = "DENY"
