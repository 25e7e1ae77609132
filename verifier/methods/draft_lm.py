"""Classic speculative decoding with a small causal LM as the drafter (gpt-fast's `speculative_decode`).

The draft model keeps its own KV cache over committed tokens and drafts k tokens autoregressively, returning the
distributions it sampled from (q) at temperature > 0 so the loop can run exact rejection sampling.

A hybrid draft model (linear-attention layers) rolls back with `crop` like any other: its cache records the recurrent
states of the positions a round may reject (`verifier.decode.new_cache`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from verifier.decode import new_cache, probabilities, rollback_problem
from verifier.folders import LoadError
from verifier.harness.contract import IncompatiblePair, given_draft_length
from registry.domain.measurement import RunSettings
from verifier.loading import LoadedTarget, load_causal_lm, resolve_dtype
from verifier.proposer import Proposal, TargetOutput



class DraftLMProposer:
    needs_hidden_states = False

    def __init__(self, draft_model: Any, draft_length: int, target_vocab: int) -> None:
        if draft_length < 1:
            raise ValueError("draft_length must be at least 1 for a draft LM")
        draft_vocab = draft_model.get_output_embeddings().weight.shape[0]
        if draft_vocab > target_vocab:
            raise LoadError(
                f"the draft LM's vocabulary ({draft_vocab}) is larger than the target's ({target_vocab}); "
                "its tokens cannot be verified"
            )
        self.model = draft_model
        self.draft_length = draft_length
        self.target_vocab = target_vocab
        self.device = next(draft_model.parameters()).device
        self._sequence: list[int] = []  # every committed token, the pending one last
        self._cached = 0  # leading tokens of the draft cache that are committed and valid
        self._in_cache = 0  # tokens currently in the draft cache (committed + drafts of the last round)
        self._cache: Any = None

    @torch.inference_mode()
    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        self._cache = new_cache(self.model, verify_width=self.draft_length + 1)
        self._sequence = [*prompt_ids.tolist(), target_out.pending_token]
        self.model(input_ids=prompt_ids.to(self.device)[None], cache=self._cache, use_cache=True, logits_to_keep=1)
        self._cached = self._in_cache = prompt_ids.shape[0]

    @torch.inference_mode()
    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        feed = torch.tensor(self._sequence[self._cached :], device=self.device)
        tokens: list[int] = []
        q_rows: list[torch.Tensor] = []
        for _ in range(self.draft_length):
            logits = self.model(input_ids=feed[None], cache=self._cache, use_cache=True, logits_to_keep=1).logits[0, -1]
            if temperature == 0:
                token = int(torch.argmax(logits))
            else:
                q = probabilities(logits, temperature)
                token = int(torch.multinomial(q, 1, generator=generator))
                q_rows.append(q)
            tokens.append(token)
            feed = torch.tensor([token], device=self.device)
        # The last draft was never fed, so the cache holds the committed tokens + the first k - 1 drafts.
        self._in_cache = len(self._sequence) + self.draft_length - 1
        self._cached = len(self._sequence)
        q_probs = None
        if q_rows:
            q_probs = torch.nn.functional.pad(torch.stack(q_rows), (0, self.target_vocab - q_rows[0].shape[-1]))
        return Proposal(tokens=torch.tensor(tokens, dtype=torch.long), q_probs=q_probs)

    @torch.inference_mode()
    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        # Drafts 1..n were accepted; of those the cache holds at most the first k - 1.
        valid = self._cached + min(n_accepted, self.draft_length - 1)
        self._cache.crop(-(self._in_cache - valid))
        self._cached = self._in_cache = valid
        self._sequence.extend(committed_tokens.tolist())


def build_proposer(drafter_dir: Path, target: LoadedTarget, settings: RunSettings,
                   raw_config: dict[str, Any]) -> DraftLMProposer:
    """A draft-LM proposer; raises `IncompatiblePair` when the target's or the draft's cache cannot roll back."""
    model = load_causal_lm(Path(drafter_dir), device=target.device, dtype=resolve_dtype(settings.dtype),
                           config=raw_config)
    problems = [
        f"{role}: {problem}"
        for role, problem in (("target", rollback_problem(target.model)), ("draft LM", rollback_problem(model)))
        if problem is not None
    ]
    if problems:
        raise IncompatiblePair(problems)
    target_vocab = target.model.get_output_embeddings().weight.shape[0]
    return DraftLMProposer(model, given_draft_length(settings), target_vocab)
