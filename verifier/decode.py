"""The one decode loop (batch size 1) shared by the baseline and every drafting method.

Prefill, then rounds (`verify_round`, one round per call): propose k tokens, one target forward over
`[pending, d1..dk]` with the KV cache, accept/reject, roll the cache back; `decode` commits the accepted drafts plus
one target token and tells the proposer.
The proposer contract (positions, hidden states, cache) is documented in `verifier.proposer`.

Rolling back. Every layer drops rejected positions with `cache.crop`: attention layers (full, sliding with recorded
past, MLA, indexed) cut their keys, linear-attention layers (Gated DeltaNet: qwen3_next, qwen3_5, qwen3_5_moe) cut their
conv inputs and take back the recurrent state of the last kept position. transformers records those per-position
states from 5.25 on (`activate_past_recording(recurrent_states_to_keep=...)`), the way vLLM and SGLang keep them in
their kernels, so a partial accept costs no second target pass. Older releases keep only the final state; on them a
hybrid model is refused up front (`rollback_problem`).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from verifier.metrics import RoundRecord
from verifier.proposer import Proposal, Proposer, TargetOutput


@dataclass
class DecodeResult:
    prompt_length: int
    tokens: list[int]  # generated tokens, exactly as output (trimmed at EOS / max_new_tokens)
    prefill_seconds: float  # prompt prefill + first token = time to first token
    total_seconds: float
    stop_reason: Literal["eos", "length"]
    rounds: list[RoundRecord] = field(default_factory=list)


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work so the clock reads real elapsed time."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def probabilities(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Softmax of `logits / temperature` in float32 (rows = positions)."""
    return torch.softmax(logits.float() / temperature, dim=-1)


def choose_token(logits_row: torch.Tensor, temperature: float, generator: torch.Generator) -> int:
    """argmax at temperature 0, else one sample from softmax(logits / T)."""
    if temperature == 0:
        return int(torch.argmax(logits_row))
    return int(torch.multinomial(probabilities(logits_row, temperature), 1, generator=generator))


def accept_greedy(logits: torch.Tensor, drafts: torch.Tensor) -> tuple[int, int]:
    """(accepted count, next token): accept while d_i == argmax p_i; the next token is argmax p_{n+1}."""
    choices = torch.argmax(logits, dim=-1)
    matches = (drafts == choices[: drafts.shape[0]]).long()
    n_accepted = int(matches.cumprod(0).sum())
    return n_accepted, int(choices[n_accepted])


def accept_sampled(
    logits: torch.Tensor, proposal: Proposal, drafts: torch.Tensor, temperature: float, generator: torch.Generator
) -> tuple[int, int]:
    """Modified rejection sampling (Leviathan et al. 2023): the output is distributed exactly as the target's.

    Accept d_i with probability min(1, p_i(d_i) / q_i(d_i)); at the first rejection sample from
    normalize(max(0, p_i - q_i)); when all are accepted sample a bonus token from p_{k+1}. Without q-probs q_i is
    the point mass on d_i, which keeps the rule exact whatever way the drafts were chosen.
    """
    p = probabilities(logits, temperature)
    for i in range(drafts.shape[0]):
        token = int(drafts[i])
        q_row = _draft_row(proposal, i, token, p.shape[-1], p.device)
        u = torch.rand((), generator=generator, device=p.device)
        if float(u) * float(q_row[token]) < float(p[i, token]):
            continue
        residual = torch.clamp(p[i] - q_row, min=0.0)
        if float(residual.sum()) <= 0.0:  # only reachable through rounding when p == q
            residual = p[i]
        return i, int(torch.multinomial(residual / residual.sum(), 1, generator=generator))
    return drafts.shape[0], int(torch.multinomial(p[drafts.shape[0]], 1, generator=generator))


def _draft_row(proposal: Proposal, index: int, token: int, vocab: int, device: torch.device) -> torch.Tensor:
    if proposal.q_probs is None:
        row = torch.zeros(vocab, device=device)
        row[token] = 1.0
        return row
    if proposal.q_probs.shape[-1] != vocab:
        raise ValueError(f"q_probs has width {proposal.q_probs.shape[-1]} but the target's logits have width {vocab}")
    return proposal.q_probs[index].to(device=device, dtype=torch.float32)


def _target_view(out: Any, cache: Any, start: int, input_ids: torch.Tensor, pending: int, rows: int) -> TargetOutput:
    hidden = None if out.hidden_states is None else tuple(h[:, :rows] for h in out.hidden_states)
    return TargetOutput(start=start, input_ids=input_ids, pending_token=pending, cache=cache, hidden_states=hidden)


def transformers_problem() -> str | None:
    """Why the installed transformers cannot run the loop; None when it can. Releases before TESTED_TRANSFORMERS
    take no `recurrent_states_to_keep` (every cache would fail with a TypeError on its first use) and keep no
    per-position recurrent state, so they are refused before a weight is loaded, with what to install."""
    import transformers

    installed = transformers.__version__
    if _release(installed) < _release(TESTED_TRANSFORMERS):
        return (f"transformers {installed} is older than {TESTED_TRANSFORMERS}, the release the verifier's rollback "
                f"is tested on (it cannot record the cache states a rejected draft rolls back to): install "
                f"transformers=={TESTED_TRANSFORMERS} (constraints.txt)")
    return None


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string ("5.25.0.dev0" → (5, 25, 0)), for ordering."""
    parts = []
    for part in version.split("+")[0].split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def new_cache(model: Any, verify_width: int = 1) -> Any:
    """A cache for `model` that `crop` can roll back by up to the last `verify_width` positions of a forward."""
    from transformers import DynamicCache

    problem = transformers_problem()
    if problem is not None:
        raise UnsupportedCache(problem)

    cache = DynamicCache(config=model.config)
    # Sliding-window layers drop old states on update unless recording; linear-attention layers keep their conv inputs
    # and the recurrent states of the last `verify_width` positions of each pass until `crop`.
    cache.activate_past_recording(recurrent_states_to_keep=verify_width)
    for layer in cache.layers:
        history = getattr(layer, "recurrent_states_history", None)
        if isinstance(history, dict):
            # transformers 5.25 builds this with `dict.fromkeys(..., [])`: one list shared by every state of the layer.
            layer.recurrent_states_history = {index: [] for index in history}
    return cache


class UnsupportedCache(RuntimeError):
    """A cache layer whose state `crop` cannot roll back."""


# The transformers release the verifier's rollback is tested on (constraints.txt pins it; a test keeps them equal).
TESTED_TRANSFORMERS = "5.25.0"
# transformers cache layers whose rollback the loop knows to be exact with `crop` (sliding layers record their past,
# indexed layers crop their indexer keys, linear-attention layers restore a recorded recurrent state).
# A subclass may carry state that `crop` ignores (DeepSeek-V4's compressor buffers), so the match is by exact class.
ROLLBACK_LAYER_CLASSES = (
    "DynamicLayer",
    "DynamicSlidingWindowLayer",
    "DynamicIndexedLayer",
    "LinearAttentionLayer",
    "LinearAttentionAndFullAttentionLayer",
    "LinearAttentionAndSlidingWindowAttentionLayer",
    "DummyLayer",
)


def rollback_problem(model: Any) -> str | None:
    """Why rejected drafts cannot be undone exactly in `model`'s cache; None when they can."""
    import transformers
    import transformers.cache_utils as cache_utils

    problem = transformers_problem()
    if problem is not None:
        return problem
    cache = new_cache(model, verify_width=2)
    model_type = getattr(model.config.get_text_config(), "model_type", "?")
    known = tuple(getattr(cache_utils, name) for name in ROLLBACK_LAYER_CLASSES if hasattr(cache_utils, name))
    unknown = sorted({type(layer).__name__ for layer in cache.layers if type(layer) not in known})
    if unknown:
        return (
            f"the {model_type} cache layers {', '.join(unknown)} keep state that the verifier cannot roll back after "
            "a rejected draft, so speculative decoding on this model would not be exact"
        )
    recurrent = [layer for layer in cache.layers if hasattr(layer, "recurrent_states")]
    if any(getattr(layer, "recurrent_states_to_keep", None) != 2 for layer in recurrent):
        return (
            f"transformers {transformers.__version__}: hybrid rollback not supported (it keeps no per-position "
            f"recurrent state of the {model_type} linear-attention layers, so a rejected draft cannot be undone "
            f"without a second target pass); tested on transformers {TESTED_TRANSFORMERS}"
        )
    return None


@dataclass(frozen=True)
class Verified:
    """One round as the target verified it: how many drafts it accepted, the tokens it commits, and its forward
    output over `[pending, d1..dk]` (what the proposer reads next)."""

    drafted: int
    accepted: int
    committed: list[int]  # the accepted drafts, then the target's own next token
    verify_ids: torch.Tensor  # [pending, d1..dk]
    out: Any
    draft_seconds: float
    verify_seconds: float


def verify_round(model: Any, proposer: Proposer, cache: Any, pending: int, *, device: torch.device,
                 temperature: float, generator: torch.Generator, wants_hidden: bool) -> Verified:
    """One round: the proposer drafts k tokens, one target forward over `[pending, d1..dk]` with the KV cache,
    accept/reject (greedy at temperature 0, else rejection sampling), the cache rolled back to what was kept."""
    round_started = time.perf_counter()
    proposal = proposer.propose(temperature, generator)
    drafts = proposal.tokens.to(device=device, dtype=torch.long)
    synchronize(device)
    drafted_at = time.perf_counter()

    verify_ids = torch.cat([torch.tensor([pending], device=device), drafts])
    out = model(input_ids=verify_ids[None], cache=cache, use_cache=True, output_hidden_states=wants_hidden)
    logits = out.logits[0]
    if temperature == 0:
        n_accepted, next_token = accept_greedy(logits, drafts)
    else:
        n_accepted, next_token = accept_sampled(logits, proposal, drafts, temperature, generator)
    # Also trims what layers recorded for the rollback back to their working size when nothing is rejected.
    cache.crop(-(drafts.shape[0] - n_accepted))
    synchronize(device)
    verified_at = time.perf_counter()
    return Verified(drafted=drafts.shape[0], accepted=n_accepted, committed=[*drafts[:n_accepted].tolist(), next_token],
                    verify_ids=verify_ids, out=out, draft_seconds=drafted_at - round_started,
                    verify_seconds=verified_at - drafted_at)


@torch.inference_mode()
def decode(
    model: Any,
    proposer: Proposer,
    prompt_ids: torch.Tensor,
    *,
    max_new_tokens: int,
    temperature: float,
    generator: torch.Generator,
    eos_token_ids: frozenset[int],
) -> DecodeResult:
    """Generate up to `max_new_tokens` after `prompt_ids` [P] with `proposer` drafting (NoDraft = baseline).

    `generator` must live on the model's device; it drives every random choice of the loop and the proposer.
    """
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be at least 1")
    if temperature < 0:
        raise ValueError("temperature must be >= 0")
    device = prompt_ids.device
    wants_hidden = proposer.needs_hidden_states
    if proposer.draft_length > 0:
        problem = rollback_problem(model)
        if problem is not None:
            raise UnsupportedCache(problem)
    cache = new_cache(model, verify_width=proposer.draft_length + 1)

    synchronize(device)
    started = time.perf_counter()
    out = model(
        input_ids=prompt_ids[None], cache=cache, use_cache=True, output_hidden_states=wants_hidden, logits_to_keep=1
    )
    pending = choose_token(out.logits[0, -1], temperature, generator)
    tokens = [pending]
    proposer.begin(prompt_ids, _target_view(out, cache, 0, prompt_ids, pending, prompt_ids.shape[0]))
    synchronize(device)
    prefill_seconds = time.perf_counter() - started

    rounds: list[RoundRecord] = []
    stop_reason: Literal["eos", "length"] = "eos" if pending in eos_token_ids else "length"
    while pending not in eos_token_ids and len(tokens) < max_new_tokens:
        start = prompt_ids.shape[0] + len(tokens) - 1  # position of the pending token
        verified = verify_round(model, proposer, cache, pending, device=device, temperature=temperature,
                                generator=generator, wants_hidden=wants_hidden)
        emitted = verified.committed[: max_new_tokens - len(tokens)]
        eos_at = next((i for i, token in enumerate(emitted) if token in eos_token_ids), None)
        if eos_at is not None:
            emitted = emitted[: eos_at + 1]
        tokens.extend(emitted)
        rounds.append(RoundRecord(drafted=verified.drafted, accepted=verified.accepted, emitted=len(emitted),
                                  draft_seconds=verified.draft_seconds, verify_seconds=verified.verify_seconds))
        if eos_at is not None:
            stop_reason = "eos"
            break
        if len(tokens) >= max_new_tokens:
            stop_reason = "length"
            break
        pending = verified.committed[-1]
        kept = verified.accepted + 1
        proposer.observe(verified.accepted, torch.tensor(verified.committed, device=device),
                         _target_view(verified.out, cache, start, verified.verify_ids[:kept], pending, kept))

    synchronize(device)
    return DecodeResult(
        prompt_length=int(prompt_ids.shape[0]),
        tokens=tokens,
        prefill_seconds=prefill_seconds,
        total_seconds=time.perf_counter() - started,
        stop_reason=stop_reason,
        rounds=rounds,
    )
