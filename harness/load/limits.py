"""Process limits a load process needs for many streams at once (offline mode: thousands).

Each stream holds one socket, so the open-file limit caps the requests in flight. Linux's usual
soft limit is 1024 with a much higher hard limit; a process may raise its own soft limit up to
the hard one without privileges, so the load process does that before it opens anything.
"""

from __future__ import annotations


def raise_fd_limit(needed: int) -> str | None:
    """Raise RLIMIT_NOFILE's soft limit to fit `needed` descriptors (up to the hard limit).
    Returns a warning when even the hard limit is too low (the client would cap concurrency)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        new = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < needed:
        return (
            f"open-file limit {soft} is below the {needed} this load process needs: requests beyond it fail to "
            f"connect (raise `ulimit -n`, or use --processes N to spread the streams)"
        )
    return None
