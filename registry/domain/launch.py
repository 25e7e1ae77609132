"""Launch commands: the exact command that serves one target with one drafter on vLLM, SGLang or llama.cpp.

Pure: the caller hands in the pair's facts (repo ids, the shas the registry recorded, method, block size) and,
when the pair was measured, the draft length that `price` found best; this module turns them into argv lists
and says, for an engine that cannot run the method, why not.

Every flag and config key written here is checked against the engines' own definitions at a pinned source
commit (tests/data/engine_sources.json, tests/registry/test_launch.py), never against these templates; the
llama.cpp commands are executed on the tiny pairs (tests/llamacpp/test_launch_commands.py).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field, replace

from registry.domain.coverage import DEEPSPEC, DEEPSPEC_GEMMA4
from registry.domain.llama_commands import (
    CONVERTER,
    EAGLE3_CONVERTER_KEY,
    LLAMA_SPEC_TYPES,
    NEEDS_TARGET_DIR,
    converter_args,
    eagle3_layers_step,
    server_draft_args,
)

ENGINES = ("vllm", "sglang", "llamacpp")

# The project's default for chain drafters (the verifier's DRAFT_LM_DEFAULT_LENGTH) when no run was measured.
CHAIN_DEFAULT_LENGTH = 4

# Drafter method → vLLM `--speculative-config` "method" (SpeculativeMethod in vllm/config/speculative.py).
VLLM_METHODS: dict[str, str] = {
    "eagle3": "eagle3",
    "dflash": "dflash",
    "dspark": "dspark",
    "gemma4-assistant": "mtp",
    "draft-lm": "draft_model",
}
# Drafter method → SGLang `--speculative-algorithm` (builtins in python/sglang/srt/server_args.py).
SGLANG_ALGORITHMS: dict[str, str] = {
    "eagle3": "EAGLE3",
    "dflash": "DFLASH",
    "dspark": "DSPARK",
    "draft-lm": "STANDALONE",
}

@dataclass(frozen=True)
class MinimumVersion:
    version: str  # "unknown" when no public source states it
    source: str


# Minimum engine versions per method, each with where it is stated. "unknown" rather than a guess.
MINIMUM_VERSIONS: dict[tuple[str, str], MinimumVersion] = {
    ("vllm", "dflash"): MinimumVersion("0.20.1", "vllm-project/vllm PR #36847 (https://github.com/vllm-project/vllm/pull/36847)"),
    ("vllm", "gemma4-assistant"): MinimumVersion("0.21", "vllm-project/vllm PR #41745, merged after v0.20.2 "
                                                       "(https://discuss.vllm.ai/t/how-to-use-gemma-4-with-the-new-mtp-drafters/2619)"),
    ("vllm", "eagle3"): MinimumVersion("unknown", "no release named by a public source read here; method eagle3 in "
                                                  "vllm/config/speculative.py at the pinned commit"),
    ("vllm", "dspark"): MinimumVersion("unknown", "no release named by a public source read here; method dspark in "
                                                  "vllm/config/speculative.py at the pinned commit"),
    ("vllm", "draft-lm"): MinimumVersion("unknown", "method draft_model in vllm/config/speculative.py at the pinned commit"),
    ("sglang", "dflash"): MinimumVersion("unknown", "sgl-project/sglang PR #16818 (2026-01-22; release not named)"),
    ("sglang", "eagle3"): MinimumVersion("unknown", "EAGLE3 builtin in python/sglang/srt/server_args.py at the pinned commit"),
    ("sglang", "dspark"): MinimumVersion("unknown", "DSPARK builtin in python/sglang/srt/server_args.py at the pinned commit"),
    ("sglang", "draft-lm"): MinimumVersion("unknown", "STANDALONE builtin in python/sglang/srt/server_args.py at the pinned commit"),
    ("llamacpp", "dflash"): MinimumVersion("unknown build (PR merged 2026-06-28)", "ggml-org/llama.cpp PR #22105"),
    ("llamacpp", "dflash2"): MinimumVersion("unknown build", "ggml-org/llama.cpp PR #27342"),
    ("llamacpp", "dspark"): MinimumVersion("unknown build", "ggml-org/llama.cpp PRs #25784, #25549"),
    ("llamacpp", "gemma4-assistant"): MinimumVersion("b9549", "ggml-org/llama.cpp PR #23398"),
    ("llamacpp", "eagle3"): MinimumVersion("unknown build", "--spec-type draft-eagle3 in llama.cpp b11434 (tested here)"),
    ("llamacpp", "draft-lm"): MinimumVersion("unknown build", "--spec-type draft-simple in llama.cpp b11434 (tested here)"),
}
TESTED_LLAMA_BUILD = "b11434"  # the llama-server the tests execute these commands with

# Why an engine cannot run a method, with the source that says so.
UNSUPPORTED: dict[tuple[str, str], str] = {
    ("vllm", "dflash2"): "vLLM's SpeculativeConfig (vllm/config/speculative.py at the pinned commit) has no DFlash 2 "
                         "method; the DFlash 2 drafters run on llama.cpp (--spec-type draft-dflash)",
    ("sglang", "dflash2"): "SGLang's builtin --speculative-algorithm values (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, "
                           "DFLASH, DSPARK at the pinned commit) include no DFlash 2",
    ("sglang", "gemma4-assistant"): "SGLang runs Gemma 4 assistants as FROZEN_KV_MTP (sglang PR #24436), which is not a "
                                    "builtin --speculative-algorithm at the pinned commit of server_args.py",
}


# Drafters whose weight layout an engine's loader does not know, whatever the method (what layout_of calls them).
UNSUPPORTED_LAYOUTS: dict[tuple[str, str, str], str] = {
    ("llamacpp", "eagle3", DEEPSPEC): "llama.cpp's converter (conversion/__init__.py and llama.py at b11434) has no "
                                      "Qwen3Eagle3Model, DeepSpec's EAGLE-3 architecture, and detects an EAGLE-3 head "
                                      "only by a draft_vocab_size DeepSpec's config does not carry",
    ("llamacpp", "eagle3", DEEPSPEC_GEMMA4): "llama.cpp's converter (b11434) has no Gemma4Eagle3Model, DeepSpec's "
                                             "Gemma-4 EAGLE-3 architecture",
}


@dataclass(frozen=True)
class PairFacts:
    """What the registry recorded about one exact pair."""

    target: str  # repo id (or a local folder for local pairs)
    target_sha: str | None
    drafter: str
    drafter_sha: str | None
    method: str
    block_size: int | None = None
    built_in: bool = False  # the drafter ships inside a full checkpoint (DeepSeek-V4 DSpark, MiMo FP4 DFlash)
    gguf: bool = False  # the drafter repo holds GGUF files already (…-GGUF)
    target_family: str | None = None
    # EAGLE-3: the hidden-state indices llama.cpp's converter must be given (llama_commands.eagle3_converter_layers
    # of the head's recorded config); None when it reads the right ones itself.
    eagle3_layers: tuple[int, ...] | None = None
    drafter_config_read: bool = False  # the registry holds the drafter's config.json (eagle3_layers follow from it)
    layout: str | None = None  # the drafter's weight layout (coverage.layout_of); None: not known


@dataclass(frozen=True)
class DraftLength:
    value: int | None  # None: left to the engine (read from the drafter's config)
    source: str


@dataclass(frozen=True)
class Launch:
    """One engine's command for one pair, or why there is none."""

    engine: str
    target: str
    drafter: str
    method: str
    supported: bool
    reason: str | None  # why not, when not supported
    steps: tuple[tuple[str, ...], ...] = ()  # commands to run first (downloads, GGUF conversion)
    argv: tuple[str, ...] = ()  # the serving command
    draft_length: int | None = None
    draft_length_source: str = ""
    minimum_version: str = "unknown"
    minimum_version_source: str = ""
    notes: tuple[str, ...] = field(default=())

    def shell(self) -> str:
        """The commands as one copy-pasteable shell text."""
        return "\n".join(shlex.join(step) for step in (*self.steps, self.argv) if step)

    def as_json(self) -> dict[str, object]:
        return {
            "engine": self.engine, "target": self.target, "drafter": self.drafter, "method": self.method,
            "supported": self.supported, "reason": self.reason, "steps": [list(s) for s in self.steps],
            "argv": list(self.argv), "shell": self.shell() if self.supported else None,
            "draft_length": self.draft_length, "draft_length_source": self.draft_length_source,
            "minimum_version": self.minimum_version, "minimum_version_source": self.minimum_version_source,
            "notes": list(self.notes),
        }


def default_draft_length(facts: PairFacts) -> DraftLength:
    """The draft length when no run was measured: what the method's block fixes, else the project's default."""
    if facts.method in ("dflash", "dflash2"):
        if facts.block_size is None:
            return DraftLength(None, "block size not recorded: the engine reads it from the drafter's config")
        return DraftLength(facts.block_size - 1, f"block size {facts.block_size} − 1 (no measured run)")
    if facts.method == "dspark":
        if facts.block_size is None:
            return DraftLength(None, "block size not recorded: the engine reads it from the drafter's config")
        return DraftLength(facts.block_size, f"DSpark drafts a whole block of {facts.block_size} (no measured run)")
    return DraftLength(CHAIN_DEFAULT_LENGTH, f"the verifier's default for chain drafters, {CHAIN_DEFAULT_LENGTH} "
                                             "(no measured run: `drafters verify` then `drafters price` find the best)")


def choose_draft_length(facts: PairFacts, measured: DraftLength | None) -> DraftLength:
    """The measured best γ when there is one, clamped to what a block drafter can draft."""
    fallback = default_draft_length(facts)
    if measured is None or measured.value is None:
        return fallback
    if fallback.value is not None and facts.method in ("dflash", "dflash2", "dspark") and measured.value > fallback.value:
        return DraftLength(fallback.value, f"{measured.source}, clamped to the block ({fallback.source})")
    return measured


def _unsupported(facts: PairFacts, engine: str, reason: str) -> Launch:
    minimum = MINIMUM_VERSIONS.get((engine, facts.method), MinimumVersion("none", reason))
    return Launch(engine, facts.target, facts.drafter, facts.method, False, reason,
                  minimum_version=minimum.version, minimum_version_source=minimum.source)


def launch_command(facts: PairFacts, engine: str, measured: DraftLength | None = None, *,
                   local: bool = False) -> Launch:
    """The command for `engine`. `local`: target and drafter are folders on this machine (nothing to download)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; one of {', '.join(ENGINES)}")
    if facts.built_in:
        return _unsupported(facts, engine, "the drafter ships inside the checkpoint itself: serve "
                                           f"{facts.drafter} with its own speculative settings; there is no separate "
                                           "drafter to attach")
    reason = UNSUPPORTED.get((engine, facts.method))
    if reason is not None:
        return _unsupported(facts, engine, reason)
    reason = UNSUPPORTED_LAYOUTS.get((engine, facts.method, facts.layout or ""))
    if reason is not None:  # the engine runs the method, but no version loads this layout
        return replace(_unsupported(facts, engine, reason), minimum_version="none", minimum_version_source=reason)
    if engine == "vllm":
        return _vllm(facts, measured)
    if engine == "sglang":
        return _sglang(facts, measured)
    return _llamacpp(facts, measured, local=local)


def _with_minimum(engine: str, method: str) -> MinimumVersion:
    return MINIMUM_VERSIONS.get((engine, method), MinimumVersion("unknown", "not stated by a public source read here"))


def _vllm(facts: PairFacts, measured: DraftLength | None) -> Launch:
    method = VLLM_METHODS.get(facts.method)
    if method is None:
        return _unsupported(facts, "vllm", f"vLLM has no speculative method for {facts.method} drafters")
    length = choose_draft_length(facts, measured)
    config: dict[str, object] = {"method": method, "model": facts.drafter}
    if length.value is not None:
        config["num_speculative_tokens"] = length.value
    if facts.drafter_sha:
        config["revision"] = facts.drafter_sha
    argv = ["vllm", "serve", facts.target]
    if facts.target_sha:
        argv += ["--revision", facts.target_sha]
    argv += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
    notes = []
    if facts.method in ("dflash", "dspark") and (facts.target_family or "").lower().startswith("gemma"):
        notes.append("Gemma 4 targets: releases up to vLLM v0.28 lack the draft path's embedding scale and logit "
                     "softcapping (acceptance collapses); use a build with vLLM PR #41703 or the image "
                     "ghcr.io/z-lab/vllm-openai:gemma4-dflash-cu130")
    if not facts.drafter_sha:
        notes.append("the registry recorded no drafter sha: the revision is not pinned")
    minimum = _with_minimum("vllm", facts.method)
    return Launch("vllm", facts.target, facts.drafter, facts.method, True, None, (), tuple(argv), length.value,
                  length.source, minimum.version, minimum.source, tuple(notes))


def _sglang(facts: PairFacts, measured: DraftLength | None) -> Launch:
    algorithm = SGLANG_ALGORITHMS.get(facts.method)
    if algorithm is None:
        return _unsupported(facts, "sglang", f"SGLang has no speculative algorithm for {facts.method} drafters")
    argv = ["python", "-m", "sglang.launch_server", "--model-path", facts.target,
            "--speculative-algorithm", algorithm, "--speculative-draft-model-path", facts.drafter]
    if facts.drafter_sha:
        argv += ["--speculative-draft-model-revision", facts.drafter_sha]
    notes: list[str] = []
    if facts.target_sha:
        notes.append(f"the target is served at its default revision: download {facts.target}@{facts.target_sha} "
                     "and give --model-path that folder to pin it")
    if facts.method == "dflash":
        if facts.block_size is None:
            return _unsupported(facts, "sglang", "the drafter's block size is not recorded, and SGLang's DFLASH needs "
                                                 "--speculative-num-draft-tokens equal to it (a mismatch runs silently "
                                                 "wrong)")
        # DFLASH verifies a whole block: num-draft-tokens is the block size, never a tuned γ.
        length = DraftLength(facts.block_size, f"the drafter's block size {facts.block_size} (SGLang DFLASH requires "
                                               "--speculative-num-draft-tokens = block size)")
        argv += ["--speculative-num-draft-tokens", str(facts.block_size)]
    elif facts.method == "dspark":
        length = choose_draft_length(facts, measured)
        if length.value is not None:
            argv += ["--speculative-dspark-block-size", str(length.value)]
    else:
        length = choose_draft_length(facts, measured)
        assert length.value is not None
        # topk 1 (a chain): SGLang requires num_draft_tokens = num_steps + 1.
        argv += ["--speculative-num-steps", str(length.value), "--speculative-eagle-topk", "1",
                 "--speculative-num-draft-tokens", str(length.value + 1)]
    minimum = _with_minimum("sglang", facts.method)
    return Launch("sglang", facts.target, facts.drafter, facts.method, True, None, (), tuple(argv), length.value,
                  length.source, minimum.version, minimum.source, tuple(notes))


def _folder_name(repo: str) -> str:
    return repo.rstrip("/").rsplit("/", 1)[-1]


def _llamacpp(facts: PairFacts, measured: DraftLength | None, *, local: bool) -> Launch:
    spec_type = LLAMA_SPEC_TYPES.get(facts.method)
    if spec_type is None:
        return _unsupported(facts, "llamacpp", f"llama-server has no --spec-type for {facts.method} drafters")
    length = choose_draft_length(facts, measured)
    steps: list[tuple[str, ...]] = []
    notes: list[str] = []
    if length.value is None:
        notes.append("the drafter's block size is not recorded: add --spec-draft-n-max with its block size − 1 "
                     "(dflash_config.block_size in its config.json); llama-server's own default applies otherwise")
    if local:
        target_dir, drafter_dir = facts.target, facts.drafter
    else:
        target_dir, drafter_dir = _folder_name(facts.target), _folder_name(facts.drafter)
        for repo, sha, folder in ((facts.target, facts.target_sha, target_dir),
                                  (facts.drafter, facts.drafter_sha, drafter_dir)):
            steps.append(("hf", "download", repo, *(("--revision", sha) if sha else ()), "--local-dir", folder))
    target_gguf = f"{_folder_name(facts.target)}.gguf"
    # The same converter and server arguments the verifier runs (registry.domain.llama_commands).
    steps.append(("python", CONVERTER, *converter_args(target_dir, target_gguf, outtype="bf16")))
    if facts.gguf:
        drafter_gguf = f"{drafter_dir}/<the .gguf file of {facts.drafter}>"
        notes.append(f"{facts.drafter} ships GGUF files: pass the one you want with -md")
    else:
        drafter_gguf = f"{_folder_name(facts.drafter)}.gguf"
        if facts.method == "eagle3" and facts.eagle3_layers is not None:
            layers = list(facts.eagle3_layers)
            steps.append(eagle3_layers_step(drafter_dir, layers))
            notes.append(f"llama.cpp's converter reads an EAGLE-3 head's fused target states only from a top-level "
                         f"{EAGLE3_CONVERTER_KEY}; this head names them elsewhere, so the step before the conversion "
                         f"writes them there ({layers}): without it the head reads EAGLE-3's default layers instead")
        elif facts.method == "eagle3" and not facts.drafter_config_read:
            notes.append(f"the registry has not read this head's config.json: llama.cpp's converter reads the fused "
                         f"target states only from a top-level {EAGLE3_CONVERTER_KEY} (hidden-state indices); a head "
                         "that names them under eagle_config (yuhuili / SpecForge: layer ids, one less) or as "
                         "target_layer_ids needs them written there first, or it reads EAGLE-3's default layers")
        # A drafter without embeddings or tokenizer of its own takes them from the target (--target-model-dir).
        steps.append(("python", CONVERTER, *converter_args(
            drafter_dir, drafter_gguf, outtype="bf16",
            target_dir=target_dir if facts.method in NEEDS_TARGET_DIR else None)))
    argv = ("llama-server", "-m", target_gguf, *server_draft_args(drafter_gguf, spec_type, length.value))
    minimum = _with_minimum("llamacpp", facts.method)
    notes.append(f"checked by running it with llama.cpp {TESTED_LLAMA_BUILD} on the tiny pairs")
    return Launch("llamacpp", facts.target, facts.drafter, facts.method, True, None, tuple(steps), argv,
                  length.value, length.source, minimum.version, minimum.source, tuple(notes))
