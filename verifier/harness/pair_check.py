"""The compatibility pre-check every engine runs before it loads or converts a single weight: the pair judged from
its two folders by `registry.domain.pair` (the rules the registry's stored verdicts use), refused with the same
`IncompatiblePair` whichever engine (PyTorch, llama.cpp) was asked to run it.
"""

from __future__ import annotations

from pathlib import Path

from registry.domain import pair
from registry.local import folder_tokenizer_digest
from verifier.folders import read_config
from verifier.harness.contract import IncompatiblePair


def folder_side(folder: Path, method: str | None = None) -> pair.Side:
    """A model folder as one side of a pair: its config (LoadError when it has none or it is no JSON object) and its
    tokenizer digest."""
    return pair.Side(config=read_config(folder), tokenizer_digest=folder_tokenizer_digest(folder), method=method)


def refuse_incompatible(target_dir: Path, drafter_dir: Path, method: str | None = None) -> str:
    """The drafter's method (the requested one, else its config's, else a draft model) once the pair is not
    incompatible; raises `IncompatiblePair` with the verdict's reasons when it is, and `LoadError` when a folder has
    no usable config.json."""
    drafter = folder_side(Path(drafter_dir), method)
    verdict = pair.judge(drafter, folder_side(Path(target_dir)))
    if verdict.verdict == "incompatible":
        raise IncompatiblePair(verdict.reasons)
    return pair.method_to_run(drafter.config, method)
