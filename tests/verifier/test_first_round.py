"""Temperature > 0, position by position: the first round of the loop outputs each token from the target's exact
conditional distribution, the bonus token after an all-accepted round included.

Why per position: after the prefill token t0, the round emits y_1..y_m (m = accepted + 1 ≤ k + 1). Modified
rejection sampling promises that, given the committed prefix (t0, y_<j) reached through accepted drafts, y_j is
distributed exactly as the target's p(· | prompt, t0, y_<j), whether it comes from an accepted draft, the residual
after a rejection or (j = k + 1) the bonus row. So every (position, prefix) seen often enough is a chi-square test
against one exact target row, pooled per position; position k + 1 is only reached when all k drafts were accepted,
which is where a bonus drawn from the wrong row shows. Thousands of first rounds per method; each planted bug of
the sampler (bonus from the wrong row, a wrong residual, a proposer reporting a q it did not sample from) fails.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

import verifier.decode as decode_module
from verifier.decode import decode, probabilities
from verifier.engines.pytorch import RunSettings
from verifier.loading import LoadedTarget
from verifier.methods import build_proposer
from verifier.proposer import Proposal, Proposer, TargetOutput

PREFIX = "<|user|>\nWhat is"  # uncertain continuations on the tiny target: the round's first token has ~1.6 nats
DRAFTS = 2  # k: the bonus is position 3 of the round
ALPHA = 1e-4  # a correct sampler fails one position in ten thousand; the planted bugs give p far below it
MIN_EXPECTED = 5.0
SAMPLES = 1000  # first rounds per test: ~10 ms each on the tiny pair


def _prefix_ids(target: LoadedTarget) -> torch.Tensor:
    return torch.tensor([target.tokenizer.bos_token_id,
                         *target.tokenizer.encode(PREFIX, add_special_tokens=False)])


def first_rounds(target: LoadedTarget, proposer: Proposer, temperature: float, n: int, seed: int = 7
                 ) -> list[tuple[tuple[int, ...], int]]:
    """n decodes of the prefill token and one round: (tokens, drafts accepted in the round)."""
    ids = _prefix_ids(target)
    generator = torch.Generator().manual_seed(seed)
    eos = frozenset({target.tokenizer.eos_token_id})
    samples = []
    for _ in range(n):
        result = decode(target.model, proposer, ids, max_new_tokens=DRAFTS + 2, temperature=temperature,
                        generator=generator, eos_token_ids=eos)
        accepted = result.rounds[0].accepted if result.rounds else 0
        samples.append((tuple(result.tokens), accepted))
    return samples


@torch.no_grad()
def position_p_values(target: LoadedTarget, samples: list[tuple[tuple[int, ...], int]], temperature: float
                      ) -> dict[int, float]:
    """Per position j of the round (1..k+1): the pooled chi-square p-value of y_j against the target's exact row
    at its prefix, over every prefix seen at least often enough to expect MIN_EXPECTED in two bins."""
    seen: dict[int, dict[tuple[int, ...], Counter[int]]] = defaultdict(lambda: defaultdict(Counter))
    for tokens, accepted in samples:
        for j in range(1, len(tokens)):
            if j - 1 > accepted:  # y_<j holds a residual token: the rest of the round is not this test's
                break
            seen[j][tokens[:j]][tokens[j]] += 1
    prompt = _prefix_ids(target).tolist()
    results = {}
    for j, by_prefix in seen.items():
        statistic, dof = 0.0, 0
        for prefix, counts in by_prefix.items():
            total = sum(counts.values())
            row = probabilities(target.model(torch.tensor([prompt + list(prefix)])).logits[0, -1], temperature)
            bins = [t for t in torch.nonzero(row * total >= MIN_EXPECTED).flatten().tolist()]
            if not bins:
                continue
            observed = [counts[t] for t in bins]
            expected = [total * float(row[t]) for t in bins]
            rest = total - sum(expected)
            if rest >= MIN_EXPECTED:
                observed.append(total - sum(observed))
                expected.append(rest)
            if len(expected) < 2:
                continue
            statistic += sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))
            dof += len(expected) - 1
        if dof:
            results[j] = float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                                       torch.tensor(statistic / 2, dtype=torch.float64)))
    return results


def _draft_lm(target: LoadedTarget, folder: Path) -> Proposer:
    return build_proposer("draft-lm", folder, target, RunSettings(draft_length=DRAFTS, device="cpu"))


def _dflash(target: LoadedTarget, folder: Path) -> Proposer:
    return build_proposer("dflash", folder, target, RunSettings(draft_length=DRAFTS, device="cpu"))


METHODS: dict[str, Callable[[LoadedTarget, Path], Proposer]] = {"draft-lm": _draft_lm, "dflash": _dflash}


@pytest.fixture
def drafter_dirs(tiny_draft_lm_dir: Path, tiny_dflash_dir: Path) -> dict[str, Path]:
    return {"draft-lm": tiny_draft_lm_dir, "dflash": tiny_dflash_dir}


@pytest.mark.parametrize(("method", "temperature"), [("draft-lm", 0.7), ("dflash", 1.0)])
def test_every_position_of_the_first_round_follows_the_target(
    method: str, temperature: float, tiny_target: LoadedTarget, drafter_dirs: dict[str, Path]
) -> None:
    proposer = METHODS[method](tiny_target, drafter_dirs[method])
    samples = first_rounds(tiny_target, proposer, temperature, n=SAMPLES)
    p_values = position_p_values(tiny_target, samples, temperature)
    assert 1 in p_values and min(p_values.values()) > ALPHA, p_values
    if method == "draft-lm":
        # Every position was tested, the bonus included: all k drafts were accepted in ~70% of the rounds. (The
        # tiny DFlash drafter at T = 1 almost never has both drafts accepted, so its bonus goes untested here; the
        # bonus row is the loop's, the same for every method.)
        assert sorted(p_values) == list(range(1, DRAFTS + 2)), p_values
        assert sum(1 for _, accepted in samples if accepted == DRAFTS) >= 300


# ---- the planted bugs: each must fail the same check ----------------------------------------------------------


@pytest.fixture
def bonus_from_the_last_draft_row(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = decode_module.accept_sampled

    def buggy(logits, proposal, drafts, temperature, generator):
        n, token = real(logits, proposal, drafts, temperature, generator)
        if n == drafts.shape[0]:  # all accepted: draw the bonus from the row of the last draft instead
            token = int(torch.multinomial(probabilities(logits[n - 1], temperature), 1, generator=generator))
        return n, token

    monkeypatch.setattr(decode_module, "accept_sampled", buggy)
    yield


@pytest.fixture
def residual_from_p(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """At a rejection, resample from p itself instead of normalize(max(0, p - q))."""

    def buggy(logits, proposal, drafts, temperature, generator):
        p = probabilities(logits, temperature)
        for i in range(drafts.shape[0]):
            token = int(drafts[i])
            q = proposal.q_probs[i] if proposal.q_probs is not None else torch.nn.functional.one_hot(
                drafts[i], p.shape[-1]).float()
            if float(torch.rand((), generator=generator)) * float(q[token]) < float(p[i, token]):
                continue
            return i, int(torch.multinomial(p[i], 1, generator=generator))
        return drafts.shape[0], int(torch.multinomial(p[drafts.shape[0]], 1, generator=generator))

    monkeypatch.setattr(decode_module, "accept_sampled", buggy)
    yield


class _ReportsAnotherQ:
    """A proposer that samples its drafts at the run's temperature but reports q before the temperature was
    applied (a q it did not sample from: the acceptance ratio p/q is then wrong)."""

    def __init__(self, inner: Proposer) -> None:
        self.inner = inner
        self.draft_length, self.needs_hidden_states = inner.draft_length, inner.needs_hidden_states

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        self.inner.begin(prompt_ids, target_out)

    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        proposal = self.inner.propose(temperature, generator)
        assert proposal.q_probs is not None
        # q_T = softmax(l / T), so softmax(T · log q_T) = softmax(l): the untempered distribution.
        untempered = torch.softmax(temperature * torch.log(proposal.q_probs.clamp_min(1e-30)), dim=-1)
        return Proposal(tokens=proposal.tokens, q_probs=untempered)

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        self.inner.observe(n_accepted, committed_tokens, target_out)


# Each bug where it shows: the bonus where all drafts are often accepted (the trained draft LM), the residual where
# drafts are often rejected (the untrained one), a misreported q where the temperature matters (T = 0.5).
BUGS = {"bonus_from_the_last_draft_row": ("trained", 1.0), "residual_from_p": ("untrained", 1.0),
        "q_not_sampled_from": ("trained", 0.5)}


@pytest.mark.parametrize("bug", list(BUGS))
def test_each_planted_sampler_bug_fails_the_check(bug: str, request: pytest.FixtureRequest,
                                                  tiny_target: LoadedTarget, tiny_draft_lm_dir: Path,
                                                  untrained_draft_lm_dir: Path) -> None:
    drafter, temperature = BUGS[bug]
    proposer = _draft_lm(tiny_target, tiny_draft_lm_dir if drafter == "trained" else untrained_draft_lm_dir)
    if bug == "q_not_sampled_from":
        proposer = _ReportsAnotherQ(proposer)
    else:
        request.getfixturevalue(bug)
    samples = first_rounds(tiny_target, proposer, temperature, n=SAMPLES)
    p_values = position_p_values(tiny_target, samples, temperature)
    assert min(p_values.values()) < ALPHA, p_values
