"""Secret scrubbing: THE one place that finds the secrets of a store URL and takes them out of any text
(a leaf: it imports nothing of the project, so the backends' error translation, the CLI, the Spark jobs and
their submission all use it without importing the store address or a backend).

* :func:`url_secrets` - every secret of a URL (the password, its pieces, ``password=`` query values);
* :func:`scrub` - a text with secrets (and, given one, a whole URL) replaced by ``***``;
* :func:`redact_url` - a URL with its password replaced by ``***`` (what logs and errors show).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote


def userinfo_end(rest: str) -> int:
    """Index of the ``@`` that ends the credentials of ``rest`` (the URL after ``scheme://``), or -1.

    The LAST ``@`` of the URL: a password typed with an unescaped ``/``, ``?``, ``#`` or ``@`` still counts
    as the password (never as a host, a port, a path or a query), so no parse error can echo part of it.
    (An ``@`` inside a query value must therefore be percent-encoded as ``%40``.)"""
    return rest.rfind("@")


def url_secrets(url: object) -> list[str]:
    """Every secret in ``url``, to scrub from any text: the password of the credentials (raw and
    percent-decoded, and its pieces between the characters a parser splits at) and ``password=`` query
    values. Longest first. (THE credential scrubbing of the project: :func:`redact_url` and
    :func:`scrub` use it.)"""
    if not isinstance(url, str) or "://" not in url:
        return []
    scheme, _, rest = url.partition("://")
    found: set[str] = set()
    at = -1 if scheme.strip().lower() == "sqlite" else userinfo_end(rest)
    if at >= 0:
        userinfo = rest[:at]
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            found.update({password, unquote(password)})
            found.update(p for p in re.split(r"[/?#@:&=;,\[\]]", password) if len(p) >= 3)
    for value in re.findall(r"(?i)[?&]password=([^&#]*)", rest[at + 1 :] if at >= 0 else rest):
        found.update({value, unquote(value)})
    return sorted((s for s in found if s), key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str] = (), *, url: str | None = None) -> str:
    """``text`` with each secret (e.g. :func:`url_secrets`) replaced by ``***``; with ``url``, also that URL
    (written out whole, it becomes :func:`redact_url`) and every secret in it. THE scrubbing of the project
    (the CLI, the Cassandra backend's errors, the Spark jobs and their submission use it)."""
    if not text:
        return text
    if url:
        text = text.replace(url, redact_url(url))
        secrets = [*secrets, *url_secrets(url)]
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def redact_url(url: str) -> str:
    """``url`` with the password (and any ``password=`` query value) replaced by ``***``."""
    if not isinstance(url, str):
        return "<not a URL>"
    scheme, sep, rest = url.partition("://")
    if not sep:
        return re.sub(r"(?i)(password=)[^&#]*", r"\1***", url)
    at = -1 if scheme.strip().lower() == "sqlite" else userinfo_end(rest)
    if at >= 0:
        userinfo, rest = rest[:at], rest[at + 1 :]
        user = userinfo.split(":", 1)[0]
        prefix = f"{user}:***@" if ":" in userinfo else f"{user}@"
    else:
        prefix = ""
    rest = re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", rest)
    return scrub(f"{scheme}://{prefix}{rest}", url_secrets(url))
