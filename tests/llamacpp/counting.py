"""How llama-server counts a speculative decode, applied to the PyTorch engine's rounds, so that the agreement tests
compare like with like: llama-server drafts at most `n_remaining - 1` tokens (nothing when one token is left) and
accepts no draft past an end-of-generation token, where the PyTorch loop counts drafts accepted past the end."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from verifier.metrics import RoundRecord


@dataclass(frozen=True)
class ServerCounts:
    drafting_steps: int
    drafted: int
    accepted: int


def counted_as_llama_server(rounds: Sequence[RoundRecord], tokens: Sequence[int], eos_ids: Collection[int],
                            max_new_tokens: int, draft_length: int) -> ServerCounts:
    """A PyTorch greedy decode's rounds as llama-server counts them (see the module docstring). Chained drafts are
    deterministic, so a draft cut to m tokens is the first m of the PyTorch chain, and the rounds stay aligned."""
    generated = 1  # the first token comes from the prefill
    steps = drafted = accepted = 0
    for record in rounds:
        cap = min(draft_length, max_new_tokens - generated - 1)
        committed = tokens[generated : generated + record.emitted]
        generated += record.emitted
        if cap <= 0:
            continue  # a plain step: llama-server drafts nothing for the last token
        steps += 1
        drafted += cap
        taken = min(record.accepted, cap)
        eos_at = next((i for i, token in enumerate(committed) if token in eos_ids), None)
        if eos_at is not None and eos_at < taken and eos_at + 1 < cap:
            taken = eos_at  # an accepted end-of-generation draft stops acceptance before it
        accepted += taken
    return ServerCounts(steps, drafted, accepted)
