"""The memory server: a Django project.

Its entry points (``urls``, ``asgi``, ``wsgi``) sit above every app. The rest sits below
every app and imports none (``tests/test_layers.py``): settings, the SQLite backend and
database functions, strict JSON, domain errors, instants, the read-only admin base.
"""

import os

__version__ = "0.1.0"

# OpenBLAS's worker threads spin after each call, holding a core other requests need
# (benchmarks/blas_threads.py); it reads this when numpy first loads, after this module.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
