"""`drafters serve`: the read-only JSON API over a real database and a real uvicorn server on 127.0.0.1.

Its OpenAPI document, versioned bodies, ETag/Last-Modified and 304, paging, the events cursor, the bearer token
(never logged), CORS off unless configured, a database the API cannot write, and a run that reads the same in
the API as in `drafters runs --json`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from drafters.api import app as app_module
from drafters.api.app import ApiConfig, create_app
from drafters.api.server import ApiServer, bind
from registry.domain.json_shapes import SCHEMA_VERSION, versioned
from registry.domain.plan import WorkerCapability
from registry.domain.records import EventSpec
from registry.store import Store
from registry.store.catalog_import import CatalogSummary, load_catalog
from registry.store.read_only import open_read_only
from registry.store.runs import record_run
from registry.store.workers import register_worker
from tests.registry.run_fixtures import full_run, measured
from tests.support.cli import drafters, popen

TARGET, DRAFTER = "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16"
TOKEN = "api-token-0123456789abcdef"


@pytest.fixture
def filled(database_url: str) -> Store:
    store = Store.open(database_url)
    load_catalog(store)
    store.verdicts.recompute_compatibility()
    for n in range(3):
        record_run(store, full_run(target=TARGET, drafter=DRAFTER, prediction=None, run_id=f"run-{n}",
                                   created_at=full_run().created_at.replace(day=1 + n)))
    for n in range(5):
        store.events.record_event(EventSpec(type="test", subject=f"event {n}", dedupe_key=f"api-test-{n}"))
    return store


@pytest.fixture
def api(filled: Store, database_url: str) -> Iterator[httpx.Client]:
    server = ApiServer(create_app(ApiConfig(database_url))).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield client
    finally:
        server.stop()


def test_openapi_document_lists_every_route(api: httpx.Client) -> None:
    document = api.get("/openapi.json")
    assert document.status_code == 200
    paths = document.json()["paths"]
    for path in ("/v1/targets/{target}/drafters", "/v1/drafters/{drafter}", "/v1/lag", "/v1/runs", "/v1/events",
                 "/v1/plan", "/hub/webhook"):
        assert path in paths, path
    assert "get" in paths["/v1/runs"] and {p["name"] for p in paths["/v1/runs"]["get"]["parameters"]} >= {
        "limit", "offset", "target", "drafter", "engine"}


def test_target_drafters_has_verdicts_measurements_and_launch_commands(api: httpx.Client) -> None:
    answer = api.get(f"/v1/targets/{TARGET}/drafters")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert body["schema_version"] == SCHEMA_VERSION and body["target"] == TARGET
    assert body["lag"]["days"] is not None and body["lag"]["open"] is False
    row = next(d for d in body["drafters"] if d["drafter"] == DRAFTER)
    assert row["verdict"] == "exact" and isinstance(row["reasons"], list)
    (measured,) = row["measured"]
    assert (measured["engine"], measured["hardware"], measured["runs"]) == ("pytorch", "cpu (test)", 3)
    assert measured["newest_run_id"] == "run-2" and measured["tau"] > 1
    assert set(row["launch"]) == {"vllm", "sglang", "llamacpp"}
    vllm = row["launch"]["vllm"]
    assert vllm["supported"] and vllm["shell"].startswith(f"vllm serve {TARGET}")
    # The runs are tiny PyTorch stand-ins on a CPU: they set no vLLM length for an H100, the trained block does.
    assert vllm["draft_length"] == 15 and vllm["draft_length_source"].startswith("the trained block 16")
    assert json.loads(vllm["argv"][vllm["argv"].index("--speculative-config") + 1])["num_speculative_tokens"] == 15
    # Ranked: nothing measured on an H100, so the published τ leads, labelled as such with its source.
    assert row["rank"]["position"] == 1 and row["rank"]["basis"] == "published"
    assert row["rank"]["why"].startswith("published, not measured") and "github.com/z-lab/dflash" in row["rank"]["why"]
    assert any(c.startswith("license:") for c in row["rank"]["caveats"]) and "non-thinking only" in " ".join(
        row["rank"]["caveats"])
    assert row["launch"]["sglang"]["argv"][row["launch"]["sglang"]["argv"].index("--speculative-num-draft-tokens") + 1] == "16"
    missing = api.get("/v1/targets/nobody/nothing/drafters")
    assert missing.status_code == 404 and missing.json() == {"schema_version": SCHEMA_VERSION,
                                                            "error": "nobody/nothing is not in the registry"}


def test_the_recommendation_is_measured_on_the_asked_hardware_and_engine_else_published(
        api: httpx.Client, filled: Store) -> None:
    """`/v1/targets/{id}/recommendation`: one drafter, its command, why. A vLLM run on an H100 puts its drafter
    first for vLLM on H100 SXM only; elsewhere the published τ leads; a checkpoint's own MTP head is recommended
    for the target that ships it."""
    eagle3 = "RedHatAI/Qwen3-8B-speculator.eagle3"
    overall = measured(marginal=(0.9, 0.8, 0.6), speedup=2.5)
    record_run(filled, full_run(target=TARGET, drafter=eagle3, engine="vllm", hardware="NVIDIA H100 80GB HBM3",
                                method="eagle3", overall=overall, per_set=(overall,), target_weight_bytes=16_000_000_000,
                                prediction=None, run_id="vllm-h100"))
    body = api.get(f"/v1/targets/{TARGET}/recommendation", params={"engine": "vllm", "gpu": "H100 SXM"}).json()
    assert body["schema_version"] == SCHEMA_VERSION and body["gpu"] == "H100 SXM"
    best = body["recommendation"]
    assert best["drafter"] == eagle3 and best["basis"] == "measured" and best["score"] == 2.5
    assert "vllm on NVIDIA H100" in best["why"] and best["launch"]["supported"]
    assert best["launch"]["shell"].startswith(f"vllm serve {TARGET}") and body["why"] == best["why"]
    assert [c["drafter"] for c in body["considered"]][0] == eagle3 and len(body["considered"]) > 2
    for params in ({"engine": "sglang", "gpu": "H100 SXM"}, {"engine": "vllm", "gpu": "A100 80GB"}):
        other = api.get(f"/v1/targets/{TARGET}/recommendation", params=params).json()["recommendation"]
        assert other["drafter"] == DRAFTER and other["basis"] == "published", params
    built_in = api.get("/v1/targets/deepseek-ai/DeepSeek-V3/recommendation", params={"engine": "vllm"}).json()
    assert built_in["recommendation"]["built_in"] and built_in["recommendation"]["method"] == "mtp"
    assert api.get(f"/v1/targets/{TARGET}/recommendation", params={"engine": "tensorrt"}).status_code == 422
    assert api.get("/v1/targets/nobody/nothing/recommendation", params={"engine": "vllm"}).status_code == 404


def test_etag_and_last_modified_answer_304_until_the_data_changes(api: httpx.Client, filled: Store) -> None:
    first = api.get("/v1/lag?limit=5")
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    assert api.get("/v1/lag?limit=5", headers={"If-None-Match": etag}).status_code == 304
    assert api.get("/v1/lag?limit=5", headers={"If-Modified-Since": modified}).status_code == 304
    assert api.get("/v1/lag?limit=5", headers={"If-None-Match": '"other"'}).status_code == 200
    time.sleep(1.1)  # HTTP dates count whole seconds (ETag is the exact validator)
    filled.events.record_event(EventSpec(type="test", subject="a change", dedupe_key="api-test-change"))
    # The lag rows did not change, so their ETag still matches; the date says the registry did change.
    assert api.get("/v1/lag?limit=5", headers={"If-None-Match": etag}).status_code == 304
    again = api.get("/v1/lag?limit=5", headers={"If-Modified-Since": modified})
    assert again.status_code == 200  # newer than what the caller holds
    assert api.get("/v1/events?after=0&limit=100", headers={"If-None-Match": etag}).status_code == 200


def test_paging_and_the_events_cursor(api: httpx.Client) -> None:
    page = api.get("/v1/runs?limit=2").json()
    assert [r["run_id"] for r in page["runs"]] == ["run-2", "run-1"] and page["next_offset"] == 2
    rest = api.get("/v1/runs?limit=2&offset=2").json()
    assert [r["run_id"] for r in rest["runs"]] == ["run-0"] and rest["next_offset"] is None
    lag = api.get("/v1/lag?limit=3").json()
    assert len(lag["lag"]) == 3 and lag["total"] > 3 and lag["next_offset"] == 3
    seen: list[str] = []
    after = 0
    while True:
        events = api.get(f"/v1/events?after={after}&limit=2").json()
        if not events["events"]:
            break
        seen += [e["subject"] for e in events["events"]]
        after = events["next_after"]
    assert [s for s in seen if s.startswith("event ")] == [f"event {n}" for n in range(5)]
    bad = api.get("/v1/runs?limit=0")
    assert bad.status_code == 422 and bad.json()["schema_version"] == SCHEMA_VERSION


def test_drafter_and_plan(api: httpx.Client, filled: Store) -> None:
    drafter = api.get(f"/v1/drafters/{DRAFTER}").json()
    assert drafter["schema_version"] == SCHEMA_VERSION and drafter["block_size"] == 16
    assert any(v["target"] == TARGET and v["verdict"] == "exact" for v in drafter["verdicts"])
    idle = api.get("/v1/plan?limit=500").json()
    assert (idle["workers"], idle["pairs"], idle["worker"]) == (0, [], None) and "no live worker" in idle["reason"]

    # The plan the dashboard shows: every exact pair as the live worker with the most memory plans it.
    register_worker(filled, WorkerCapability(worker_id="w-small", device="cpu", memory_bytes=2 * 2**30,
                                             engines={"pytorch": "test"}, disk_budget_bytes=10 * 2**30), host="h")
    plan = api.get("/v1/plan?limit=500").json()
    assert plan["workers"] == 1 and plan["worker"]["worker_id"] == "w-small" and plan["reason"] is None
    pairs = {(p["target"], p["drafter"]): p for p in plan["pairs"]}
    assert plan["total"] == len(pairs) and sum(plan["counts"].values()) == plan["total"]
    pair = pairs[(TARGET, "deepseek-ai/dflash_qwen3_8b_block7")]
    assert pair["state"] and pair["reason"]  # an 8B target on a 2 GB worker: never "queued" without a reason
    assert pair["state"] != "queued"


def test_a_run_is_the_same_json_in_the_api_and_the_cli(api: httpx.Client, database_url: str) -> None:
    from_api = api.get("/v1/runs?limit=1").json()["runs"][0]
    done = drafters("runs", "--json", env={"DRAFTERS_DATABASE_URL": database_url}, timeout=120)
    assert done.returncode == 0, done.stderr
    from_cli = json.loads(done.stdout)
    assert from_cli["schema_version"] == SCHEMA_VERSION
    cli_run = from_cli["items"][0]
    assert set(cli_run) == set(from_api)
    # The measurement is byte for byte the same encoding; only the prediction differs by design: `drafters runs`
    # computes one on read when none is stored, the API shows stored predictions only (docs/api.md).
    unshared = {"prediction", "prediction_source"}
    assert {k: v for k, v in cli_run.items() if k not in unshared} == {
        k: v for k, v in from_api.items() if k not in unshared}
    assert from_api["prediction"] is None and from_api["prediction_source"] is None


def test_the_api_cannot_write(filled: Store, database_url: str) -> None:
    engine = open_read_only(database_url)
    with engine.connect() as connection, pytest.raises(Exception, match="(?i)read.only|readonly"):
        connection.execute(text("DELETE FROM event"))
        connection.commit()
    assert len(filled.events.events()) == 5


def test_bearer_token_and_cors(filled: Store, database_url: str) -> None:
    server = ApiServer(create_app(ApiConfig(database_url, token=TOKEN))).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            refused = client.get("/v1/lag")
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert client.get("/v1/lag", headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert client.get("/v1/lag", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
            assert client.get("/health").status_code == 200
            # CORS is off unless origins are configured: no Access-Control header for a browser's request.
            cross = client.get("/v1/lag", headers={"Authorization": f"Bearer {TOKEN}",
                                                   "Origin": "https://elsewhere.example"})
            assert "access-control-allow-origin" not in cross.headers
    finally:
        server.stop()
    server = ApiServer(create_app(ApiConfig(database_url, cors_origins=["https://dash.example"]))).start()
    try:
        allowed = httpx.get(f"{server.url}/v1/lag", headers={"Origin": "https://dash.example"})
        assert allowed.headers["access-control-allow-origin"] == "https://dash.example"
    finally:
        server.stop()


def test_serve_command_never_logs_the_token(filled: Store, database_url: str, tmp_path: Path) -> None:
    env = {"DRAFTERS_DATABASE_URL": database_url, "DRAFTERS_API_TOKEN": TOKEN, "DRAFTERS_LOG_LEVEL": "DEBUG",
           "DRAFTERS_HOME": str(tmp_path / "home")}
    process = popen(["serve", "--port", "0"], env=env, drop=["DRAFTERS_HUB_WEBHOOK_SECRET"])
    try:
        assert process.stdout is not None
        seen = []
        while not (line := process.stdout.readline()).startswith("API listening on"):
            seen.append(line)  # DEBUG logging of the start-up
            assert line and len(seen) < 500, "".join(seen)
        url = line.strip().rsplit(" ", 1)[-1].rstrip("/")
        assert httpx.get(f"{url}/v1/lag", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert httpx.get(f"{url}/v1/lag", headers={"Authorization": "Bearer nope"}).status_code == 401
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert TOKEN not in output


def test_every_json_body_is_versioned_one_way() -> None:
    assert list(versioned({"a": 1, "schema_version": 0})) == ["schema_version", "a"]
    assert versioned({"a": 1})["schema_version"] == SCHEMA_VERSION
    assert versioned([1, 2]) == {"schema_version": SCHEMA_VERSION, "items": [1, 2]}
    summary = versioned(CatalogSummary(**{f: 0 for f in CatalogSummary.__dataclass_fields__}))
    assert summary["schema_version"] == SCHEMA_VERSION and "items" not in summary


def test_cli_json_outputs_carry_the_version(database_url: str) -> None:
    env = {"DRAFTERS_DATABASE_URL": database_url}
    for args in (("catalog", "load", "--json"), ("lag", "--json"), ("lag", "--by", "family", "--json"),
                 ("alerts", "--json"), ("runs", "--json"), ("find", TARGET, "--json"), ("status", "--json")):
        done = drafters(*args, env=env, timeout=120)
        assert done.returncode == 0, (args, done.stderr)
        assert json.loads(done.stdout)["schema_version"] == SCHEMA_VERSION, args


# ---- under load: bodies answered from memory, invalidated by a data change; TCP_NODELAY ----------------------------


def _reader(server: ApiServer) -> Any:
    return server.app.state.reader


def test_a_cached_body_is_served_from_memory_byte_for_byte(filled: Store, database_url: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing changes here: the version is not due again mid-test however slow the machine is.
    monkeypatch.setattr(app_module, "DATA_VERSION_TTL_S", 600.0)
    server = ApiServer(create_app(ApiConfig(database_url))).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            path = f"/v1/targets/{TARGET}/drafters?gpu=H100%20SXM"
            first = client.get(path)
            built = _reader(server).built
            second = client.get(path)  # answered by the ASGI layer in front of FastAPI: nothing built
            assert _reader(server).built == built and _reader(server).served_from_memory == 1
            assert second.content == first.content
            assert second.headers.raw == first.headers.raw  # same headers, same order, same bytes
            not_modified = [client.get(path, headers={"If-None-Match": first.headers["etag"]}) for _ in range(2)]
            assert [r.status_code for r in not_modified] == [304, 304] and _reader(server).built == built
            assert _reader(server).served_from_memory == 3
            assert not_modified[0].headers.raw == not_modified[1].headers.raw
            assert client.get(f"/v1/targets/{TARGET}/drafters?gpu=A100").content != first.content  # own key
    finally:
        server.stop()


def test_a_new_run_shows_up_in_a_cached_answer(filled: Store, database_url: str) -> None:
    server = ApiServer(create_app(ApiConfig(database_url))).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            path = f"/v1/targets/{TARGET}/drafters"

            def runs_measured() -> int:
                body = client.get(path).json()
                return sum(m["runs"] for d in body["drafters"] if d["drafter"] == DRAFTER for m in d["measured"])

            before = runs_measured()
            assert runs_measured() == before  # from the cache
            record_run(filled, full_run(target=TARGET, drafter=DRAFTER, prediction=None, run_id="run-new",
                                        created_at=full_run().created_at.replace(day=20)))
            deadline = time.monotonic() + 10
            while (now := runs_measured()) == before and time.monotonic() < deadline:
                time.sleep(0.2)  # the data version is read at most once a second
            assert now == before + 1
    finally:
        server.stop()


def test_a_cached_body_still_needs_the_token_and_keeps_cors(filled: Store, database_url: str) -> None:
    server = ApiServer(create_app(ApiConfig(database_url, token=TOKEN, cors_origins=["https://dash.example"]))).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            good = {"Authorization": f"Bearer {TOKEN}", "Origin": "https://dash.example"}
            assert client.get("/v1/lag", headers=good).status_code == 200
            built = _reader(server).built
            again = client.get("/v1/lag", headers=good)
            assert again.status_code == 200 and _reader(server).built == built  # from the cache
            assert again.headers["access-control-allow-origin"] == "https://dash.example"
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
                refused = client.get("/v1/lag", headers=headers)
                assert refused.status_code == 401 and "lag" not in refused.json()
    finally:
        server.stop()


def test_accepted_connections_do_not_wait_for_delayed_acks(filled: Store, database_url: str) -> None:
    """asyncio turns Nagle's algorithm off only on sockets that say they are TCP; without it a two-part answer
    (headers, then body) waited 40 ms for the client's delayed ACK."""
    listener = bind("127.0.0.1", 0)

    async def accepted_nodelay() -> int:
        found: list[int] = []

        async def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            found.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=listener)
        _, writer = await asyncio.open_connection("127.0.0.1", listener.getsockname()[1])
        while not found:
            await asyncio.sleep(0.01)
        writer.close()
        server.close()
        return found[0]

    try:
        assert asyncio.run(accepted_nodelay()) != 0
    finally:
        listener.close()


def test_one_request_reads_the_data_version_while_the_others_answer(filled: Store, database_url: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The data version query scans the runs; forty threads running it at once was the warm path's tail."""
    reads: list[float] = []
    real = app_module.data_version

    def slow_data_version(engine: Any) -> Any:
        reads.append(time.monotonic())
        time.sleep(0.5)  # a long scan: every request that arrives meanwhile finds the read under way
        return real(engine)

    monkeypatch.setattr(app_module, "data_version", slow_data_version)
    # Long enough that twenty requests on a loaded machine finish before the version is due once more.
    monkeypatch.setattr(app_module, "DATA_VERSION_TTL_S", 4.0)
    server = ApiServer(create_app(ApiConfig(database_url))).start()
    try:
        path = f"{server.url}/v1/targets/{TARGET}/drafters"
        assert httpx.get(path, timeout=30).status_code == 200 and len(reads) == 1
        time.sleep(4.1)  # the version is now due to be read again
        before = _reader(server).served_from_memory
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(lambda _: httpx.get(path, timeout=30).status_code, range(20)))
        assert answers == [200] * 20
        assert len(reads) == 2  # one read for twenty requests
        assert _reader(server).served_from_memory - before == 20  # none of them waited for FastAPI's thread pool
        time.sleep(4.1)
        with concurrent.futures.ThreadPoolExecutor(20) as pool:  # twenty bodies not built yet: the app's path
            answers = list(pool.map(lambda n: httpx.get(f"{server.url}/v1/runs?limit={n + 1}", timeout=30).status_code,
                                    range(20)))
        assert answers == [200] * 20
        assert len(reads) == 3  # one read for twenty requests the app answered
    finally:
        server.stop()
