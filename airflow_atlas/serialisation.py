"""THE serialisation of the results: a dataclass to its JSON object and back, by pydantic.

Results are stdlib dataclasses. :func:`to_json` dumps one (its fields in declaration order, nested
dataclasses as objects, ``None`` kept as ``None``; values otherwise as they are, so an ``int`` in a ``float``
field stays an ``int``) and :func:`from_json` builds one from such an object (nested dataclasses included;
keys the class does not have are ignored). Both go through one cached ``pydantic.TypeAdapter`` per class,
for every boundary: the XCom JSON, the CLI's ``--json``, the sweep history rows, the status document and
the Spark job document.

What a class's JSON does beyond its fields is declared on the class, in pydantic's terms:

* a field left out while it is ``None``: ``Annotated[T | None, OMIT_NONE]``;
* a field whose fields are the result's own in the JSON (the counts): ``_dump, _load = flatten("counts",
  SweepCounts)`` in the class body (:func:`flatten`: written in place on the way out, gathered on the way in);
* anything else (a reordering, a derived field): a ``pydantic.model_serializer(mode="wrap")`` method.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

from pydantic import Field, TypeAdapter, model_serializer, model_validator

T = TypeVar("T")

OMIT_NONE = Field(exclude_if=lambda value: value is None)
"""``Annotated[T | None, OMIT_NONE]``: the field is left out of the JSON while it is ``None``."""


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type) -> TypeAdapter[Any]:
    """The class's adapter, built once (building one is the costly part)."""
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


def to_json(result: object) -> dict[str, Any]:
    """``result`` (a dataclass instance) as its JSON object."""
    if not is_dataclass(result) or isinstance(result, type):
        raise TypeError(f"to_json takes a dataclass instance, got {type(result).__name__}")
    data: dict[str, Any] = _adapter(type(result)).dump_python(result)
    return data


def from_json(cls: type[T], data: Mapping[str, Any]) -> T:
    """A ``cls`` (a dataclass) from its JSON object (:func:`to_json`'s output, or a superset of it)."""
    value: T = _adapter(cls).validate_python(data)
    return value


def flatten(name: str, nested: type) -> tuple[Any, Any]:
    """Class-body declaration ``_dump, _load = flatten("counts", SweepCounts)``: the field ``name`` (a
    ``nested`` dataclass) is flat in its owner's JSON - its fields written where it stands, and gathered
    from the owner's keys on the way in (a key missing there takes its default)."""
    keys = tuple(f.name for f in fields(nested))

    def dump(self: object, handler: Callable[[object], dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in handler(self).items():
            if key == name:
                out.update(value)
            else:
                out[key] = value
        return out

    def load(data: Any) -> Any:
        if not isinstance(data, Mapping) or name in data:
            return data
        rest = {key: value for key, value in data.items() if key not in keys}
        rest[name] = {key: data[key] for key in keys if key in data}
        return rest

    return model_serializer(mode="wrap")(dump), model_validator(mode="before")(load)


__all__ = ["OMIT_NONE", "flatten", "from_json", "to_json"]
