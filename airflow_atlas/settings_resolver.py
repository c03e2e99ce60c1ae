"""THE settings resolver: every layer of engine settings goes through :func:`resolve`, once.

Where a value can come from, lowest precedence first (:class:`Rank`; docs/SETTINGS.md):

===  ================  ==========================================================================
 1   ``DEFAULTS``      the declarations (:class:`~airflow_atlas.config.StoreConfig`), or a ``base``
 2   ``VARIABLE``      the ``atlas_settings`` Airflow Variable (engine keys)
 3   ``TASK``          an operator's or sensor's ``store_config`` argument, a form's intensity
 4   ``SPARK_CONF``    ``spark.atlas.store.<key>`` Spark conf of a job
 5   ``COMMAND_LINE``  ``atlas-sweep --set KEY=VALUE`` (and its ``--max-entries-per-second``); a
                       Spark job's ``--setting KEY=VALUE``
 6   ``STORE``         what describes the one store: the store URL's query options and the Airflow
                       connection's extras (replica-safety keys only)
===  ================  ==========================================================================

:func:`resolve` takes the layers in any order, applies that precedence once (key by key: a higher layer
wins), checks every value by its key's declaration (text values are parsed by the key's kind) naming the
key and the layer it came from, and builds ONE immutable :class:`~airflow_atlas.config.StoreConfig`, whose
construction checks the cross-field rules (e.g. a consistency level below ALL for sweep deletes needs
``allow_weak_sweep_consistency``, which may come from another layer). That object is what the engine gets
(``AtlasStore``, the key-value service's :class:`~airflow_atlas.kvs.consistency.ConsistencyPolicy` built
from it) and what is serialised, once, to Spark (``StoreConfig.to_json``).

Nothing here imports Airflow: the Airflow layer reads its Variable and connection and hands their values
in as layers.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .config import StoreConfig
from .errors import InvalidInputError
from .kvs.consistency import SETTING_NAMES as STORE_LAYER_KEYS
from .settings_model import layer_values, setting_fields

if TYPE_CHECKING:
    from .kvs.address import StoreAddress


class Rank(enum.IntEnum):
    """A layer's place in the precedence: a higher rank wins."""

    DEFAULTS = 1
    VARIABLE = 2
    TASK = 3
    SPARK_CONF = 4
    COMMAND_LINE = 5
    STORE = 6


@dataclass(frozen=True)
class Layer:
    """One layer's values (only the keys it sets).

    :param rank: where it stands in the precedence (:class:`Rank`).
    :param source: how errors name it, e.g. ``"the atlas_settings Variable"``, ``"--set"``.
    :param values: key -> value; JSON values, or text (``text=True``: each parsed by its key's kind, e.g.
        ``"yes"`` for a boolean; non-text values are checked as they are).
    """

    rank: Rank
    source: str
    values: Mapping[str, Any] = field(default_factory=dict)
    text: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.values, Mapping):
            raise InvalidInputError(
                f"settings must be a mapping of name to value, got {self.values!r} (from {self.source})"
            )
        if self.rank is Rank.STORE:
            outside = sorted(set(self.values) - set(STORE_LAYER_KEYS))
            if outside:
                raise InvalidInputError(
                    f"{self.source} may set only the replica-safety settings ({', '.join(STORE_LAYER_KEYS)}), "
                    f"not {', '.join(outside)}"
                )


def resolve(*layers: Layer, base: StoreConfig | None = None) -> StoreConfig:
    """The engine settings of ``layers`` over the defaults (or over ``base``, an already resolved object
    standing for the layers below them): precedence applied once, every value and cross-field rule checked
    once. Raises InvalidInputError naming the key and the layer."""
    merged: dict[str, Any] = {} if base is None else {f.name: getattr(base, f.name) for f in setting_fields(base)}
    for layer in sorted(layers, key=lambda lay: lay.rank):  # stable: equal ranks keep the given order
        merged.update(layer_values(StoreConfig, layer.values, layer.source, text=layer.text))
    try:
        return StoreConfig(**merged)
    except InvalidInputError as exc:  # a cross-field rule: say which layers were combined
        sources = ", ".join(lay.source for lay in sorted(layers, key=lambda lay: lay.rank) if lay.values)
        raise InvalidInputError(f"{exc} (settings from: {sources or 'the defaults'})") from None


DEFAULT_SOURCE = "default"
"""The source of a value no layer set (:func:`sourced`)."""


@dataclass(frozen=True)
class SettingValue:
    """One effective setting and where it came from: ``source`` is the name of the highest layer that set
    it (:attr:`Layer.source`) or :data:`DEFAULT_SOURCE`; ``group``: ``engine`` or ``Airflow``; ``value``
    is its JSON value."""

    name: str
    group: str
    value: Any
    source: str


def sourced(config: StoreConfig, *layers: Layer) -> list[SettingValue]:
    """Each engine setting of ``config`` (what :func:`resolve` built from ``layers``) with the layer it came
    from, by the same precedence (a higher rank wins; equal ranks: the later one)."""
    source: dict[str, str] = {}
    for layer in sorted(layers, key=lambda lay: lay.rank):
        source.update(dict.fromkeys(layer.values, layer.source))
    values = config.to_json()
    return [SettingValue(f.name, "engine", values[f.name], source.get(f.name, DEFAULT_SOURCE)) for f in setting_fields(config)]


def text_layer(rank: Rank, items: Mapping[str, str] | Iterable[tuple[str, str]], source: str) -> Layer:
    """A layer of ``NAME=VALUE`` text pairs (CLI ``--set``, a Spark job's ``--setting``); a name given
    twice is refused."""
    pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
    values: dict[str, str] = {}
    for name, value in pairs:
        if name in values:
            raise InvalidInputError(f"setting {name} given twice (from {source})")
        values[name] = value
    return Layer(rank, source, values, text=True)


def parse_assignments(items: Iterable[str], source: str) -> list[tuple[str, str]]:
    """``["NAME=VALUE", ...]`` -> ``[(name, value), ...]`` (text, parsed later by each key's kind)."""
    out = []
    for item in items or ():
        name, sep, value = str(item).partition("=")
        if not sep or not name.strip():
            raise InvalidInputError(f"setting {item!r} is not NAME=VALUE (from {source})")
        out.append((name.strip(), value.strip()))
    return out


def address_layer(address: StoreAddress) -> Layer:
    """The replica-safety settings a store address carries (a URL's query, a connection's extras), as the
    ``STORE`` layer (text or JSON values, named by where they came from)."""
    return Layer(Rank.STORE, address.settings_source, dict(address.settings), text=True)


def with_address(config: StoreConfig | None, address: StoreAddress) -> StoreConfig:
    """``config`` (the resolved layers below the store; None = the defaults) with the address's
    replica-safety settings on top: what :meth:`airflow_atlas.store.AtlasStore.open` uses."""
    layer = address_layer(address)
    if not layer.values:
        return config or StoreConfig()
    return resolve(layer, base=config)
