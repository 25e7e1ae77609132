"""Counting the project's reads of one file (`Path.read_bytes` / `Path.read_text`, how every reader of a folder's
config.json reads it), for tests that a verify reads a drafter's config once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def count_reads(monkeypatch: pytest.MonkeyPatch, watched: Path) -> list[Path]:
    """A list that grows by one each time `watched` is read through `Path`, for the rest of the test."""
    reads: list[Path] = []
    read_bytes, read_text = Path.read_bytes, Path.read_text

    def counted_bytes(self: Path) -> bytes:
        if self == watched:
            reads.append(self)
        return read_bytes(self)

    def counted_text(self: Path, *args: Any, **kwargs: Any) -> str:
        if self == watched:
            reads.append(self)
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_bytes", counted_bytes)
    monkeypatch.setattr(Path, "read_text", counted_text)
    return reads
