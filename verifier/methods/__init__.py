"""Drafting methods the verifier can run, by method name.

Each module exposes `build_proposer(drafter_dir: Path, target: LoadedTarget, settings: RunSettings, raw_config:
dict) -> Proposer` (see `verifier.proposer`); `build_proposer(method, ...)` here resolves the draft length once
(`verifier.harness.contract.resolve_draft_length`) and hands it down in the settings: a builder never clamps it.
`raw_config` is the drafter's config.json as the harness's pre-check read it: a builder never reads it again.
Modules are imported only when their method is used, so a method's heavy imports cost nothing to the others.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from registry.domain.measurement import RunSettings
from registry.local import read_config
from verifier.harness.contract import resolve_draft_length

if TYPE_CHECKING:  # they pull in torch, which a method's own module imports only when the method runs
    from verifier.loading import LoadedTarget
    from verifier.proposer import Proposer

METHOD_MODULES: dict[str, str] = {
    "draft-lm": "verifier.methods.draft_lm",
    "dflash": "verifier.methods.dflash.layouts",  # z-lab folders go on to verifier.methods.dflash.proposer
    "gemma4-assistant": "verifier.methods.gemma4_assistant",
    "eagle3": "verifier.methods.eagle3.proposer",
    "dspark": "verifier.methods.dspark",
    "dflash2": "verifier.methods.dflash2.proposer",
}


class UnsupportedMethod(ValueError):
    """The drafter's method has no runnable implementation in the verifier."""


class ProposerBuilder(Protocol):
    def __call__(self, drafter_dir: Path, target: LoadedTarget, settings: RunSettings,
                 raw_config: dict[str, Any]) -> Proposer: ...


def supported_methods() -> list[str]:
    return sorted(METHOD_MODULES)


def proposer_builder(method: str) -> ProposerBuilder:
    """The `build_proposer` function of `method`; a clear error for unknown or not-yet-runnable methods."""
    module_path = METHOD_MODULES.get(method)
    if module_path is None:
        raise UnsupportedMethod(
            f"the verifier cannot run drafter method {method!r}; supported methods: {', '.join(supported_methods())}"
        )
    try:
        module = importlib.import_module(module_path)
    except ModuleNotFoundError as error:
        if error.name != module_path:
            raise
        raise UnsupportedMethod(
            f"drafter method {method!r} is not available in this installation ({module_path} is missing); "
            f"supported methods: {', '.join(supported_methods())}"
        ) from error
    return module.build_proposer


def build_proposer(method: str, drafter_dir: Path, target: LoadedTarget, settings: RunSettings,
                   drafter_config: dict[str, Any] | None = None) -> Proposer:
    """The proposer of `method` for `target`, drafting the length resolved here, once, from the request and the
    drafter's config (EAGLE-3's default, its config's `speculative_tokens`, stays its builder's). `drafter_config`:
    the drafter's config.json as already read (a verify's pre-check); read here once when a caller has none."""
    config = drafter_config if drafter_config is not None else read_config(Path(drafter_dir))
    draft_length = resolve_draft_length(method, Path(drafter_dir), config, settings.draft_length)
    return proposer_builder(method)(Path(drafter_dir), target, replace(settings, draft_length=draft_length), config)
