"""`drafters ingest`: runs recorded from servers users already run. vLLM and SGLang answers are recorded texts
served by small real HTTP servers on loopback; the llama.cpp one is a real llama-server with a drafter."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from registry import calibration
from registry.recording import RecordingFailed
from registry.store import Store
from tests.llamacpp import SKIP_VARIABLE
from verifier.counters import ServerReadError, SpecCounters, counter_acceptance, parse_prometheus, spec_counters
from verifier.metrics import StepCounts, counts_acceptance
from verifier.ingest import ingest_server
from tests.support.cli import drafters

# vLLM 0.2x /metrics (prometheus_client exposition), trimmed to the families ingest reads plus neighbours.
VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 0.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 51234.0
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen3-8B"} 1000.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 3000.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 1650.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-8B",position="0"} 800.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-8B",position="1"} 550.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-8B",position="2"} 300.0
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="Qwen/Qwen3-8B"} 40000.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-8B"} 50000.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="Qwen/Qwen3-8B"} 50000.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="Qwen/Qwen3-8B"} 400.0
"""
SGLANG_SERVER_INFO = {
    "model_path": "Qwen/Qwen3-8B",
    "served_model_name": "Qwen/Qwen3-8B",
    "speculative_algorithm": "DFLASH",
    "speculative_num_draft_tokens": 16,
    "version": "0.5.9",
    "internal_states": [{"avg_spec_accept_length": 4.25, "last_gen_throughput": 212.5}],
}


class _Recorded(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, str, str]] = {}

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        status, content_type, body = self.routes.get(self.path, (404, "text/plain", "not found"))
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def recorded_server() -> Iterator[Callable]:
    servers: list[ThreadingHTTPServer] = []

    def serve(routes: dict[str, tuple[int, str, str]]) -> str:
        handler = type("Handler", (_Recorded,), {"routes": routes})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'registry.db'}")


def test_vllm_counters_become_a_run_on_the_users_hardware(recorded_server: Callable, sqlite_store: Store) -> None:
    url = recorded_server({
        "/metrics": (200, "text/plain; version=0.0.4", VLLM_METRICS),
        "/version": (200, "application/json", json.dumps({"version": "0.21.1"})),
    })
    record = ingest_server(sqlite_store, "vllm", url, hardware="RTX 3060 12GB", drafter="z-lab/Qwen3-8B-DFlash")

    assert (record.engine, record.engine_version, record.target) == ("vllm", "0.21.1", "Qwen/Qwen3-8B")
    assert record.hardware == "RTX 3060 12GB" and record.status == "ok"
    assert record.tau == pytest.approx(1 + 1650 / 1000)
    assert record.acceptance_rate == pytest.approx(1650 / 3000)
    assert record.tokens_per_s == pytest.approx(50000 / 400)
    assert record.draft_length == 3
    (live,) = record.per_set
    assert live.name == "live-traffic"
    assert list(live.per_position_acceptance) == pytest.approx([0.8, 0.55, 0.3])
    assert record.provenance["url"] == url and record.provenance["source"] == "ingested"
    assert [r.run_id for r in sqlite_store.runs.list_runs(engine="vllm")] == [record.run_id]
    # Stored with the pricing model's forecast of it, or, as here, why there is none: this drafter is not in the
    # registry or the bundled catalog, so its size is unknown.
    [stored] = sqlite_store.runs.list_runs(engine="vllm")
    prediction = stored.prediction
    assert prediction is not None
    assert prediction == record.prediction and prediction.hardware == "RTX 3060 12GB"
    assert prediction.predicted_tokens_per_s is None and prediction.tokens_per_s_error is None
    assert prediction.note == "not predicted: the drafter's size is unknown: no weight bytes or usable config"


def test_an_ingested_run_whose_prediction_fails_is_not_half_stored(
    recorded_server: Callable, sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ingest records through the same one transaction as verify_now: a failing prediction step stores nothing."""
    url = recorded_server({
        "/metrics": (200, "text/plain; version=0.0.4", VLLM_METRICS),
        "/version": (200, "application/json", json.dumps({"version": "0.21.1"})),
    })

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(calibration, "predict_one", broken)
    with pytest.raises(RecordingFailed, match="the prediction failed .RuntimeError: boom"):
        ingest_server(sqlite_store, "vllm", url, hardware="RTX 3060 12GB", drafter="z-lab/Qwen3-8B-DFlash")
    assert sqlite_store.runs.list_runs() == []


def test_sglang_mean_acceptance_length(recorded_server: Callable, sqlite_store: Store) -> None:
    url = recorded_server({"/get_server_info": (200, "application/json", json.dumps(SGLANG_SERVER_INFO))})
    record = ingest_server(sqlite_store, "sglang", url, hardware="H200")

    assert (record.engine, record.engine_version, record.method) == ("sglang", "0.5.9", "dflash")
    assert (record.tau, record.tokens_per_s, record.draft_length) == (4.25, 212.5, 16)
    assert record.acceptance_rate is None  # SGLang reports only the mean acceptance length


def test_credentials_in_the_url_are_never_stored(recorded_server: Callable, sqlite_store: Store) -> None:
    url = recorded_server({"/get_server_info": (200, "application/json", json.dumps(SGLANG_SERVER_INFO))})
    with_password = url.replace("http://", "http://admin:s3cret-token@")
    record = ingest_server(sqlite_store, "sglang", with_password, hardware="H200")

    assert "s3cret-token" not in json.dumps(record.provenance) and record.provenance["url"] == url


def test_servers_that_cannot_be_read_store_nothing(recorded_server: Callable, sqlite_store: Store) -> None:
    no_metrics = recorded_server({"/metrics": (501, "application/json", '{"error": "not supported"}')})
    no_drafts = recorded_server({"/metrics": (200, "text/plain", "llamacpp:tokens_predicted_total 10\n"),
                                 "/props": (200, "application/json", '{"model_path": "m.gguf"}')})
    garbled = recorded_server({"/metrics": (200, "text/plain", "vllm:spec_decode_num_drafts_total{ 3\n")})

    with pytest.raises(ServerReadError, match="start llama-server with --metrics"):
        ingest_server(sqlite_store, "llamacpp", no_metrics, hardware="RTX 3060")
    with pytest.raises(ServerReadError, match="no speculative decoding yet"):
        ingest_server(sqlite_store, "llamacpp", no_drafts, hardware="RTX 3060")
    with pytest.raises(ServerReadError, match="metrics line 1"):
        ingest_server(sqlite_store, "vllm", garbled, hardware="RTX 3060")
    with pytest.raises(ServerReadError, match="cannot reach"):
        ingest_server(sqlite_store, "vllm", "http://127.0.0.1:9", hardware="RTX 3060")
    assert sqlite_store.runs.list_runs() == []


def test_counter_acceptance_matches_the_per_step_definitions() -> None:
    # 10 steps drafting 3: accepted 0,0,1,2,3,3,3,3,1,2 drafts.
    counters = SpecCounters(drafts=10, draft_tokens=30, accepted=18, accepted_per_position=(8, 6, 4))
    acceptance = counter_acceptance(counters)

    assert acceptance is not None
    assert acceptance.tau == pytest.approx(2.8)
    assert acceptance.histogram == (2, 2, 2, 4)
    assert acceptance.marginal == pytest.approx((0.8, 0.6, 0.4))
    assert acceptance.conditional == pytest.approx((0.8, 0.75, 4 / 6))
    assert acceptance.uniform_draft_length and acceptance.identity_gap == pytest.approx(0.0)
    assert counter_acceptance(SpecCounters(drafts=0, draft_tokens=0, accepted=0)) is None
    with pytest.raises(ServerReadError, match="non-increasing"):
        counter_acceptance(SpecCounters(drafts=10, draft_tokens=30, accepted=9, accepted_per_position=(3, 6)))
    later = SpecCounters(drafts=12, draft_tokens=36, accepted=20, accepted_per_position=(9, 7, 4))
    assert later.minus(counters) == SpecCounters(drafts=2, draft_tokens=6, accepted=2, accepted_per_position=(1, 1, 0))
    assert counters.plus(later.minus(counters)) == later


def test_prometheus_labels_and_values() -> None:
    samples = parse_prometheus('a_total{model="x \\"y\\"",position="2"} 7\nb 1.5e3 1700000000\n# comment\n')
    assert [(s.name, dict(s.labels), s.value) for s in samples] == [
        ("a_total", {"model": 'x "y"', "position": "2"}, 7.0), ("b", {}, 1500.0)]
    assert spec_counters(samples, "vllm:") is None


@pytest.mark.skipif(os.environ.get(SKIP_VARIABLE) == "1", reason=f"{SKIP_VARIABLE}=1")
def test_a_real_llama_server_is_ingested(
    sqlite_store: Store, llama_options: object, qwen3_target: Path, draft_lm: Path, server_binary: object, tmp_path: Path
) -> None:
    from verifier.engines.llamacpp.convert import cached_gguf
    from verifier.engines.llamacpp.server import Draft, LlamaServer

    target = cached_gguf(qwen3_target, llama_options.gguf_cache, source=llama_options.source_dir,
                         build=server_binary.build)
    drafter = cached_gguf(draft_lm, llama_options.gguf_cache, source=llama_options.source_dir,
                          build=server_binary.build)
    with LlamaServer(binary=server_binary, model=target.path, draft=Draft(drafter.path, "draft-simple", 4),
                     ctx_size=256, options=llama_options) as server:
        for prompt in ([1, 450, 12, 99], [1, 30, 31, 32, 33]):
            server.complete(prompt, max_new_tokens=24, temperature=0.0, seed=0)
        counters = server.counters()
        key = server._client.headers["Authorization"].removeprefix("Bearer ")
        env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home"), "TEST_LLAMA_KEY": key}
        result = drafters("ingest", "llamacpp", "--url", server.url, "--hardware", "test machine", "--drafter",
                          "tiny-draft", "--api-key-env", "TEST_LLAMA_KEY", "--json", env=env, timeout=120)

    assert result.returncode == 0, result.stderr
    run = json.loads(result.stdout)
    assert (run["engine"], run["drafter"], run["method"]) == ("llama.cpp", "tiny-draft", "draft-simple")
    assert run["overall"]["acceptance"]["tau"] == pytest.approx(1 + counters.accepted / counters.drafts)
    assert run["overall"]["acceptance"]["acceptance_rate"] == pytest.approx(counters.accepted / counters.draft_tokens)
    assert run["provenance"]["counters"]["spec"]["drafts"] == counters.drafts


def test_counter_acceptance_is_the_verifiers_definition_over_drafting_steps() -> None:
    counters = SpecCounters(drafts=10, draft_tokens=30, accepted=18, accepted_per_position=(8, 6, 4))
    as_steps = StepCounts(steps=10, drafting_steps=10, drafted=30, accepted=18, emitted=28,
                          accepted_per_position=(8, 6, 4))
    assert counter_acceptance(counters) == counts_acceptance(as_steps)
    # Without per-position counters the histogram is unknown: it was (10,), "every step accepted nothing", at τ 2.8.
    bare = counter_acceptance(SpecCounters(drafts=10, draft_tokens=30, accepted=18))
    assert bare is not None and bare.tau == pytest.approx(2.8)
    assert bare.histogram == () and bare.marginal == ()
