"""Gemma-4 assistant (Google's MTP drafter) as a proposer for the shared decode loop.

The assistant has query projections only. Each round it drafts autoregressively, one token per step, all steps at
the position of the pending token p (the committed token the target has not consumed yet), exactly as transformers'
`SinglePositionMultiTokenCandidateGenerator` drives `Gemma4AssistantForCausalLM`:

- step 1 input: `concat(target_embedding(pending token), target final hidden state at p - 1)`;
- step i > 1 input: `concat(target_embedding(draft i - 1), assistant output of step i - 1)` (the assistant's
  `last_hidden_state`, already projected back to the target's width);
- every step attends to the K/V of the target's last sliding-window layer and last full-attention layer (the
  layers Gemma-4 marks `store` in `kv_sharing_modes`) for the committed positions < p, read from the loop's cache.

One difference from transformers, by design: after a rejection transformers slices the verify pass's K/V to the
committed length, which keeps the K/V the target computed for the rejected draft at position p; this proposer
reads the loop's cache, cropped to the committed positions before p, so rejected drafts never leak into drafting.
Greedy output is identical either way (the target decides every token); acceptance can differ slightly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from registry.domain.measurement import RunSettings
from verifier.harness.contract import given_draft_length
from verifier.loading import LoadedTarget, load_causal_lm
from verifier.proposer import Proposal, TargetOutput

ASSISTANT_ARCHITECTURES = ("Gemma4AssistantForCausalLM",)
# Text configs whose models expose Gemma-4 K/V layouts (`layer_types` + `kv_sharing_modes`).
GEMMA4_TEXT_MODEL_TYPES = ("gemma4_text",)


class IncompatibleAssistant(ValueError):
    """The drafter is not a Gemma-4 assistant, or cannot read this target's hidden state and K/V."""


class Gemma4AssistantProposer:
    """Drafts `draft_length` tokens per round with a `Gemma4AssistantForCausalLM` reading the target's state."""

    needs_hidden_states = True

    def __init__(self, assistant: Any, target_model: Any, draft_length: int) -> None:
        if draft_length < 1:
            raise ValueError(f"draft_length must be at least 1, got {draft_length}")
        self.assistant = assistant
        self.draft_length = draft_length
        self.target_embeddings = target_model.get_input_embeddings()
        self.kv_layers = kv_source_layers(target_model.config.get_text_config())
        self._state: TargetOutput | None = None

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        self._state = target_out

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        self._state = target_out

    @torch.inference_mode()
    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        if self._state is None:
            raise RuntimeError("propose() called before begin()")
        state = self._state
        shared_kv = self._shared_kv(state)
        kv_length = shared_kv["full_attention"][0].shape[-2]
        device = state.last_hidden_state.device
        # The loop's positions are all committed: an all-ones mask, as transformers passes in assisted generation.
        attention_mask = torch.ones((1, kv_length), dtype=torch.long, device=device)
        position_ids = torch.tensor([[state.end]], dtype=torch.long, device=device)
        previous_hidden = state.last_hidden_state[:, -1:]
        token = torch.tensor([[state.pending_token]], dtype=torch.long, device=device)

        tokens: list[torch.Tensor] = []
        q_rows: list[torch.Tensor] = []
        for _ in range(self.draft_length):
            inputs_embeds = torch.cat([self.target_embeddings(token), previous_hidden], dim=-1)
            out = self.assistant(
                inputs_embeds=inputs_embeds,
                attention_mask=attention_mask,
                position_ids=position_ids,
                shared_kv_states=shared_kv,
                use_cache=False,
            )
            logits = out.logits[0, -1].float()
            if temperature == 0:
                token = logits.argmax().view(1, 1)
            else:
                q = torch.softmax(logits / temperature, dim=-1)
                token = torch.multinomial(q, 1, generator=generator).view(1, 1)
                q_rows.append(q)
            tokens.append(token.view(1))
            previous_hidden = out.last_hidden_state
        return Proposal(
            tokens=torch.cat(tokens),
            q_probs=torch.stack(q_rows) if q_rows else None,
        )

    def _shared_kv(self, state: TargetOutput) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """K/V of the target's source layer per layer type, for the committed positions before the pending token."""
        shared: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for layer_type, index in self.kv_layers.items():
            layer = state.cache.layers[index]
            shared[layer_type] = (layer.keys, layer.values)
        full_length = shared["full_attention"][0].shape[-2]
        if full_length != state.end:
            raise RuntimeError(f"target cache holds {full_length} positions, expected {state.end} (loop contract)")
        return shared


def kv_source_layers(text_config: Any) -> dict[str, int]:
    """Layer index whose K/V the assistant reads, per layer type: the last non-shared layer of each type."""
    modes = text_config.kv_sharing_modes
    return {
        layer_type: index
        for index, (layer_type, mode) in enumerate(zip(text_config.layer_types, modes, strict=True))
        if mode == "store"
    }


def check_pairing(assistant_config: Any, target_config: Any, target_name: str) -> None:
    """Refuse pairs the assistant cannot run on, saying why (raises `IncompatibleAssistant`)."""
    target_text = target_config.get_text_config()
    target_type = getattr(target_text, "model_type", None)
    if target_type not in GEMMA4_TEXT_MODEL_TYPES:
        architectures = ", ".join(getattr(target_config, "architectures", None) or []) or "unknown architecture"
        raise IncompatibleAssistant(
            f"a Gemma-4 assistant drafts from a Gemma-4 target's final hidden state and the K/V of its last sliding "
            f"and full-attention layers; target {target_name} is model_type {target_type!r} ({architectures}), "
            "which has neither. Pair this drafter with the Gemma-4 model it was trained for."
        )
    assistant_text = assistant_config.get_text_config()
    problems = []
    if assistant_config.backbone_hidden_size != target_text.hidden_size:
        problems.append(
            f"backbone_hidden_size {assistant_config.backbone_hidden_size} != target hidden_size "
            f"{target_text.hidden_size}"
        )
    if assistant_text.vocab_size != target_text.vocab_size:
        problems.append(f"vocab_size {assistant_text.vocab_size} != target vocab_size {target_text.vocab_size}")
    sources = kv_source_layers(target_text)
    for index, layer_type in enumerate(assistant_text.layer_types):
        if layer_type not in sources:
            problems.append(f"assistant layer {index} is {layer_type} but the target has no such layer")
            continue
        mine, theirs = assistant_text.per_layer_config[index], target_text.per_layer_config[sources[layer_type]]
        if (mine.head_dim, mine.num_key_value_heads) != (theirs.head_dim, theirs.num_key_value_heads):
            problems.append(
                f"assistant layer {index} ({layer_type}) expects K/V heads x head_dim "
                f"{mine.num_key_value_heads}x{mine.head_dim}, the target's layer {sources[layer_type]} has "
                f"{theirs.num_key_value_heads}x{theirs.head_dim}"
            )
    if problems:
        raise IncompatibleAssistant(
            f"this Gemma-4 assistant was not built for target {target_name}: " + "; ".join(problems)
        )


def build_proposer(drafter_dir: Path, target: LoadedTarget, settings: RunSettings,
                   raw_config: dict[str, Any]) -> Gemma4AssistantProposer:
    """Load the assistant from `drafter_dir` (safetensors, no remote code) and check it fits `target`."""
    from transformers import AutoConfig

    drafter_dir = Path(drafter_dir)
    architectures = raw_config.get("architectures") or []
    if not any(name in ASSISTANT_ARCHITECTURES for name in architectures):
        raise IncompatibleAssistant(
            f"{drafter_dir} is not a Gemma-4 assistant: its config.json architectures are {architectures or 'missing'}, "
            f"expected {ASSISTANT_ARCHITECTURES[0]}"
        )
    assistant_config = AutoConfig.from_pretrained(drafter_dir, trust_remote_code=False, local_files_only=True)
    check_pairing(assistant_config, target.model.config, str(target.path))
    assistant = load_causal_lm(drafter_dir, device=target.device, dtype=target.model.dtype)
    return Gemma4AssistantProposer(assistant, target.model, given_draft_length(settings))
