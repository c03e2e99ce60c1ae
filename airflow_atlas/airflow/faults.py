"""Fault injection for tests and failure drills: the environment variable ``ATLAS_FAULT_INJECT``.

Unset (the normal case) nothing happens. Otherwise it holds ``;``-separated rules, each
``point[:key=value...]``. A rule fires when a task reaches ``point`` with matching attributes, and only on
attempts ``try_number <= tries`` (default 1), so a retried task gets past it. Example::

    ATLAS_FAULT_INJECT="sweep_shard:shard=1:strategy=THOROUGH:tries=1"

fails the first attempt of the task that sweeps shard 1 THOROUGH, just before the sweep starts (after the
lock was taken, so the retry also exercises lease recovery). With ``hang=<seconds>`` the rule makes the
attempt hang that long instead of failing (to drive ``execution_timeout`` and ``on_kill``). Points:
``sweep_shard`` (attributes ``shard``, ``strategy``), ``full_sweep`` (``table``), ``compaction``
(``table``), ``scrub``.
"""
from __future__ import annotations

import os
import time

ENV = "ATLAS_FAULT_INJECT"


class InjectedFault(RuntimeError):
    """Raised by :func:`maybe_fail` when an ``ATLAS_FAULT_INJECT`` rule matches."""


def _rules(spec: str) -> list[tuple[str, dict[str, str]]]:
    rules = []
    for part in spec.split(";"):
        part = part.strip()
        if not part:
            continue
        point, *pairs = part.split(":")
        attrs = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep:
                raise ValueError(f"{ENV}: expected key=value, got {pair!r} in {part!r}")
            attrs[key.strip()] = value.strip()
        rules.append((point.strip(), attrs))
    return rules


def maybe_fail(point: str, try_number: int | None, **attrs) -> None:
    """Raise InjectedFault if a rule for ``point`` matches ``attrs`` on this attempt."""
    spec = os.environ.get(ENV, "").strip()
    if not spec:
        return
    for rule_point, rule in _rules(spec):
        if rule_point != point:
            continue
        tries = int(rule.get("tries", "1"))
        if all(str(attrs.get(k, "")).upper() == v.upper() for k, v in rule.items() if k not in ("tries", "hang")):
            if (try_number or 1) <= tries:
                if "hang" in rule:
                    time.sleep(float(rule["hang"]))
                    return
                raise InjectedFault(f"injected fault at {point} {attrs} (attempt {try_number}, {ENV})")
