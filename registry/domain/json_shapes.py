"""The version of every JSON body the registry prints or serves (`--json` output and the HTTP API).

One number for all of them, bumped whenever any shape changes (docs/api.md lists the shapes and their history):
a consumer checks `schema_version` and refuses a shape it does not know instead of misreading it.

Version 2 put `schema_version` into every body: an object carries it beside its own keys; a list became
`{"schema_version": 2, "items": [...]}`. Version 1 is the unversioned shape before it. Version 3: the API's errors
are RFC 9457 problem details and its pages keyset cursors. Version 4 (this one): `find`, `launch` and the API's
target drafters and recommendation carry `concurrency`, what measured speedup curves say (docs/api.md).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import date, datetime
from typing import Any

SCHEMA_VERSION = 4


def versioned(value: Any) -> dict[str, Any]:
    """`value` as a versioned body: an object (a dict, or a dataclass written as one) gains `schema_version`
    (first); anything else goes under `items`."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = jsonable(value)
    if isinstance(value, dict):
        return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in value.items() if k != "schema_version"}}
    return {"schema_version": SCHEMA_VERSION, "items": value}


def json_default(value: Any) -> Any:
    """How values that JSON lacks are written, the same in `--json` and the API: dates ISO 8601, dataclasses as
    objects, sets and tuples as arrays, anything else as its text."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=json_default))
