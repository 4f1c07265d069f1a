"""Which URLs may go without TLS: those of this machine's loopback interface, as OAuth 2.1 and RFC 8252 allow."""

import ipaddress
from urllib.parse import urlsplit


def is_loopback(hostname: str | None) -> bool:
    """Whether ``hostname`` (as urlsplit gives it: no brackets, lower case) names the loopback interface."""
    if not hostname:
        return False
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def https_or_loopback(url: str) -> bool:
    """Whether ``url`` is an https URL, or an http URL of the loopback interface."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if not parts.netloc:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and is_loopback(parts.hostname))
