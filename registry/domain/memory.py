"""Will it fit? Weight and KV-cache bytes of a (target, drafter) pair against common GPU memory sizes.

Pure arithmetic, no I/O. Cards are sold in "GB" that are really GiB (a 24 GB card has 24 × 2**30 bytes), so
card sizes are GiB here. The budget counts weights and the target's KV cache only: activations, the CUDA
context and allocator slack come on top, which is why the table shows the headroom left rather than a yes/no
alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from registry.domain import configs

GIB = 2**30
CARD_SIZES_GB: tuple[int, ...] = (8, 12, 16, 24, 48, 80)
DEFAULT_CONTEXT_TOKENS = 8192


@dataclass(frozen=True)
class Quantization:
    name: str
    bits_per_weight: float


# Bits per weight including the per-block scales each format stores: Q8_0 and Q4_0 keep one fp16 scale per
# 32 weights (+0.5 bit), mxfp4 one 8-bit exponent per 32 (+0.25), Q4_K_M mixes 4- and 6-bit blocks (≈4.5–4.8
# bits; the upper end is used so a "fits" is not optimistic).
BF16 = Quantization("bf16", 16.0)
FP8 = Quantization("fp8", 8.0)
Q8_0 = Quantization("int8 / Q8_0", 8.5)
Q4_K_M = Quantization("Q4_K_M", 4.8)
Q4_0 = Quantization("Q4_0", 4.5)
MXFP4 = Quantization("mxfp4", 4.25)
QUANTIZATIONS: tuple[Quantization, ...] = (BF16, FP8, Q8_0, Q4_K_M, Q4_0, MXFP4)

# What one stored weight costs, by the config's dtype or quantization method.
_DTYPE_BITS = {"float32": 32.0, "float16": 16.0, "bfloat16": 16.0, "float8_e4m3fn": 8.0, "float8_e5m2": 8.0}
_QUANT_METHOD_BITS = {"fp8": 8.0, "mxfp4": MXFP4.bits_per_weight, "bitsandbytes": 8.0}


class BudgetError(ValueError):
    """Inputs that cannot give a budget (negative sizes, nothing known about the weights)."""


@dataclass(frozen=True)
class KvGeometry:
    """What sizes the KV cache: per token, each layer keeps a key and a value of kv_heads × head_dim."""

    layers: int
    kv_heads: int
    head_dim: int


@dataclass(frozen=True)
class BudgetRow:
    quantization: str
    bits_per_weight: float
    card_gb: int
    target_bytes: int
    drafter_bytes: int
    kv_cache_bytes: int
    total_bytes: int
    card_bytes: int
    headroom_bytes: int  # negative when it does not fit
    fits: bool


def kv_geometry(config: Mapping[str, Any] | None) -> KvGeometry | None:
    """The target's KV-cache shape from its config (nested text_config read first), or None when unknown."""
    if not config:
        return None
    facts = configs.model_facts(dict(config))
    layers, heads = facts.num_hidden_layers, facts.num_attention_heads
    if layers is None or heads is None:
        return None
    kv_heads = facts.num_key_value_heads or heads  # no num_key_value_heads means plain multi-head attention
    head_dim = facts.head_dim
    if head_dim is None:
        if facts.hidden_size is None:
            return None
        head_dim = facts.hidden_size // heads
    return KvGeometry(layers=layers, kv_heads=kv_heads, head_dim=head_dim)


def kv_cache_bytes(geometry: KvGeometry, tokens: int, bytes_per_element: float = 2.0) -> int:
    """2 (K and V) × layers × kv_heads × head_dim × bytes per element × tokens."""
    if tokens < 0:
        raise BudgetError(f"context length must be at least 0 tokens, got {tokens}")
    return round(2 * geometry.layers * geometry.kv_heads * geometry.head_dim * bytes_per_element * tokens)


def stored_bits_per_weight(config: Mapping[str, Any] | None) -> float:
    """Bits one weight takes in the repo's files: its quantization method, else its dtype, else bf16."""
    if not config:
        return BF16.bits_per_weight
    section = config.get("quantization_config")
    if isinstance(section, Mapping):
        bits = _QUANT_METHOD_BITS.get(str(section.get("quant_method", "")).lower())
        if bits is not None:
            return bits
    for layer in (config, config.get("text_config")):
        if isinstance(layer, Mapping):
            for key in ("torch_dtype", "dtype"):
                bits = _DTYPE_BITS.get(str(layer.get(key, "")).lower())
                if bits is not None:
                    return bits
    return BF16.bits_per_weight


def parameter_estimate(
    *, parameter_count: int | None, weight_bytes: int | None, stored_bits: float = BF16.bits_per_weight
) -> int | None:
    """Parameters: the counted number when known, else the stored weight bytes divided by the bytes per weight."""
    if parameter_count is not None:
        if parameter_count < 0:
            raise BudgetError(f"parameter count must not be negative, got {parameter_count}")
        return parameter_count
    if weight_bytes is not None:
        if weight_bytes < 0:
            raise BudgetError(f"weight bytes must not be negative, got {weight_bytes}")
        return round(weight_bytes * 8 / stored_bits)
    return None


_SIZE_LABEL = re.compile(r"(\d+(?:\.\d+)?)([MBT])")
_SIZE_UNITS = {"M": 10**6, "B": 10**9, "T": 10**12}


def parameters_from_size_label(size: str | None) -> int | None:
    """Parameters a name's size label states ("8B", "0.6B", "1.5T"); None for others such as Gemma's "E2B",
    whose "effective" size is not its parameter count."""
    match = _SIZE_LABEL.fullmatch((size or "").strip().upper())
    return round(float(match.group(1)) * _SIZE_UNITS[match.group(2)]) if match else None


@dataclass(frozen=True)
class ParameterEstimate:
    parameters: int | None
    basis: str  # how it was found, shown next to the number


def estimate_parameters(
    *, parameter_count: int | None, weight_bytes: int | None, config: Mapping[str, Any] | None, size_label: str | None
) -> ParameterEstimate:
    """The best parameter figure at hand: counted, else from the stored weight bytes, else from the name."""
    if parameter_count is not None:
        return ParameterEstimate(parameter_estimate(parameter_count=parameter_count, weight_bytes=None), "parameter count")
    if weight_bytes is not None:
        bits = stored_bits_per_weight(config)
        return ParameterEstimate(
            parameter_estimate(parameter_count=None, weight_bytes=weight_bytes, stored_bits=bits),
            f"weight bytes at {bits:g} bits",
        )
    from_name = parameters_from_size_label(size_label)
    if from_name is not None:
        return ParameterEstimate(from_name, f"size in the name ({size_label})")
    return ParameterEstimate(None, "unknown")


def weight_bytes_at(parameters: int, quantization: Quantization) -> int:
    return round(parameters * quantization.bits_per_weight / 8)


def budget_table(
    *,
    target_parameters: int,
    drafter_parameters: int | None,
    kv: KvGeometry | None,
    context_tokens: int = DEFAULT_CONTEXT_TOKENS,
    quantizations: Sequence[Quantization] = QUANTIZATIONS,
    cards_gb: Sequence[int] = CARD_SIZES_GB,
    drafter_quantization: Quantization | None = BF16,
    kv_bytes_per_element: float = 2.0,
) -> list[BudgetRow]:
    """One row per (target quantization, card).

    The drafter stays at `drafter_quantization` (bf16: drafters are small and usually shipped unquantized);
    None quantizes it like the target. No KV geometry means the KV cache is left out (counted as 0).
    """
    if target_parameters < 0 or (drafter_parameters is not None and drafter_parameters < 0):
        raise BudgetError("parameter counts must not be negative")
    kv_bytes = kv_cache_bytes(kv, context_tokens, kv_bytes_per_element) if kv is not None else 0
    rows = []
    for quantization in quantizations:
        target_bytes = weight_bytes_at(target_parameters, quantization)
        drafter_bytes = (
            weight_bytes_at(drafter_parameters, drafter_quantization or quantization)
            if drafter_parameters is not None
            else 0
        )
        total = target_bytes + drafter_bytes + kv_bytes
        for card_gb in cards_gb:
            card_bytes = card_gb * GIB
            rows.append(
                BudgetRow(
                    quantization=quantization.name,
                    bits_per_weight=quantization.bits_per_weight,
                    card_gb=card_gb,
                    target_bytes=target_bytes,
                    drafter_bytes=drafter_bytes,
                    kv_cache_bytes=kv_bytes,
                    total_bytes=total,
                    card_bytes=card_bytes,
                    headroom_bytes=card_bytes - total,
                    fits=total <= card_bytes,
                )
            )
    return rows


def smallest_card(rows: Sequence[BudgetRow], quantization: str) -> int | None:
    """The smallest card (GB) the pair fits at one quantization, or None when none of them does."""
    fitting = [row.card_gb for row in rows if row.quantization == quantization and row.fits]
    return min(fitting) if fitting else None


def binary_size(value: int | float) -> str:
    """Bytes in binary units, as every size the project prints (a card's "24 GB" is 24 GiB)."""
    return f"{value / GIB:.1f} GiB" if value >= GIB / 10 else f"{value / 2**20:.1f} MiB"
