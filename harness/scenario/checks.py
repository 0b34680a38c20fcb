"""Checks of single values a user types (a target URL, a header) that say what is wrong with them.

Without them `not-a-url` reaches urllib ("unknown url type", an internal error), `ftp://` and port
99999 read as "Connection refused", and a header value with CR/LF is refused by urllib in the
preflight with a traceback-shaped message. Here each is a `ValueError` with the fix, which the
scenario models and the CLI turn into one `error:` line.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

#: RFC 9110 token characters: what a header name may hold
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def check_url(url: str, what: str = "URL") -> str:
    """An http(s) base URL with a host and a valid port, else ValueError saying which part is wrong."""
    raw = url.strip()
    example = "e.g. http://127.0.0.1:8000"
    parts = urlsplit(raw)
    text = _without_userinfo(raw, parts.netloc)  # what the messages may quote
    if "@" in parts.netloc:
        # neither the client nor urllib sends user:password@ (it read as a host name), and the URL
        # is written to scenario.yaml: a credential belongs in a header or in target.api_key_env
        raise ValueError(
            f"{text!r}: credentials in the URL (user:password@) are not sent; remove them and give "
            "the key by target.api_key_env (--api-key-env NAME) or a header (--header 'Authorization: ...')"
        )
    if any(c.isspace() for c in text) or not text:
        raise ValueError(f"{text!r} is not a {what} (no spaces allowed; {example})")
    if not parts.scheme or "://" not in text:
        raise ValueError(f"{text!r} is not a {what}: it needs http:// or https:// ({example})")
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{text!r}: scheme {parts.scheme}:// is not supported; use http:// or https:// ({example})")
    if not parts.hostname:
        raise ValueError(f"{text!r} names no host ({example})")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535 ({example})") from None
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"{text!r}: port {port} is out of range (1-65535)")
    if parts.query or parts.fragment:
        raise ValueError(f"{text!r}: a base URL takes no ?query or #fragment ({example})")
    return text


def _without_userinfo(url: str, netloc: str) -> str:
    """`url` with its user:password@ part masked, for messages."""
    if "@" not in netloc:
        return url
    return url.replace(netloc, "[redacted]@" + netloc.rpartition("@")[2], 1)


def check_header(name: str, value: str) -> None:
    """A header line that cannot be split or smuggle a second header."""
    if not _TOKEN.match(name or ""):
        raise ValueError(f"header name {name[:40]!r} is not a valid HTTP header name")
    if any(c in value for c in "\r\n\0"):
        raise ValueError(
            f"header {name}: the value holds a line break or NUL (CR, LF or \\0); a header value is one line"
        )
