"""Where a store URL comes from when no Airflow connection names the store: the environment
(:data:`STORE_URL_ENV`) or a private file (:func:`read_private_line`: the CLI's ``--store-file`` and
``--password-file``, a Spark job's ``--store-url-file``). The URL itself is parsed once, by
:meth:`airflow_atlas.kvs.address.StoreAddress.from_url`; secrets are scrubbed by :mod:`.scrub`.
"""
from __future__ import annotations

import os

from ..errors import InvalidInputError

STORE_URL_ENV = "ATLAS_STORE_URL"
"""The environment variable naming the store for processes without an argument for it (the CLI, a Spark
job without ``--store-url-file``); read only by :func:`store_url_from_environment`."""


def read_private_line(path: str, what: str) -> str:
    """The first line (stripped) of the file ``path`` holding a secret (``what`` names it in errors: "store URL
    file", "password file"). A file readable by group or others is refused, as are a missing and an empty
    file: InvalidInputError naming the file, never its content. THE reading of secret files (the CLI's
    ``--store-file`` and ``--password-file``, a Spark job's ``--store-url-file``)."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise InvalidInputError(f"{what} {path} does not exist (or is not a file)")
    mode = p.stat().st_mode & 0o777
    if mode & 0o077:
        raise InvalidInputError(f"{what} {path} has mode {mode:o}: it must not be readable by group/others (use 0600)")
    text = p.read_text(encoding="utf-8").strip()
    line = text.splitlines()[0].strip() if text else ""
    if not line:
        raise InvalidInputError(f"{what} {path} is empty")
    return line


def store_url_from_environment(environ: os._Environ[str] | dict[str, str] | None = None) -> str | None:
    """The store URL of :data:`STORE_URL_ENV` (stripped), or None when it is unset or empty."""
    url = ((os.environ if environ is None else environ).get(STORE_URL_ENV) or "").strip()
    return url or None
