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
    return typing.cast(T, _read(cls, data))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _read(kind: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(kind) if a is not type(None)]
        return _read(options[0], data) if len(options) == 1 else data
    if dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            raise ValueError(f"{kind.__name__}: expected an object, got {type(data).__name__}")
        hints = _hints(kind)
        values = {}
        for f in dataclasses.fields(kind):
            if f.name in data:
                values[f.name] = _read(hints[f.name], data[f.name])
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                values[f.name] = None  # written before the field existed
        return kind(**values)
    if origin is tuple:
        args = typing.get_args(kind)
        item = args[0] if len(args) == 2 and args[1] is Ellipsis else Any
        return tuple(_read(item, v) for v in data)
    if origin is list:
        (item,) = typing.get_args(kind) or (Any,)
        return [_read(item, v) for v in data]
    if origin is dict:
        _, item = typing.get_args(kind) or (str, Any)
        return {k: _read(item, v) for k, v in data.items()}
    if kind is float and isinstance(data, int) and not isinstance(data, bool):
        return float(data)
    if kind is datetime and isinstance(data, str):
        return datetime.fromisoformat(data)
    return data
