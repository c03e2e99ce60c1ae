"""What a table of the store is: its name (the rule every backend enforces), its write mode (``LOGICAL``,
``LWT``, ``WALLCLOCK``: :mod:`airflow_atlas.kvs.api` says what each allows), its sweep strategy (``NOTHING``,
``CONSERVATIVE``, ``THOROUGH``: spec 003) and the metadata the store's registry keeps for it. A leaf of
``kvs/``: the interface (:mod:`.api`), both backends and the engine import it.
"""
from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import InvalidInputError

_TABLE_NAME = re.compile(r"^_?[a-z][a-z0-9_]{0,46}$")
_USER_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,46}$")


class SweepStrategy(str, enum.Enum):
    """How a table is swept (spec 003)."""

    NOTHING = "NOTHING"
    CONSERVATIVE = "CONSERVATIVE"
    THOROUGH = "THOROUGH"

    @classmethod
    def parse(cls, value: str | SweepStrategy) -> SweepStrategy:
        if isinstance(value, SweepStrategy):
            return value
        try:
            return cls[str(value).strip().upper()]
        except KeyError:
            raise InvalidInputError(
                f"unknown sweep strategy {value!r}: expected one of NOTHING, CONSERVATIVE, THOROUGH"
            ) from None

    @property
    def is_swept(self) -> bool:
        """THE "is swept" predicate: CONSERVATIVE and THOROUGH have a sweep queue; NOTHING is never swept."""
        return self is not SweepStrategy.NOTHING

    @classmethod
    def parse_swept(cls, value: str | SweepStrategy) -> SweepStrategy:
        """:meth:`parse`, refusing NOTHING (InvalidInputError): for arguments that name what to sweep."""
        strategy = cls.parse(value)
        if not strategy.is_swept:
            raise InvalidInputError("strategy NOTHING is never swept: choose CONSERVATIVE or THOROUGH")
        return strategy


SWEEPABLE_STRATEGIES = tuple(s for s in SweepStrategy if s.is_swept)
"""``(CONSERVATIVE, THOROUGH)``: the strategies that have a sweep queue and are swept, in sweep order."""

SWEEPABLE_STRATEGY_NAMES = tuple(s.value for s in SWEEPABLE_STRATEGIES)
"""``("CONSERVATIVE", "THOROUGH")``: :data:`SWEEPABLE_STRATEGIES` as strings (forms, JSON, arguments)."""


class WriteMode(str, enum.Enum):
    LOGICAL = "logical"
    LWT = "lwt"
    WALLCLOCK = "wallclock"


@dataclass(frozen=True)
class TableMetadata:
    """Per-table settings stored in the store's metadata registry."""

    strategy: SweepStrategy = SweepStrategy.CONSERVATIVE
    write_mode: WriteMode = WriteMode.LOGICAL
    # Extra Cassandra table options, e.g. {"bloom_filter_fp_chance": 0.0001, "gc_grace_seconds": 0}.
    # Only a fixed allow-list of option names is accepted by the Cassandra backend.
    cassandra_options: Mapping[str, object] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "strategy": self.strategy.value,
            "write_mode": self.write_mode.value,
            "cassandra_options": dict(self.cassandra_options),
        }

    @classmethod
    def from_json(cls, data: Mapping) -> TableMetadata:
        return cls(
            strategy=SweepStrategy.parse(data.get("strategy", "CONSERVATIVE")),
            write_mode=WriteMode(data.get("write_mode", "logical")),
            cassandra_options=dict(data.get("cassandra_options") or {}),
        )


def validate_table_name(name: str, *, internal_ok: bool = True) -> str:
    """Return ``name`` if it is a valid Atlas table name, else raise InvalidInputError naming it.

    Names are lower-case ASCII letters, digits and underscores, starting with a letter, at most 47
    characters. Internal tables of the engine additionally start with one underscore.
    """
    pattern = _TABLE_NAME if internal_ok else _USER_TABLE_NAME
    if not isinstance(name, str) or not pattern.match(name):
        raise InvalidInputError(
            f"invalid table name {name!r}: use 1-47 lower-case letters, digits or underscores, starting with a letter"
        )
    return name
