"""Tiny Qwen3 target and draft LM trained on the bundled corpus (CPU, deterministic, well under a minute each).

`build_target` trains a ~0.5 M parameter Qwen3ForCausalLM on the corpus. `build_draft_lm` trains a 1-layer Qwen3
by distillation from the target's next-token distributions on corpus windows (KL(p_target || q_draft)), so its
proposals match the target's closely; `trained=False` saves the same geometry at random init.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from verifier.build_cache import cached_build
from verifier.tiny.tokenizer import build_tokenizer, corpus_documents

SOURCE_FILES = (Path(__file__), Path(__file__).with_name("tokenizer.py"), Path(__file__).with_name("corpus.txt"))
TOKENIZER_FILES = ("tokenizer.model", "tokenizer_config.json")


@dataclass(frozen=True)
class Geometry:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int


@dataclass(frozen=True)
class Training:
    steps: int = 300
    batch_size: int = 16
    sequence_length: int = 128
    learning_rate: float = 3e-3
    warmup_steps: int = 20
    seed: int = 0


TARGET_GEOMETRY = Geometry(
    hidden_size=96,
    intermediate_size=256,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=24,
)
DRAFT_GEOMETRY = Geometry(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
)


def build_settings(geometry: Geometry, training: Training) -> dict[str, object]:
    """Everything that determines a build's output, for cache keys."""
    return {"geometry": asdict(geometry), "training": asdict(training), "torch": torch.__version__.split("+")[0]}


def _qwen3_config(geometry: Geometry, tokenizer: Any) -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=len(tokenizer),
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **asdict(geometry),
    )


def corpus_token_stream(tokenizer) -> torch.Tensor:
    """All corpus documents as one stream of `<s> document </s>` token ids."""
    ids: list[int] = []
    for document in corpus_documents():
        ids.append(tokenizer.bos_token_id)
        ids.extend(tokenizer.encode(document, add_special_tokens=False))
        ids.append(tokenizer.eos_token_id)
    return torch.tensor(ids, dtype=torch.long)


def _batches(stream: torch.Tensor, training: Training) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(training.seed)
    starts = torch.randint(
        0, stream.numel() - training.sequence_length, (training.steps, training.batch_size), generator=generator
    )
    offsets = torch.arange(training.sequence_length)
    return [stream[row.unsqueeze(1) + offsets] for row in starts]


def _learning_rate(step: int, training: Training) -> float:
    if step < training.warmup_steps:
        return training.learning_rate * (step + 1) / training.warmup_steps
    progress = (step - training.warmup_steps) / max(1, training.steps - training.warmup_steps)
    return training.learning_rate * 0.5 * (1.0 + math.cos(math.pi * progress))


@contextmanager
def _one_thread() -> Iterator[None]:
    """Train on one thread: on a shared 2-core machine OpenMP threads that spin-wait against other processes
    made training up to 10x slower, while one thread is steady."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _fit(model, batches: list[torch.Tensor], training: Training, loss_of_batch) -> float:
    """Plain AdamW with warm-up and cosine decay; returns the last loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=training.learning_rate, weight_decay=0.0)
    model.train()
    loss = torch.tensor(float("nan"))
    with _one_thread():
        for step, batch in enumerate(batches):
            for group in optimizer.param_groups:
                group["lr"] = _learning_rate(step, training)
            loss = loss_of_batch(batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
    model.eval()
    return loss.item()


def save_model(model, tokenizer_dir: Path, out_dir: Path) -> None:
    # transformers 5 writes safetensors only.
    model.save_pretrained(out_dir)
    for name in TOKENIZER_FILES:
        if tokenizer_dir != out_dir:
            shutil.copyfile(tokenizer_dir / name, out_dir / name)


def build_target(out_dir: Path, training: Training = Training(), geometry: Geometry = TARGET_GEOMETRY) -> Path:
    """Train the tiny target on the corpus and save it with its tokenizer into `out_dir`."""
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    torch.manual_seed(training.seed)
    model = Qwen3ForCausalLM(_qwen3_config(geometry, tokenizer))
    batches = _batches(corpus_token_stream(tokenizer), training)
    _fit(model, batches, training, lambda batch: model(input_ids=batch, labels=batch).loss)
    save_model(model, out_dir, out_dir)
    return out_dir


def build_draft_lm(
    target_dir: Path,
    out_dir: Path,
    trained: bool = True,
    training: Training = Training(seed=1),
    geometry: Geometry = DRAFT_GEOMETRY,
) -> Path:
    """A 1-layer Qwen3 draft LM sharing the target's tokenizer; distilled from the target when `trained`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3ForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    torch.manual_seed(training.seed)
    draft = Qwen3ForCausalLM(_qwen3_config(geometry, tokenizer))
    if trained:
        target = AutoModelForCausalLM.from_pretrained(target_dir, use_safetensors=True).eval()
        batches = _batches(corpus_token_stream(tokenizer), training)

        def distillation_loss(batch: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                target_log_probs = torch.log_softmax(target(input_ids=batch).logits, dim=-1)
            draft_log_probs = torch.log_softmax(draft(input_ids=batch).logits, dim=-1)
            return torch.nn.functional.kl_div(
                draft_log_probs.flatten(0, 1), target_log_probs.flatten(0, 1), log_target=True, reduction="batchmean"
            )

        _fit(draft, batches, training, distillation_loss)
    save_model(draft, target_dir, out_dir)
    return out_dir


def cached_target(cache_root: Path) -> Path:
    """The tiny target under `cache_root`, built once per builder source + settings."""
    return cached_build(
        cache_root,
        "tiny-qwen3-target",
        build_target,
        source_files=SOURCE_FILES,
        settings=build_settings(TARGET_GEOMETRY, Training()),
    )


def cached_draft_lm(cache_root: Path, target_dir: Path, *, trained: bool = True) -> Path:
    """The tiny draft LM for `target_dir` (a `cached_target` folder) under `cache_root`."""
    settings = {**build_settings(DRAFT_GEOMETRY, Training(seed=1)), "target": target_dir.name, "trained": trained}
    return cached_build(
        cache_root,
        f"tiny-qwen3-draft-lm-{'trained' if trained else 'random'}",
        lambda out_dir: build_draft_lm(target_dir, out_dir, trained=trained),
        source_files=SOURCE_FILES,
        settings=settings,
    )
