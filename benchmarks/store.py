"""A store of its own for a retrieval benchmark: a SQLite file in a temporary or given folder.

Django reads its settings once, so ``open_store`` must run before anything imports a
model: it sets MEMORY_DATA_DIR / MEMORY_DB_PATH / MEMORY_EMBEDDER, calls
``django.setup()`` and migrates. The project's own database is never touched.
"""

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
MODES = ("keyword", "semantic", "hybrid")


def open_store(*, db_path: str | None, embedder: str = "minilm") -> tuple[Path, bool]:
    """Point Django at ``db_path`` (a fresh temporary file when None), migrate; return (path, existed)."""
    if db_path is None:
        folder = Path(tempfile.mkdtemp(prefix="memory-bench-"))
        path = folder / "bench.db"
    else:
        path = Path(db_path).resolve()
        folder = path.parent
        folder.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    os.environ["MEMORY_DATA_DIR"] = str(folder)
    os.environ["MEMORY_DB_PATH"] = str(path)
    os.environ["MEMORY_EMBEDDER"] = embedder
    os.environ["DJANGO_SETTINGS_MODULE"] = "memoryproject.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    return path, existed


def fusion_settings() -> dict:
    """The fusion settings in force, as recorded beside every result."""
    from django.conf import settings

    from search import channels, context, fusion

    found = {
        name: getattr(settings, name)
        for name in dir(settings)
        if name.startswith(("MEMORY_RRF", "MEMORY_COSINE", "MEMORY_FUSION"))
    }
    found["MEMORY_EMBEDDER"] = settings.MEMORY_EMBEDDER
    # The search package's fusion constants.
    for module in (channels, context, fusion):
        for name in ("COVERAGE_POWER", "TOP_MATCH_SHARE", "TOP_MATCH_WIDTH", "REACH", "CHANNEL_DEPTH"):
            if hasattr(module, name):
                found[f"{module.__name__.split('.')[-1]}.{name}"] = getattr(module, name)
    return found


def save(result: dict, output: str) -> None:
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"saved {path}")
