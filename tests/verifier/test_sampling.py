"""Temperature > 0: the speculative loop samples exactly from the target's distribution.

For a fixed prefix we sample the first three tokens many times through the loop and compare the counts with the
target's exact joint probabilities (chi-square over every path with expected count >= 5, plus one "other" bin).
Seeds are fixed, so each test is deterministic; the significance level only sets how large an error would be
caught, and `test_the_check_rejects_the_draft_distribution` shows it rejects a wrong sampler.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

from verifier.decode import accept_greedy, accept_sampled, decode, probabilities
from verifier.engines.pytorch import RunSettings
from verifier.loading import LoadedTarget, load_causal_lm
from verifier.methods import build_proposer
from verifier.proposer import Proposal, Proposer, TargetOutput

PREFIX = "<|user|>\n"  # the next tokens are uncertain: which kind of question, then its first words
DEPTH = 3
ALPHA = 1e-3


def prefix_ids(target: LoadedTarget) -> list[int]:
    return [target.tokenizer.bos_token_id, *target.tokenizer.encode(PREFIX, add_special_tokens=False)]


@torch.no_grad()
def exact_paths(
    model, prefix: list[int], temperature: float, threshold: float, eos: int
) -> dict[tuple[int, ...], float]:
    """Exact target probabilities of every DEPTH-token continuation (or shorter, ending in EOS) with p >= threshold."""
    complete: dict[tuple[int, ...], float] = {}
    frontier: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(DEPTH):
        paths = list(frontier)
        logits = model(torch.tensor([prefix + list(path) for path in paths])).logits[:, -1]
        grown: dict[tuple[int, ...], float] = {}
        for path, row in zip(paths, probabilities(logits, temperature), strict=True):
            for token in torch.nonzero(row * frontier[path] >= threshold).flatten().tolist():
                (complete if token == eos else grown)[(*path, token)] = frontier[path] * float(row[token])
        frontier = grown
    return {**complete, **frontier}


def chi_square_p_value(samples: list[tuple[int, ...]], exact: dict[tuple[int, ...], float]) -> float:
    counts = Counter(samples)
    n = len(samples)
    observed = [counts[path] for path in exact]
    expected = [n * p for p in exact.values()]
    other_expected = n - sum(expected)
    if other_expected > 1e-9:
        observed.append(n - sum(observed))
        expected.append(other_expected)
    stat = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))
    dof = len(expected) - 1
    return float(
        torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(stat / 2, dtype=torch.float64))
    )


def sample_with_loop(target: LoadedTarget, proposer: Proposer, temperature: float, n: int) -> list[tuple[int, ...]]:
    ids = torch.tensor(prefix_ids(target))
    generator = torch.Generator().manual_seed(1234)
    eos = frozenset({target.tokenizer.eos_token_id})
    return [
        tuple(decode(target.model, proposer, ids, max_new_tokens=DEPTH, temperature=temperature,
                     generator=generator, eos_token_ids=eos).tokens)
        for _ in range(n)
    ]  # fmt: skip


class FixedProposer:
    """Always proposes the same two tokens without q-probs: the loop must treat q as a point mass on each."""

    needs_hidden_states = False
    draft_length = 2

    def __init__(self, tokens: list[int]) -> None:
        self.tokens = torch.tensor(tokens, dtype=torch.long)

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        return None

    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        return Proposal(tokens=self.tokens)

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        return None


def draft_lm(target: LoadedTarget, drafter_dir: Path) -> Proposer:
    return build_proposer("draft-lm", drafter_dir, target, RunSettings(draft_length=2, device="cpu"))


@pytest.mark.parametrize(
    ("drafter", "temperature", "n"),
    [("untrained", 1.0, 900), ("fixed", 1.0, 900), ("trained", 0.7, 500)],
)
def test_speculative_sampling_matches_the_target_distribution(
    drafter: str,
    temperature: float,
    n: int,
    tiny_target: LoadedTarget,
    tiny_draft_lm_dir: Path,
    untrained_draft_lm_dir: Path,
) -> None:
    tokenizer = tiny_target.tokenizer
    if drafter == "fixed":
        # "Translate to" is a likely start; proposing it after anything else forces rejections and residuals.
        proposer: Proposer = FixedProposer(tokenizer.encode(" to French", add_special_tokens=False)[:2])
    else:
        proposer = draft_lm(tiny_target, tiny_draft_lm_dir if drafter == "trained" else untrained_draft_lm_dir)
    exact = exact_paths(tiny_target.model, prefix_ids(tiny_target), temperature, 5 / n, tokenizer.eos_token_id)
    assert len(exact) >= 8  # enough distinct outcomes for the check to mean something

    samples = sample_with_loop(tiny_target, proposer, temperature, n)

    assert chi_square_p_value(samples, exact) > ALPHA


@torch.no_grad()
def test_the_check_rejects_the_draft_distribution(tiny_target: LoadedTarget, untrained_draft_lm_dir: Path) -> None:
    """Accepting every draft would output the drafter's own distribution; the same check must reject that."""
    n = 900
    draft = load_causal_lm(untrained_draft_lm_dir, device=torch.device("cpu"), dtype=torch.float32)
    generator = torch.Generator().manual_seed(99)
    sequences = torch.tensor([prefix_ids(tiny_target)] * n)
    for _ in range(DEPTH):
        q = probabilities(draft(sequences).logits[:, -1], 1.0)
        sequences = torch.cat([sequences, torch.multinomial(q, 1, generator=generator)], dim=1)
    samples = [tuple(row) for row in sequences[:, -DEPTH:].tolist()]
    exact = exact_paths(tiny_target.model, prefix_ids(tiny_target), 1.0, 5 / n, tiny_target.tokenizer.eos_token_id)

    assert chi_square_p_value(samples, exact) < 1e-9


def test_greedy_acceptance_takes_the_matching_prefix_and_the_target_token() -> None:
    logits = torch.full((4, 10), -5.0)
    for row, best in enumerate([3, 4, 7, 9]):
        logits[row, best] = 5.0

    assert accept_greedy(logits, torch.tensor([3, 4, 5])) == (2, 7)
    assert accept_greedy(logits, torch.tensor([3, 4, 7])) == (3, 9)
    assert accept_greedy(logits, torch.tensor([1, 4, 7])) == (0, 3)
    assert accept_greedy(logits[:1], torch.tensor([], dtype=torch.long)) == (0, 3)


def test_drafts_drawn_from_p_itself_are_always_accepted() -> None:
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    p = probabilities(logits, 0.8)
    generator = torch.Generator().manual_seed(1)
    for _ in range(200):
        drafts = torch.multinomial(p[:2], 1, generator=generator).flatten()
        n_accepted, _ = accept_sampled(logits, Proposal(tokens=drafts, q_probs=p[:2]), drafts, 0.8, generator)
        assert n_accepted == 2


def test_a_draft_the_target_rules_out_is_rejected_and_never_emitted() -> None:
    logits = torch.zeros(2, 6)
    logits[0, 5] = float("-inf")  # the target never emits token 5 here
    generator = torch.Generator().manual_seed(2)
    drafts = torch.tensor([5])
    for q_probs in (None, torch.nn.functional.one_hot(drafts, 6).float()):
        for _ in range(100):
            n_accepted, token = accept_sampled(logits, Proposal(tokens=drafts, q_probs=q_probs), drafts, 1.0, generator)
            assert (n_accepted, token != 5) == (0, True)


def test_q_probs_of_the_wrong_width_are_a_clear_error() -> None:
    drafts = torch.tensor([1])
    proposal = Proposal(tokens=drafts, q_probs=torch.full((1, 7), 1 / 7))
    with pytest.raises(ValueError, match="width 7"):
        accept_sampled(torch.zeros(2, 6), proposal, drafts, 1.0, torch.Generator())
