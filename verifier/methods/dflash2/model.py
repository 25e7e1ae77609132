"""The DFlash 2 draft model in torch, written from llama.cpp's `src/models/dflash.cpp` (`build_dflash2_conv`,
`build_dflash2_selector`) and its converter, which are the written-down reference for this format.

Everything DFlash v1 does stays (`verifier.methods.dflash.model`: fused context features through `fc` and
`hidden_norm`, the block `[anchor, mask x (B - 1)]`, non-causal attention over cached context K/V plus the block,
final norm, the target's LM head). DFlash 2 adds two things:

- `GroupedDynamicCausalConv` around attention and around the MLP of every layer. From the normed block x a linear
  map gives one coefficient per (side, tap, channel group); the weight of channel c at tap t is
  `base_kernel[side, t, c] + coefficient[side, t, c // group_size]`, computed at the output position. Side 0 mixes
  the normed input before the block (q/k/v or the MLP) and side 1 the block's output, both with the coefficients
  of the same normed input: `y[p] = sum_t w[p, t] * v[p - t]`, zero before the block's first position. Only the
  block is convolved; context rows are not.
- `CandidateSelector`: the top-k tokens of every drafted position's logits and a low-rank transition score
  `successor[cand] . (predecessor[prev] * hidden_projection(h))` added to each candidate's logit. The draft is the
  greedy walk: position 1 scores against the anchor token, every later position against the candidate chosen
  before it (llama.cpp `common/speculative.cpp`, DFlash 2 branch).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from verifier.methods.dflash.model import DFlashDecoderLayer, DFlashDraftModel, LayerKV
from verifier.methods.dflash2.config import DFlash2Config

INPUT_SIDE = 0
OUTPUT_SIDE = 1


class GroupedDynamicCausalConv(nn.Module):
    """A causal convolution over block positions whose per-position taps come from the input itself."""

    def __init__(self, hidden: int, kernel_size: int, group_size: int) -> None:
        super().__init__()
        self.kernel_size, self.group_size = kernel_size, group_size
        self.base_kernel = nn.Parameter(torch.zeros(2, kernel_size, hidden))
        self.kernel_projection = nn.Linear(hidden, 2 * kernel_size * (hidden // group_size), bias=False)

    def taps(self, x: torch.Tensor) -> torch.Tensor:
        """Per-position weights [b, Q, 2, K, H] from the normed block x [b, Q, H]."""
        batch, length, _ = x.shape
        coefficients = self.kernel_projection(x).view(batch, length, 2, self.kernel_size, -1)
        return coefficients.repeat_interleave(self.group_size, dim=-1) + self.base_kernel

    def mix(self, values: torch.Tensor, weights: torch.Tensor, side: int) -> torch.Tensor:
        """sum over taps t of weights[:, p, side, t] * values[:, p - t] (positions before the block read zero)."""
        length = values.shape[1]
        result = weights[:, :, side, 0] * values
        for tap in range(1, min(self.kernel_size, length)):
            shifted = F.pad(values, (0, 0, tap, 0))[:, :length]
            result = result + weights[:, :, side, tap] * shifted
        return result


class CandidateSelector(nn.Module):
    """Low-rank predecessor/successor codebooks over target token ids and a gate from the drafted hidden state."""

    def __init__(self, vocab_size: int, hidden: int, rank: int, top_k: int) -> None:
        super().__init__()
        self.top_k = top_k
        self.predecessor_codebook = nn.Parameter(torch.zeros(vocab_size, rank))
        self.successor_codebook = nn.Parameter(torch.zeros(vocab_size, rank))
        self.hidden_projection = nn.Linear(hidden, rank, bias=False)

    def walk(self, logits: torch.Tensor, hidden: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
        """Draft tokens [n] for drafted positions with `logits` [n, V] and final hidden states `hidden` [n, H];
        `anchor` (0-d) is the committed token before the first of them. Scored in float32, as llama.cpp does."""
        unary, candidates = logits.float().topk(self.top_k, dim=-1)
        gates = F.linear(hidden.float(), self.hidden_projection.weight.float())
        successors = self.successor_codebook[candidates].float()  # [n, k, rank]
        previous = anchor
        chosen = []
        for position in range(logits.shape[0]):
            condition = self.predecessor_codebook[previous].float() * gates[position]
            scores = successors[position] @ condition + unary[position]
            previous = candidates[position, scores.argmax()]
            chosen.append(previous)
        return torch.stack(chosen) if chosen else candidates.new_empty(0)


class DFlash2DecoderLayer(DFlashDecoderLayer):
    def __init__(self, config: DFlash2Config, layer_index: int) -> None:
        super().__init__(config.backbone, layer_index)
        hidden = config.backbone.hidden_size
        self.attention_conv = GroupedDynamicCausalConv(hidden, config.conv_kernel_size, config.conv_group_size)
        self.mlp_conv = GroupedDynamicCausalConv(hidden, config.conv_kernel_size, config.conv_group_size)

    def forward(
        self,
        hidden: torch.Tensor,
        context: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        past: LayerKV | None,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, LayerKV]:
        """DFlash v1's layer with a dynamic convolution around attention and around the MLP. The block must be one
        whole block: the convolutions run along it."""
        normed = self.input_layernorm(hidden)
        taps = self.attention_conv.taps(normed)
        mixed = self.attention_conv.mix(normed, taps, INPUT_SIDE)
        attended, layer_kv = self.self_attn(mixed, context, rope, past, mask)
        hidden = hidden + self.attention_conv.mix(attended, taps, OUTPUT_SIDE)
        normed = self.post_attention_layernorm(hidden)
        taps = self.mlp_conv.taps(normed)
        fed = self.mlp(self.mlp_conv.mix(normed, taps, INPUT_SIDE))
        return hidden + self.mlp_conv.mix(fed, taps, OUTPUT_SIDE), layer_kv


class DFlash2DraftModel(DFlashDraftModel):
    """`state_dict()` keys are the published DFlash 2 tensor names without the optional `model.` prefix."""

    def __init__(self, config: DFlash2Config, num_fused_layers: int, vocab_size: int) -> None:
        super().__init__(config.backbone, num_fused_layers)
        self.dflash2 = config
        self.layers = nn.ModuleList(DFlash2DecoderLayer(config, i) for i in range(config.backbone.num_hidden_layers))
        self.candidate_selector = CandidateSelector(
            vocab_size, config.backbone.hidden_size, config.selector_rank, config.selector_top_k
        )
