"""`drafters doctor`: a running server's speculation checked against what the registry knows.

Four real llama-servers on the tiny pairs (a good pair, a random drafter, no drafter, a DFlash drafter served with a
draft length its block disagrees with); vLLM and SGLang as small real HTTP servers that answer the way their sources
do (vLLM's `spec_decode_*` Prometheus counters, vllm/v1/spec_decode/metrics.py; SGLang's `meta_info.spec_verify_ct`,
python/sglang/srt/managers/tokenizer_manager.py), their counters advancing with each request; the events reach a
real webhook receiver.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from registry.domain.measurement import RunSettings
from registry.alerts import webhooks as alerts
from registry.alerts.secrets import SecretBox
from registry.domain.doctor import Expectation, ProbeFacts, below_minimum, diagnose
from registry.store import Store
from tests.llamacpp import SKIP_VARIABLE
from tests.support.cli import drafters
from tests.support.receiver import Receiver
from verifier.doctor import run_doctor

needs_llama = pytest.mark.skipif(os.environ.get(SKIP_VARIABLE) == "1", reason=f"{SKIP_VARIABLE}=1")


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'registry.db'}")


# --- the rules, on facts alone -------------------------------------------------------------------------------

def _facts(**changes: object) -> ProbeFacts:
    base = {"engine": "llama.cpp", "engine_version": "b11434", "drafts": 40, "tau": 3.0, "draft_length": 4,
            "thinking": None}
    return ProbeFacts(**{**base, **changes})  # type: ignore[arg-type]


def _codes(facts: ProbeFacts, expected: Expectation) -> list[str]:
    return [f.code for f in diagnose(facts, expected).findings if f.problem]


def test_each_signature_is_named_only_when_its_evidence_is_there() -> None:
    band = Expectation(target="t", drafter="d", verdict="exact", trained_draft_length=4, tau_band=(2.8, 3.4),
                       tau_band_source="3 measured runs")
    assert _codes(_facts(), band) == []
    assert _codes(_facts(drafts=0, tau=None), band) == ["not_engaged"]
    assert _codes(_facts(tau=1.05), band) == ["acceptance_collapsed"]
    assert _codes(_facts(tau=2.2), band) == ["below_band"]
    assert _codes(_facts(tau=2.6), band) == []  # within the band's 10% margin
    assert _codes(_facts(draft_length=3), band) == ["draft_length_mismatch"]
    assert _codes(_facts(), Expectation(target="t", drafter="d", verdict="incompatible")) == ["pair_not_compatible"]
    revisions = Expectation(target="t", drafter="d", declared_target_revision="a" * 40,
                            served_target_revision="b" * 40)
    assert _codes(_facts(), revisions) == ["target_revision_mismatch"]
    minimum = Expectation(target="t", drafter="d", method="dflash", minimum_version="0.20.1")
    assert _codes(_facts(engine="vllm", engine_version="0.19.2"), minimum) == ["engine_below_minimum"]
    assert _codes(_facts(engine="vllm", engine_version="0.21.0"), minimum) == []
    # Unknown is not a problem and is said: no band, no per-request counts.
    unknown = diagnose(_facts(drafts=None, tau=None), Expectation(target=None, drafter=None))
    assert unknown.healthy and any("unknown" in f.message for f in unknown.findings)
    assert diagnose(_facts(drafts=0, tau=None), band).event_types == ("speculation_not_engaged",)
    assert diagnose(_facts(tau=1.0), band).event_types == ("acceptance_regressed",)


def test_version_comparison_reads_engine_versions_and_refuses_to_guess() -> None:
    assert below_minimum("0.19.2", "0.20.1") is True
    assert below_minimum("0.21", "0.20.1") is False
    assert below_minimum("b9000", "b9549") is True
    assert below_minimum("11434 (7f3a2c1)", "b9549") is False
    assert below_minimum("b0-unknown", "b9549") is None  # llama.cpp built outside git does not know its build
    assert below_minimum("main", "0.20.1") is None and below_minimum("0.20.1", "unknown build") is None


# --- vLLM and SGLang as HTTP servers answering like their sources --------------------------------------------

class _Engine(BaseHTTPRequestHandler):
    """Counters that advance with each request, as a real server's do."""

    kind = "vllm"
    drafting = True
    steps_per_request = 16
    accepted_per_step = (12, 8, 5)  # per 16 steps: how many accepted at least 1, 2, 3 drafts
    state: dict[str, int] = {}

    def log_message(self, *_: object) -> None:
        pass

    def _send(self, status: int, body: str, content_type: str = "application/json") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        if self.kind == "vllm" and self.path == "/version":
            self._send(200, json.dumps({"version": "0.21.1"}))
        elif self.kind == "vllm" and self.path == "/v1/models":
            self._send(200, json.dumps({"object": "list", "data": [{"id": "Qwen/Qwen3-8B", "object": "model",
                                                                     "root": "/models/Qwen3-8B"}]}))
        elif self.kind == "vllm" and self.path == "/metrics":
            self._send(200, self._vllm_metrics(), "text/plain; version=0.0.4")
        elif self.kind == "sglang" and self.path == "/get_server_info":
            info = {"model_path": "Qwen/Qwen3-8B", "served_model_name": "Qwen/Qwen3-8B", "version": "0.5.9",
                    "speculative_algorithm": "EAGLE3" if self.drafting else None,
                    "speculative_num_draft_tokens": 4}
            self._send(200, json.dumps(info))
        else:
            self._send(404, '{"detail": "Not Found"}')

    def _vllm_metrics(self) -> str:
        requests = self.state.get("requests", 0) + 7  # seven requests before the probe, from other clients
        if not self.drafting:
            return 'vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 100.0\n'
        steps = requests * self.steps_per_request
        per_position = [requests * n for n in self.accepted_per_step]
        lines = [
            f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="Qwen/Qwen3-8B"}} {steps}.0',
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="Qwen/Qwen3-8B"}} {3 * steps}.0',
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="Qwen/Qwen3-8B"}} {sum(per_position)}.0',
        ] + [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="Qwen/Qwen3-8B",'
             f'position="{i}"}} {n}.0' for i, n in enumerate(per_position)]
        return "\n".join(lines) + "\n"

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.state["requests"] = self.state.get("requests", 0) + 1
        if self.kind == "vllm" and self.path == "/v1/completions":
            assert body["temperature"] == 0.0 and body["model"] == "Qwen/Qwen3-8B"
            self._send(200, json.dumps({"choices": [{"text": "x"}], "usage": {"completion_tokens": 41}}))
        elif self.kind == "sglang" and self.path == "/generate":
            meta = {"completion_tokens": 40, "e2e_latency": 0.2}
            if self.drafting:
                meta["spec_verify_ct"] = 16  # SGLang adds it only with a speculative algorithm
            self._send(200, json.dumps({"text": "x", "meta_info": meta}))
        else:
            self._send(404, '{"detail": "Not Found"}')


@pytest.fixture
def engine_server() -> Iterator:
    servers: list[ThreadingHTTPServer] = []

    def serve(kind: str, *, drafting: bool = True) -> str:
        handler = type("Handler", (_Engine,), {"kind": kind, "drafting": drafting, "state": {}})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_vllm_probe_counts_its_own_requests_only(engine_server, sqlite_store: Store) -> None:
    url = engine_server("vllm")
    report = run_doctor(sqlite_store, url, drafter="z-lab/Qwen3-8B-DFlash-b16", hardware="H100 80GB")

    assert report.served.kind == "vllm" and report.served.model == "Qwen/Qwen3-8B"
    assert report.facts.engine_version == "0.21.1"
    # Six probe prompts: the seven earlier requests' counts are not the probe's.
    assert report.facts.drafts == 6 * 16
    assert report.facts.tau == pytest.approx(1 + (12 + 8 + 5) / 16)
    assert report.facts.draft_length == 3
    assert report.probe.output_tokens == 6 * 41
    [run] = sqlite_store.runs.list_runs()
    assert run.provenance["source"] == "doctor" and run.hardware == "H100 80GB"
    assert run.tau == pytest.approx(report.facts.tau) and run.target == "Qwen/Qwen3-8B"


def test_a_vllm_server_without_spec_counters_is_not_engaged(engine_server, sqlite_store: Store) -> None:
    report = run_doctor(sqlite_store, engine_server("vllm", drafting=False))
    assert [f.code for f in report.diagnosis.findings if f.problem] == ["not_engaged"]
    assert report.events == ("speculation_not_engaged",)
    assert sqlite_store.runs.list_runs() == []  # nothing measured: no run, but the event
    [event] = sqlite_store.events.events()
    assert event.type == "speculation_not_engaged" and "verified no drafted tokens" in event.payload["message"]


def test_sglang_accept_length_from_meta_info(engine_server, sqlite_store: Store) -> None:
    report = run_doctor(sqlite_store, engine_server("sglang"), record=False)
    assert report.served.kind == "sglang" and report.served.method == "eagle3"
    assert report.facts.tau == pytest.approx(40 / 16) and report.facts.drafts == 6 * 16
    assert sqlite_store.runs.list_runs() == [] and sqlite_store.events.events() == []
    idle = run_doctor(sqlite_store, engine_server("sglang", drafting=False), record=False)
    assert not idle.diagnosis.healthy and idle.facts.drafts == 0


def test_the_cli_exits_by_what_it_found(engine_server, tmp_path: Path) -> None:
    env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home")}
    healthy = drafters("doctor", "--url", engine_server("vllm"), "--json", env=env, timeout=120)
    assert healthy.returncode == 0, healthy.stderr
    body = json.loads(healthy.stdout)
    assert body["schema_version"] >= 2 and body["healthy"] is True and body["probe"]["drafts"] == 96
    broken = drafters("doctor", "--url", engine_server("vllm", drafting=False), env=env, timeout=120)
    assert broken.returncode == 1
    assert "problem: the server verified no drafted tokens" in broken.stdout and "fix:" in broken.stdout
    wrong = drafters("doctor", "--url", engine_server("vllm"), "--prompts", "no-such-set", env=env, timeout=60)
    assert wrong.returncode == 2 and "--prompts takes a bundled set" in wrong.stderr
    unreachable = drafters("doctor", "--url", "http://127.0.0.1:9", env=env, timeout=60)
    assert unreachable.returncode == 2 and "cannot reach" in unreachable.stderr


def test_the_doctors_events_reach_a_real_webhook_receiver(engine_server, sqlite_store: Store, tmp_path: Path) -> None:
    secrets = SecretBox(tmp_path / "secrets.json")
    with Receiver() as receiver:
        alerts.subscribe(sqlite_store, secrets, receiver.url, event_types=("speculation_not_engaged",),
                         allow_internal=True)
        run_doctor(sqlite_store, engine_server("vllm", drafting=False))
        alerts.deliver_pending(sqlite_store, secrets, allow_internal=True)
        [got] = receiver.received
    assert got.json["event"]["type"] == "speculation_not_engaged"


def test_the_canary_in_up_checks_each_server_and_alerts_once_per_problem(
    engine_server, sqlite_store: Store, tmp_path: Path
) -> None:
    from drafters.service import Service
    from registry.settings import CanaryServer, Settings

    good, idle = engine_server("vllm"), engine_server("vllm", drafting=False)
    settings = Settings(home=tmp_path / "home", canary_interval_s=0.05,
                        canary_servers=[CanaryServer(url=good, hardware="H100"), CanaryServer(url=idle)])
    said: list[str] = []
    service = Service(settings, sqlite_store, said.append)
    raised: dict[str, set[str]] = {}
    for _ in range(3):  # three rounds of checks, as the loop makes them
        service._check_server("canary 1", settings.canary_servers[0], raised)
        service._check_server("canary 2", settings.canary_servers[1], raised)
    statuses = {s.name: s for s in sqlite_store.watch_state.service_statuses()}
    assert statuses["canary 1"].state == "healthy" and good in (statuses["canary 1"].detail or "")
    assert statuses["canary 2"].state == "problem" and "verified no drafted tokens" in statuses["canary 2"].last_error
    # Three failing checks of the same server: one event, not three.
    assert [e.type for e in sqlite_store.events.events()] == ["speculation_not_engaged"]
    assert len(sqlite_store.runs.list_runs()) == 3  # each healthy probe is a run on the user's hardware
    service._check_server("canary 3", CanaryServer(url="http://127.0.0.1:9"), raised)
    assert {s.name: s.state for s in sqlite_store.watch_state.service_statuses()}["canary 3"] == "unreachable"


def test_up_starts_the_canary_only_when_servers_are_listed(engine_server, sqlite_store: Store, tmp_path: Path) -> None:
    import time

    from drafters.service import Service
    from registry.settings import CanaryServer, Settings

    parts = {"watch": False, "worker": False, "dashboard": False, "demo": False, "api": False}
    quiet = Service(Settings(home=tmp_path / "quiet"), sqlite_store, lambda _: None)
    quiet.start(**parts)
    assert "canary" not in [t.name for t in quiet.threads]
    quiet.close()
    service = Service(Settings(home=tmp_path / "home", canary_servers=[CanaryServer(url=engine_server("vllm"))]),
                      sqlite_store, lambda _: None)
    service.start(**parts)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
                s.name == "canary 1" and s.state == "healthy" for s in sqlite_store.watch_state.service_statuses()):
            time.sleep(0.1)
        assert any(s.name == "canary 1" and s.state == "healthy" for s in sqlite_store.watch_state.service_statuses())
    finally:
        service.close()


# --- real llama-servers on the tiny pairs ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def gguf_pieces(llama_options, qwen3_target: Path, draft_lm: Path, random_draft_lm: Path, server_binary) -> dict:
    from verifier.engines.llamacpp.convert import cached_gguf
    from verifier.tiny.dflash import cached_dflash_drafter
    from tests.tiny_models import cache_root

    def gguf(folder: Path, target_dir: Path | None = None) -> Path:
        return cached_gguf(folder, llama_options.gguf_cache, source=llama_options.source_dir,
                           build=server_binary.build, target_dir=target_dir).path

    dflash = cached_dflash_drafter(cache_root(), qwen3_target, trained=True)
    return {"target": gguf(qwen3_target), "draft_lm": gguf(draft_lm), "random": gguf(random_draft_lm),
            "dflash": gguf(dflash, qwen3_target), "dflash_dir": dflash}


@pytest.fixture(scope="module")
def measured_store(tmp_path_factory, qwen3_target: Path, draft_lm: Path, llama_source: Path) -> Store:
    """A registry holding one real llama.cpp measurement of the good pair: the band the doctor compares with."""
    from registry.settings import get_settings
    from tests.tiny_models import cache_root
    from verifier.jobs import VerifyRequest, verify_now

    store = Store.open(f"sqlite:///{tmp_path_factory.mktemp('doctor') / 'registry.db'}")
    saved = {k: os.environ.get(k) for k in ("DRAFTERS_LLAMA_CPP_DIR", "DRAFTERS_MODELS_DIR", "DRAFTERS_LLAMACPP_THREADS")}
    os.environ.update(DRAFTERS_LLAMA_CPP_DIR=str(llama_source), DRAFTERS_MODELS_DIR=str(cache_root()),
                      DRAFTERS_LLAMACPP_THREADS="1")
    get_settings.cache_clear()
    try:
        run = verify_now(store, VerifyRequest(
            target=str(qwen3_target), drafter=str(draft_lm), prompt_sets=("code", "chat"), engine="llamacpp",
            settings=RunSettings(max_new_tokens=48, temperature=0.0, repeats=1, draft_length=4)))
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        get_settings.cache_clear()
    assert run.status == "ok", run.failure_reason
    return store


def _served(server_binary, llama_options, model: Path, draft: tuple[Path, str, int | None] | None):
    from verifier.engines.llamacpp.server import Draft, LlamaServer

    return LlamaServer(binary=server_binary, model=model, ctx_size=512, options=llama_options,
                       draft=Draft(*draft) if draft else None)


def _api_key(server) -> str:
    return server._client.headers["Authorization"].removeprefix("Bearer ")


@needs_llama
def test_a_good_pair_is_healthy_and_found_by_its_gguf_bytes(
    server_binary, llama_options, gguf_pieces: dict, measured_store: Store, qwen3_target: Path, draft_lm: Path
) -> None:
    with _served(server_binary, llama_options, gguf_pieces["target"],
                 (gguf_pieces["draft_lm"], "draft-simple", 4)) as server:
        report = run_doctor(measured_store, server.url, api_key=_api_key(server), hardware="test machine")

    assert report.served.kind == "llamacpp" and report.served.method == "draft-simple"
    # Neither side was named: both come from the registry's run whose target GGUF has the served bytes.
    assert (report.expected.target, report.expected.drafter) == (str(qwen3_target), str(draft_lm))
    assert report.expected.tau_band is not None and "measured run" in (report.expected.tau_band_source or "")
    assert report.facts.drafts and report.facts.tau > 1.5 and report.facts.draft_length == 4
    assert report.diagnosis.healthy, [f.message for f in report.diagnosis.findings]
    assert report.events == () and report.run is not None and report.run.provenance["source"] == "doctor"


@needs_llama
def test_a_sweep_of_a_tiny_model_on_a_named_gpu_never_says_it_pays_there(
    server_binary, llama_options, gguf_pieces: dict, measured_store: Store, qwen3_target: Path
) -> None:
    """The served GGUF's bytes are the registry's tiny test target: the sweep's curve says so in its provenance, so
    even with a catalog GPU given as its hardware it never stands for a launch there."""
    from registry.calibration.concurrency import concurrency_for, stand_in
    from registry.calibration.launch_inputs import pick_gpu
    from verifier.sweep import measure_sweep

    spec_server = _served(server_binary, llama_options, gguf_pieces["target"], (gguf_pieces["draft_lm"], "draft-simple", 4))
    base_server = _served(server_binary, llama_options, gguf_pieces["target"], None)
    with spec_server as spec, base_server as base:
        curve = measure_sweep(measured_store, spec.url, base.url, concurrency=[1], max_new_tokens=4,
                              requests_per_level=2, hardware="NVIDIA H100 80GB HBM3", api_key=_api_key(spec),
                              baseline_api_key=_api_key(base))

    runs = {r.run_id: r for r in measured_store.runs.list_runs(engine="llama.cpp", status="ok")}
    matched = runs[curve.provenance["matched_run"]]
    assert curve.target == matched.target == str(qwen3_target) and matched.provenance["test_model"] is True
    assert curve.provenance["test_model"] is True
    assert stand_in(curve) == "tiny test models on NVIDIA H100 80GB HBM3"
    shown = concurrency_for([curve], pick_gpu("H100 SXM"), "llama.cpp")
    assert not shown.measured and "c≈" not in shown.text and "only curves from tiny test models" in shown.text


@needs_llama
def test_a_random_drafter_is_flagged_with_its_likely_causes(
    server_binary, llama_options, gguf_pieces: dict, measured_store: Store, qwen3_target: Path,
) -> None:
    with _served(server_binary, llama_options, gguf_pieces["target"],
                 (gguf_pieces["random"], "draft-simple", 4)) as server:
        report = run_doctor(measured_store, server.url, api_key=_api_key(server), record=False,
                            target=str(qwen3_target))

    [problem] = [f for f in report.diagnosis.findings if f.problem]
    assert problem.code == "acceptance_collapsed" and report.facts.tau <= 1.1
    assert "wrong target layers" in problem.message and "https://github.com/sgl-project/sglang/issues/37475" in problem.sources


@needs_llama
def test_a_server_without_a_drafter_is_not_engaged(server_binary, llama_options, gguf_pieces: dict,
                                                   sqlite_store: Store) -> None:
    with _served(server_binary, llama_options, gguf_pieces["target"], None) as server:
        report = run_doctor(sqlite_store, server.url, api_key=_api_key(server))

    assert [f.code for f in report.diagnosis.findings if f.problem] == ["not_engaged"]
    assert report.events == ("speculation_not_engaged",) and report.run is None


@needs_llama
def test_a_draft_length_that_disagrees_with_the_block_is_flagged(
    server_binary, llama_options, gguf_pieces: dict, sqlite_store: Store, qwen3_target: Path
) -> None:
    with _served(server_binary, llama_options, gguf_pieces["target"],
                 (gguf_pieces["dflash"], "draft-dflash", 3)) as server:
        report = run_doctor(sqlite_store, server.url, api_key=_api_key(server), record=False,
                            target=str(qwen3_target), drafter=str(gguf_pieces["dflash_dir"]))

    assert report.expected.trained_draft_length == 7  # the tiny DFlash drafter's block of 8, less its anchor
    assert report.facts.draft_length == 3
    assert "draft_length_mismatch" in [f.code for f in report.diagnosis.findings if f.problem]
