"""Tiny Gemma-4 target and Gemma-4 assistant (MTP drafter) trained on the bundled corpus (CPU, deterministic).

`build_gemma4_target` trains a text-only `Gemma4ForCausalLM` (3 sliding-window layers + 1 full-attention layer,
final logit soft-capping, scaled embeddings) on the corpus with the project's SentencePiece tokenizer.

`build_gemma4_assistant` builds a `Gemma4AssistantForCausalLM` the way transformers drives it in assisted
generation: every assistant step sits at the position of the last committed token, takes
`concat(target_embedding(token), previous hidden state)` and attends (queries only) to the K/V of the target's last
sliding and last full-attention layers for the committed positions before it. The first step's hidden state is the
target's final hidden state of the previous position; later steps feed back the assistant's own
`post_projection` output. The logits come from the centroid-masked head (`use_ordered_embeddings`): the centroid
classifier picks `centroid_intermediate_top_k` token clusters and only their tokens get real logits.

Training is distillation against the target's own greedy continuations: the target continues random corpus windows
greedily; then for every position p of those sequences the assistant unrolls `draft_steps` steps from p (teacher
forcing the sequence's tokens as inputs, which are the target's own choices) and matches the target's next-token
distribution at p, p+1, ... (KL), while the centroid classifier learns the cluster of the target's argmax token.
All positions train in parallel with an attention mask that lets position p see exactly the target K/V the decode
loop's cache holds at p. `trained=False` saves the same geometry (and token ordering) at random init.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any

import torch

from verifier.build_cache import cached_build
from verifier.tiny.qwen3 import Training, _batches, _fit, _one_thread, corpus_token_stream, save_model
from verifier.tiny.tokenizer import build_tokenizer

SOURCE_FILES = (
    Path(__file__),
    Path(__file__).with_name("qwen3.py"),
    Path(__file__).with_name("tokenizer.py"),
    Path(__file__).with_name("corpus.txt"),
)
SLIDING = "sliding_attention"
FULL = "full_attention"


@dataclass(frozen=True)
class Gemma4Geometry:
    hidden_size: int
    intermediate_size: int
    layer_types: tuple[str, ...]
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int  # sliding layers; the full-attention layers use the same (Gemma-4's `global_head_dim`)


# Smaller than the generated sequences (prompt + 64 new tokens), so the sliding cache really drops old positions.
SLIDING_WINDOW = 48
FINAL_LOGIT_SOFTCAPPING = 30.0
TARGET_GEOMETRY = Gemma4Geometry(
    hidden_size=96,
    intermediate_size=256,
    layer_types=(SLIDING, SLIDING, SLIDING, FULL),
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=24,
)
# Query heads only: K/V come from the target, so head_dim and num_key_value_heads must equal the target's.
ASSISTANT_GEOMETRY = Gemma4Geometry(
    hidden_size=64,
    intermediate_size=128,
    layer_types=(SLIDING, FULL),
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=24,
)
NUM_CENTROIDS = 20  # divides the tokenizer's 1000 ids: 50 tokens per cluster
CENTROID_TOP_K = 4  # 200 of 1000 tokens get real logits per step
NUM_ASSISTANT_TOKENS = 4


@dataclass(frozen=True)
class Distillation:
    sequences: int = 192  # random corpus windows continued greedily by the target
    prompt_length: int = 24  # continuation length = training.sequence_length - prompt_length
    draft_steps: int = NUM_ASSISTANT_TOKENS  # assistant steps unrolled from every position


TARGET_TRAINING = Training(steps=300, batch_size=16, sequence_length=128, learning_rate=3e-3, warmup_steps=20, seed=0)
ASSISTANT_TRAINING = Training(steps=150, batch_size=32, sequence_length=72, learning_rate=1e-2, warmup_steps=15, seed=1)


def gemma4_text_config(geometry: Gemma4Geometry, tokenizer: Any) -> Any:
    """A `Gemma4TextConfig` without per-layer embeddings (tiny models cannot afford the 262K PLE table)."""
    from transformers import Gemma4TextConfig

    config = Gemma4TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=geometry.hidden_size,
        intermediate_size=geometry.intermediate_size,
        num_hidden_layers=len(geometry.layer_types),
        layer_types=list(geometry.layer_types),
        num_attention_heads=geometry.num_attention_heads,
        num_key_value_heads=geometry.num_key_value_heads,
        head_dim=geometry.head_dim,
        global_head_dim=geometry.head_dim,
        sliding_window=SLIDING_WINDOW,
        final_logit_softcapping=FINAL_LOGIT_SOFTCAPPING,
        hidden_size_per_layer_input=0,
        vocab_size_per_layer_input=0,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    # transformers folds `global_head_dim` into `per_layer_config` and drops overrides equal to `head_dim`, so the
    # saved config would not say what head_dim the full-attention layers use; llama.cpp's converter needs it there.
    # Explicit per-layer serialization writes every layer's head_dim (the same model: all layers use `head_dim`).
    config.serialize_explicit_per_layer_config = True
    return config


def build_gemma4_target(
    out_dir: Path, training: Training = TARGET_TRAINING, geometry: Gemma4Geometry = TARGET_GEOMETRY
) -> Path:
    """Train the tiny Gemma-4 target on the corpus and save it (safetensors) with its tokenizer into `out_dir`."""
    from transformers import AutoTokenizer, Gemma4ForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    torch.manual_seed(training.seed)
    model = Gemma4ForCausalLM(gemma4_text_config(geometry, tokenizer))
    batches = _batches(corpus_token_stream(tokenizer), training)
    _fit(model, batches, training, lambda batch: model(input_ids=batch, labels=batch).loss)
    save_model(model, out_dir, out_dir)
    return out_dir


def build_gemma4_assistant(
    target_dir: Path,
    out_dir: Path,
    trained: bool = True,
    training: Training = ASSISTANT_TRAINING,
    distillation: Distillation = Distillation(),
    geometry: Gemma4Geometry = ASSISTANT_GEOMETRY,
) -> Path:
    """A Gemma-4 assistant for the target in `target_dir`; distilled from it when `trained`, random otherwise."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    target = AutoModelForCausalLM.from_pretrained(target_dir, use_safetensors=True).eval()
    stream = corpus_token_stream(tokenizer)
    torch.manual_seed(training.seed)
    assistant = new_assistant(target.config, geometry, tokenizer, token_frequencies(stream, len(tokenizer)))
    if trained:
        with _one_thread():
            features = _distillation_features(target, stream, training, distillation)
        _fit(assistant, features, training, _DistillationLoss(assistant, target, training, distillation))
    assistant.generation_config.num_assistant_tokens = NUM_ASSISTANT_TOKENS
    save_model(assistant, target_dir, out_dir)
    return out_dir


def token_frequencies(stream: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return torch.bincount(stream, minlength=vocab_size)


def frequency_ordering(frequencies: torch.Tensor) -> torch.Tensor:
    """Token ids by falling corpus frequency: cluster c holds ranks [c*n, (c+1)*n) (stable, so deterministic)."""
    return torch.argsort(frequencies, descending=True, stable=True)


def new_assistant(target_config: Any, geometry: Gemma4Geometry, tokenizer: Any, frequencies: torch.Tensor) -> Any:
    from transformers import Gemma4AssistantConfig, Gemma4AssistantForCausalLM

    if len(tokenizer) % NUM_CENTROIDS:
        raise ValueError(f"{NUM_CENTROIDS} centroids must split the vocabulary ({len(tokenizer)}) evenly")
    text_config = gemma4_text_config(geometry, tokenizer)
    text_config.final_logit_softcapping = None  # the assistant's head never soft-caps
    config = Gemma4AssistantConfig(
        text_config=text_config,
        backbone_hidden_size=target_config.hidden_size,
        use_ordered_embeddings=True,
        num_centroids=NUM_CENTROIDS,
        centroid_intermediate_top_k=CENTROID_TOP_K,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config.architectures = ["Gemma4AssistantForCausalLM"]
    assistant = Gemma4AssistantForCausalLM(config)
    with torch.no_grad():
        assistant.masked_embedding.token_ordering.copy_(frequency_ordering(frequencies))
    return assistant


@dataclass(frozen=True)
class _Features:
    """The target's view of a batch of greedy sequences, computed once before training."""

    tokens: torch.Tensor  # [B, T]
    last_hidden: torch.Tensor  # [B, T, H_target], after the final norm
    log_probs: torch.Tensor  # [B, T, V], next-token log-probabilities
    shared_kv: dict[str, tuple[torch.Tensor, torch.Tensor]]  # per layer type: K, V [B, kv_heads, T, head_dim]


@torch.no_grad()
def _distillation_features(
    target: Any, stream: torch.Tensor, training: Training, distillation: Distillation
) -> list[_Features]:
    """One `_Features` per training step (cycling over the sequences): corpus windows + the target's greedy tail."""
    from transformers import GenerationConfig

    generator = torch.Generator().manual_seed(training.seed)
    continuation = training.sequence_length - distillation.prompt_length
    starts = torch.randint(0, stream.numel() - distillation.prompt_length, (distillation.sequences,), generator=generator)
    prompts = stream[starts.unsqueeze(1) + torch.arange(distillation.prompt_length)]
    # min_new_tokens keeps every row the same length (no padding) by never ending at EOS.
    greedy = GenerationConfig(do_sample=False, max_new_tokens=continuation, min_new_tokens=continuation)
    sequences = torch.cat(
        [
            target.generate(chunk, attention_mask=torch.ones_like(chunk), generation_config=greedy)
            for chunk in prompts.split(training.batch_size)
        ]
    )
    batches: list[_Features] = []
    for chunk in sequences.split(training.batch_size):
        out = target(input_ids=chunk, output_hidden_states=True, return_shared_kv_states=True, use_cache=False)
        batches.append(
            _Features(
                tokens=chunk,
                last_hidden=out.hidden_states[-1],
                log_probs=torch.log_softmax(out.logits.float(), dim=-1),
                shared_kv={kind: (keys, values) for kind, (keys, values) in out.shared_kv_states.items()},
            )
        )
    return [batches[step % len(batches)] for step in range(training.steps)]


class _DistillationLoss:
    """Unrolls the assistant from every position of a batch at once and scores it against the target."""

    def __init__(self, assistant: Any, target: Any, training: Training, distillation: Distillation) -> None:
        self.assistant = assistant
        self.embed = target.get_input_embeddings()
        self.steps = distillation.draft_steps
        length = training.sequence_length
        # Position p (the committed token the assistant drafts after) sees the K/V of positions < p, and for sliding
        # layers only the last `window - 1` of them: exactly what the decode loop's cache holds at p.
        self.positions = torch.arange(1, length - self.steps + 1)
        kv = torch.arange(length)
        before = kv[None, :] < self.positions[:, None]
        in_window = kv[None, :] > self.positions[:, None] - SLIDING_WINDOW
        self.masks = {FULL: before[None, None], SLIDING: (before & in_window)[None, None]}
        self.cluster_of = self._clusters(assistant.masked_embedding.token_ordering)

    @staticmethod
    def _clusters(ordering: torch.Tensor) -> torch.Tensor:
        cluster_of = torch.empty_like(ordering)
        cluster_of[ordering] = torch.arange(ordering.numel()) // (ordering.numel() // NUM_CENTROIDS)
        return cluster_of

    def __call__(self, batch: _Features) -> torch.Tensor:
        assistant = self.assistant
        size = batch.tokens.shape[0]
        positions = self.positions.expand(size, -1)
        masks = {kind: mask.expand(size, -1, -1, -1) for kind, mask in self.masks.items()}
        previous = batch.last_hidden[:, self.positions - 1]
        loss = torch.zeros(())
        for step in range(self.steps):
            rows = self.positions + step
            with torch.no_grad():
                embedded = self.embed(batch.tokens[:, rows])
            inputs = assistant.pre_projection(torch.cat([embedded, previous], dim=-1))
            # output_hidden_states only disables transformers' kv-shared-layer slicing, which needs per-layer inputs.
            hidden = assistant.model(
                inputs_embeds=inputs,
                position_ids=positions,
                attention_mask=masks,
                shared_kv_states=batch.shared_kv,
                use_cache=False,
                output_hidden_states=True,
            ).last_hidden_state
            previous = assistant.post_projection(hidden)
            target_log_probs = batch.log_probs[:, rows]
            draft_log_probs = torch.log_softmax(assistant.lm_head(hidden), dim=-1)
            loss = loss + torch.nn.functional.kl_div(
                draft_log_probs.flatten(0, 1), target_log_probs.flatten(0, 1), log_target=True, reduction="batchmean"
            )
            centroid_logits = assistant.masked_embedding.centroids(hidden)
            loss = loss + torch.nn.functional.cross_entropy(
                centroid_logits.flatten(0, 1), self.cluster_of[target_log_probs.argmax(-1)].flatten()
            )
        return loss / self.steps


def cached_gemma4_target(cache_root: Path) -> Path:
    """The tiny Gemma-4 target under `cache_root`, built once per builder source + settings."""
    return cached_build(
        cache_root,
        "tiny-gemma4-target",
        build_gemma4_target,
        source_files=SOURCE_FILES,
        settings=_settings(geometry=TARGET_GEOMETRY, training=TARGET_TRAINING),
    )


def cached_gemma4_assistant(cache_root: Path, target_dir: Path, *, trained: bool = True) -> Path:
    """The tiny Gemma-4 assistant for `target_dir` (a `cached_gemma4_target` folder) under `cache_root`."""
    settings = _settings(
        geometry=ASSISTANT_GEOMETRY, training=ASSISTANT_TRAINING, distillation=Distillation(), trained=trained
    )
    return cached_build(
        cache_root,
        f"tiny-gemma4-assistant-{'trained' if trained else 'random'}",
        lambda out_dir: build_gemma4_assistant(target_dir, out_dir, trained=trained),
        source_files=SOURCE_FILES,
        settings={**settings, "target": target_dir.name},
    )


def _settings(**parts: Any) -> dict[str, object]:
    """Everything that determines a build's output, for cache keys."""
    values = {name: asdict(part) if is_dataclass(part) else part for name, part in parts.items()}
    return {**values, "torch": torch.__version__.split("+")[0]}
