"""EAGLE-3 heads in the decode loop: the weights loaded in any published layout, and the proposer that drafts a
chain per round.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from verifier.decode import rollback_problem
from verifier.harness.contract import IncompatiblePair
from registry.domain.measurement import RunSettings
from verifier.loading import LoadedTarget
from verifier.methods.dflash.proposer import read_drafter_weights
from verifier.methods.eagle3.config import (
    DEFAULT_DRAFT_LENGTH,
    Eagle3Config,
    Eagle3FormatError,
    compatibility_problems,
    expected_weight_shapes,
    optional_weight_shapes,
    parse_eagle3_config,
    stored_name,
    target_shape,
    weight_problems,
)
from verifier.methods.eagle3.model import DraftCache, Eagle3DraftModel, rotary_embedding
from verifier.proposer import Proposal, TargetOutput


def load_eagle3(
    drafter_dir: Path, config: Eagle3Config, num_fused: int, *, device: torch.device, dtype: torch.dtype
) -> Eagle3DraftModel:
    """The drafter with its folder's weights; an unknown layout is refused with the tensors that did not match."""
    stored = read_drafter_weights(drafter_dir)
    problems = weight_problems(config, num_fused, {name: tuple(t.shape) for name, t in stored.items()})
    if problems:
        shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
        raise Eagle3FormatError(f"{drafter_dir}: the weights do not follow the EAGLE-3 {config.layout} layout: {shown}")
    canonical = {stored_name(config.layout, name): name for name in expected_weight_shapes(config, num_fused)}
    canonical |= {stored_name(config.layout, name): name for name in optional_weight_shapes(config)}
    # t2d (target -> draft mask) is the inverse of d2t: nothing reads it.
    tensors = {canonical[name]: tensor for name, tensor in stored.items() if name in canonical and name != "t2d"}
    if config.draft_vocab_size == config.vocab_size:
        tensors.pop("d2t", None)
    with torch.device("meta"):
        model = Eagle3DraftModel(
            config,
            num_fused,
            own_embedding="embed_tokens.weight" in tensors,
            own_lm_head="lm_head.weight" in tensors,
            fc_bias="fc.bias" in tensors,
        )
    rotary = rotary_embedding(config)  # its inv_freq buffer is computed, not stored
    model.rotary = rotary
    missing, unexpected = model.load_state_dict(tensors, strict=False, assign=True)
    missing = [name for name in missing if not name.startswith("rotary.")]
    if missing or unexpected:
        raise Eagle3FormatError(f"{drafter_dir}: tensors missing {missing[:6]}, unexpected {unexpected[:6]}")
    model = model.to(device=device)
    for name, parameter in model.named_parameters():
        parameter.data = parameter.data.to(dtype)
    return model.eval()


def draft_to_target(config: Eagle3Config, model: Eagle3DraftModel) -> torch.Tensor | None:
    """Target id of each draft id ([Dv] long), or None when the drafter speaks the whole target vocabulary."""
    if config.draft_vocab_size == config.vocab_size:
        return None
    return torch.arange(config.draft_vocab_size, device=model.d2t.device) + model.d2t


class Eagle3Proposer:
    """Drafts a chain of tokens per round with an EAGLE-3 head; greedy, or sampled with q rows for exact sampling."""

    needs_hidden_states = True

    def __init__(
        self,
        model: Eagle3DraftModel,
        *,
        embedding: nn.Module,
        lm_head: nn.Module,
        target_vocab: int,
        hidden_state_indices: tuple[int, ...],
        draft_length: int,
    ) -> None:
        """`embedding` / `lm_head`: the head's own when its folder has them, else the target's."""
        if draft_length < 1:
            raise ValueError("draft_length must be at least 1 for EAGLE-3")
        self.model = model
        self.indices = hidden_state_indices
        self.draft_length = draft_length
        self.embedding = embedding
        self.lm_head = lm_head
        self.target_vocab = target_vocab
        self.to_target = draft_to_target(model.config, model)
        self.last_logits: list[torch.Tensor] = []  # draft-vocab logits of the last round's steps (for checks)
        self.cache = DraftCache(layers=[])
        self.committed_rows = 0  # cache rows computed from target features (valid across rounds)
        self.pending: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # fused, tokens, positions

    def _take(self, target_out: TargetOutput) -> None:
        if target_out.hidden_states is None:
            raise RuntimeError("hidden states were not captured: set needs_hidden_states = True on the proposer")
        fused = torch.cat([target_out.hidden_states[i] for i in self.indices], dim=-1)
        device = fused.device
        # Row i pairs the state at position i with the token at i + 1; the last row's token is the pending one.
        tokens = torch.cat([target_out.input_ids[1:].to(device), torch.tensor([target_out.pending_token], device=device)])
        positions = torch.arange(target_out.start, target_out.end, device=device)
        self.pending = (fused, tokens, positions)

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        self.cache = DraftCache(layers=[])
        self.committed_rows = 0
        self._take(target_out)

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        self._take(target_out)

    def _to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids if self.to_target is None else self.to_target[draft_ids]

    def draft_logits(self, choose) -> list[torch.Tensor]:
        """Run the chain; `choose(logits [Dv]) -> draft id` picks each token. Returns the per-step logits."""
        if self.pending is None:
            raise RuntimeError("propose() was called before begin()")
        fused, tokens, positions = self.pending
        self.cache.crop(self.committed_rows)
        hidden = self.model.project_features(fused.to(self.model.fc.weight.dtype))
        embeds = self.embedding(tokens[None]).to(hidden.dtype)
        normed, state = self.model(hidden, embeds, positions, self.cache)
        self.committed_rows = self.cache.length
        self.pending = (fused[:, :0], tokens[:0], positions[:0])
        position = int(positions[-1]) if positions.numel() else self.committed_rows - 1
        step_logits: list[torch.Tensor] = []
        state, normed = state[:, -1:], normed[:, -1:]
        for step in range(self.draft_length):
            logits = self.lm_head(normed[0, -1])
            step_logits.append(logits)
            if step == self.draft_length - 1:
                break
            draft_id = choose(logits)
            token = self._to_target_ids(torch.tensor([draft_id], device=logits.device))
            position += 1
            normed, state = self.model(
                state, self.embedding(token[None]).to(state.dtype), torch.tensor([position], device=logits.device), self.cache
            )
        return step_logits

    @torch.inference_mode()
    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        chosen: list[int] = []
        q_rows: list[torch.Tensor] = []

        def choose(logits: torch.Tensor) -> int:
            if temperature <= 0:
                draft_id = int(torch.argmax(logits))
            else:
                q = torch.softmax(logits.float() / temperature, dim=-1)
                draft_id = int(torch.multinomial(q, 1, generator=generator))
                q_rows.append(q)
            chosen.append(draft_id)
            return draft_id

        step_logits = self.draft_logits(choose)
        choose(step_logits[-1])
        self.last_logits = step_logits
        draft_ids = torch.tensor(chosen, device=step_logits[0].device)
        tokens = self._to_target_ids(draft_ids)
        if temperature <= 0:
            return Proposal(tokens=tokens)
        q_draft = torch.stack(q_rows)
        q_probs = torch.zeros(q_draft.shape[0], self.target_vocab, device=q_draft.device)
        columns = torch.arange(q_draft.shape[1], device=q_draft.device) if self.to_target is None else self.to_target
        q_probs[:, columns] = q_draft
        return Proposal(tokens=tokens, q_probs=q_probs)


def build_proposer(drafter_dir: Path, target: LoadedTarget, settings: RunSettings,
                   raw_config: dict[str, Any]) -> Eagle3Proposer:
    """An EAGLE-3 proposer for `target`; raises `IncompatiblePair` when the head cannot serve this target."""

    drafter_dir = Path(drafter_dir)
    config = parse_eagle3_config(raw_config)
    shape = target_shape(target.model)
    problems = compatibility_problems(config, shape)
    rollback = rollback_problem(target.model)
    if rollback is not None:
        problems.append(f"target: {rollback}")
    if problems:
        raise IncompatiblePair(problems)
    indices = config.hidden_state_indices(shape.num_hidden_layers)
    parameter = next(target.model.parameters())
    model = load_eagle3(drafter_dir, config, len(indices), device=parameter.device, dtype=parameter.dtype)
    default = config.speculative_tokens or DEFAULT_DRAFT_LENGTH
    draft_length = default if settings.draft_length is None else settings.draft_length
    return Eagle3Proposer(
        model,
        embedding=model.embed_tokens if hasattr(model, "embed_tokens") else target.model.get_input_embeddings(),
        lm_head=model.lm_head if hasattr(model, "lm_head") else target.model.get_output_embeddings(),
        target_vocab=shape.vocab_size,
        hidden_state_indices=indices,
        draft_length=draft_length,
    )
