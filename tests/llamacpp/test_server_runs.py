"""The tiny pairs through a real llama-server: stored runs, lossless greedy output, τ from the server's counters,
refusals named, and failures (a dying server, a taken port, a GGUF that does not load) that leave nothing running."""

from __future__ import annotations

import os
import signal
import socket
from dataclasses import replace
from pathlib import Path

import pytest

from registry.store import Store
from tests.llamacpp import llama_server_children, skip_unless_wanted
from tests.support.file_reads import count_reads
from tests.tiny_models import cache_root
from verifier.engines.pytorch import RunSettings
from verifier.jobs import VerifyRequest, Worker, enqueue, verify_now
from verifier.engines.llamacpp.engine import run_llamacpp_pair
from verifier.engines.llamacpp.server import LlamaCppOptions, ServerFailed
from verifier.prompts import bundled_set
from tests.support.cli import drafters

skip_unless_wanted()

SETTINGS = RunSettings(max_new_tokens=48, repeats=1, warmup=0, device="cpu")
# llama.cpp reads a fused layer as the input of the next one, which a 4-layer target does not have for layer 3 (the
# tiny DFlash drafters fuse layers 0 and 2, which llama.cpp runs).
LAST_LAYER_DFLASH_LAYERS = (1, 3)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'registry.db'}")


@pytest.fixture(autouse=True)
def nothing_left_running() -> None:
    yield
    assert llama_server_children() == [], "a llama-server outlived its run"


def _dflash(target: Path, *, trained: bool, layers: tuple[int, ...] | None = None) -> Path:
    from verifier.build_cache import cached_build
    from verifier.tiny.dflash import (
        SOURCE_FILES,
        DrafterShape,
        DrafterTraining,
        build_dflash_drafter,
        build_settings,
        cached_dflash_drafter,
    )

    if layers is None:
        return cached_dflash_drafter(cache_root(), target, trained=trained)
    shape = DrafterShape(target_layer_ids=layers)
    return cached_build(
        cache_root(),
        f"tiny-dflash-layers{''.join(map(str, layers))}-{'trained' if trained else 'random'}",
        lambda out: build_dflash_drafter(target, out, trained=trained, shape=shape),
        source_files=SOURCE_FILES,
        settings={**build_settings(shape, DrafterTraining(), trained), "target": target.name},
    )


def _request(target: Path, drafter: Path | str | None, sets: tuple[str, ...] = ("chat",)) -> VerifyRequest:
    return VerifyRequest(target=str(target), drafter=str(drafter) if drafter else None, prompt_sets=sets,
                         settings=SETTINGS, engine="llamacpp")


def test_trained_draft_lm_run_is_stored_lossless_and_beats_a_random_one(
    sqlite_store: Store, llama_env: None, qwen3_target: Path, draft_lm: Path, random_draft_lm: Path
) -> None:
    trained = verify_now(sqlite_store, _request(qwen3_target, draft_lm))
    untrained = verify_now(sqlite_store, _request(qwen3_target, random_draft_lm))

    for record in (trained, untrained):
        assert record.status == "ok", record.failure_reason
        assert (record.engine, record.engine_version) == ("llama.cpp", "b11434")
        assert record.method == "draft-lm" and record.draft_length == 4
        assert record.lossless is True  # greedy: the pair's output is the target-only llama-server's
        assert record.tau is not None and record.tau >= 1.0
        assert record.provenance["spec_type"] == "draft-simple"
        for side in ("target", "drafter"):
            gguf = record.provenance["gguf"][side]
            assert gguf["quantization"] == "F32" and len(gguf["sha256"]) == 64
    assert trained.tau > untrained.tau + 1.0
    assert trained.acceptance_rate > 0.5 > untrained.acceptance_rate
    stored = sqlite_store.runs.get_run(trained.run_id)
    assert stored is not None and [s.name for s in stored.per_set] == ["chat"]
    assert stored.per_set[0].tau == pytest.approx(trained.tau)
    assert [r.run_id for r in sqlite_store.runs.list_runs(engine="llama.cpp")] == [untrained.run_id, trained.run_id]


def test_greedy_output_equals_the_target_alone_and_counters_add_up(
    llama_options: LlamaCppOptions, qwen3_target: Path, draft_lm: Path
) -> None:
    prompts = [bundled_set("code")]
    settings = SETTINGS
    alone = run_llamacpp_pair(qwen3_target, None, prompts, settings, options=llama_options)
    pair = run_llamacpp_pair(qwen3_target, draft_lm, prompts, settings, options=llama_options)

    assert alone.method is None and alone.overall.acceptance is None
    assert pair.generations == alone.generations
    acceptance = pair.overall.acceptance
    assert acceptance is not None and acceptance.tau >= 1.0
    assert sum(acceptance.histogram) == acceptance.rounds
    assert acceptance.accepted == sum(n * count for n, count in enumerate(acceptance.histogram))
    assert acceptance.identity_gap == pytest.approx(0.0) or not acceptance.uniform_draft_length
    assert pair.peak_memory_kind == "llama_server_rss_peak" and pair.peak_memory_bytes > 0
    # τ means what it means in PyTorch: drafted and accepted from each answer's timings.draft_n / draft_n_accepted,
    # which the server's /metrics counters confirm, over every verification step.
    assert pair.provenance["counters"]["metrics_disagreed"] == 0
    assert 1.0 <= pair.overall.tau_emitted <= acceptance.tau
    assert pair.provenance["draft_parameters"]["spec_draft_n_max"] == pair.draft_length == 4
    assert pair.provenance["metric_version"] == 3 and pair.provenance["seed_scheme"].startswith("sha256")
    # llama-server times no single forward: no ideal speedup, rather than a made-up one.
    assert pair.forward_costs is None and pair.overall.efficiency is None


def test_dflash_drafter_runs_in_llama_server_and_training_shows(
    llama_options: LlamaCppOptions, qwen3_target: Path
) -> None:
    trained = _dflash(qwen3_target, trained=True)
    untrained = _dflash(qwen3_target, trained=False)
    settings = SETTINGS
    runs = {name: run_llamacpp_pair(qwen3_target, folder, [bundled_set("chat")], settings, options=llama_options)
            for name, folder in (("trained", trained), ("untrained", untrained))}

    for run in runs.values():
        assert run.method == "dflash" and run.draft_length == 7  # block size 8 - 1
        assert run.provenance["spec_type"] == "draft-dflash"
        assert run.provenance["gguf"]["drafter"]["architecture"] == "dflash"
        assert run.lossless is True
    assert runs["trained"].overall.acceptance.tau > runs["untrained"].overall.acceptance.tau + 0.5


def test_a_llama_cpp_verify_reads_the_drafters_config_once(
    llama_options: LlamaCppOptions, qwen3_target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pre-check's read serves the draft length and the GGUF cache key too (issue 36: read 3 times before)."""
    trained = _dflash(qwen3_target, trained=True)
    run_llamacpp_pair(qwen3_target, trained, [bundled_set("chat")], SETTINGS, options=llama_options)  # converted
    reads = count_reads(monkeypatch, trained / "config.json")
    run = run_llamacpp_pair(qwen3_target, trained, [bundled_set("chat")],
                            replace(SETTINGS, max_new_tokens=8), options=llama_options)
    assert run.method == "dflash" and run.draft_length == 7
    assert len(reads) == 1


def test_a_dflash_drafter_fusing_the_last_target_layer_is_a_failed_run_naming_llama_cpps_refusal(
    sqlite_store: Store, llama_env: None, qwen3_target: Path
) -> None:
    drafter = _dflash(qwen3_target, trained=False, layers=LAST_LAYER_DFLASH_LAYERS)
    dflash = verify_now(sqlite_store, _request(qwen3_target, drafter))

    assert dflash.status == "failed" and dflash.engine == "llama.cpp"
    assert "SIGABRT while serving" in dflash.failure_reason
    assert "layer input tensor is null" in dflash.failure_reason


def test_a_gguf_that_does_not_load_fails_its_job_and_the_worker_goes_on(
    sqlite_store: Store, llama_env: None, tmp_path: Path, qwen3_target: Path, draft_lm: Path,
    llama_options: LlamaCppOptions
) -> None:
    from verifier.engines.llamacpp.convert import cached_gguf

    good = cached_gguf(draft_lm, llama_options.gguf_cache, source=llama_options.source_dir, build=11434)
    broken = tmp_path / "truncated.gguf"
    broken.write_bytes(good.path.read_bytes()[: good.size_bytes // 2])
    first = enqueue(sqlite_store, _request(qwen3_target, broken))
    second = enqueue(sqlite_store, _request(qwen3_target, draft_lm))

    assert Worker(sqlite_store).drain(timeout_s=300) == 2

    failed = sqlite_store.runs.get_run(f"job{first.id}")
    assert failed is not None and failed.status == "failed"
    assert "before it was ready" in failed.failure_reason
    assert "corrupted or incomplete" in failed.failure_reason and "truncated.gguf" in failed.failure_reason
    ok = sqlite_store.runs.get_run(f"job{second.id}")
    assert ok is not None and ok.status == "ok" and ok.lossless is True


def test_a_taken_port_is_a_failed_run_with_the_reason(
    sqlite_store: Store, llama_env: None, monkeypatch: pytest.MonkeyPatch, qwen3_target: Path, draft_lm: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        monkeypatch.setenv("DRAFTERS_LLAMACPP_PORT", str(port))
        record = verify_now(sqlite_store, _request(qwen3_target, draft_lm))

    assert record.status == "failed"
    assert f"port {port} on 127.0.0.1 is already taken" in record.failure_reason


def test_a_server_that_dies_mid_run_fails_the_run_and_is_not_left_behind(
    llama_options: LlamaCppOptions, qwen3_target: Path, draft_lm: Path
) -> None:
    killed: list[int] = []

    def kill_after_first_prompt(done: int, total: int, label: str) -> None:
        if done == 1:
            for pid in llama_server_children():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    with pytest.raises(ServerFailed, match="killed by SIGKILL while serving"):
        run_llamacpp_pair(qwen3_target, draft_lm, [bundled_set("math")], SETTINGS,
                          progress=kill_after_first_prompt, options=llama_options)
    assert len(killed) == 2  # the target alone and the pair, served side by side


def test_verify_engine_llamacpp_from_the_command_line(
    tmp_path: Path, llama_source: Path, qwen3_target: Path, draft_lm: Path
) -> None:
    import json

    env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_LLAMA_CPP_DIR": str(llama_source),
           "DRAFTERS_MODELS_DIR": str(cache_root()), "DRAFTERS_LLAMACPP_THREADS": "1"}
    result = drafters("verify", str(qwen3_target), str(draft_lm), "--engine", "llamacpp", "--sets", "math", "--repeats",
                      "1", "--max-new-tokens", "32", "--device", "cpu", "--json", env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    run = json.loads(result.stdout)
    assert (run["engine"], run["engine_version"], run["lossless"]) == ("llama.cpp", "b11434", True)
    assert run["overall"]["acceptance"]["tau"] >= 1.0 and run["overall"]["speedup"]["median"] > 0


def test_llama_cpp_throughput_is_not_below_pytorchs_on_the_same_tiny_target(
    llama_options: LlamaCppOptions, qwen3_target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same target and prompts, baseline only, in both engines. On a tiny model PyTorch's eager per-forward
    overhead dominates and llama.cpp runs many times faster (~4,000 vs ~50-150 tok/s here), so llama.cpp at under
    half of PyTorch's tok/s is a broken measurement, not a property of the engines: the check that would have caught
    a llama.cpp baseline of 10.1 tok/s beside PyTorch's 53 (llama-server's default threads spinning on a busy
    machine). The engine now picks its thread count and records it, and every run records the machine's load.
    Bounded from above as well: an inflated llama.cpp figure is as wrong as a deflated one."""
    from verifier.engines.llamacpp.server import default_threads
    from verifier.engines.pytorch import run_pair

    monkeypatch.delenv("DRAFTERS_LLAMACPP_THREADS", raising=False)
    defaults = LlamaCppOptions.from_env()
    assert defaults.threads == default_threads() >= 1
    options = LlamaCppOptions(threads=defaults.threads, gguf_cache=llama_options.gguf_cache,
                              source_dir=llama_options.source_dir)
    prompts = [bundled_set("chat")]
    settings = RunSettings(max_new_tokens=48, repeats=1, warmup=1, device="cpu")
    llama = run_llamacpp_pair(qwen3_target, None, prompts, settings, options=options)
    torch_run = run_pair(qwen3_target, None, prompts, settings)
    assert llama.provenance["threads"] == default_threads()
    for run in (llama, torch_run):
        load = run.provenance["machine_load"]
        assert load["cpus"] >= 1 and len(load["load_average"]) == 2 and isinstance(load["contended"], bool)
    llama_tps = llama.overall.baseline.tokens_per_s
    torch_tps = torch_run.overall.baseline.tokens_per_s
    assert llama_tps >= 0.5 * torch_tps, (llama_tps, torch_tps)
    # And from above: tens of times PyTorch's is what eager per-forward overhead explains; a timing that read as 0
    # or in the wrong unit gives a thousand times and more. Each request's timings were checked against its wall
    # clock too (`checked_timings`), and the run says what share of it they covered.
    assert llama_tps <= 300 * torch_tps, (llama_tps, torch_tps)
    low, high = llama.provenance["timings"]["share_of_wall_clock"]
    assert 0.02 <= low <= high
