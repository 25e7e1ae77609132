"""llama.cpp's tok/s come from each answer's `timings`; a missing, renamed or mis-scaled field fails the run loudly
instead of reading as 0 ms (which inflated throughput), and the timings are checked against the request's own wall
clock from both sides."""

from __future__ import annotations

import pytest

from verifier.engines.llamacpp.engine import TimingsInconsistent, checked_timings


def test_plausible_timings_are_read_in_seconds() -> None:
    assert checked_timings({"prompt_ms": 4.0, "predicted_ms": 36.0, "draft_n": 3}, wall_s=0.042) == (0.004, 0.036)


@pytest.mark.parametrize("timings, reason", [
    ({"prompt_ms": 4.0}, "no usable timings.predicted_ms"),  # a field missing: was read as 0
    ({"prompt_ms": 4.0, "predicted_time_ms": 36.0}, "no usable timings.predicted_ms"),  # renamed
    ({"prompt_ms": 4.0, "predicted_ms": "36"}, "no usable timings.predicted_ms"),
    ({"prompt_ms": -1.0, "predicted_ms": 36.0}, "no usable timings.prompt_ms"),
    ({"prompt_ms": 0.004, "predicted_ms": 0.036}, "cover under 2%"),  # seconds where milliseconds were meant
    ({"prompt_ms": 4000.0, "predicted_ms": 36000.0}, "exceed the request's wall clock"),  # microseconds
])
def test_timings_that_cannot_be_true_fail_loudly(timings: dict, reason: str) -> None:
    with pytest.raises(TimingsInconsistent, match=reason):
        checked_timings(timings, wall_s=0.042)
