"""The JSON form of the registry's typed values (a `Run` and its parts): one encoding for the store's JSON columns
and the command line's `--json`, read back into the same types by their annotations, so no caller re-keys a
measurement by hand.

Reading is lenient the way stored history needs: a key a row lacks (written before the field existed) reads as
the field's default, or None; a key the type no longer has is ignored. Non-finite floats are written as null
(JSON has no inf or NaN, and PostgreSQL's JSON refuses them).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from datetime import datetime
from functools import cache
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def to_json(value: Any) -> Any:
    """A dataclass (or a container of them) as plain JSON values; fields marked transient are left out."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.metadata.get("transient")}
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def from_json(cls: type[T], data: Any) -> T:
    """`data` (as `to_json` wrote it) as an instance of the dataclass `cls`."""
    return typing.cast(T, _reader(cls)(data))


Reader = Callable[[Any], Any]


@cache
def _reader(kind: Any) -> Reader:
    """How to read a value of the annotated type `kind`, worked out once per type (runs are read by the
    thousand when the dashboard or the pricing model lists them)."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(kind) if a is not type(None)]
        return _optional(_reader(options[0])) if len(options) == 1 else _as_is
    if dataclasses.is_dataclass(kind):
        return _dataclass_reader(kind)
    if origin is tuple:
        args = typing.get_args(kind)
        item = _reader(args[0]) if len(args) == 2 and args[1] is Ellipsis else _as_is
        return _optional(lambda data: tuple(item(v) for v in data))
    if origin is list:
        (arg,) = typing.get_args(kind) or (Any,)
        item = _reader(arg)
        return _optional(lambda data: [item(v) for v in data])
    if origin is dict:
        _, arg = typing.get_args(kind) or (str, Any)
        value = _reader(arg)
        return _optional(lambda data: {k: value(v) for k, v in data.items()})
    if kind is float:
        return _optional(lambda data: float(data) if isinstance(data, int) and not isinstance(data, bool) else data)
    if kind is datetime:
        return _optional(lambda data: datetime.fromisoformat(data) if isinstance(data, str) else data)
    return _as_is


def _as_is(data: Any) -> Any:
    return data


def _optional(read: Reader) -> Reader:
    return lambda data: None if data is None else read(data)


def _dataclass_reader(kind: type) -> Reader:
    hints = typing.get_type_hints(kind)
    # (name, reader, required): a required field a row lacks was written before the field existed and reads None.
    parts = [(f.name, _reader(hints[f.name]),
              f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
             for f in dataclasses.fields(kind)]

    def read(data: Any) -> Any:
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ValueError(f"{kind.__name__}: expected an object, got {type(data).__name__}")
        values = {}
        for name, field_reader, required in parts:
            if name in data:
                values[name] = field_reader(data[name])
            elif required:
                values[name] = None
        return kind(**values)

    return read
