"""The store URL of a Spark job: read from a 0600 file or the environment, never shown unredacted (the
scrubbing and redaction: :func:`airflow_atlas.kvs.url.scrub`, :func:`~airflow_atlas.kvs.url.redact_url`)."""
from __future__ import annotations

from pathlib import Path

from ..kvs.url import STORE_URL_ENV, store_url_from_environment


def read_store_url(path: str | None = None, environ=None) -> str:
    """The store URL from ``path`` (first line, stripped) or from :data:`STORE_URL_ENV`.

    A file readable by group or others is refused (it may hold a password). Raises ValueError with a
    message that never contains the URL.
    """
    if path:
        p = Path(path)
        if not p.exists():
            raise ValueError(f"store URL file {path} does not exist")
        mode = p.stat().st_mode & 0o777
        if mode & 0o077:
            raise ValueError(f"store URL file {path} has mode {mode:o}: it must not be readable by group/others (use 0600)")
        text = p.read_text(encoding="utf-8").strip()
        url = text.splitlines()[0].strip() if text else ""
        if not url:
            raise ValueError(f"store URL file {path} is empty")
        return url
    from_env = store_url_from_environment(environ)
    if not from_env:
        raise ValueError(f"no store location: pass --store-url-file or set {STORE_URL_ENV}")
    return from_env
