"""Which release upgrades which: the one rule the `base_upgrade` alert and `lag --upgrades` share (pure, no I/O).

Vendors publish an upgrade as a new repo, so the rule reads names (registry.domain.names) and, where names cannot
tell, what a card declares: a bare name is a post-trained release when its card's `base_model` is its vendor's own
pretrained model.
"""

from __future__ import annotations

from typing import Literal

from registry.domain.names import RepoName, RepoNameError, parse_repo_id

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
