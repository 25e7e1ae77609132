"""DSpark drafters (DeepSeek's DeepSpec; the speculators `dspark` layout): a DFlash backbone that drafts from the
anchor slot too, plus a low-rank Markov logit bias that lets each block slot depend on the token chosen before it.

One round, as DeepSpec describes it and speculators' `DSparkDraftModel` computes it:
- z-lab's DFlash pass over the block `[pending token, mask x (B - 1)]` at positions end .. end + B - 1 with the
  cached context (`verifier.methods.dflash`), final norm -> hidden h_k and base logits (draft vocabulary) for every
  slot k = 0 .. B - 1. Unlike DFlash, slot k drafts the token AFTER its own position (slot 0 drafts d1), so a block
  yields B drafts;
- slot by slot: logits_k = base_k + bias(prev_k, h_k), where prev_0 is the pending token and prev_k the draft chosen
  at slot k - 1 (target ids); bias = W2 · e with e = W1[prev] ("vanilla"), e gated by sigmoid(G [h; e]) ("gated"), or
  a GRU-like state over the block fed [state; e; h] ("rnn");
- a confidence head (predicted acceptance per slot) does not change the drafts and is not used.

Layouts: speculators (`speculators_model_type: "dspark"`, tensors `markov_head.markov_w1/markov_w2/gate_proj/
joint_proj`, optional `confidence_head.*`, reduced vocabulary via `lm_head` + `d2t`) and DeepSpec's exports (z-lab's
config with `dflash_config.projector_type: "dspark"`, `markov_rank`, `markov_head_type`; the same `markov_head.*`
names as DeepSpec's `markov_head.py`, plus its own `embed_tokens` and full-vocabulary `lm_head`). Tensors outside
these names are refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from registry.domain.measurement import RunSettings
from verifier.harness.contract import given_draft_length
from verifier.loading import LoadedTarget
from verifier.methods.dflash.config import (
    DFlashFormatError,
    layout_problems,
    parse_dflash_config,
)
from verifier.methods.dflash.layouts import LayoutDFlashProposer, draft_vocab_map, load_backbone, zlab_config
from verifier.methods.dflash.model import block_logits, output_numerics
from verifier.methods.dflash.proposer import read_drafter_weights, served_target
from verifier.proposer import Proposal

HEAD_TYPES = ("vanilla", "gated", "rnn")


class MarkovHead(nn.Module):
    """The low-rank sequential bias; parameter names are speculators' (`markov_head.*` in the checkpoint)."""

    def __init__(self, target_vocab: int, draft_vocab: int, rank: int, hidden: int, head_type: str) -> None:
        super().__init__()
        if head_type not in HEAD_TYPES:
            raise DFlashFormatError(f"markov_head_type {head_type!r} is not one of {', '.join(HEAD_TYPES)}")
        self.head_type, self.rank = head_type, rank
        self.markov_w1 = nn.Embedding(target_vocab, rank)
        self.markov_w2 = nn.Linear(rank, draft_vocab, bias=False)
        if head_type == "gated":
            self.gate_proj = nn.Linear(hidden + rank, rank)
        elif head_type == "rnn":
            self.joint_proj = nn.Linear(2 * rank + hidden, 3 * rank)

    def initial_state(self, like: torch.Tensor) -> torch.Tensor:
        return like.new_zeros(self.rank)

    def step(self, prev_token: torch.Tensor, hidden: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(bias over the draft vocabulary [Dv], next state) for one slot; `prev_token` is a target id (0-d)."""
        previous = self.markov_w1(prev_token).to(self.markov_w2.weight.dtype)
        if self.head_type == "vanilla":
            return self.markov_w2(previous), state
        hidden = hidden.to(previous.dtype)
        if self.head_type == "gated":
            gate = torch.sigmoid(self.gate_proj(torch.cat([hidden, previous], dim=-1)))
            return self.markov_w2(gate * previous), state
        gate_raw, candidate, out = self.joint_proj(torch.cat([state, previous, hidden], dim=-1)).chunk(3, dim=-1)
        gate = torch.sigmoid(gate_raw)
        state = gate * state + (1.0 - gate) * torch.tanh(candidate)
        return self.markov_w2(torch.tanh(out)), state


def markov_head_shapes(head_type: str, target_vocab: int, draft_vocab: int, rank: int, hidden: int) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {
        "markov_head.markov_w1.weight": (target_vocab, rank),
        "markov_head.markov_w2.weight": (draft_vocab, rank),
    }
    if head_type == "gated":
        shapes |= {"markov_head.gate_proj.weight": (rank, hidden + rank), "markov_head.gate_proj.bias": (rank,)}
    elif head_type == "rnn":
        shapes |= {"markov_head.joint_proj.weight": (3 * rank, 2 * rank + hidden), "markov_head.joint_proj.bias": (3 * rank,)}
    return shapes


def _head_settings(raw: Mapping[str, Any]) -> tuple[int, str]:
    section = raw.get("dflash_config") if isinstance(raw.get("dflash_config"), Mapping) else {}
    rank = raw.get("markov_rank", section.get("markov_rank", 256))
    head_type = raw.get("markov_head_type", section.get("markov_head_type", "vanilla"))
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise DFlashFormatError(f"markov_rank must be an integer >= 0, got {rank!r}")
    return rank, str(head_type)


class DSparkProposer(LayoutDFlashProposer):
    """B drafts per block (slot k drafts d_{k+1}), each slot's logits biased by the Markov head."""

    def __init__(self, *args: Any, markov_head: MarkovHead | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.markov_head = markov_head
        self.last_logits: torch.Tensor | None = None  # the final per-slot logits of the last round (for checks)

    def block_states(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(final-normed states [B, H], base logits [B, V or Dv]) for every slot; moves the context into the cache."""
        states = self.block_hidden()[: self.draft_length]
        return states, block_logits(states, self.lm_head, self.numerics)

    def _to_target(self, draft_id: torch.Tensor) -> torch.Tensor:
        return draft_id if self.to_target is None else self.to_target[draft_id]

    @torch.inference_mode()
    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        states, base = self.block_states()
        prev = torch.tensor(self.anchor_token, device=base.device)
        state = None if self.markov_head is None else self.markov_head.initial_state(states[0].float())
        tokens, q_rows, finals = [], [], []
        for slot in range(base.shape[0]):
            logits = base[slot].float()
            if self.markov_head is not None:
                bias, state = self.markov_head.step(prev, states[slot], state)
                logits = logits + bias.float()
            finals.append(logits)
            if temperature <= 0:
                draft_id = torch.argmax(logits)
            else:
                q = torch.softmax(logits / temperature, dim=-1)
                draft_id = torch.multinomial(q, 1, generator=generator)[0]
                q_rows.append(q)
            prev = self._to_target(draft_id)
            tokens.append(prev)
        self.last_logits = torch.stack(finals)
        proposal_tokens = torch.stack(tokens)
        if temperature <= 0:
            return Proposal(tokens=proposal_tokens)
        q_draft = torch.stack(q_rows)
        if self.to_target is None:
            return Proposal(tokens=proposal_tokens, q_probs=q_draft)
        q_probs = torch.zeros(q_draft.shape[0], self.target_vocab, device=q_draft.device)
        q_probs[:, self.to_target] = q_draft
        return Proposal(tokens=proposal_tokens, q_probs=q_probs)


def split_tensors(
    drafter_dir: Path, tensors: dict[str, torch.Tensor], expected_head: Mapping[str, tuple[int, ...]]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(backbone and vocabulary tensors, Markov head tensors); refuses head tensors that do not match by name."""
    head = {n[len("markov_head.") :]: t for n, t in tensors.items() if n.startswith("markov_head.")}
    problems = layout_problems(
        {f"markov_head.{n}": tuple(t.shape) for n, t in head.items()}, dict(expected_head)
    )
    if problems:
        raise DFlashFormatError(f"{drafter_dir}: the Markov head does not follow the speculators DSpark layout: "
                                + "; ".join(problems[:6]))
    rest = {n: t for n, t in tensors.items() if not n.startswith(("markov_head.", "confidence_head."))}
    return rest, head


def build_proposer(drafter_dir: Path, target: LoadedTarget, settings: RunSettings,
                   raw_config: dict[str, Any]) -> DSparkProposer:
    drafter_dir = Path(drafter_dir)
    speculators = raw_config.get("speculators_model_type") is not None
    if speculators and raw_config["speculators_model_type"] != "dspark":
        raise DFlashFormatError(f"speculators_model_type {raw_config['speculators_model_type']!r} is not 'dspark'")
    section = raw_config.get("dflash_config") if isinstance(raw_config.get("dflash_config"), Mapping) else {}
    if not speculators and section.get("projector_type") != "dspark":
        raise DFlashFormatError("not a DSpark drafter: neither speculators_model_type 'dspark' nor "
                                "dflash_config.projector_type 'dspark'")
    if raw_config.get("sample_from_anchor") is False:
        raise DFlashFormatError("this DSpark drafter does not draft from the anchor slot (sample_from_anchor: false)")
    # DeepSpec's exports are z-lab configs (DFlashDraftModel + dflash_config) whose slot 0 drafts too.
    config = parse_dflash_config(zlab_config(raw_config, anchor_drafts=True) if speculators else raw_config)
    served = served_target(config, target)
    geometry, mask_token_id, layer_ids = served.geometry, served.mask_token_id, served.layer_ids
    device, dtype = served.device, served.dtype
    tensors = read_drafter_weights(drafter_dir)
    head_vocab = tensors["lm_head.weight"].shape[0] if "lm_head.weight" in tensors else geometry.vocab_size
    rank, head_type = _head_settings(raw_config)
    expected_head = {} if rank == 0 else markov_head_shapes(head_type, geometry.vocab_size, head_vocab, rank, config.hidden_size)
    rest, head_tensors = split_tensors(drafter_dir, tensors, expected_head)
    model = load_backbone(drafter_dir, rest, config, len(layer_ids), "speculators DSpark", device=device, dtype=dtype)
    markov_head = None
    if rank > 0:
        with torch.device("meta"):
            markov_head = MarkovHead(geometry.vocab_size, head_vocab, rank, config.hidden_size, head_type)
        markov_head.load_state_dict(head_tensors, strict=True, assign=True)
        markov_head = markov_head.to(device=device, dtype=dtype).eval()
    lm_head = None
    if "lm_head.weight" in rest:
        lm_head = nn.Linear(config.hidden_size, head_vocab, bias=False, device=device, dtype=dtype)
        with torch.no_grad():
            lm_head.weight.copy_(rest["lm_head.weight"])
    to_target = draft_vocab_map(rest, geometry.vocab_size)
    embedding = rest.get("embed_tokens.weight")  # DeepSpec stores (frozen copies of) the target's table and head
    if embedding is not None and tuple(embedding.shape) != (geometry.vocab_size, config.hidden_size):
        raise DFlashFormatError(
            f"embed_tokens.weight has shape {list(embedding.shape)}, expected {[geometry.vocab_size, config.hidden_size]}"
        )
    return DSparkProposer(
        model,
        target.model,
        layer_ids=layer_ids,
        mask_token_id=mask_token_id,
        numerics=output_numerics(config, geometry),
        draft_length=given_draft_length(settings),
        embedding=None if embedding is None else embedding.to(device=device, dtype=dtype),
        lm_head=lm_head,
        to_target=None if to_target is None else to_target.to(device),
        target_vocab=geometry.vocab_size,
        markov_head=markov_head,
    )
