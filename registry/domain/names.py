"""Hub repo-id parsing: family line, generation, size and variant read from a model's name (pure, no I/O).

Names are the only signal for two questions the Hub's metadata does not answer: which target a drafter was
built for (z-lab and DeepSpec configs never name it) and which release succeeds which (vendors publish
upgrades as new repos). The parser is best effort: any well-formed repo id parses, and the fields it cannot
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
# What a release is for, as its name says: vendors name the pretrained model `-Base` (Qwen) or `-pt` (Gemma), or
# leave it bare and name the post-trained one `-Instruct` / `-it` / `-Chat` (Llama, Gemma, Qwen2.5).
_PRETRAINED_WORDS = frozenset({"base", "pt"})
_INSTRUCT_WORDS = frozenset({"it", "instruct", "chat"})
# The other variant words, by what the upgrade rule makes of them. A specialization is another use of the line
# (Kimi-K2.7-Code is no upgrade of Kimi-K2.6); a mode is half of a hybrid (Qwen3-4B-Thinking-2507 updates one half
# of Qwen3-4B); a tier is a sibling of one generation (DeepSeek-V4-Flash and -Pro); a stage orders the releases of
# one generation: DeepSeek-V3.2-Exp, then DeepSeek-V3.2, then DeepSeek-V3.2-Speciale.
_SPECIALIZED_WORDS = frozenset({"code"})
_MODE_WORDS = frozenset({"thinking", "reasoning"})
_TIER_WORDS = frozenset({"flash", "pro", "mini", "lite"})
_STAGE_RANKS = {"exp": 0, "speciale": 2}
_FINAL_STAGE = 1
ReleaseRole = Literal["pretrained", "instruct"]
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


# --------------------------------------------------------------------------------------------- relationships


def _version_number(generation: str) -> tuple[str, tuple[int, ...]]:
    letter = generation[0].upper() if generation[0].isalpha() else ""
    numbers = [int(part) for part in generation[len(letter) :].split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()  # "2.0" and "2" are the same generation
    return letter, tuple(numbers)


def _variant_words(name: RepoName) -> frozenset[str]:
    return frozenset(word for word in (name.variant or "").split("-") if word)


def _stage(name: RepoName) -> int:
    return max((_STAGE_RANKS[w] for w in _variant_words(name) if w in _STAGE_RANKS), default=_FINAL_STAGE)


def _generation_number(name: RepoName) -> tuple[str, tuple[int, ...]]:
    return ("", ()) if name.generation is None else _version_number(name.generation)


def release_key(name: RepoName) -> tuple[str, tuple[int, ...], str, int]:
    """Orders releases of one model line: generation first, then a date suffix (0731 after none), then the stage
    (DeepSeek-V3.2-Exp, DeepSeek-V3.2, DeepSeek-V3.2-Speciale)."""
    letter, number = _generation_number(name)
    return (letter, number, name.date or "", _stage(name))


def release_role(name: RepoName) -> ReleaseRole | None:
    """"pretrained" (`-Base`, `-pt`), "instruct" (`-Instruct`, `-it`, `-Chat`), or None for a bare name, which
    means either, depending on the vendor (Qwen3-8B is post-trained, Llama-3.1-8B pretrained)."""
    words = _variant_words(name)
    if words & _PRETRAINED_WORDS:
        return "pretrained"
    if words & _INSTRUCT_WORDS:
        return "instruct"
    return None


def _roles_pair(old: RepoName, new: RepoName, post_trained: bool) -> bool:
    """Like pairs with like. A bare name is a post-trained release when its card says so (`post_trained`) or when
    it carries a release date (vendors date post-trained releases and name pretrained ones `-Base`:
    Mistral-Small-3.1-24B-Base-2503); otherwise it may be the pretrained sibling (Llama-3.4-8B of
    Llama-3.4-8B-Instruct) and upgrades no `-Instruct` release."""
    old_role, new_role = release_role(old), release_role(new)
    if old_role == new_role:
        return True
    if "pretrained" in (old_role, new_role):
        return False
    if new_role == "instruct":
        return True  # a bare hybrid release updated as `-Instruct` (Qwen3-4B -> Qwen3-4B-Instruct-2507)
    return post_trained or new.date is not None


def is_upgrade(old: RepoName, new: RepoName, *, post_trained: bool = False) -> bool:
    """THE rule of "`new` upgrades `old`", for the `base_upgrade` alert and the `lag --upgrades` table alike: a
    later release of the same vendor's line that the users of `old` move to, so that `old`'s drafters may no
    longer fit. `post_trained`: the card of `new` says it is post-trained (see is_post_trained).

    - a newer generation, at any size (Qwen2.5-7B-Instruct -> Qwen3-8B, gemma-3-12b-it -> gemma-4-E2B-it); it may
      add a tier (Kimi-K3 -> Kimi-K3.1-Pro) but not swap one (DeepSeek-V4-Flash -> V4.1-Pro is another tier);
    - the first numbered release after an unversioned one, at the same size (gpt-oss-20b -> gpt-oss-2-20b);
    - within one generation, at the same size and tier, a later date or stage (Qwen3-4B -> Qwen3-4B-Instruct-2507,
      DeepSeek-V3.2 -> DeepSeek-V3.2-Speciale, DeepSeek-V4-Flash -> DeepSeek-V4-Flash-0731);
    - never another line or use (Qwen3-8B -> Qwen3-Coder-8B, Kimi-K2.6 -> Kimi-K2.7-Code), another mode of a
      split hybrid, another org, or a pretrained release for a post-trained one (see _roles_pair)."""
    if old.org.lower() != new.org.lower() or old.family != new.family or new.generation is None:
        return False
    if old.repo_id.lower() == new.repo_id.lower():
        return False
    old_words, new_words = _variant_words(old), _variant_words(new)
    if old_words & _SPECIALIZED_WORDS != new_words & _SPECIALIZED_WORDS:
        return False
    old_mode, new_mode = old_words & _MODE_WORDS, new_words & _MODE_WORDS
    if old_mode and old_mode != new_mode:
        return False
    if not _roles_pair(old, new, post_trained):
        return False
    old_tier, new_tier = old_words & _TIER_WORDS, new_words & _TIER_WORDS
    same_size = (old.size, old.active_size) == (new.size, new.active_size)
    if old.generation is None:
        return same_size and old_tier == new_tier
    old_letter, old_number = _version_number(old.generation)
    new_letter, new_number = _version_number(new.generation)
    if old_letter != new_letter:
        return False  # DeepSeek-R1 and DeepSeek-V3 are different lines
    if new_number != old_number:
        return new_number > old_number and (not old_tier or old_tier == new_tier)
    if not same_size or old_tier != new_tier:
        return False
    return (new.date or "", _stage(new)) > (old.date or "", _stage(old))


def upgraded_releases(new: RepoName, olds: list[RepoName], *, post_trained: bool = False) -> list[RepoName]:
    """The releases among `olds` that `new` is the upgrade of: of those it upgrades, the ones at its size when there
    are any, and of those the newest generation (Qwen3.5-27B upgrades Qwen3-4B and Qwen3-8B, not also
    Qwen2.5-7B-Instruct; Kimi-K3.1-Pro upgrades Kimi-K3, not also Kimi-K2.6). The alert names them all; the table
    pairs `new` with the newest of them (release_key)."""
    upgraded = [old for old in olds if is_upgrade(old, new, post_trained=post_trained)]
    same_size = [old for old in upgraded if (old.size, old.active_size) == (new.size, new.active_size)]
    pool = same_size or upgraded
    newest = max((_generation_number(old) for old in pool), default=None)
    return [old for old in pool if _generation_number(old) == newest]


def is_own_pretrained_parent(release: str, parent: str) -> bool:
    """True when `parent` is a pretrained model of the vendor's own `release`: same org, line and size, the same
    generation or an older one, not itself an instruct release (meta-llama/Llama-3.1-8B for Llama-3.1-8B-Instruct,
    google/gemma-3-12b-pt for gemma-3-12b-it, Qwen/Qwen3-8B-Base for Qwen3-8B; moonshotai/Kimi-K2-Base for
    Kimi-K2.5, "continual pretraining atop Kimi-K2-Base"; DeepSeek-V3.2-Exp-Base for DeepSeek-V3.2-Speciale).
    Anything that is not a repo id is no parent."""
    try:
        child, base = parse_repo_id(release), parse_repo_id(parent)
    except RepoNameError:
        return False
    if not (child.org.lower() == base.org.lower() and release_role(child) != "pretrained"
            and release_role(base) != "instruct" and child.repo_id.lower() != base.repo_id.lower()
            and (child.family, child.size, child.active_size) == (base.family, base.size, base.active_size)):
        return False
    if child.generation is None or base.generation is None:
        return child.generation == base.generation
    (child_letter, child_number), (base_letter, base_number) = (_version_number(child.generation),
                                                                _version_number(base.generation))
    return child_letter == base_letter and base_number <= child_number


def is_post_trained(repo_id: str, bases: tuple[tuple[str, str], ...]) -> bool:
    """Whether the card of `repo_id` says it is the vendor's post-trained release: a finetune of one of its own
    pretrained models (`bases`: (parent, relation) as the Hub derives them from the card's `base_model`)."""
    return any(relation == "finetune" and is_own_pretrained_parent(repo_id, base) for base, relation in bases)


def is_repo_id(value: object) -> bool:
    """Whether `value` is a Hub repo id at all (a local path such as `/home/user/models/Qwen3-8B` is not)."""
    try:
        split_repo_id(value)  # type: ignore[arg-type]
    except RepoNameError:
        return False
    return True


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
