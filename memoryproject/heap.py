"""Handing freed heap memory back to the system: glibc keeps the pages of freed blocks (of a few MiB, freed among
long-lived objects) until it is asked to return them."""

import ctypes

try:
    MALLOC_TRIM = ctypes.CDLL(None).malloc_trim
except (OSError, AttributeError):  # not glibc
    MALLOC_TRIM = None


def return_freed() -> None:
    """Ask the C library to return the free pages of its heap (milliseconds); nothing where it cannot."""
    if MALLOC_TRIM is not None:
        MALLOC_TRIM(0)
