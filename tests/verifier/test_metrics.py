"""Metrics over known round records give known numbers."""

from __future__ import annotations

import pytest

from verifier.decode import DecodeResult
from verifier.metrics import RoundRecord, acceptance, ideal_speedup, speedup, spread, throughput


def rounds_of(*pairs: tuple[int, int], draft: float = 0.0, verify: float = 0.0) -> list[RoundRecord]:
    return [
        RoundRecord(drafted=k, accepted=n, emitted=n + 1, draft_seconds=draft, verify_seconds=verify) for k, n in pairs
    ]


def test_uniform_draft_length_gives_known_tau_histogram_and_rates() -> None:
    result = acceptance(rounds_of((4, 4), (4, 0), (4, 2), (4, 4), (4, 1)))

    assert result.rounds == 5
    assert result.drafted == 20
    assert result.accepted == 11
    assert result.tau == pytest.approx(3.2)
    assert result.acceptance_rate == pytest.approx(0.55)
    assert result.histogram == (1, 1, 1, 0, 2)
    assert result.marginal == pytest.approx((0.8, 0.6, 0.4, 0.4))
    assert result.conditional == pytest.approx((0.8, 0.75, 2 / 3, 1.0))
    assert result.uniform_draft_length
    assert result.identity_gap == pytest.approx(0.0, abs=1e-12)


def test_mixed_draft_lengths_use_rounds_that_reached_each_position() -> None:
    result = acceptance(rounds_of((4, 4), (2, 2), (2, 0)))

    assert result.tau == pytest.approx(3.0)
    assert result.histogram == (1, 0, 1, 0, 1)
    assert result.marginal == pytest.approx((2 / 3, 2 / 3, 1.0, 1.0))
    assert result.conditional == pytest.approx((2 / 3, 1.0, 1.0, 1.0))
    assert not result.uniform_draft_length
    # With unequal k the per-position identity is only approximate; the gap records by how much.
    assert result.identity_gap == pytest.approx(3.0 - (1.0 + 2 / 3 + 2 / 3 + 1.0 + 1.0))


def test_no_drafts_is_plain_decoding() -> None:
    result = acceptance(rounds_of((0, 0), (0, 0), (0, 0)))

    assert result.tau == 1.0
    assert result.acceptance_rate is None
    assert result.histogram == (3,)
    assert result.marginal == ()
    assert result.identity_gap == 0.0


def test_conditional_is_none_where_no_round_reached_the_position() -> None:
    result = acceptance(rounds_of((3, 0), (3, 0)))

    assert result.marginal == (0.0, 0.0, 0.0)
    assert result.conditional == (0.0, None, None)


@pytest.mark.parametrize("records", [[], rounds_of((2, 3))])
def test_invalid_records_are_refused(records: list[RoundRecord]) -> None:
    with pytest.raises(ValueError):
        acceptance(records)


def test_throughput_pools_tokens_and_times() -> None:
    long = DecodeResult(
        prompt_length=7,
        tokens=list(range(10)),
        prefill_seconds=0.1,
        total_seconds=1.1,
        stop_reason="length",
        rounds=rounds_of((2, 2), (2, 2), (2, 1), draft=0.1, verify=0.2),
    )
    short = DecodeResult(prompt_length=3, tokens=[5], prefill_seconds=0.2, total_seconds=0.2, stop_reason="eos")

    result = throughput([long, short])

    assert result.prompts == 2
    assert result.output_tokens == 11
    assert result.seconds == pytest.approx(1.3)
    assert result.tokens_per_s == pytest.approx(11 / 1.3)
    assert result.ttft_s == pytest.approx(0.15)
    assert result.tpot_s == pytest.approx(1.0 / 9)
    assert result.target_steps == 3
    assert result.draft_seconds_per_step == pytest.approx(0.1)
    assert result.verify_seconds_per_step == pytest.approx(0.2)
    assert result.draft_time_share == pytest.approx(1 / 3)


def test_speedup_and_ideal_speedup() -> None:
    assert speedup(200.0, 100.0) == pytest.approx(2.0)
    # τ = 3, a target step of 10 ms, rounds of 4 ms drafting + 11 ms verifying → S = 3 · 10 / 15.
    assert ideal_speedup(3.0, 0.010, 0.004, 0.011) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        speedup(1.0, 0.0)
    with pytest.raises(ValueError):
        ideal_speedup(3.0, 0.01, 0.0, 0.0)


def test_spread_over_repeats() -> None:
    result = spread([3.0, 1.0, 2.0])
    assert (result.median, result.minimum, result.maximum, result.q1, result.q3, result.n) == (
        2.0,
        1.0,
        3.0,
        1.5,
        2.5,
        3,
    )
    single = spread([4.0])
    assert (single.median, single.minimum, single.maximum, single.q1, single.q3) == (4.0,) * 5
    with pytest.raises(ValueError):
        spread([])
