"""Metrics over known round records give known numbers."""

from __future__ import annotations

import json

import pytest

from registry.domain.measurement import SetMeasurement
from registry.domain.run import Run
from registry.domain.stored_json import from_json, to_json
from verifier.decode import DecodeResult
from verifier.harness.contract import Generation
from verifier.harness.run import _Trials, summarize
from verifier.metrics import (
    ForwardCosts,
    RoundRecord,
    StepCounts,
    Throughput,
    acceptance,
    counts_acceptance,
    decode_speedup,
    ideal_speedup,
    recompute_efficiency,
    speedup,
    spread,
    throughput,
)


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
    # τ = 3, T(1) = 10 ms, T(γ+1) = 11 ms, a drafting step of 4 ms → S = 3 · 10 / 15.
    assert ideal_speedup(3.0, 0.010, 0.011, 0.004) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        speedup(1.0, 0.0)
    with pytest.raises(ValueError):
        ideal_speedup(3.0, 0.01, 0.0, 0.0)


def _throughput(tpot_s: float | None) -> Throughput:
    return Throughput(prompts=1, output_tokens=10, seconds=1.0, tokens_per_s=10.0, ttft_s=0.5, tpot_s=tpot_s,
                      target_steps=3, draft_seconds_per_step=0.0, verify_seconds_per_step=0.0, draft_time_share=0.0)


def test_decode_speedup_leaves_the_first_token_out() -> None:
    # Same end-to-end throughput, but the speculative side spends a third of the baseline's time per later token.
    assert decode_speedup(_throughput(0.01), _throughput(0.03)) == pytest.approx(3.0)
    assert decode_speedup(_throughput(None), _throughput(0.03)) is None


def test_step_counts_from_rounds_count_drafts_past_the_end_in_tau_verified_only() -> None:
    # The last round accepted 3 drafts but max_new_tokens let only 2 tokens out.
    rounds = [RoundRecord(drafted=4, accepted=4, emitted=5, draft_seconds=0, verify_seconds=0),
              RoundRecord(drafted=4, accepted=1, emitted=2, draft_seconds=0, verify_seconds=0),
              RoundRecord(drafted=4, accepted=3, emitted=2, draft_seconds=0, verify_seconds=0)]
    counts = StepCounts.from_rounds(rounds)
    assert (counts.steps, counts.drafting_steps, counts.drafted, counts.accepted, counts.emitted) == (3, 3, 12, 7, 9)
    assert counts.accepted_per_position == (3, 2, 1, 1)
    assert counts.tau == pytest.approx(1 + 7 / 3) == acceptance(rounds).tau
    assert counts.tau_verified == pytest.approx(1 + 8 / 3)
    assert counts.tau_emitted == pytest.approx(3.0)
    # Counters alone give the same τ and per-position rates as the rounds.
    from_counts = counts_acceptance(counts)
    assert from_counts is not None
    assert from_counts.tau == pytest.approx(acceptance(rounds).tau)
    assert from_counts.marginal == pytest.approx(acceptance(rounds).marginal)
    assert from_counts.histogram == acceptance(rounds).histogram


def test_counter_steps_include_plain_steps() -> None:
    # Two drafting steps and three steps without a draft: τ is over all five verification steps.
    counts = StepCounts(steps=5, drafting_steps=2, drafted=6, accepted=4, emitted=9, accepted_per_position=(2, 1, 1))
    result = counts_acceptance(counts)
    assert result is not None
    assert result.tau == pytest.approx(1 + 4 / 5)
    assert result.marginal == pytest.approx((1.0, 0.5, 0.5))
    assert result.histogram == (3, 1, 0, 1)  # the plain steps accepted nothing
    assert sum(n * c for n, c in enumerate(result.histogram)) == result.accepted
    assert StepCounts.total([counts, counts]).tau == pytest.approx(counts.tau)
    assert counts_acceptance(StepCounts(steps=0, drafting_steps=0, drafted=0, accepted=0, emitted=0)) is None


def test_forward_costs_round_trip_and_recompute_an_efficiency() -> None:
    costs = ForwardCosts.from_timings(100, 4, [0.010, 0.012, 0.011], [0.020, 0.019, 0.021], [0.005, 0.004, 0.006])
    # The fastest repeat is the cost; the spread keeps the rest.
    assert (costs.target_step_s, costs.verify_step_s, costs.draft_step_s, costs.repeats) == (0.010, 0.019, 0.004, 3)
    assert costs.spread["verify_step_s"]["median"] == 0.020
    assert from_json(ForwardCosts, json.loads(json.dumps(to_json(costs)))) == costs

    def stored(forward_costs: ForwardCosts | None, decode: float) -> Run:
        run = Run(target="t", drafter="d", forward_costs=forward_costs,
                  overall=SetMeasurement(name="overall", prompts=1, digest="d", tau_emitted=2.5,
                                         decode_speedup=spread([decode])))
        return from_json(Run, json.loads(json.dumps(to_json(run))))  # as the store hands it back

    # S = 2.5 · 10 / (19 + 4) ≈ 1.087, so a realized 0.5 is 0.46 of the ideal.
    assert recompute_efficiency(stored(costs, 0.5)) == pytest.approx(0.5 / (2.5 * 10 / 23))
    assert recompute_efficiency(stored(None, 0.55)) is None


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


def test_tau_counts_output_drafts_in_both_engines_and_keeps_zlabs_form_beside() -> None:
    """A final round trimmed at max_new_tokens accepted 3 drafts but output 1. τ counts the output drafts, as
    llama-server's draft_n_accepted does (both engines agree on the same decode); τ_verified keeps the drafts the
    target accepted past the end too, as z-lab's benchmark counts acceptance length."""
    rounds = [RoundRecord(3, 3, 4, 0.0, 0.0), RoundRecord(3, 2, 3, 0.0, 0.0), RoundRecord(3, 3, 1, 0.0, 0.0)]
    pytorch = StepCounts.from_rounds(rounds)
    llama = StepCounts(steps=3, drafting_steps=3, drafted=9, accepted=6, emitted=8)  # what the server reports
    assert acceptance(rounds).tau == pytorch.tau == llama.tau == counts_acceptance(llama).tau == 3.0
    assert acceptance(rounds).histogram == (0, 1, 1, 1)  # the trimmed round counts as 1 accepted
    assert pytorch.tau_verified == pytest.approx(1 + 8 / 3) and llama.tau_verified is None
    assert StepCounts.total([pytorch, llama]).tau_verified is None  # unknown for part: unknown, not a sum


def test_tau_per_prompt_is_the_mean_of_each_prompts_tau() -> None:
    """z-lab averages acceptance length per prompt; the pooled τ weighs long outputs more. Both are stored."""
    def generation(rounds: list[RoundRecord]) -> Generation:
        tokens = tuple(range(1 + sum(r.emitted for r in rounds)))
        return Generation(tokens=tokens, prefill_seconds=0.01, total_seconds=0.1,
                          counts=StepCounts.from_rounds(rounds), rounds=tuple(rounds))

    baseline = [generation([RoundRecord(0, 0, 1, 0.0, 0.01)] * 4)] * 2
    speculative = [generation([RoundRecord(3, 3, 4, 0.0, 0.01)]), generation([RoundRecord(3, 0, 1, 0.0, 0.01)] * 3)]
    result = summarize("s", "d", _Trials(baseline=[baseline], speculative=[speculative]), None, None)
    assert result.tau == pytest.approx(1 + 3 / 4)  # pooled: 3 accepted over 4 steps
    assert result.tau_per_prompt == pytest.approx((4.0 + 1.0) / 2)
    assert result.tau_verified == pytest.approx(1 + 3 / 4)
