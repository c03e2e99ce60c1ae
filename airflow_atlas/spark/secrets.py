"""The store URL of a Spark job: read from a 0600 file or the environment, never shown unredacted (the
scrubbing and redaction: :func:`airflow_atlas.kvs.scrub.scrub`, :func:`~airflow_atlas.kvs.scrub.redact_url`)."""
from __future__ import annotations

from ..kvs.url import STORE_URL_ENV, read_private_line, store_url_from_environment


def read_store_url(path: str | None = None, environ: dict[str, str] | None = None) -> str:
    """The store URL from ``path`` (first line, stripped) or from :data:`STORE_URL_ENV`.

    A file readable by group or others is refused (it may hold a password). Raises ValueError with a
    message that never contains the URL.
    """
    if path:
        return read_private_line(path, "store URL file")  # InvalidInputError is a ValueError
    from_env = store_url_from_environment(environ)
    if not from_env:
        raise ValueError(f"no store location: pass --store-url-file or set {STORE_URL_ENV}")
    return from_env
