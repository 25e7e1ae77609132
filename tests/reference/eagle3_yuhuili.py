"""Make the yuhuili-layout EAGLE-3 reference fixture tests/data/eagle3/yuhuili/ (+ yuhuili.reference.safetensors).

The forward below is written down from the public EAGLE reference code (SafeAILab/EAGLE `eagle/model/cnets.py`,
classes `Model`, `LlamaDecoderLayeremb`, `LlamaAttention` and `Model.topK_genrate`), in plain torch and independent
of the project's implementation, with full recomputation and explicit masks instead of a KV cache:

- weights: `midlayer.self_attn.{q,k,v}_proj` take 2H inputs, `o_proj` H; no biases; `midlayer.hidden_norm`,
  `midlayer.input_layernorm`, `midlayer.post_attention_layernorm`, SiLU-gated MLP; `fc` (3H -> H, no bias);
  `norm`; `lm_head` (H -> draft vocab); `d2t` (draft id -> offset to its target id); the token embedding is the
  target's (loaded from the base model, not stored in the head);
- RMSNorm: x * rsqrt(mean(x^2) + eps) in float32, times the weight;
- `fc` is applied only when the incoming state is wider than H (the fused target states); a state fed back from
  the head itself is already H wide;
- decoder layer: residual = incoming state; attention input = cat(input_layernorm(embedding), hidden_norm(state));
  attention with rotate-half RoPE (theta from the config) at absolute positions, causal; state = residual + o_proj;
  then state + mlp(post_attention_layernorm(state));
- the prompt pass pairs the target state at position i with the token at i + 1 (input_ids[:, 1:] plus the sampled
  token) at positions 0 .. n - 1; each further step feeds (last raw layer output, embedding of the mapped draft
  token) at the next position (`len_posi`), attending to every earlier row;
- logits = lm_head(norm(state)); a draft id j becomes target id j + d2t[j]. With top_k = 1 the tree of
  `topK_genrate` is a chain of argmax tokens: that chain is what the fixture records.

Run with the project's environment: `python tests/reference/eagle3_yuhuili.py tests/data/eagle3`.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE = 32, 4, 2, 8, 64
VOCAB, DRAFT_VOCAB, TARGET_LAYERS = 96, 48, 6
AUX_LAYER_IDS = [0, 2, 4]  # SpecForge's eagle_config ids: the OUTPUT of these target layers is fused
ROPE_THETA, EPS = 10000.0, 1e-6
PROMPT, DEPTH = 9, 4


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)


def rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """x [heads, rows, d] rotated by the rows' absolute positions (rotate-half convention)."""
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    angles = positions.float()[:, None] * inv_freq[None]
    emb = torch.cat([angles, angles], dim=-1)
    first, second = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2 :]
    return x * emb.cos() + torch.cat([-second, first], dim=-1) * emb.sin()


def layer(w: dict[str, torch.Tensor], embeds: torch.Tensor, states: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The midlayer over ALL rows so far (no cache), causal."""
    residual = states
    x = torch.cat([rms_norm(embeds, w["midlayer.input_layernorm.weight"]), rms_norm(states, w["midlayer.hidden_norm.weight"])], -1)
    rows = x.shape[0]
    q = (x @ w["midlayer.self_attn.q_proj.weight"].T).view(rows, HEADS, HEAD_DIM).transpose(0, 1)
    k = (x @ w["midlayer.self_attn.k_proj.weight"].T).view(rows, KV_HEADS, HEAD_DIM).transpose(0, 1)
    v = (x @ w["midlayer.self_attn.v_proj.weight"].T).view(rows, KV_HEADS, HEAD_DIM).transpose(0, 1)
    q, k = rope(q, positions), rope(k, positions)
    k = k.repeat_interleave(HEADS // KV_HEADS, dim=0)
    v = v.repeat_interleave(HEADS // KV_HEADS, dim=0)
    scores = q @ k.transpose(1, 2) / math.sqrt(HEAD_DIM)
    scores = scores.masked_fill(~torch.ones(rows, rows, dtype=torch.bool).tril(), float("-inf"))
    attended = (torch.softmax(scores.float(), dim=-1) @ v).transpose(0, 1).reshape(rows, HEADS * HEAD_DIM)
    states = residual + attended @ w["midlayer.self_attn.o_proj.weight"].T
    h = rms_norm(states, w["midlayer.post_attention_layernorm.weight"])
    gated = torch.nn.functional.silu(h @ w["midlayer.mlp.gate_proj.weight"].T) * (h @ w["midlayer.mlp.up_proj.weight"].T)
    return states + gated @ w["midlayer.mlp.down_proj.weight"].T


def greedy_chain(w: dict[str, torch.Tensor], embedding: torch.Tensor, fused: torch.Tensor, ids: torch.Tensor, sample: int):
    """(logits per step [DEPTH, DRAFT_VOCAB], target ids drafted [DEPTH]) after the prompt `ids` + `sample`."""
    tokens = torch.cat([ids[1:], torch.tensor([sample])])
    states = fused @ w["fc.weight"].T  # wider than H: through fc
    positions = torch.arange(tokens.shape[0])
    all_logits, drafted = [], []
    for _ in range(DEPTH):
        out = layer(w, embedding[tokens], states, positions)
        logits = rms_norm(out[-1], w["norm.weight"]) @ w["lm_head.weight"].T
        draft_id = int(torch.argmax(logits))
        target_id = draft_id + int(w["d2t"][draft_id])
        all_logits.append(logits)
        drafted.append(target_id)
        # Rows computed from target states keep them; the new row carries the head's own raw output.
        states = torch.cat([states, out[-1:]])
        tokens = torch.cat([tokens, torch.tensor([target_id])])
        positions = torch.arange(tokens.shape[0])
    return torch.stack(all_logits), torch.tensor(drafted)


def main(out_root: Path) -> None:
    g = torch.Generator().manual_seed(5)

    def rand(*shape: int, scale: float = 0.2) -> torch.Tensor:
        return scale * torch.randn(*shape, generator=g)

    w = {
        "fc.weight": rand(HIDDEN, 3 * HIDDEN),
        "norm.weight": 1 + rand(HIDDEN, scale=0.1),
        "lm_head.weight": rand(DRAFT_VOCAB, HIDDEN),
        "midlayer.hidden_norm.weight": 1 + rand(HIDDEN, scale=0.1),
        "midlayer.input_layernorm.weight": 1 + rand(HIDDEN, scale=0.1),
        "midlayer.post_attention_layernorm.weight": 1 + rand(HIDDEN, scale=0.1),
        "midlayer.self_attn.q_proj.weight": rand(HEADS * HEAD_DIM, 2 * HIDDEN),
        "midlayer.self_attn.k_proj.weight": rand(KV_HEADS * HEAD_DIM, 2 * HIDDEN),
        "midlayer.self_attn.v_proj.weight": rand(KV_HEADS * HEAD_DIM, 2 * HIDDEN),
        "midlayer.self_attn.o_proj.weight": rand(HIDDEN, HEADS * HEAD_DIM),
        "midlayer.mlp.gate_proj.weight": rand(INTERMEDIATE, HIDDEN),
        "midlayer.mlp.up_proj.weight": rand(INTERMEDIATE, HIDDEN),
        "midlayer.mlp.down_proj.weight": rand(HIDDEN, INTERMEDIATE),
    }
    kept = torch.sort(torch.randperm(VOCAB, generator=g)[:DRAFT_VOCAB]).values
    w["d2t"] = kept - torch.arange(DRAFT_VOCAB)
    w["t2d"] = torch.zeros(VOCAB, dtype=torch.bool)
    w["t2d"][kept] = True
    embedding = rand(VOCAB, HIDDEN, scale=1.0)
    # The target's hidden-state tuple (entry 0 = embeddings, entry i = output of layer i - 1) for the prompt rows.
    hidden_states = rand(TARGET_LAYERS + 1, PROMPT, HIDDEN, scale=1.0)
    fused = torch.cat([hidden_states[i + 1] for i in AUX_LAYER_IDS], dim=-1)
    ids = torch.randint(0, VOCAB, (PROMPT,), generator=g)
    sample = int(torch.randint(0, VOCAB, (1,), generator=g))
    logits, drafted = greedy_chain(w, embedding, fused, ids, sample)

    out = out_root / "yuhuili"
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "num_hidden_layers": 1,
        "hidden_act": "silu",
        "rms_norm_eps": EPS,
        "rope_theta": ROPE_THETA,
        "rope_scaling": None,
        "max_position_embeddings": 256,
        "vocab_size": VOCAB,
        "draft_vocab_size": DRAFT_VOCAB,
        "tie_word_embeddings": False,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": AUX_LAYER_IDS},
        "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file({k: v.contiguous() for k, v in w.items()}, out / "model.safetensors")
    save_file(
        {
            "target_embedding": embedding,
            "target_hidden_states": hidden_states.contiguous(),
            "input_ids": ids,
            "sample": torch.tensor([sample]),
            "logits": logits.contiguous(),
            "drafted": drafted,
        },
        out_root / "yuhuili.reference.safetensors",
    )
    print(f"{out}: drafted {drafted.tolist()}")


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/eagle3"))
