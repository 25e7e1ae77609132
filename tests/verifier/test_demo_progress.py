"""`drafters up` and `drafters demo` say how far the demo build's training is: plain lines at each quarter of a
model's steps in a log, a bar on a terminal (issue 35 item 1)."""

from __future__ import annotations

import io
import re
import threading
from pathlib import Path

import torch
from rich.console import Console

from drafters.cli.up import TrainingBars, training_progress
from verifier.build_cache import training_steps
from verifier.demo import BuildStep, build_each
from verifier.tiny.qwen3 import Training, _fit


def _train(out: Path, steps: int) -> Path:
    """A real (tiny) training through the builders' own loop."""
    model = torch.nn.Linear(4, 4)
    batches = [torch.randn(2, 4) for _ in range(steps)]
    _fit(model, batches, Training(steps=steps, warmup_steps=2), lambda batch: model(batch).pow(2).mean())
    return out


def test_a_build_says_its_training_steps_at_each_quarter(tmp_path: Path) -> None:
    lines: list[str] = []
    steps = [BuildStep("first", "tiny target", 8, lambda: _train(tmp_path / "a", 8)),
             BuildStep("second", "tiny drafter", 0, lambda: tmp_path / "b")]  # found cached: no training
    built = build_each(steps, lines.append)
    assert built == {"first": tmp_path / "a", "second": tmp_path / "b"}
    assert lines[:4] == [f"demo model 1 of 2, tiny target: training step {n} of 8" for n in (2, 4, 6, 8)]
    assert re.fullmatch(r"demo model 1 of 2, tiny target: (built in \d+ s|cached)", lines[4])
    assert lines[5:] == ["demo model 2 of 2, tiny drafter: cached"]


def test_only_this_threads_training_is_counted() -> None:
    seen: list[int] = []
    with training_steps(seen.append):
        other = threading.Thread(target=_train, args=(Path("x"), 5))
        other.start()
        other.join()
        _train(Path("y"), 3)
    _train(Path("z"), 2)  # after the block: not counted either
    assert seen == [1, 2, 3]


def test_a_terminal_gets_a_bar_and_a_log_gets_lines() -> None:
    assert training_progress(Console(file=io.StringIO())) is None  # not a terminal: the quarter lines
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80)
    bars = training_progress(console)
    assert isinstance(bars, TrainingBars)
    for step in range(1, 301):
        bars(3, 7, "Qwen3 DFlash drafter", step, 300)
    assert bars.progress is None  # gone once the model is trained
    shown = out.getvalue()
    assert "demo model 3 of 7, Qwen3 DFlash drafter: training steps" in shown and "300/300" in shown
