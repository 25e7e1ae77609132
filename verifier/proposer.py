"""The interface between the one decode loop (`verifier.decode`) and every drafting method.

A round of speculative decoding, batch size 1:

1. the loop calls `proposer.propose(temperature, generator)` and gets up to `draft_length` draft tokens;
2. the target scores `[pending token, d1..dk]` in one forward pass with its KV cache;
3. the loop accepts a prefix of n drafts, commits them plus one target token (bonus or correction),
   rolls the target cache back to the committed tokens (`crop`; linear-attention layers restore the recurrent
   state they recorded at the last kept position, so no second target pass runs, see `verifier.decode`), and calls
   `proposer.observe(n, committed_tokens, target_out)`.

The baseline is `NoDraft`, a proposer that proposes nothing, so baseline and speculative runs share the loop
and the token accounting.

Positions. After prefill of a prompt of length P the committed sequence is `prompt + [t0]` where t0 comes from
the target's last logit; t0 has not been fed to the target yet. We call the one committed token that the target
has not yet consumed the *pending token*. At every moment the target's cache holds exactly the committed
sequence minus the pending token.

What `TargetOutput` holds (the same contract for `begin` and `observe`):

- `start`: absolute position of the first row below.
- `input_ids` [n]: the committed tokens the target consumed in this pass, at positions start..start+n-1.
  At `begin`: the prompt (start = 0, n = P). At `observe`: `[previous pending token, d1..d_accepted]`
  (start = previous committed length - 1, n = accepted + 1). Rejected drafts never appear.
- `pending_token`: the committed token not yet consumed by the target (t0 at `begin`, the bonus/correction
  token at `observe`); the next round's drafting starts after it.
- `hidden_states`: only when the proposer sets `needs_hidden_states = True` (otherwise None): the target's
  `output_hidden_states` tuple restricted to the n rows above, one tensor [1, n, H] per entry; entry 0 is the
  embedding output, entry i (1 <= i <= L) the output of decoder layer i - 1 (the last entry is after the final
  norm, as transformers returns it). So DFlash's `target_layer_ids` id maps to entry id + 1.
- `cache`: the target's live cache object, ALREADY ROLLED BACK to the committed length minus the pending token
  (= start + n positions, 0..start+n-1), recurrent states included. It is the loop's object: read it, never mutate
  it. `hidden_states` come from the round's one verify pass, its rows for the rejected drafts cut off.

Tensors are on the target's device. Token tensors are 1-D LongTensors.

Sampling contract for `propose`:
- temperature == 0: propose whatever you believe the target's argmax is; `q_probs` may be None.
- temperature > 0: for exact rejection sampling, sample each draft token from your distribution q (after
  applying the same temperature) with the given generator and return the q rows you sampled from as `q_probs`
  [k, V] where V is the target's logit width (pad a smaller draft vocab with zeros). A proposer that returns
  `q_probs=None` is treated as a point mass on each proposed token; the output stays exactly distributed as the
  target's, only acceptance is lower.

`observe` is not called after the round that ends generation (EOS or max_new_tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass(frozen=True)
class Proposal:
    """Draft tokens for one round; `q_probs[i]` is the distribution `tokens[i]` was drawn from (or None)."""

    tokens: torch.Tensor  # LongTensor [k], k may be 0
    q_probs: torch.Tensor | None = None  # FloatTensor [k, V] or None

    @property
    def k(self) -> int:
        return int(self.tokens.shape[0])


@dataclass
class TargetOutput:
    """The target's view of newly committed positions; see the module docstring for the exact contract."""

    start: int
    input_ids: torch.Tensor  # LongTensor [n]
    pending_token: int
    cache: Any  # transformers Cache, cropped to start + n positions; read-only for proposers
    hidden_states: tuple[torch.Tensor, ...] | None = None  # each [1, n, H]; entry 0 = embeddings

    @property
    def end(self) -> int:
        """Position right after the last consumed committed token (= the pending token's position)."""
        return self.start + int(self.input_ids.shape[0])

    def layer_output(self, layer_id: int) -> torch.Tensor:
        """Output of decoder layer `layer_id` (0-based) for the committed rows: [1, n, H]."""
        if self.hidden_states is None:
            raise RuntimeError("hidden states were not captured: set needs_hidden_states = True on the proposer")
        return self.hidden_states[layer_id + 1]

    @property
    def last_hidden_state(self) -> torch.Tensor:
        """The target's final hidden state (after the final norm) for the committed rows: [1, n, H]."""
        if self.hidden_states is None:
            raise RuntimeError("hidden states were not captured: set needs_hidden_states = True on the proposer")
        return self.hidden_states[-1]


@runtime_checkable
class Proposer(Protocol):
    """What the decode loop calls. One instance serves one (target, drafter) pair across many prompts."""

    # Tokens proposed per round (0 = no drafting; DFlash: block_size - 1).
    draft_length: int
    # Ask the loop to run the target with output_hidden_states=True on prefill and verify passes.
    needs_hidden_states: bool

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        """Reset per-prompt state after the target's prefill of `prompt_ids` [P]."""
        ...

    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        """Draft up to `draft_length` tokens following the committed sequence (ending in the pending token)."""
        ...

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        """`committed_tokens` [n_accepted + 1] = accepted drafts + the target's token (== target_out.pending_token)."""
        ...


class NoDraft:
    """The baseline: proposes nothing, so every round is one plain target step."""

    draft_length = 0
    needs_hidden_states = False

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        return None

    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        return Proposal(tokens=torch.empty(0, dtype=torch.long))

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        return None
