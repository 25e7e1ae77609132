"""The decode loop and engine on real tiny models: losslessness, token accounting, the proposer contract, loading."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch

from registry.domain.run import Run
from registry.domain.stored_json import from_json, to_json
from verifier.decode import DecodeResult, decode
from verifier.engines.pytorch import IncompatiblePair, RunSettings, TorchEngine, run_pair
from verifier.harness.pair_check import check_pair
from verifier.folders import LoadError, cached_snapshot, files_digest
from verifier.harness.run import run as measure
from verifier.loading import LoadedTarget, load_target
from verifier.methods import UnsupportedMethod, build_proposer
from verifier.prompts import Message, Prompt, PromptSet, bundled_set, bundled_sets, encode_prompt
from verifier.proposer import NoDraft, Proposal, TargetOutput

GREEDY = RunSettings(max_new_tokens=64, repeats=1, warmup=0, device="cpu")


@pytest.fixture(scope="module")
def trained_run(tiny_target_dir: Path, tiny_draft_lm_dir: Path) -> Run:
    return run_pair(tiny_target_dir, tiny_draft_lm_dir, bundled_sets(), GREEDY)


@pytest.fixture(scope="module")
def untrained_run(tiny_target_dir: Path, untrained_draft_lm_dir: Path) -> Run:
    return run_pair(tiny_target_dir, untrained_draft_lm_dir, bundled_sets(), GREEDY)


def prompt_ids(target: LoadedTarget, text: str) -> torch.Tensor:
    return torch.tensor(encode_prompt(Prompt(messages=(Message("user", text),)), target.tokenizer))


def greedy(target: LoadedTarget, proposer, ids: torch.Tensor, max_new_tokens: int = 64) -> DecodeResult:
    return decode(
        target.model,
        proposer,
        ids,
        max_new_tokens=max_new_tokens,
        temperature=0.0,
        generator=torch.Generator().manual_seed(0),
        eos_token_ids=frozenset({target.tokenizer.eos_token_id}),
    )


@pytest.mark.parametrize("run_name", ["trained_run", "untrained_run"])
def test_greedy_speculative_output_equals_baseline_on_every_prompt(
    run_name: str, request: pytest.FixtureRequest
) -> None:
    run: Run = request.getfixturevalue(run_name)

    assert run.lossless is True
    assert run.first_divergence is None
    assert [s.lossless for s in run.per_set] == [True] * 4
    assert len(run.generations) == sum(len(s.prompts) for s in bundled_sets())


def test_the_shared_loop_matches_transformers_generate(trained_run: Run, tiny_target: LoadedTarget) -> None:
    """An independent reference: the loop's greedy output equals transformers' own greedy generate."""
    for prompt_set in bundled_sets():
        for index, prompt in enumerate(prompt_set.prompts):
            ids = torch.tensor([encode_prompt(prompt, tiny_target.tokenizer)])
            reference = tiny_target.model.generate(ids, max_new_tokens=64, do_sample=False)[0, ids.shape[1] :]
            assert trained_run.generations[f"{prompt_set.name}/{index}"] == reference.tolist()


def test_trained_draft_lm_accepts_far_more_than_an_untrained_one(trained_run: Run, untrained_run: Run) -> None:
    trained, untrained = trained_run, untrained_run
    print(
        f"draft-lm tau trained {trained.tau:.2f} vs untrained {untrained.tau:.2f}; "
        f"tok/s baseline {trained.baseline_tokens_per_s:.0f}, trained {trained.tokens_per_s:.0f}, "
        f"untrained {untrained.tokens_per_s:.0f}"
    )
    assert trained.tau > untrained.tau + 0.5
    assert trained.acceptance_rate > untrained.acceptance_rate + 0.3


def test_run_dict_holds_metrics_and_provenance(trained_run: Run, tiny_target_dir: Path) -> None:
    result = trained_run
    encoded = to_json(result)
    assert from_json(Run, json.loads(json.dumps(encoded))) == result  # JSON-able, and reads back as it was
    assert "generations" not in encoded  # transient: never stored or printed

    acc = result.overall.acceptance
    assert acc is not None and acc.uniform_draft_length
    assert acc.identity_gap == pytest.approx(0.0, abs=1e-9)
    assert result.tau == pytest.approx(1 + sum(result.per_position_acceptance))
    assert result.per_position_acceptance == acc.marginal
    assert sum(acc.histogram) == acc.rounds
    assert len(acc.conditional) == 4
    assert result.speedup == pytest.approx(result.tokens_per_s / result.baseline_tokens_per_s)
    assert result.metric_version == 3
    assert result.efficiency == pytest.approx(result.decode_speedup / result.overall.ideal_speedup)
    costs = result.forward_costs
    assert costs is not None
    assert (costs.gamma, costs.repeats) == (4, GREEDY.cost_repeats)
    assert costs.target_step_s > 0 and costs.verify_step_s > 0 and costs.draft_step_s > 0
    assert result.overall.ideal_speedup == pytest.approx(
        result.tau_emitted * costs.target_step_s / (costs.verify_step_s + costs.draft_step_s)
    )
    # A round can emit fewer tokens than it accepted (at EOS or max_new_tokens), never more.
    assert 1.0 < result.tau_emitted <= result.tau
    assert 0.0 < result.overall.speculative.draft_time_share < 1.0
    assert result.peak_memory_bytes > 0 and result.peak_memory_kind == "process_rss_peak_of_run"
    assert result.target_weight_bytes > result.drafter_weight_bytes > 0
    assert {s.name for s in result.per_set} == {"code", "math", "chat", "multilingual"}
    provenance = result.provenance
    assert provenance["target_files_digest"] == files_digest(tiny_target_dir)
    assert provenance["prompt_sets"]["math"] == bundled_set("math").digest
    assert (provenance["method"], provenance["draft_length"], provenance["temperature"]) == ("draft-lm", 4, 0.0)
    assert provenance["torch_version"] == torch.__version__
    assert provenance["target_sha"] is None
    assert provenance["torch_threads"] == torch.get_num_threads()
    assert provenance["attn_implementation"] and provenance["verifier_version"]
    assert provenance["target_tokenizer_digest"] and provenance["metric_version"] == 3
    assert "target_generation_config_digest" in provenance and "verifier_git_sha" in provenance


class SleepyProposer:
    """A proposer that sleeps in `propose` while `asleep` is set: a drafter slowed where only the loop sees it."""

    def __init__(self, inner, delay_s: float) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.delay_s, self.asleep = inner, delay_s, False
        self.draft_length, self.needs_hidden_states = inner.draft_length, inner.needs_hidden_states

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        self.inner.begin(prompt_ids, target_out)

    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        if self.asleep:
            time.sleep(self.delay_s)
        return self.inner.propose(temperature, generator)

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        self.inner.observe(n_accepted, committed_tokens, target_out)


class DelayInLoop:
    """The engine, with its sleepy drafter awake only while generating (never while forward costs are timed)."""

    def __init__(self, engine: TorchEngine, sleepy: SleepyProposer) -> None:
        self.engine, self.sleepy = engine, sleepy

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.engine, name)

    def generate(self, prompt_ids, *, speculative: bool, seed: int):  # type: ignore[no-untyped-def]
        self.sleepy.asleep = True
        try:
            return self.engine.generate(prompt_ids, speculative=speculative, seed=seed)
        finally:
            self.sleepy.asleep = False


def test_a_drafter_slowed_inside_the_loop_lowers_efficiency(tiny_target_dir: Path, tiny_draft_lm_dir: Path) -> None:
    # Many cost repeats: the fastest of them is the bare cost even on a busy machine.
    settings = RunSettings(repeats=1, warmup=1, device="cpu", max_new_tokens=32, cost_repeats=20)
    sets = [PromptSet(name="code", prompts=bundled_set("code").prompts[:3])]
    engine = TorchEngine.load(check_pair(tiny_target_dir, tiny_draft_lm_dir), settings)
    # The delay is many rounds' worth of bare forwards on this machine, whatever its speed.
    costs = engine.forward_costs(engine.encode(sets[0].prompts[0]), repeats=5)
    assert costs is not None
    sleepy = SleepyProposer(engine.proposer, delay_s=max(0.3, 30 * (costs.verify_step_s + costs.draft_step_s)))
    engine.proposer = sleepy

    plain = measure(engine, sets, settings)
    slowed = measure(DelayInLoop(engine, sleepy), sets, settings)

    assert plain.lossless is True and slowed.lossless is True
    assert slowed.overall.acceptance.tau == pytest.approx(plain.overall.acceptance.tau)  # same decisions
    assert plain.overall.efficiency is not None and slowed.overall.efficiency is not None
    print(f"efficiency {plain.overall.efficiency:.2f} undelayed, {slowed.overall.efficiency:.2f} with "
          f"{sleepy.delay_s * 1000:.1f} ms per draft")
    assert slowed.overall.efficiency < 0.5 * plain.overall.efficiency


@pytest.fixture(scope="module")
def draft_lm(tiny_target: LoadedTarget, tiny_draft_lm_dir: Path):
    return build_proposer("draft-lm", tiny_draft_lm_dir, tiny_target, GREEDY)


def test_every_generated_token_is_accounted_for(tiny_target: LoadedTarget, draft_lm) -> None:
    result = greedy(tiny_target, draft_lm, prompt_ids(tiny_target, "What is 27 plus 18?"))

    assert result.stop_reason == "eos"
    assert result.tokens[-1] == tiny_target.tokenizer.eos_token_id
    assert tiny_target.tokenizer.eos_token_id not in result.tokens[:-1]
    assert 1 + sum(r.emitted for r in result.rounds) == len(result.tokens)
    assert all(r.emitted == r.accepted + 1 for r in result.rounds[:-1])


@pytest.mark.parametrize("max_new_tokens", [1, 2, 3, 5, 6, 7, 11])
def test_token_count_is_exact_when_a_round_overshoots(tiny_target: LoadedTarget, draft_lm, max_new_tokens: int) -> None:
    ids = prompt_ids(tiny_target, "Write a Python function that returns the total of a list of scores.")
    full = greedy(tiny_target, NoDraft(), ids)
    assert len(full.tokens) > 11  # the answer is long enough for every cut below

    baseline = greedy(tiny_target, NoDraft(), ids, max_new_tokens)
    speculative = greedy(tiny_target, draft_lm, ids, max_new_tokens)

    assert baseline.tokens == speculative.tokens == full.tokens[:max_new_tokens]
    assert speculative.stop_reason == "length"
    assert 1 + sum(r.emitted for r in speculative.rounds) == max_new_tokens


class OracleProposer:
    """Knows the target's greedy continuation and proposes it, corrupting one position on some rounds.

    It checks the documented `TargetOutput` contract on every call against a full forward pass over the final
    sequence: positions, committed tokens, cache length and the hidden states of committed positions only.
    """

    needs_hidden_states = True
    draft_length = 3
    corrupt_at = (None, 0, 2, 1)  # per round, cycling: the draft index to corrupt (None: propose it all right)

    def __init__(self, sequence: list[int], full_hidden: tuple[torch.Tensor, ...], vocab: int) -> None:
        self.sequence = sequence  # prompt + the target's greedy output
        self.full_hidden = full_hidden
        self.vocab = vocab
        self.committed = 0
        self.round = 0
        self.expected_accepted: int | None = None
        self.observed: list[int] = []

    def check(self, target_out: TargetOutput) -> None:
        start, end = target_out.start, target_out.end
        assert end == self.committed - 1
        assert target_out.input_ids.tolist() == self.sequence[start:end]
        assert target_out.pending_token == self.sequence[end]
        assert target_out.cache.get_seq_length() == end
        assert target_out.hidden_states is not None
        assert len(target_out.hidden_states) == len(self.full_hidden)
        for mine, full in zip(target_out.hidden_states, self.full_hidden, strict=True):
            assert mine.shape == (1, end - start, full.shape[-1])
            torch.testing.assert_close(mine[0], full[0, start:end], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(target_out.layer_output(0), target_out.hidden_states[1])
        assert target_out.last_hidden_state is target_out.hidden_states[-1]

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        self.committed = prompt_ids.shape[0] + 1
        self.check(target_out)

    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        truth = self.sequence[self.committed : self.committed + self.draft_length]
        drafts = list(truth)
        corrupt = self.corrupt_at[self.round % len(self.corrupt_at)]
        if corrupt is not None and corrupt < len(drafts):
            drafts[corrupt] = (drafts[corrupt] + 1) % self.vocab
        self.expected_accepted = corrupt if corrupt is not None and corrupt < len(drafts) else len(drafts)
        self.round += 1
        return Proposal(tokens=torch.tensor(drafts, dtype=torch.long))

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        assert n_accepted == self.expected_accepted
        assert committed_tokens.tolist() == self.sequence[self.committed : self.committed + n_accepted + 1]
        self.committed += n_accepted + 1
        self.observed.append(n_accepted)
        self.check(target_out)


def test_proposer_sees_committed_positions_only(tiny_target: LoadedTarget) -> None:
    ids = prompt_ids(tiny_target, "Write a Python function that counts the prices above a limit.")
    reference = greedy(tiny_target, NoDraft(), ids).tokens
    sequence = [*ids.tolist(), *reference]
    with torch.no_grad():
        full = tiny_target.model(torch.tensor([sequence]), output_hidden_states=True).hidden_states
    oracle = OracleProposer(sequence, full, tiny_target.model.config.vocab_size)

    result = greedy(tiny_target, oracle, ids)

    assert result.tokens == reference
    assert len(oracle.observed) >= 6  # several full cycles of the corruption pattern were checked
    assert [r.accepted for r in result.rounds[: len(oracle.observed)]] == oracle.observed
    assert {0, 1, 2, 3} <= set(oracle.observed)


def test_baseline_only_run_has_no_speculative_metrics(tiny_target_dir: Path) -> None:
    one_prompt = PromptSet(name="one", prompts=(Prompt(messages=(Message("user", "What is 4 plus 5?"),)),))
    result = run_pair(tiny_target_dir, None, [one_prompt], RunSettings(max_new_tokens=64, repeats=2, warmup=1, device="cpu"))

    assert result.method is None and result.drafter is None
    assert result.lossless is None and result.tau is None and result.speedup is None
    assert result.overall.acceptance is None and result.overall.speculative is None
    assert result.baseline_tokens_per_s > 0
    assert result.overall.baseline_tokens_per_s.n == 2


def test_drafter_with_another_vocabulary_is_refused(
    tiny_target_dir: Path, tiny_draft_lm_dir: Path, tmp_path: Path
) -> None:
    drafter = tmp_path / "other-vocab"
    shutil.copytree(tiny_draft_lm_dir, drafter)
    config = json.loads((drafter / "config.json").read_text())
    config["vocab_size"] = 32000
    (drafter / "config.json").write_text(json.dumps(config))

    with pytest.raises(IncompatiblePair, match="32000") as raised:
        run_pair(tiny_target_dir, drafter, [bundled_set("math")], GREEDY)
    assert raised.value.reasons


def test_unsupported_method_names_the_supported_ones(tiny_target_dir: Path, tiny_draft_lm_dir: Path) -> None:
    with pytest.raises(UnsupportedMethod, match="draft-lm"):
        run_pair(tiny_target_dir, tiny_draft_lm_dir, [bundled_set("math")], RunSettings(method="peagle", device="cpu"))


def test_pickle_only_weights_are_refused(tiny_target_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "pickled"
    folder.mkdir()
    shutil.copyfile(tiny_target_dir / "config.json", folder / "config.json")
    (folder / "pytorch_model.bin").write_bytes(b"not loaded")

    with pytest.raises(LoadError, match="safetensors only"):
        load_target(folder, device="cpu")


def test_remote_code_models_are_refused(tiny_target_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "remote"
    shutil.copytree(tiny_target_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="my_custom_lm", auto_map={"AutoModelForCausalLM": "modeling_custom.CustomLM"})
    (folder / "config.json").write_text(json.dumps(config))

    with pytest.raises(LoadError, match="never runs remote code"):
        load_target(folder, device="cpu")


def test_target_loads_from_the_local_hub_cache_by_repo_and_sha(tiny_target_dir: Path, tmp_path: Path) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    snapshot = tmp_path / "hub" / "models--tiny--target" / "snapshots" / sha
    shutil.copytree(tiny_target_dir, snapshot)

    folder = cached_snapshot("tiny/target", sha, cache_dir=tmp_path / "hub")
    one_prompt = PromptSet(name="one", prompts=(Prompt(text="<|user|>\nHello"),))
    result = run_pair(folder, None, [one_prompt], RunSettings(max_new_tokens=64, repeats=1, warmup=0, device="cpu"))

    assert folder == snapshot
    assert result.provenance["target_sha"] == sha
    assert result.target_revision == sha
    with pytest.raises(LoadError, match="not in the local Hugging Face cache"):
        cached_snapshot("tiny/target", "f" * 40, cache_dir=tmp_path / "hub")
