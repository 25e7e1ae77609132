"""The GPU catalog: every card the issue names is there, sourced, and internally consistent; lookups by the
strings users and runs use find the right card."""

from __future__ import annotations

import copy
import json
from importlib import resources

import pytest

from registry.domain.gpus import GpuCatalogError, find_gpu, load_gpus, parse_gpus

REQUIRED = ["RTX 3060 12GB", "RTX 4060 Ti 16GB", "RTX 3090", "RTX 4090", "RTX 5090", "L4", "L40S", "A100 40GB",
            "A100 80GB", "H100 SXM", "H200", "MI300X"]


def _document() -> dict:
    return json.loads(resources.files("registry").joinpath("data", "gpus.json").read_text(encoding="utf-8"))


def test_bundled_catalog_has_every_named_card_with_sources() -> None:
    gpus = {g.name: g for g in load_gpus()}
    assert set(REQUIRED) <= set(gpus)
    unified = [g for g in gpus.values() if g.kind == "unified"]
    assert {g.vendor for g in unified} == {"Apple"} and len(unified) >= 3
    for gpu in gpus.values():
        assert gpu.sources and all(s.strip() for s in gpu.sources), gpu.name
        assert gpu.derivation, gpu.name


def test_catalog_figures_are_consistent() -> None:
    gpus = {g.name: g for g in load_gpus()}
    assert gpus["RTX 3060 12GB"].memory_gb == 12 and gpus["RTX 3060 12GB"].bandwidth_gb_s == 360
    assert gpus["H200"].memory_gb == 141
    # Bandwidth ordering the vendors publish.
    order = ["RTX 4060 Ti 16GB", "RTX 3060 12GB", "RTX 3090", "RTX 4090", "A100 40GB", "RTX 5090", "A100 80GB",
             "H100 SXM", "H200", "MI300X"]
    bandwidths = [gpus[name].bandwidth_gb_s for name in order]
    assert bandwidths == sorted(bandwidths)
    for gpu in gpus.values():
        if gpu.kind == "discrete":
            assert gpu.bf16_tflops is not None, gpu.name
        if gpu.int8_tops is not None and gpu.bf16_tflops is not None:
            assert gpu.int8_tops >= gpu.bf16_tflops, gpu.name  # integer tensor paths are never slower
        if gpu.int4_tops is not None:
            assert gpu.int8_tops is not None and gpu.int4_tops >= gpu.int8_tops, gpu.name


@pytest.mark.parametrize(("text", "name"), [
    ("RTX 3060", "RTX 3060 12GB"),
    ("NVIDIA GeForce RTX 3060", "RTX 3060 12GB"),
    ("rtx-4090", "RTX 4090"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H200", "H200"),
    ("M4 Max", "Apple M4 Max 128GB"),
    ("AMD Instinct MI300X", "MI300X"),
])
def test_find_gpu_by_the_strings_people_and_torch_use(text: str, name: str) -> None:
    found = find_gpu(load_gpus(), text)
    assert found is not None and found.name == name


@pytest.mark.parametrize("text", ["cpu (x86_64)", "RTX 30600", "", "unknown"])
def test_find_gpu_names_nothing_for_other_hardware(text: str) -> None:
    assert find_gpu(load_gpus(), text) is None


@pytest.mark.parametrize(("change", "message"), [
    (lambda e: e.pop("sources"), "sources"),
    (lambda e: e.update(sources=[]), "sources"),
    (lambda e: e.update(bandwidth_gb_s=-1), "bandwidth_gb_s"),
    (lambda e: e.update(memory_gb=None), "memory_gb"),
    (lambda e: e.update(kind="cloud"), "kind"),
    (lambda e: e.update(int8_tops=True), "int8_tops"),
])
def test_invalid_entries_are_refused_with_the_field_named(change, message: str) -> None:
    document = _document()
    entry = copy.deepcopy(document["gpus"][0])
    change(entry)
    document["gpus"][0] = entry
    with pytest.raises(GpuCatalogError, match=message):
        parse_gpus(document)


def test_an_alias_naming_two_cards_is_refused() -> None:
    document = _document()
    document["gpus"][1]["aliases"] = ["RTX 3060"]
    with pytest.raises(GpuCatalogError, match="also names"):
        parse_gpus(document)
