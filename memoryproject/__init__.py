"""The memory server: a Django project.

Its entry points (``urls``, ``asgi``, ``wsgi``) sit above every app. The rest sits below
every app and imports none (``tests/test_layers.py``): settings, the SQLite backend and
database functions, strict JSON, domain errors, instants, the read-only admin base.
"""

import os

__version__ = "0.1.0"

# numpy's OpenBLAS keeps its worker threads spinning for about 0.1 s after each call (the
# vector scan) before they sleep, holding a core the server's other requests need: with
# 20 ms of other work between 135k-row scans, process CPU was 1.99x wall time, 1.29x with
# this, the scan as fast (8.1 against 8.5 ms). OpenBLAS reads it when numpy first loads,
# which every entry point (manage.py, memoryproject.asgi, the settings) does after this.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
