"""The version of every JSON body the registry prints or serves (`--json` output and the HTTP API).

One number for all of them, bumped whenever any shape changes (docs/api.md lists the shapes and their history):
a consumer checks `schema_version` and refuses a shape it does not know instead of misreading it.

Version 2 (this one) put `schema_version` into every body: an object carries it beside its own keys; a list
became `{"schema_version": 2, "items": [...]}`. Version 1 is the unversioned shape before it.
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 2


def versioned(value: Any) -> dict[str, Any]:
    """`value` as a versioned body: an object gains `schema_version` (first), anything else goes under `items`."""
    if isinstance(value, dict):
        return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in value.items() if k != "schema_version"}}
    return {"schema_version": SCHEMA_VERSION, "items": value}
