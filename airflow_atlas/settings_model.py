"""The settings model: how a setting is declared, validated, layered and documented (engine only).

Every setting of the project - the engine's (:class:`airflow_atlas.config.StoreConfig`) and the Airflow
layer's (:class:`airflow_atlas.airflow.settings.AtlasSettings`) - is ONE dataclass field declared with
:func:`setting`: name (the field), type (the annotation), default, kind (range / choices) and doc, plus
where it is read. From that one declaration come

* validation (:func:`validate_fields`, run by the dataclass's ``__post_init__``): every value finite,
  in its range, ``True``/``False`` never accepted as a number, errors name the setting and where it came
  from (:class:`~airflow_atlas.errors.InvalidInputError`: CLI exit 2, Airflow task failed without retry);
* parsing of text values (CLI ``--set``, Spark conf, URL query): :meth:`Kind.parse`;
* cross-field rules (:class:`Requires`, listed in the class's ``SETTING_RULES``), checked by the same
  ``__post_init__``, so a combination that is refused fails where the settings object is built;
* the checks of one layer's values (:func:`layer_values`), used by THE resolver
  (:func:`airflow_atlas.settings_resolver.resolve`), which applies the precedence of the layers;
* the table in ``docs/SETTINGS.md`` (:func:`markdown_table`, checked by ``tests/unit/test_settings_model.py``).

Adding a setting is one declaration, e.g. in ``StoreConfig``::

    repair_interval_seconds: int = setting(
        864_000, Int(1, 10 * 365 * 86_400), "Cassandra repair interval ...", read="sweep/..."
    )

then ``python -m airflow_atlas.airflow.settings_doc --write-docs`` rewrites the table in docs/SETTINGS.md.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .errors import InvalidInputError
from .validation import check_int

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

SPEC = "atlas_setting"
"""Key of a field's ``metadata`` that holds its :class:`Spec`."""

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


# ----- kinds: what values a setting accepts -------------------------------------------------------------
class Kind:
    """What values a setting accepts. ``check`` returns the normalised value or raises ValueError with the
    reason (the caller adds the setting's name); ``parse`` turns text (CLI, Spark conf, URL) into a value."""

    def check(self, value: Any) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def parse(self, text: str) -> Any:
        return text

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError


def _fmt(number: float) -> str:
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if isinstance(number, int) and number >= 1 << 31 and number & (number - 1) == 0:
        return f"2^{number.bit_length() - 1}"
    return str(number)


@dataclass(frozen=True)
class Int(Kind):
    """An integer in ``lo..hi`` (bool refused)."""

    lo: int
    hi: int

    def check(self, value: Any) -> int:
        try:
            return check_int(value, "value", self.lo, self.hi)
        except InvalidInputError:
            if isinstance(value, int) and not isinstance(value, bool):
                raise ValueError(f"must be between {self.lo} and {self.hi}, got {value!r}") from None
            raise ValueError(f"must be an integer between {self.lo} and {self.hi}, got {value!r}") from None

    def parse(self, text: str) -> int:
        try:
            return int(text.strip().replace("_", ""))
        except ValueError:
            raise ValueError(f"must be an integer between {self.lo} and {self.hi}, got {text!r}") from None

    def describe(self) -> str:
        return f"{_fmt(self.lo)}..{_fmt(self.hi)}"


@dataclass(frozen=True)
class Float(Kind):
    """A finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); ints become floats, bool refused."""

    lo: float
    hi: float
    lo_open: bool = False

    def check(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"must be a number {self._range()}, got {value!r}")
        try:
            number = float(value)
        except OverflowError:  # an int beyond float range
            raise ValueError(f"must be a finite number {self._range()}, got {value!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"must be a finite number {self._range()}, got {value!r}")
        if number > self.hi or number < self.lo or (self.lo_open and number == self.lo):
            raise ValueError(f"must be {self._range()}, got {value!r}")
        return number

    def parse(self, text: str) -> float:
        try:
            return float(text.strip())
        except ValueError:
            raise ValueError(f"must be a number {self._range()}, got {text!r}") from None

    def _range(self) -> str:
        lo, hi = _fmt(self.lo), _fmt(self.hi)
        return f"> {lo} and <= {hi}" if self.lo_open else f"between {lo} and {hi}"

    def describe(self) -> str:
        return f"{'(' if self.lo_open else '['}{_fmt(self.lo)}, {_fmt(self.hi)}]"


@dataclass(frozen=True)
class Bool(Kind):
    """``true`` or ``false`` (JSON booleans; text: true/false, 1/0, yes/no, on/off)."""

    def check(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
        return value

    def parse(self, text: str) -> bool:
        t = text.strip().lower()
        if t in _TRUE:
            return True
        if t in _FALSE:
            return False
        raise ValueError(f"must be true or false, got {text!r}")

    def describe(self) -> str:
        return "true / false"


@dataclass(frozen=True)
class Choice(Kind):
    """One of ``options`` (strings; ``upper``: matched case-insensitively, stored upper case)."""

    options: tuple
    upper: bool = False

    def check(self, value: Any) -> Any:
        if self.upper and isinstance(value, str):
            value = value.strip().upper()
        if isinstance(value, bool) or value not in self.options:
            raise ValueError(f"must be one of {', '.join(map(str, self.options))}, got {value!r}")
        return value

    def parse(self, text: str) -> Any:
        return text.strip()

    def describe(self) -> str:
        return " / ".join(f"`{o}`" for o in self.options)


@dataclass(frozen=True)
class Text(Kind):
    """A non-empty string."""

    what: str = "a non-empty string"

    def check(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"must be {self.what}, got {value!r}")
        return value

    def parse(self, text: str) -> str:
        return text.strip()

    def describe(self) -> str:
        return self.what


@dataclass(frozen=True)
class AbsolutePath(Text):
    """The absolute path of a file (relative paths are refused: a Spark executor or a task runs elsewhere). The
    one rule of a file named by a setting or by the environment variable that stands in for it (e.g.
    ``$ATLAS_TIMESTAMP_TLS_CA``: :func:`airflow_atlas.timestamps.tls.path_from_environment`)."""

    what: str = "an absolute file path"

    def check(self, value: Any) -> str:
        text = super().check(value).strip()
        if not text.startswith("/"):
            raise ValueError(f"must be an absolute file path, got {value!r}")
        return text


@dataclass(frozen=True)
class TextList(Kind):
    """A list of non-empty strings (stored as a tuple)."""

    allow_empty: bool = True

    def check(self, value: Any) -> tuple:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ValueError(f"must be a list of strings, got {value!r}")
        if not value and not self.allow_empty:
            raise ValueError("must not be empty")
        if not all(isinstance(v, str) and v.strip() for v in value):
            raise ValueError(f"must be a list of non-empty strings, got {value!r}")
        return tuple(value)

    def parse(self, text: str) -> tuple:
        return tuple(p.strip() for p in text.split(",") if p.strip())

    def describe(self) -> str:
        return "list of strings" + ("" if self.allow_empty else ", not empty")


@dataclass(frozen=True)
class TextMapping(Kind):
    """A JSON object of string keys to strings or numbers/booleans (e.g. Spark conf)."""

    def check(self, value: Any) -> dict:
        if not isinstance(value, Mapping):
            raise ValueError(f"must be a JSON object, got {value!r}")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str) or not k.strip():
                raise ValueError(f"keys must be non-empty strings, got {k!r}")
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"value of {k!r} must be finite, got {v!r}")
            if not isinstance(v, (str, int, float, bool)):
                raise ValueError(f"value of {k!r} must be a string, number or boolean, got {v!r}")
            out[k] = v
        return out

    def describe(self) -> str:
        return "JSON object"


@dataclass(frozen=True)
class Nullable(Kind):
    """``null`` (text: ``null`` / ``none`` / empty) or a value of ``kind``."""

    kind: Kind

    def check(self, value: Any) -> Any:
        return None if value is None else self.kind.check(value)

    def parse(self, text: str) -> Any:
        return None if text.strip().lower() in ("", "null", "none") else self.kind.parse(text)

    def describe(self) -> str:
        return f"{self.kind.describe()} or null"


# ----- declaration -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """What one setting is: filled in by :func:`setting`; the name is the dataclass field's."""

    kind: Kind
    doc: str
    read: str


def setting(default: Any, kind: Kind, doc: str, *, read: str) -> Any:
    """Declare a setting as a dataclass field: default, accepted values, meaning, and where it is read."""
    spec = Spec(kind=kind, doc=" ".join(doc.split()), read=read)
    if isinstance(default, (dict, list)):
        frozen = dict(default) if isinstance(default, dict) else tuple(default)
        return field(default_factory=lambda: dict(frozen) if isinstance(frozen, dict) else frozen, metadata={SPEC: spec})
    return field(default=default, metadata={SPEC: spec})


def setting_fields(cls_or_obj: DataclassInstance | type[DataclassInstance]) -> list[Field[Any]]:
    """The fields of a settings dataclass that are settings (declared with :func:`setting`)."""
    return [f for f in fields(cls_or_obj) if SPEC in f.metadata]


def spec_of(f: Field) -> Spec:
    return f.metadata[SPEC]


def default_of(f: Field) -> Any:
    if f.default is MISSING and f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


# ----- validation and layering -------------------------------------------------------------------------
def _source(source: str | None) -> str:
    return f" (from {source})" if source else ""


def check_value(f: Field, value: Any, source: str | None = None) -> Any:
    """The normalised value of setting ``f``, or InvalidInputError naming it and its source."""
    try:
        return spec_of(f).kind.check(value)
    except ValueError as exc:
        raise InvalidInputError(f"setting {f.name} {exc}{_source(source)}") from None


def parse_value(f: Field, text: str, source: str | None = None) -> Any:
    """Text (CLI ``--set``, Spark conf, URL query) -> the validated value of setting ``f``."""
    if not isinstance(text, str):
        return check_value(f, text, source)
    try:
        value = spec_of(f).kind.parse(text)
    except ValueError as exc:
        raise InvalidInputError(f"setting {f.name} {exc}{_source(source)}") from None
    return check_value(f, value, source)


@dataclass(frozen=True)
class Requires:
    """A cross-field rule: each setting of ``names`` must satisfy ``safe`` unless the boolean setting
    ``flag`` is true. ``why`` is the reason the error gives (it names both settings)."""

    names: tuple[str, ...]
    flag: str
    safe: Callable[[Any], bool]
    describe_safe: str
    why: str

    def check(self, obj: Any) -> None:
        if getattr(obj, self.flag):
            return
        for name in self.names:
            value = getattr(obj, name)
            if not self.safe(value):
                raise InvalidInputError(
                    f"setting {name}={value} needs setting {self.flag}=true (without it {name} must be "
                    f"{self.describe_safe}): {self.why}"
                )

    def document(self) -> str:
        return f"{' / '.join(f'`{n}`' for n in self.names)} other than {self.describe_safe} need `{self.flag}` = true"


def validate_fields(obj: DataclassInstance) -> None:
    """Validate (and normalise, e.g. int -> float) every setting of a frozen settings dataclass, then its
    cross-field rules (the class's ``SETTING_RULES``): the one check of a settings object."""
    for f in setting_fields(obj):
        object.__setattr__(obj, f.name, check_value(f, getattr(obj, f.name)))
    for rule in getattr(type(obj), "SETTING_RULES", ()):
        rule.check(obj)


@functools.cache
def known_names(cls: type[DataclassInstance]) -> dict[str, Field[Any]]:
    """The settings of a settings dataclass by name (cached per class; do not mutate)."""
    return {f.name: f for f in setting_fields(cls)}


def check_known(cls: type[DataclassInstance], names: Iterable[str], source: str | None, *, also: Iterable[str] = ()) -> None:
    """InvalidInputError listing the names that are not settings of ``cls`` (nor in ``also``)."""
    known = set(known_names(cls)) | set(also)
    unknown = sorted(set(names) - known)
    if unknown:
        raise InvalidInputError(
            f"unknown setting(s): {', '.join(unknown)}{_source(source)}; known: {', '.join(sorted(known))}"
        )


def layer_values(
    cls: type[DataclassInstance], values: Mapping[str, Any], source: str | None, *, text: bool = False
) -> dict[str, Any]:
    """One layer's values, each checked (``text``: parsed from text first); unknown names refused."""
    if not isinstance(values, Mapping):
        raise InvalidInputError(f"settings must be a mapping of name to value, got {values!r}{_source(source)}")
    check_known(cls, values, source)
    by_name = known_names(cls)
    return {
        name: (parse_value(by_name[name], value, source) if text else check_value(by_name[name], value, source))
        for name, value in values.items()
    }


# ----- documentation -----------------------------------------------------------------------------------
def _default_text(value: Any) -> str:
    import json

    if isinstance(value, tuple):
        value = list(value)
    return f"`{json.dumps(value)}`"


def markdown_table(*models: tuple[str, type[DataclassInstance]]) -> str:
    """The settings table of docs/SETTINGS.md: one row per setting of each (layer name, dataclass)."""
    lines = [
        "| key | layer | default | accepted values | meaning | read by |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for layer, cls in models:
        for f in setting_fields(cls):
            spec = spec_of(f)
            cells = [f"`{f.name}`", layer, _default_text(default_of(f)), spec.kind.describe(), spec.doc, spec.read]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    rules = [rule.document() for _, cls in models for rule in getattr(cls, "SETTING_RULES", ())]
    if rules:
        lines += ["", "Cross-field rules (checked with the values, where the settings object is built):", ""]
        lines += [f"* {rule}" for rule in rules]
    return "\n".join(lines) + "\n"
