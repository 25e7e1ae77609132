"""The GPU catalog (registry/data/gpus.json): memory, bandwidth and tensor throughput of the cards users price
drafters for, every entry with its sources.

Discrete cards and unified-memory machines (Apple M-series) are separate kinds: a unified machine shares its
memory with the operating system and the CPU, so only part of it is usable by the GPU (see registry.domain.pricing).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from registry.errors import UserError

SCHEMA_VERSION = 1
KINDS = ("discrete", "unified")


class GpuCatalogError(UserError, ValueError):
    """The GPU catalog file is unreadable or an entry is invalid; the message names the entry and field."""


@dataclass(frozen=True)
class Gpu:
    name: str
    aliases: tuple[str, ...]
    kind: str  # "discrete" or "unified"
    vendor: str
    memory_gb: float  # vendor "GB", read as GiB (see registry.memory)
    bandwidth_gb_s: float  # peak, 10^9 bytes/s
    bf16_tflops: float | None  # dense tensor throughput; None where the vendor does not state it
    int8_tops: float | None
    int4_tops: float | None
    derivation: str
    sources: tuple[str, ...]

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.bandwidth_gb_s * 1e9


def load_gpus(path: Path | None = None) -> tuple[Gpu, ...]:
    """Read and validate the catalog (default: the one packaged with registry)."""
    origin = str(path) if path is not None else "registry/data/gpus.json"
    try:
        if path is None:
            text = resources.files("registry").joinpath("data", "gpus.json").read_text(encoding="utf-8")
        else:
            text = path.read_text(encoding="utf-8")
        document = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GpuCatalogError(f"GPU catalog {origin} cannot be read: {exc}") from None
    return parse_gpus(document)


def parse_gpus(document: Any) -> tuple[Gpu, ...]:
    if not isinstance(document, dict) or document.get("schema_version") != SCHEMA_VERSION:
        raise GpuCatalogError(f"GPU catalog: schema_version must be {SCHEMA_VERSION}")
    raw_gpus = document.get("gpus")
    if not isinstance(raw_gpus, list) or not raw_gpus:
        raise GpuCatalogError("GPU catalog: 'gpus' must be a non-empty list")
    gpus = tuple(_gpu(i, raw) for i, raw in enumerate(raw_gpus))
    seen: dict[str, str] = {}
    for gpu in gpus:
        for label in (gpu.name, *gpu.aliases):
            key = normalize(label)
            if key in seen and seen[key] != gpu.name:
                raise GpuCatalogError(f"GPU catalog: {label!r} of {gpu.name} also names {seen[key]}")
            seen[key] = gpu.name
    return gpus


def _gpu(index: int, raw: Any) -> Gpu:
    where = f"GPU catalog gpus[{index}]"
    if not isinstance(raw, dict):
        raise GpuCatalogError(f"{where}: not an object")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise GpuCatalogError(f"{where}: name must be a non-empty string")
    where = f"GPU catalog entry {name!r}"
    kind = raw.get("kind")
    if kind not in KINDS:
        raise GpuCatalogError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    sources = raw.get("sources")
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s.strip() for s in sources):
        raise GpuCatalogError(f"{where}: sources must be a non-empty list of strings (every figure needs one)")
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise GpuCatalogError(f"{where}: aliases must be a list of strings")

    def number(field: str, *, required: bool) -> float | None:
        value = raw.get(field)
        if value is None and not required:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise GpuCatalogError(f"{where}: {field} must be a positive number, got {value!r}")
        return float(value)

    return Gpu(
        name=name.strip(),
        aliases=tuple(a.strip() for a in aliases),
        kind=kind,
        vendor=str(raw.get("vendor") or ""),
        memory_gb=number("memory_gb", required=True),  # type: ignore[arg-type]
        bandwidth_gb_s=number("bandwidth_gb_s", required=True),  # type: ignore[arg-type]
        bf16_tflops=number("bf16_tflops", required=False),
        int8_tops=number("int8_tops", required=False),
        int4_tops=number("int4_tops", required=False),
        derivation=str(raw.get("derivation") or ""),
        sources=tuple(sources),
    )


@functools.cache  # a few dozen labels, compared against every run's hardware when runs are priced
def normalize(label: str) -> str:
    """Lower case, letters and digits only: 'GeForce RTX 3060' and 'rtx-3060' compare equal."""
    return re.sub(r"[^a-z0-9]", "", label.lower())


def find_gpu(gpus: tuple[Gpu, ...], text: str) -> Gpu | None:
    """The entry a user's or a run's hardware string names, or None.

    Exact names and aliases win; otherwise the longest name or alias the text contains ('NVIDIA GeForce RTX
    3090' contains 'rtx3090'; 'A100-SXM4-80GB' matches 'A100 80GB' through its alias). A digit right after the
    match rejects it, so 'RTX 30600' or 'H1000' name nothing.
    """
    wanted = normalize(text)
    if not wanted:
        return None
    for gpu in gpus:
        if wanted in (normalize(label) for label in (gpu.name, *gpu.aliases)):
            return gpu
    best: tuple[int, Gpu] | None = None
    for gpu in gpus:
        for label in (gpu.name, *gpu.aliases):
            key = normalize(label)
            at = wanted.find(key)
            if at < 0 or (at + len(key) < len(wanted) and wanted[at + len(key)].isdigit()):
                continue
            if best is None or len(key) > best[0]:
                best = (len(key), gpu)
    return best[1] if best else None
