"""What a run measures is what it says: one memory figure of this run alone (not of the process's life), and bare
forward costs timed under the run's own sampling."""

from __future__ import annotations

import resource
from dataclasses import replace
from pathlib import Path

import torch

from registry.domain.measurement import MEMORY_KINDS, RunSettings
from verifier.engines.pytorch import TorchEngine, run_pair
from verifier.harness.pair_check import check_pair
from verifier.prompts import bundled_set

SETTINGS = RunSettings(max_new_tokens=8, repeats=1, warmup=0, device="cpu", cost_repeats=2)


def _prompts():
    found = bundled_set("chat")
    return [replace(found, prompts=found.prompts[:1])]


def test_cpu_peak_memory_is_the_runs_not_the_processs_lifetime(tiny_target_dir: Path) -> None:
    # An earlier job of the same worker peaked at 600 MiB more than anything the tiny run holds.
    burst = torch.ones(600 * 2**20 // 4)
    del burst
    lifetime = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    run = run_pair(tiny_target_dir, tiny_target_dir, _prompts(), SETTINGS)
    assert run.peak_memory_kind == "process_rss_peak_of_run" and run.peak_memory_kind in MEMORY_KINDS
    assert run.target_weight_bytes is not None
    assert run.target_weight_bytes < run.peak_memory_bytes < lifetime - 400 * 2**20


class _Recording:
    """A proposer that records the temperature it is asked to draft at."""

    def __init__(self, inner) -> None:
        self.inner, self.temperatures = inner, []
        self.draft_length, self.needs_hidden_states = inner.draft_length, inner.needs_hidden_states

    def begin(self, prompt_ids, target_out) -> None:
        self.inner.begin(prompt_ids, target_out)

    def propose(self, temperature, generator):
        self.temperatures.append(temperature)
        return self.inner.propose(temperature, generator)

    def observe(self, n_accepted, committed, target_out) -> None:
        self.inner.observe(n_accepted, committed, target_out)


def test_forward_costs_draft_at_the_runs_temperature(tiny_target_dir: Path, tiny_draft_lm_dir: Path) -> None:
    settings = replace(SETTINGS, temperature=0.7)
    engine = TorchEngine.load(check_pair(tiny_target_dir, tiny_draft_lm_dir), settings)
    engine.proposer = recording = _Recording(engine.proposer)
    context = engine.encode(_prompts()[0].prompts[0])
    costs = engine.forward_costs(context, repeats=2)
    assert costs is not None and costs.draft_step_s > 0
    assert recording.temperatures == [0.7] * 3  # a warm-up and two timed repeats, none of them greedy
