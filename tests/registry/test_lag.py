"""Lag arithmetic with dates from drafters.md §2 and §9."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from registry.domain.lag import GroupLag, Lag, summarize, summarize_group, target_lag, upgrade_lag

TODAY = date(2026, 10, 1)


def test_qwen36_27b_got_its_drafter_after_one_day() -> None:
    lag = target_lag(date(2026, 4, 22), [date(2026, 4, 23)], TODAY)
    assert lag == Lag(days=1, open=False, first_drafter_released=date(2026, 4, 23))


def test_gpt_oss_20b_waited_about_six_and_a_half_months() -> None:
    lag = target_lag(date(2025, 8, 5), [date(2026, 2, 18)], TODAY)
    assert (lag.days, lag.open) == (197, False)


def test_the_first_of_several_drafters_counts() -> None:
    # Qwen3.5-27B: z-lab preview 2026-03-14, Modal retrain in June
    lag = target_lag(date(2026, 2, 25), [date(2026, 6, 1), date(2026, 3, 14)], TODAY)
    assert (lag.days, lag.first_drafter_released) == (17, date(2026, 3, 14))


def test_same_day_drafter_has_lag_zero_without_a_flag() -> None:
    lag = target_lag(date(2026, 4, 2), [date(2026, 4, 2)], TODAY)
    assert (lag.days, lag.drafter_before_target) == (0, False)


def test_open_lag_is_the_targets_age_and_grows_daily() -> None:
    released = date(2026, 6, 3)
    today = date(2026, 6, 30)
    first = target_lag(released, [], today)
    second = target_lag(released, [], today + timedelta(days=1))
    assert first == Lag(days=27, open=True, first_drafter_released=None)
    assert second.days == first.days + 1 and second.open


def test_drafter_dated_after_today_has_not_shipped_yet() -> None:
    lag = target_lag(date(2026, 2, 16), [date(2026, 6, 15)], today=date(2026, 5, 1))
    assert lag.open and lag.days == 74 and lag.first_drafter_released is None
    assert not target_lag(date(2026, 2, 16), [date(2026, 6, 15)], today=date(2026, 6, 15)).open


def test_drafter_before_target_is_lag_zero_and_flagged() -> None:
    # gemma4-12B-it-DFlash is dated only "2026-06" (stored as 06-01); the target is 2026-06-03
    lag = target_lag(date(2026, 6, 3), [date(2026, 6, 1)], TODAY)
    assert lag == Lag(days=0, open=False, first_drafter_released=date(2026, 6, 1), drafter_before_target=True)


def test_target_released_after_today_is_refused() -> None:
    with pytest.raises(ValueError, match="after today"):
        target_lag(date(2026, 6, 3), [], date(2026, 6, 2))


def closed(days: int) -> Lag:
    return Lag(days=days, open=False, first_drafter_released=date(2026, 1, 1))


def still_open(days: int) -> Lag:
    return Lag(days=days, open=True, first_drafter_released=None)


def test_summaries_per_family() -> None:
    summaries = summarize(
        {
            "Qwen3.6": [closed(1), closed(1)],
            "Qwen3.5": [closed(13), closed(17), closed(59), closed(119)],
            "gpt-oss": [closed(197), closed(217)],
            "GLM-5.1": [still_open(40)],
        }
    )
    assert summaries["Qwen3.6"] == GroupLag(median_days=1.0, worst_days=1, n=2, open_count=0)
    assert summaries["Qwen3.5"] == GroupLag(median_days=38.0, worst_days=119, n=4, open_count=0)
    assert summaries["gpt-oss"].median_days == 207.0
    assert summaries["GLM-5.1"] == GroupLag(median_days=40.0, worst_days=40, n=1, open_count=1)


def test_summaries_per_publisher_count_open_lags_as_their_age() -> None:
    summary = summarize_group([closed(1), closed(36), still_open(200)])
    assert summary == GroupLag(median_days=36.0, worst_days=200, n=3, open_count=1)


def test_empty_group_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        summarize_group([])
    with pytest.raises(ValueError, match="'DeepSeek'"):
        summarize({"Qwen3": [closed(1)], "DeepSeek": []})


def test_upgrade_lag_is_open_until_the_successors_drafter_ships() -> None:
    # Qwen3.5-27B had its drafter on 2026-03-14; Qwen3.6-27B came out 2026-04-22, its drafter 04-23.
    predecessor = target_lag(date(2026, 2, 25), [date(2026, 3, 14)], date(2026, 4, 22))
    on_release_day = upgrade_lag(predecessor, date(2026, 4, 22), [date(2026, 4, 23)], date(2026, 4, 22))
    assert on_release_day.lag.open and on_release_day.lag.days == 0
    assert on_release_day.predecessor_had_drafter and on_release_day.left_without_drafter
    next_day = upgrade_lag(predecessor, date(2026, 4, 22), [date(2026, 4, 23)], date(2026, 4, 23))
    assert (next_day.lag.days, next_day.lag.open, next_day.left_without_drafter) == (1, False, False)


def test_upgrade_from_a_base_without_drafter_leaves_nobody_behind() -> None:
    # gemma-3-12b-it never had a DFlash drafter; gemma-4-12B-it came out 2026-06-03.
    predecessor = target_lag(date(2025, 3, 12), [], date(2026, 6, 10))
    upgrade = upgrade_lag(predecessor, date(2026, 6, 3), [], date(2026, 6, 10))
    assert upgrade.lag == Lag(days=7, open=True, first_drafter_released=None)
    assert not upgrade.predecessor_had_drafter and not upgrade.left_without_drafter


def test_predecessor_drafter_after_the_successor_release_does_not_count() -> None:
    predecessor = target_lag(date(2026, 1, 1), [date(2026, 5, 1)], date(2026, 6, 1))
    upgrade = upgrade_lag(predecessor, date(2026, 4, 1), [], date(2026, 6, 1))
    assert not upgrade.predecessor_had_drafter
