"""Hub repo-id parsing: family line, generation, size and variant read from a model's name (pure, no I/O).

Names are the only signal for two questions the Hub's metadata does not answer: which target a drafter was
built for (z-lab and DeepSpec configs never name it) and which release succeeds which (vendors publish
upgrades as new repos; the rule is in upgrades.py). The parser is best effort: any well-formed repo id parses, and the fields it cannot
read stay None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

DerivativeKind = Literal["quantized", "finetune"]

# Hub rule: letters, digits, '-', '_', '.'; no leading/trailing '-' or '.'; names up to 96 characters.
# A Hub commit id: what every pinned revision must be (a branch name or the catalog's placeholder pins nothing).
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
_REPO_PART_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_MAX_NAME_LENGTH = 96

_SIZE_RE = re.compile(r"^(?:\d+x)?E?\d+(?:\.\d+)?[BMK]$", re.IGNORECASE)
_ACTIVE_SIZE_RE = re.compile(r"^A\d+(?:\.\d+)?B$", re.IGNORECASE)
_VERSION_RE = re.compile(r"^\d{1,2}(?:\.\d+)*$")
# "K2.5", "M2.7", "V4", "R1": one letter that belongs to the generation, not to the family.
_PREFIXED_VERSION_RE = re.compile(r"^([A-Za-z])(\d+(?:\.\d+)*)$")
# "Qwen3.5", "gemma4", "LLaMA3.1": a family word with the generation glued on.
_GLUED_VERSION_RE = re.compile(r"^([A-Za-z]{2,})(\d+(?:\.\d+)*)$")
_DATE_RE = re.compile(r"^\d{4}$")

_VARIANT_WORDS = frozenset(
    {"it", "instruct", "chat", "base", "pt", "thinking", "reasoning", "flash", "pro", "mini", "lite", "code",
     "exp", "speciale"}
)
# Variant words that never name a family ("flash" does: Ling-flash-2.0).
_PLAIN_VARIANT_WORDS = frozenset({"it", "instruct", "chat", "base", "pt"})
_QUANTIZED_WORDS = frozenset(
    "fp8 fp4 nvfp4 mxfp4 int4 int8 awq gptq gguf bnb bnb-4bit bnb-8bit 4bit 8bit exl2 qat quantized dynamic".split()
)
_QUANTIZED_PATTERNS = (re.compile(r"^w\d+a\d+$"), re.compile(r"^q\d(?:_[a-z0-9]+)*$"))
_FINETUNE_WORDS = frozenset(
    "sft dpo orpo kto grpo rlhf ft finetune finetuned abliterated uncensored".split()
    + "distill distilled lora merge merged".split()
)
# Words drafter publishers add to a target's name; they are tags, never part of the family line.
_DRAFTER_WORDS = frozenset(
    {"dflash", "dflash2", "dspark", "eagle", "eagle3", "assistant", "speculator", "specforge", "sglang"}
)
# Hub names that mean the same family line as another spelling.
_FAMILY_ALIASES = {"meta-llama": "llama"}
# How each vendor spells its family name in repo names: display form and separator before the generation.
_HOUSE_STYLES = {"qwen": ("Qwen", ""), "llama": ("Llama", "-"), "gemma": ("gemma", "-")}


class RepoNameError(ValueError):
    """A string that is not a Hub repo id of the form `org/name`."""


@dataclass(frozen=True)
class RepoName:
    org: str
    name: str
    family: str  # lowercase line, e.g. "qwen", "qwen-coder", "gemma", "gpt-oss"
    generation: str | None  # "3.5", "4", or with its letter: "K2.5", "M2.7", "V4"
    size: str | None  # "35B", "E2B", "0.6B" (upper-case unit)
    active_size: str | None  # "A3B" for MoE models
    variant: str | None  # "it", "instruct", "base", "thinking", "flash", ... joined with "-"
    date: str | None  # release-date suffix such as "2507" (Qwen) or "0731" (DeepSeek)
    tags: tuple[str, ...]  # everything else, lower-case: "fp8", "bnb-4bit", "dflash", "b16", ...

    @property
    def repo_id(self) -> str:
        return f"{self.org}/{self.name}"


def split_repo_id(repo_id: str) -> tuple[str, str]:
    """Return (org, name) of a Hub repo id, refusing anything that is not exactly `org/name`."""
    if not isinstance(repo_id, str) or not repo_id.strip():
        raise RepoNameError("empty repo id: expected 'org/name'")
    parts = repo_id.split("/")
    if len(parts) != 2:
        raise RepoNameError(f"repo id {repo_id!r} must be 'org/name' with exactly one '/'")
    org, name = parts
    for label, part in (("org", org), ("name", name)):
        if not _REPO_PART_RE.fullmatch(part):
            raise RepoNameError(
                f"repo id {repo_id!r}: {label} {part!r} may hold only letters, digits, '-', '_' and '.', "
                "and must start and end with a letter or digit"
            )
    if len(name) > _MAX_NAME_LENGTH:
        raise RepoNameError(f"repo id {repo_id!r}: name is longer than {_MAX_NAME_LENGTH} characters")
    return org, name


def parse_repo_id(repo_id: str) -> RepoName:
    org, name = split_repo_id(repo_id)
    return _parse_name(org, name)


def _tokens(name: str) -> list[str]:
    # DeepSpec names ("dspark_qwen3_4b_block7") use '_' as the separator; elsewhere '_' is part of a token
    # ("q4_0").
    separator = "-" if "-" in name or "_" not in name else "_"
    raw = [token for token in name.split(separator) if token]
    merged: list[str] = []
    for token in raw:
        if merged and merged[-1].lower() == "bnb" and token.lower() in ("4bit", "8bit"):
            merged[-1] = f"bnb-{token.lower()}"
        else:
            merged.append(token)
    return merged


def _is_quantized_word(word: str) -> bool:
    return word in _QUANTIZED_WORDS or any(pattern.match(word) for pattern in _QUANTIZED_PATTERNS)


def _normalize_size(token: str) -> str:
    """'12b' -> '12B', 'e2b' -> 'E2B', '8x7b' -> '8x7B'."""
    return token.upper() if token[0] in "eE" else token[:-1] + token[-1].upper()


def _parse_name(org: str, name: str) -> RepoName:
    family_words: list[str] = []
    line_words: list[str] = []
    variant_words: list[str] = []
    tags: list[str] = []
    generation: str | None = None
    size: str | None = None
    active_size: str | None = None
    date: str | None = None

    for token in _tokens(name):
        lower = token.lower()
        if lower in _DRAFTER_WORDS:
            tags.append(lower)
            continue
        if size is None and _SIZE_RE.match(token):
            size = _normalize_size(token)
            continue
        if active_size is None and _ACTIVE_SIZE_RE.match(token):
            active_size = token.upper()
            continue
        in_family_part = generation is None and size is None and not variant_words
        if in_family_part:
            prefixed = _PREFIXED_VERSION_RE.match(token)
            glued = _GLUED_VERSION_RE.match(token)
            if prefixed and family_words:
                generation = prefixed.group(1).upper() + prefixed.group(2)
                continue
            if glued:
                family_words.append(glued.group(1).lower())
                generation = glued.group(2)
                continue
            if prefixed:  # a one-letter name such as "t5" is the family itself
                family_words.append(lower)
                continue
            if _VERSION_RE.match(token) and family_words:
                generation = token
                continue
            if token.isalpha() and not _is_quantized_word(lower) and lower not in _PLAIN_VARIANT_WORDS:
                family_words.append(lower)
                continue
        if lower in _VARIANT_WORDS:
            variant_words.append(lower)
        elif date is None and _DATE_RE.match(token):
            date = token
        elif _is_quantized_word(lower) or lower in _FINETUNE_WORDS:
            tags.append(lower)
        elif generation is None and lower.startswith("v") and _PREFIXED_VERSION_RE.match(token):
            # A trailing version: "vicuna-13b-v1.3" is generation 1.3, as its drafters spell it ("Vicuna1.3-13B").
            generation = token[1:]
        elif token.isalpha() and generation is not None and size is None:
            # Words between the generation and the size name a line of its own: Qwen3-Coder, Qwen3-VL.
            line_words.append(lower)
        else:
            tags.append(lower)

    family = "-".join(family_words + line_words) or name.lower()
    for alias, canonical in _FAMILY_ALIASES.items():
        if family == alias or family.startswith(alias + "-"):
            family = canonical + family[len(alias) :]
    return RepoName(
        org=org,
        name=name,
        family=family,
        generation=generation,
        size=size,
        active_size=active_size,
        variant="-".join(variant_words) or None,
        date=date,
        tags=tuple(tags),
    )


# ---------------------------------------------------------------------------------------------- drafter names

_DEEPSPEC_RE = re.compile(r"^(?:dspark|dflash|eagle3)_(?P<target>.+?)_(?:block|ttt)\d+$", re.IGNORECASE)
# Publisher conventions, tried in order; each captures the target part of the drafter's name.
_DRAFTER_NAME_PATTERNS = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"(?:SGLang-)?EAGLE3?-(?P<target>.+?)(?:-SpecForge(?:-[A-Za-z0-9]+)?)?(?:-(?:bf16|fp16))?",
        r"(?P<target>.+?)-DFlash2?(?:-.+)?",
        r"(?P<target>.+?)-DSpark(?:-(?:preview|beta|alpha|v[0-9.]+))?",
        r"(?P<target>.+?)-speculator\.[A-Za-z0-9]+",
        r"(?P<target>.+?)\.(?:dflash|eagle3?|dspark|peagle|mtp)",
        r"(?P<target>.+?)-assistant",
        r"(?P<target>.+?)-eagle3?",
    )
)


def drafter_target_stem(drafter_repo_id: str) -> str | None:
    """The target name a drafter's repo name implies by its publisher's naming convention, spelled the way
    the target's vendor spells it; None when the name follows no known drafter convention."""
    _, name = split_repo_id(drafter_repo_id)
    deepspec = _DEEPSPEC_RE.match(name)
    if deepspec:
        return _house_spelling(deepspec.group("target").split("_"), upper_case_sizes=True)
    for pattern in _DRAFTER_NAME_PATTERNS:
        match = pattern.fullmatch(name)
        if match:
            return _house_spelling(match.group("target").split("-"), upper_case_sizes=False)
    return None


def _house_spelling(tokens: list[str], upper_case_sizes: bool) -> str:
    spelled: list[str] = []
    for token in tokens:
        glued = _GLUED_VERSION_RE.match(token)
        if glued and glued.group(1).lower() in _HOUSE_STYLES:
            display, separator = _HOUSE_STYLES[glued.group(1).lower()]
            spelled.append(f"{display}{separator}{glued.group(2)}")
        elif token.lower() in _HOUSE_STYLES:
            spelled.append(_HOUSE_STYLES[token.lower()][0])
        elif upper_case_sizes and (_SIZE_RE.match(token) or _ACTIVE_SIZE_RE.match(token)):
            spelled.append(_normalize_size(token) if _SIZE_RE.match(token) else token.upper())
        else:
            spelled.append(token)
    return "-".join(_variant_after_size(spelled))


def _variant_after_size(tokens: list[str]) -> list[str]:
    """EAGLE authors write "LLaMA3.1-Instruct-8B"; vendors put the variant after the size (and active size)."""
    size_positions = [i for i, t in enumerate(tokens) if _SIZE_RE.match(t) or _ACTIVE_SIZE_RE.match(t)]
    if not size_positions:
        return tokens
    last_size = size_positions[-1]
    early_variants = [t for t in tokens[:last_size] if t.lower() in _VARIANT_WORDS]
    if not early_variants:
        return tokens
    before = [t for t in tokens[: last_size + 1] if t.lower() not in _VARIANT_WORDS]
    return before + early_variants + tokens[last_size + 1 :]


_GLUED_KEY_RE = re.compile(r"^([a-z]{2,})(\d+(?:\.\d+)*)$")


def name_key(name: str) -> str:
    """Normalize a model name (or repo id; the org is dropped) so that spellings of one name compare equal:
    case, '_' vs '-', and a generation glued to the family word ("gemma4" = "gemma-4", "LLaMA3.1" = "Llama-3.1")."""
    bare = name.rsplit("/", 1)[-1].lower().replace("_", "-")
    parts: list[str] = []
    for token in bare.split("-"):
        glued = _GLUED_KEY_RE.match(token)
        parts.extend(glued.groups() if glued else (token,))
    return "-".join(part for part in parts if part)


def is_repo_id(value: object) -> bool:
    """Whether `value` is a Hub repo id at all (a local path such as `/home/user/models/Qwen3-8B` is not)."""
    try:
        split_repo_id(value)  # type: ignore[arg-type]
    except RepoNameError:
        return False
    return True


def repo_org(ref: str) -> str | None:
    """The org of a repo id ("z-lab" of "z-lab/Qwen3-8B-DFlash-b16"), the one an event about it is filed under;
    None for a local folder ("/models/draft" is no repo id) or anything else that is not `org/name`."""
    return split_repo_id(ref)[0] if is_repo_id(ref) else None


def derivative_kind(name: str) -> DerivativeKind | None:
    """Guess from name suffixes alone (for when the Hub's base_model metadata is absent) whether a repo is a
    quantized copy or a fine-tune of some base model."""
    bare = name.rsplit("/", 1)[-1]
    # RedHatAI writes "Qwen3-8B-quantized.w4a16": a dot also separates words here.
    words = [word for token in _tokens(bare) for word in token.lower().split(".")]
    if any(_is_quantized_word(word) for word in words):
        return "quantized"
    if any(word in _FINETUNE_WORDS for word in words):
        return "finetune"
    return None
