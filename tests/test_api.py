"""`drafters serve`: the read-only JSON API over a real database and a real uvicorn server on 127.0.0.1.

Its OpenAPI document (every served body validated against its schema), versioned bodies, one error shape
(problem+json) for every error, ETag (weak comparison) / Last-Modified and 304, HEAD, keyset paging with Link
headers, the events cursor (and events that commit late on PostgreSQL), the bearer token (never logged), CORS
off unless configured, a database the API cannot write, and every route reading the same as the CLI's `--json`.
The probes each test guards (issues 29.5, 31.3, 32.2, 32.7) are named in its docstring."""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from sqlalchemy import text

from drafters.api import app as app_module
from drafters.api import reader as reader_module
from registry.store import event_horizon as events_module
from drafters.api.app import ApiConfig, create_app
from drafters.api.server import ApiServer, bind
from registry.domain.compat import VERDICT_ORDER
from registry.domain.json_shapes import SCHEMA_VERSION, versioned
from registry.domain.plan import WorkerCapability
from registry.domain.records import EventSpec
from registry.store import Store
from registry.store.catalog_import import CatalogSummary
from registry.store.data_version import DataVersion
from registry.store.read_only import open_read_only
from registry.store.read_memo import ReadMemo
from tests.registry.run_fixtures import full_run, measured
from tests.support.cli import drafters, popen

TARGET, DRAFTER = "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16"
TOKEN = "api-token-0123456789abcdef"


@pytest.fixture
def filled(database_url: str) -> Store:
    store = Store.open(database_url)
    store.catalog.load_catalog()
    store.verdicts.recompute_compatibility()
    for n in range(3):
        store.runs.record_run(full_run(target=TARGET, drafter=DRAFTER, prediction=None, run_id=f"run-{n}",
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
        "limit", "cursor", "target", "drafter", "engine"}


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
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
    assert missing.json() == {"schema_version": SCHEMA_VERSION, "type": "about:blank", "title": "Not Found",
                              "status": 404, "detail": "nobody/nothing is not in the registry"}


def test_the_recommendation_is_measured_on_the_asked_hardware_and_engine_else_published(
        api: httpx.Client, filled: Store) -> None:
    """`/v1/targets/{id}/recommendation`: one drafter, its command, why. A vLLM run on an H100 puts its drafter
    first for vLLM on H100 SXM only; elsewhere the published τ leads; a checkpoint's own MTP head is recommended
    for the target that ships it."""
    eagle3 = "RedHatAI/Qwen3-8B-speculator.eagle3"
    overall = measured(marginal=(0.9, 0.8, 0.6), speedup=2.5)
    filled.runs.record_run(full_run(target=TARGET, drafter=eagle3, engine="vllm", hardware="NVIDIA H100 80GB HBM3",
                                    method="eagle3", overall=overall, per_set=(overall,),
                                    target_weight_bytes=16_000_000_000, prediction=None, run_id="vllm-h100"))
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
    """29.5: `If-None-Match: W/"…"` matched nothing (RFC 9110 weak comparison); HEAD was 405."""
    first = api.get("/v1/lag?limit=5")
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    assert api.get("/v1/lag?limit=5", headers={"If-None-Match": etag}).status_code == 304
    assert api.get("/v1/lag?limit=5", headers={"If-None-Match": f'"other", W/{etag}'}).status_code == 304
    assert api.get("/v1/lag?limit=5", headers={"If-None-Match": "*"}).status_code == 304
    assert api.get("/v1/lag?limit=5", headers={"If-None-Match": '"other"'}).status_code == 200
    head = api.head("/v1/lag?limit=5")
    assert head.status_code == 200 and head.content == b"" and head.headers["etag"] == etag
    assert head.headers["content-length"] == str(len(first.content))
    # An echoed Last-Modified proves nothing within its second (see the late-run test); a later date does.
    later = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=5), usegmt=True)
    assert api.get("/v1/lag?limit=5", headers={"If-Modified-Since": later}).status_code == 304
    assert api.get("/v1/lag?limit=5", headers={"If-Modified-Since": modified}).status_code == 200
    filled.events.record_event(EventSpec(type="test", subject="a change", dedupe_key="api-test-change"))
    time.sleep(1.1)  # the data version is read at most once a second
    # The lag rows did not change, so their ETag still matches.
    assert api.get("/v1/lag?limit=5", headers={"If-None-Match": etag}).status_code == 304
    assert api.get("/v1/events?after=0&limit=100", headers={"If-None-Match": etag}).status_code == 200


def test_a_late_recorded_run_is_never_a_false_not_modified(api: httpx.Client, filled: Store) -> None:
    """29.5: Last-Modified was the newest measurement time, so a run measured long ago and recorded now gave a
    caller holding the previous date a 304 for a body that had changed."""
    path = f"/v1/targets/{TARGET}/drafters"
    first = api.get(path)
    held = first.headers["last-modified"]
    filled.runs.record_run(full_run(target=TARGET, drafter=DRAFTER, prediction=None, run_id="run-late",
                                    created_at=full_run().created_at.replace(year=2020)))
    deadline = time.monotonic() + 10
    while (again := api.get(path, headers={"If-Modified-Since": held})).status_code == 304 or (
            again.content == first.content and time.monotonic() < deadline):
        assert again.status_code != 304, "a false 304: the body changed after the date the caller holds"
        time.sleep(0.2)
    assert again.status_code == 200 and again.content != first.content
    assert email.utils.parsedate_to_datetime(again.headers["last-modified"]) >= email.utils.parsedate_to_datetime(held)


def test_paging_and_the_events_cursor(api: httpx.Client, filled: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """29.5: offset pages repeated a row when a run came in between two pages; `/v1/events?type=` was ignored."""
    monkeypatch.setattr(events_module, "SETTLE_S", 0.0)
    first = api.get("/v1/runs?limit=2")
    page = first.json()
    assert [r["run_id"] for r in page["runs"]] == ["run-2", "run-1"] and page["next_cursor"]
    link = first.headers["link"]
    assert link == f'</v1/runs?limit=2&cursor={page["next_cursor"]}>; rel="next"'
    # A newer run comes in between the two pages: the next page neither repeats run-1 nor misses run-0.
    filled.runs.record_run(full_run(target=TARGET, drafter=DRAFTER, prediction=None, run_id="run-9",
                                    created_at=full_run().created_at.replace(day=28)))
    rest = api.get(link.split(">")[0].lstrip("<"))
    assert [r["run_id"] for r in rest.json()["runs"]] == ["run-0"] and rest.json()["next_cursor"] is None
    assert "link" not in rest.headers
    lag = api.get("/v1/lag?limit=3").json()
    assert len(lag["lag"]) == 3 and lag["total"] > 3 and lag["next_cursor"]
    walked, cursor = [], None
    while True:
        got = api.get("/v1/lag", params={"limit": 7, **({"cursor": cursor} if cursor else {})}).json()
        walked += [row["target_repo_id"] for row in got["lag"]]
        if (cursor := got["next_cursor"]) is None:
            break
    assert len(walked) == len(set(walked)) == lag["total"]
    seen: list[str] = []
    after = 0
    deadline = time.monotonic() + 60
    while not api.get("/v1/events?limit=1").json()["events"]:  # PostgreSQL: until every writer's ids settled
        assert time.monotonic() < deadline
        time.sleep(0.2)
    while True:
        events = api.get(f"/v1/events?after={after}&limit=2").json()
        if not events["events"]:
            break
        seen += [e["subject"] for e in events["events"]]
        after = events["next_after"]
    assert [s for s in seen if s.startswith("event ")] == [f"event {n}" for n in range(5)]
    filled.events.record_event(EventSpec(type="other", subject="not a test event", dedupe_key="api-other"))
    typed = api.get("/v1/events?type=test&limit=100").json()["events"]
    assert typed and {e["type"] for e in typed} == {"test"}
    bad = api.get("/v1/runs?limit=0")
    assert bad.status_code == 422 and bad.json()["schema_version"] == SCHEMA_VERSION
    assert api.get("/v1/runs?cursor=not-a-cursor").status_code == 422


def test_drafter_and_plan(api: httpx.Client, filled: Store) -> None:
    drafter = api.get(f"/v1/drafters/{DRAFTER}").json()
    assert drafter["schema_version"] == SCHEMA_VERSION and drafter["block_size"] == 16
    assert any(v["target"] == TARGET and v["verdict"] == "exact" for v in drafter["verdicts"])
    idle = api.get("/v1/plan?limit=500").json()
    assert (idle["workers"], idle["pairs"], idle["worker"]) == (0, [], None) and "no live worker" in idle["reason"]

    # The plan the dashboard shows: every exact pair as the live worker with the most memory plans it.
    filled.workers.register_worker(WorkerCapability(worker_id="w-small", device="cpu", memory_bytes=2 * 2**30,
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
    monkeypatch.setattr(reader_module, "DATA_VERSION_TTL_S", 600.0)
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
            filled.runs.record_run(full_run(target=TARGET, drafter=DRAFTER, prediction=None, run_id="run-new",
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
    real = DataVersion.parts

    def slow_data_version(version: DataVersion) -> Any:
        reads.append(time.monotonic())
        time.sleep(0.5)  # a long scan: every request that arrives meanwhile finds the read under way
        return real(version)

    monkeypatch.setattr(DataVersion, "parts", slow_data_version)
    # Long enough that twenty requests on a loaded machine finish before the version is due once more.
    monkeypatch.setattr(reader_module, "DATA_VERSION_TTL_S", 4.0)
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


# ---- one error shape, the OpenAPI document as served, parameters -------------------------------------------------


def _openapi_validator(document: dict[str, Any], path: str, status: int, media: str = "application/json") -> Any:
    schema = document["paths"][path]["get"]["responses"][str(status)]["content"][media]["schema"]
    return jsonschema.Draft202012Validator({**schema, "components": document["components"]})


def _problem_ok(answer: httpx.Response, status: int, document: dict[str, Any]) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    body = answer.json()
    jsonschema.Draft202012Validator({"$ref": "#/components/schemas/Problem",
                                     "components": document["components"]}).validate(body)
    assert body["schema_version"] == SCHEMA_VERSION and body["status"] == status
    return body


def test_every_error_is_one_problem_shape(api: httpx.Client) -> None:
    """29.5/32.7: `?gpu=RTX 9999` was a plain-text 500; unknown routes and wrong methods answered `{"detail": …}`
    without schema_version; `GET /` (the URL `drafters up` prints) was 405; `/v1/events?type=` was silently
    ignored; `offset`/`after` ≥ 2^63 were 500s with a traceback (OverflowError)."""
    document = api.get("/openapi.json").json()
    index = api.get("/")
    assert index.status_code == 200 and index.json()["schema_version"] == SCHEMA_VERSION
    hrefs = {link["href"] for link in index.json()["links"]}
    assert {"/v1/lag", "/v1/targets/{target}/drafters", "/openapi.json"} <= hrefs
    assert api.head("/").status_code == 200 and api.head("/health").status_code == 200
    live = api.head("/v1/plan")  # built per request, through the app
    assert live.status_code == 200 and live.content == b"" and int(live.headers["content-length"]) > 0
    assert "no such route" in _problem_ok(api.get("/v2/nothing"), 404, document)["detail"]
    _problem_ok(api.put("/v1/lag"), 405, document)
    _problem_ok(api.delete("/"), 405, document)
    gpu = _problem_ok(api.get(f"/v1/targets/{TARGET}/drafters", params={"gpu": "RTX 9999"}), 422, document)
    assert "RTX 9999" in gpu["detail"] and "H100" in gpu["detail"] and gpu["errors"][0]["parameter"] == "gpu"
    for path, parameter in ((f"/v1/events?after={2**63}", "after"), (f"/v1/events?after={2**64}", "after"),
                            ("/v1/lag?offset=5", "offset"), (f"/v1/runs?offset={2**63}", "offset"),
                            ("/v1/events?typo=test", "typo"), ("/v1/lag?limit=5&limit=6", "limit"),
                            ("/v1/runs?limit=abc", "limit"),
                            (f"/v1/targets/{TARGET}/drafters?verdict=great", "verdict"),
                            (f"/v1/targets/{TARGET}/drafters?engine=tgi", "engine"), ("/health?x=1", "x")):
        body = _problem_ok(api.get(path), 422, document)
        assert parameter in {e["parameter"] for e in body["errors"]}, (path, body)
    # The documented 422 is the one sent.
    assert document["paths"]["/v1/lag"]["get"]["responses"]["422"]["content"] == {
        "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert api.get("/docs").status_code == 404  # no page that loads its scripts from a CDN


def test_served_bodies_match_the_openapi_schemas(api: httpx.Client, filled: Store) -> None:
    """29.5: every 200 schema was `{}` (routes return Response), so nothing checked a body against its contract."""
    filled.workers.register_worker(WorkerCapability(worker_id="w", device="cpu", memory_bytes=2 * 2**30,
                                                    engines={"pytorch": "test"}, disk_budget_bytes=10 * 2**30), host="h")
    document = api.get("/openapi.json").json()
    head_sha = api.get(f"/v1/targets/{TARGET}/drafters").json()["head_sha"]
    served = {
        "/": "/", "/health": "/health", "/v1/targets": "/v1/targets?q=qwen3&limit=5",
        "/v1/targets/{target}/drafters": f"/v1/targets/{TARGET}/drafters",
        "/v1/targets/{target}/recommendation": f"/v1/targets/{TARGET}/recommendation?engine=vllm",
        "/v1/drafters": "/v1/drafters?limit=5", "/v1/drafters/{drafter}": f"/v1/drafters/{DRAFTER}",
        "/v1/revisions/{sha}": f"/v1/revisions/{head_sha}", "/v1/lag": "/v1/lag", "/v1/upgrades": "/v1/upgrades",
        "/v1/runs": "/v1/runs", "/v1/events": "/v1/events", "/v1/plan": "/v1/plan?limit=1000",
    }
    documented = {p for p, ops in document["paths"].items() if "get" in ops}
    assert documented == set(served)  # a new route gets a case here
    for template, path in served.items():
        answer = api.get(path)
        assert answer.status_code == 200, (path, answer.text)
        body = answer.json()
        _openapi_validator(document, template, 200).validate(body)
        assert body["schema_version"] == SCHEMA_VERSION
    # A drifted body fails: the check can fail.
    drifted = {**api.get("/v1/lag").json(), "surprise": 1}
    with pytest.raises(jsonschema.ValidationError):
        _openapi_validator(document, "/v1/lag", 200).validate(drifted)
    assert "securitySchemes" not in document["components"]  # an open server: no token to document


def test_the_token_is_a_documented_security_scheme(filled: Store, database_url: str) -> None:
    """29.5: the OpenAPI document had no security scheme for the bearer token."""
    server = ApiServer(create_app(ApiConfig(database_url, token=TOKEN))).start()
    try:
        document = httpx.get(f"{server.url}/openapi.json").json()
        assert document["components"]["securitySchemes"]["HTTPBearer"] == {
            "type": "http", "scheme": "bearer", "description": "DRAFTERS_API_TOKEN, as `Authorization: Bearer …`"}
        assert document["paths"]["/v1/lag"]["get"]["security"] == [{"HTTPBearer": []}]
        refused = httpx.get(f"{server.url}/v1/lag")
        _problem_ok(refused, 401, document)
    finally:
        server.stop()


def test_filters_lookups_listings_and_the_data_version(api: httpx.Client, filled: Store) -> None:
    """29.5: what launchers asked for: `engine=` and `verdict=` filters, lookup by revision sha, listing and
    search of targets and drafters, an upgrades route, a data-version header so pollers can skip."""
    full = api.get(f"/v1/targets/{TARGET}/drafters")
    version = full.headers["x-data-version"]
    vllm = api.get(f"/v1/targets/{TARGET}/drafters?engine=vllm").json()
    launched = [d for d in vllm["drafters"] if d["launch"] is not None]
    assert launched and all(set(d["launch"]) == {"vllm"} for d in launched)
    parts = {v: api.get(f"/v1/targets/{TARGET}/drafters?verdict={v}").json()["drafters"] for v in VERDICT_ORDER}
    assert parts["exact"] and all({d["verdict"] for d in rows} <= {v} for v, rows in parts.items())
    assert sorted(d["drafter"] for rows in parts.values() for d in rows) == sorted(
        d["drafter"] for d in full.json()["drafters"])
    assert TARGET in api.get(f"/v1/revisions/{full.json()['head_sha']}").json()["targets"]
    assert api.get("/v1/revisions/0000000deadbeef").status_code == 404
    assert TARGET in [t["target"] for t in api.get("/v1/targets?q=QWEN3-8b").json()["targets"]]
    found = api.get("/v1/drafters?q=dflash&method=dflash").json()["drafters"]
    assert DRAFTER in [d["drafter"] for d in found] and {d["method"] for d in found} == {"dflash"}
    assert isinstance(api.get("/v1/upgrades").json()["upgrades"], list)
    assert api.get("/v1/lag").headers["x-data-version"] == version  # nothing changed
    filled.events.record_event(EventSpec(type="test", subject="moves the version", dedupe_key="api-version"))
    deadline = time.monotonic() + 10
    while api.get("/v1/lag").headers["x-data-version"] == version and time.monotonic() < deadline:
        time.sleep(0.2)
    assert api.get("/v1/lag").headers["x-data-version"] != version


def test_every_route_agrees_with_the_cli_json(api: httpx.Client, database_url: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """29.5: `/v1/lag` said 0 days for a target whose `/v1/targets/{id}/drafters` said 17, from two computations;
    now one (`reports.lag_row`), and each route reads as its CLI `--json` does."""
    monkeypatch.setattr(events_module, "SETTLE_S", 0.0)
    env = {"DRAFTERS_DATABASE_URL": database_url}

    def cli(*args: str) -> Any:
        done = drafters(*args, "--json", env=env, timeout=120)
        assert done.returncode == 0, (args, done.stderr)
        return json.loads(done.stdout)

    lag_rows, cursor = [], None
    while True:
        page = api.get("/v1/lag", params={"limit": 1000, **({"cursor": cursor} if cursor else {})}).json()
        lag_rows += page["lag"]
        if (cursor := page["next_cursor"]) is None:
            break
    assert lag_rows == cli("lag")["items"]
    assert api.get("/v1/upgrades").json()["upgrades"] == cli("lag", "--upgrades")["items"]
    for row in lag_rows:
        body = api.get(f"/v1/targets/{row['target_repo_id']}/drafters").json()
        assert (body["lag"]["days"], body["lag"]["open"], body["lag"]["first_drafter"]) == (
            row["lag_days"], row["open"], row["first_drafter_repo_id"]), row["target_repo_id"]
    found = cli("find", TARGET)
    served = api.get(f"/v1/targets/{TARGET}/drafters").json()["drafters"]
    assert sorted((d["drafter"], d["verdict"], d["reasons"]) for d in served) == sorted(
        (d["drafter_repo_id"], d["verdict"], d["reasons"]) for d in found["drafters"])
    alerts = cli("alerts")["items"]
    deadline = time.monotonic() + 60
    while len(events := api.get("/v1/events?limit=1000").json()["events"]) < len(alerts):
        assert time.monotonic() < deadline, "the events never settled"  # PostgreSQL: see event_horizon.py
        time.sleep(0.2)
    assert [(e["id"], e["type"], e["subject"]) for e in events] == [(e["id"], e["type"], e["subject"]) for e in alerts]
    assert [r["run_id"] for r in api.get("/v1/runs").json()["runs"]] == [r["run_id"] for r in cli("runs")["items"]]


# ---- the cache: bytes, keys, per-target invalidation ---------------------------------------------------------------


def test_the_cache_is_capped_in_bytes_and_keyed_on_what_routes_read(filled: Store, database_url: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """32.2: the cache was capped at 4,096 entries, not bytes, and any junk query parameter made a new entry
    (RSS 124 → 395 MB over 4,000 requests with a 60 KB parameter)."""
    monkeypatch.setattr(reader_module, "DATA_VERSION_TTL_S", 600.0)
    cap = 64 * 1024
    server = ApiServer(create_app(ApiConfig(database_url, cache_bytes=cap))).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            cache = _reader(server).cache
            assert client.get("/v1/lag?limit=3&cursor=").status_code == 422  # not a cursor this API made
            assert client.get("/v1/lag?limit=3").status_code == 200
            entries = len(cache)
            junk = "x" * 60_000
            for n in range(20):
                assert client.get(f"/v1/lag?limit=3&junk{n}={junk}").status_code == 422
            assert len(cache) == entries  # refused before anything was cached
            before = _reader(server).served_from_memory
            assert client.get("/v1/runs?status=ok&limit=2").status_code == 200
            assert client.get("/v1/runs?limit=2&status=ok").status_code == 200  # the same parameters, reordered
            assert _reader(server).served_from_memory == before + 1
            for limit in range(1, 60):
                assert client.get(f"/v1/lag?limit={limit}").status_code == 200
            assert 0 < cache.bytes <= cap and len(cache) < 59
    finally:
        server.stop()


def test_a_new_run_drops_only_the_bodies_it_changes(filled: Store, database_url: str) -> None:
    """31.3: any write anywhere cleared the whole body cache (drafters/api/app.py ~120-122), so with a worker
    recording runs almost every answer was cold. A run drops its target's and drafter's bodies; an event (a
    catalog change) drops all."""
    other = next(v.checkpoint_repo_id for v in filled.reads.verdicts() if v.checkpoint_repo_id != TARGET)
    server = ApiServer(create_app(ApiConfig(database_url))).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            mine, theirs = f"/v1/targets/{TARGET}/drafters", f"/v1/targets/{other}/drafters"
            first_mine, first_theirs = client.get(mine), client.get(theirs)
            built = _reader(server).built
            filled.runs.record_run(full_run(target=TARGET, drafter=DRAFTER, prediction=None, run_id="run-new",
                                            created_at=full_run().created_at.replace(day=20)))
            deadline = time.monotonic() + 10
            while (again_mine := client.get(mine)).content == first_mine.content:
                assert time.monotonic() < deadline
                time.sleep(0.1)  # the data version is read at most once a second
            assert _reader(server).built == built + 1  # its one successor (by the refresher or a request)
            again_theirs = client.get(theirs)
            assert _reader(server).built == built + 1  # kept: answered from memory
            assert again_theirs.content == first_theirs.content
            assert again_theirs.headers["last-modified"] == first_theirs.headers["last-modified"]
            filled.events.record_event(EventSpec(type="test", subject="a catalog change", dedupe_key="api-drop-all"))
            time.sleep(1.2)
            client.get("/health")
            built = _reader(server).built
            client.get(theirs)
            assert _reader(server).built == built + 1  # rebuilt: an event may be any checkpoint's change
    finally:
        server.stop()


def test_runs_committed_out_of_id_order_drop_every_run_body(filled: Store, database_url: str) -> None:
    """31.3: per-target invalidation reads the runs above the last newest id; a run with a smaller id that commits
    later (PostgreSQL) is not among them, and the count says so: every body that shows runs goes."""
    server = ApiServer(create_app(ApiConfig(database_url))).start()
    try:
        reader = _reader(server)
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert client.get(f"/v1/targets/{TARGET}/drafters").status_code == 200
            cache = reader.cache
            dropped: list[object] = []
            real = cache.invalidate_runs
            cache.invalidate_runs = lambda pairs: dropped.append(pairs) or real(pairs)  # type: ignore[method-assign]
            # What a late commit looks like from here: the count grew by more than the rows above the newest id.
            known = reader._version
            assert known is not None
            reader._version = (known[0] - 10, replace(known[1], runs=(known[1].runs_count - 1, known[1].runs_max_id)),
                               known[2])
            reader.data_version()
            assert dropped == [None] and len([k for k in cache._entries if "targets" in k[0]]) == 0
    finally:
        server.stop()


def test_events_that_commit_late_are_not_skipped_by_the_cursor(filled: Store, database_url: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """29.5: on PostgreSQL an event with id 7 can commit after id 8; a poller handed 8 asked `after=8` and never
    saw 7. Two concurrent writers: the later id is held back until the earlier one's transaction ends."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite commits ids in order: one writer holds the database until it commits")
    monkeypatch.setattr(events_module, "SETTLE_S", 0.0)
    server = ApiServer(create_app(ApiConfig(database_url))).start()
    slow = Store.open(database_url)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            # Another transaction anywhere on the server (other databases too) holds events back until it ends.
            deadline = time.monotonic() + 60
            while (newest := client.get("/v1/events?limit=1000").json()["next_after"]) == 0:
                assert time.monotonic() < deadline, "the events never settled"
                time.sleep(0.2)
            connection = slow.engine.connect()
            transaction = connection.begin()
            connection.execute(text(
                "INSERT INTO event (type, subject, payload, dedupe_key, created_at) "
                "VALUES ('test', 'slow writer', '{}', 'api-slow', now())"))
            fast = threading.Thread(target=lambda: filled.events.record_event(
                EventSpec(type="test", subject="fast writer", dedupe_key="api-fast")))
            fast.start()
            fast.join()
            ids = dict(connection.execute(text("SELECT subject, id FROM event WHERE dedupe_key LIKE 'api-%'")).all())
            assert ids["slow writer"] < ids["fast writer"]  # the fast one took a later id and committed first
            held = client.get(f"/v1/events?after={newest}").json()
            assert held["events"] == [] and held["next_after"] == newest  # the fast event waits for the slow one
            transaction.commit()
            connection.close()
            deadline = time.monotonic() + 60
            while len(got := client.get(f"/v1/events?after={newest}").json()["events"]) < 2:
                assert time.monotonic() < deadline, got
                time.sleep(0.1)
            assert [e["subject"] for e in got] == ["slow writer", "fast writer"]
    finally:
        server.stop()
        slow.engine.dispose()


def test_many_requests_for_a_dropped_body_build_it_once(filled: Store, database_url: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """31.3: with a writer running, a hot target's body dropped by its new run was built by every request that
    came before the first build finished (the warm path's tail in bench/api.py)."""
    real = app_module.bodies.target_drafters

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(app_module.bodies, "target_drafters", slow)
    server = ApiServer(create_app(ApiConfig(database_url))).start()
    try:
        path = f"{server.url}/v1/targets/{TARGET}/drafters"
        assert httpx.get(f"{server.url}/v1/lag", timeout=30).status_code == 200  # the version is read
        built = _reader(server).built
        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(lambda _: httpx.get(path, timeout=30), range(10)))
        assert [a.status_code for a in answers] == [200] * 10 and len({a.content for a in answers}) == 1
        assert _reader(server).built == built + 1
    finally:
        server.stop()


def test_a_body_new_runs_made_stale_is_served_while_its_successor_builds(filled: Store, database_url: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """31.3 ("build bodies from what changed"): a hot target a worker keeps measuring went cold at each of its
    runs, and its clients waited for a cold build; now the old body answers until the new one is built."""
    real = app_module.bodies.target_drafters
    started, release = threading.Event(), threading.Event()
    hold = {"on": False}

    def held(*args: Any, **kwargs: Any) -> Any:
        if hold["on"]:
            started.set()
            assert release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(app_module.bodies, "target_drafters", held)
    server = ApiServer(create_app(ApiConfig(database_url))).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            path = f"/v1/targets/{TARGET}/drafters"
            first = client.get(path)
            hold["on"] = True
            filled.runs.record_run(full_run(target=TARGET, drafter=DRAFTER, prediction=None, run_id="run-stale",
                                            created_at=full_run().created_at.replace(day=21)))
            deadline = time.monotonic() + 10
            while not started.is_set():  # the next version read finds the run and starts the successor
                assert time.monotonic() < deadline
                client.get("/health")
                time.sleep(0.1)
            during = client.get(path)  # its successor is being built (held): the old body answers
            assert during.status_code == 200 and during.content == first.content
            hold["on"] = False
            release.set()
            while (after := client.get(path)).content == first.content:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert after.status_code == 200
    finally:
        release.set()
        server.stop()


def test_a_snapshot_reads_through_one_reads_object_in_every_area(store: Store) -> None:
    store.catalog.load_catalog()
    snapshot = Store(store.engine, memo=ReadMemo())
    assert snapshot.watch.reads is snapshot.reads  # the watcher's area never reads around the snapshot
    drafter = snapshot.reads.get_drafter("z-lab/Qwen3-8B-DFlash-b16")
    assert drafter is not None and snapshot.reads.get_drafter("z-lab/Qwen3-8B-DFlash-b16") is drafter  # remembered
    publishers = snapshot.reads.trusted_publishers()
    assert "z-lab" in publishers and snapshot.reads.trusted_publishers() is publishers
    assert store.reads.trusted_publishers() == publishers and store.reads.trusted_publishers() is not publishers
