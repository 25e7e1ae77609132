"""The read-only API under load: p50/p99 of `/v1/targets/{id}/drafters` at 100 concurrent clients over a SQLite
registry of 10,000 targets and 100,000 runs, a 10 s burst at 1,000 requests/s with no error, and the warm path
while a writer records runs (issue 31.3: a write anywhere used to empty the whole body cache).

    .venv/bin/python bench/api.py [--targets 10000] [--runs 100000] [--requests 3000] [--burst-s 10] [--rate 1000]
                                  [--workers 1,2] [--write-interval 0.2]

The registry: the bundled catalog, then every catalog target copied (rows, head revision, verdicts) until there
are --targets targets, and one measured run copied until there are --runs runs spread over the copied targets
and their exact drafters, as history: three engines, four GPU classes, measured over 300 days, τ and speedup
varying (bulk inserts: the bench measures reading, not loading). `drafters serve --workers N`
runs as its own processes on 127.0.0.1 (uvicorn), once per N in --workers, so client and server do not share an
interpreter. The clients
are asyncio tasks, each on its own raw keep-alive connection (an httpx pool costs more than the server it
measures), loopback only, each loop bounded by a request count.

Measured in the same run, as the references: a bare uvicorn hello-world (a 12-byte ASGI app on the same server
settings and the same number of processes: the floor of this server stack and this client on this machine) and
`/health` (the FastAPI app with no database work). Client CPU = the load generator's CPU seconds / wall seconds:
it shares the cores with the server.
Rounds: cold (each request a different target, so the body cache never helps), warm (100 hot targets, answered
from the body cache after one data-version query), 304 (warm with If-None-Match), then the burst on the warm
path at a fixed arrival rate (open loop: a late answer does not slow the next request down), then warm again
with a writer (a process of its own, `record_run` every --write-interval seconds, half of them into the hot
targets, each measured days before it is recorded): what a worker recording runs does to the cache.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from drafters.api.server import bind, make_server
from drafters.api.workers import default_workers, serve_forked
from registry.domain.measurement import Acceptance, RunSettings, SetMeasurement
from registry.domain.records import EventSpec
from registry.domain.run import Run
from registry.store import Store
from registry.store.seed import copy_checkpoints, copy_run, run_pairs

CLIENTS = 100
MEASURED = datetime(2026, 11, 1, tzinfo=UTC)  # the template run; its copies spread over the 300 days before


def build_registry(url: str, targets: int, runs: int) -> list[str]:
    """The catalog, then copies of its targets and one run until the sizes are reached; the copied target ids."""
    store = Store.open(url)
    store.catalog.load_catalog()
    store.verdicts.recompute_compatibility()
    template = Run(
        target="Qwen/Qwen3-8B", drafter="z-lab/Qwen3-8B-DFlash-b16", engine="pytorch", method="dflash",
        draft_length=15, settings=RunSettings(max_new_tokens=64, repeats=3, dtype="bfloat16", seed=0),
        overall=SetMeasurement(name="overall", digest="bench", prompts=10, acceptance=Acceptance(
            rounds=100, drafted=500, accepted=350, tau=4.5, acceptance_rate=0.7, histogram=(5, 10, 15, 20, 20, 30),
            marginal=(0.95, 0.85, 0.7, 0.55, 0.45), conditional=(0.95, 0.89, 0.82, 0.79, 0.82),
            uniform_draft_length=True, identity_gap=0.0)),
        hardware="H100 SXM", lossless=True, created_at=MEASURED,
    )
    recorded = store.runs.record_run(replace(template, run_id="bench-template"))
    source_of = copy_checkpoints(store, targets)
    copied = list(source_of)
    # A copy has its source's verdicts: runs go to the drafters that are exact for their own target.
    exact = {t: [v.drafter_repo_id for v in store.reads.verdicts(checkpoint_repo_id=t) if v.verdict == "exact"]
             for t in set(source_of.values())}
    engines, gpus = ("pytorch", "llama.cpp", "vllm"), ("H100 SXM", "A100 80GB", "RTX 4090", "L40S")
    rng = random.Random(1)

    def copy(n: int) -> dict[str, object]:
        target = copied[n % len(copied)]
        drafters = exact.get(source_of[target]) or [recorded.drafter]
        tau = round(rng.uniform(2.0, 6.0), 3)
        return {"run_id": f"bench-{n:07d}", "target": target, "drafter": drafters[n % len(drafters)],
                "engine": engines[n % 3], "hardware": gpus[(n // 3) % 4], "tau": tau,
                "speedup": round(tau * rng.uniform(0.4, 0.6), 3),
                "created_at": MEASURED - timedelta(days=300) + timedelta(seconds=n * 259)}

    copy_run(store, recorded.run_id, (copy(n) for n in range(runs - 1)))
    store.engine.dispose()
    return copied


@dataclass(frozen=True)
class Result:
    name: str
    requests: int
    errors: int
    seconds: float
    latencies_ms: list[float]
    client_cpu: float = 0.0

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def closed_loop(base: str, name: str, paths: list[str], total: int, headers: dict[str, str] | None = None
                      ) -> Result:
    """CLIENTS clients, each on its own keep-alive connection, taking the next path until `total` are done."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    latencies: list[float] = []
    errors = 0
    cursor = iter(range(total))

    async def one_client() -> None:
        nonlocal errors
        connection = await Connection.open(host, int(port))
        try:
            for n in cursor:
                started = time.perf_counter()
                ok = await connection.get(paths[n % len(paths)], extra) in (200, 304)
                latencies.append((time.perf_counter() - started) * 1000)
                errors += not ok
        finally:
            connection.writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(CLIENTS)))
    return Result(name, total, errors, time.perf_counter() - started, latencies)


class Connection:
    """One raw keep-alive connection: the client must cost far less than the server, and an httpx pool with a
    hundred busy connections costs more than the server it measures. A failed request opens a fresh one."""

    def __init__(self, host: str, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.host, self.port, self.reader, self.writer = host, port, reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        return cls(host, port, *await asyncio.open_connection(host, port))

    async def get(self, path: str, extra: str = "") -> int | None:
        """The status of one GET (30 s at most), or None when it failed."""
        try:
            return await asyncio.wait_for(self._get(path, extra), 30)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError):
            self.writer.close()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            return None

    async def _get(self, path: str, extra: str) -> int:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode())
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        await self.reader.readexactly(length)
        return status


async def burst(base: str, paths: list[str], rate: float, seconds: float, connections: int = 200) -> Result:
    """Requests due at a fixed rate for `seconds` (open loop): each latency counts from when the request was due,
    so a server that falls behind shows it; `connections` keep-alive connections take the due requests."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    due: asyncio.Queue[tuple[float, str] | None] = asyncio.Queue()
    latencies: list[float] = []
    errors = 0

    async def take_due() -> None:
        nonlocal errors
        connection = await Connection.open(host, int(port))
        try:
            while (item := await due.get()) is not None:
                when, path = item
                ok = await connection.get(path) == 200
                latencies.append((time.perf_counter() - when) * 1000)
                errors += not ok
        finally:
            connection.writer.close()

    workers = [asyncio.create_task(take_due()) for _ in range(connections)]
    total = int(rate * seconds)
    start = time.perf_counter()
    for n in range(total):
        when = start + n / rate
        delay = when - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        due.put_nowait((when, paths[n % len(paths)]))
    for _ in workers:
        due.put_nowait(None)
    await asyncio.gather(*workers)
    return Result(f"burst {rate:.0f}/s × {seconds:g} s", total, errors, time.perf_counter() - start, latencies)


def start_writer(url: str, targets: list[str], interval_s: float, scratch: Path, kind: str
                 ) -> subprocess.Popen[str]:
    """A process that records a run every `interval_s` (what a worker does), half of them into `targets`[:100];
    kind "events": an event instead (what the watcher records for a catalog change, which drops every body: the
    reference for what every write did before issue 31.3); kind "unread runs": runs into targets no client asks
    for only (the writer's own cost to the machine, with nothing to invalidate)."""
    listed = scratch / "writer-targets.txt"
    listed.write_text("\n".join(targets))
    argv = [sys.executable, __file__, "--writer", url, "--writer-targets", str(listed),
            "--write-interval", str(interval_s), "--writer-kind", kind]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stop_writer(process: subprocess.Popen[str]) -> str:
    process.terminate()
    return process.communicate(timeout=60)[0].strip()


def run_writer(url: str, listed: Path, interval_s: float, kind: str) -> None:
    """The writer process: `record_run` (or an event) until SIGTERM; prints how many and their median cost."""
    targets = listed.read_text().split("\n")
    store = Store.open(url)
    hot, others = run_pairs(store, targets[:100]), run_pairs(store, targets[100:1000])
    stop = False

    def on_term(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    rng = random.Random(2)
    costs: list[float] = []
    n = 0
    while not stop:
        hot_turn = n % 2 == 0 and kind != "unread runs"
        target, drafter = rng.choice(hot if hot_turn or not others else others)
        started = time.perf_counter()
        if kind == "events":
            store.events.record_event(EventSpec(type="bench", subject=target, dedupe_key=f"bench-writer-{n}"))
        else:
            store.runs.record_run(Run(
                target=target, drafter=drafter, engine="pytorch", method="dflash", draft_length=15,
                settings=RunSettings(max_new_tokens=64, repeats=3, dtype="bfloat16", seed=n),
                overall=SetMeasurement(name="overall", digest="bench-writer", prompts=10, acceptance=Acceptance(
                    rounds=100, drafted=500, accepted=300 + n % 100, tau=4.0, acceptance_rate=0.6,
                    histogram=(5, 10, 15, 20, 20, 30), marginal=(0.95, 0.85, 0.7, 0.55, 0.45),
                    conditional=(0.95, 0.89, 0.82, 0.79, 0.82), uniform_draft_length=True, identity_gap=0.0)),
                hardware="bench writer GPU", lossless=True, run_id=f"writer-{n:06d}",
                created_at=datetime.now(UTC) - timedelta(days=rng.randint(1, 30))))  # measured, then recorded
        costs.append((time.perf_counter() - started) * 1000)
        n += 1
        time.sleep(max(0.0, interval_s - costs[-1] / 1000))
    costs.sort()
    print(f"writer: {n} {kind} recorded, median {costs[len(costs) // 2] if costs else float('nan'):.0f} ms each",
          flush=True)


def start_server(url: str, home: Path, workers: int, *, hello: bool = False) -> tuple[subprocess.Popen[str], str]:
    """`drafters serve --workers N`, or (hello) the floor: the same server settings around a trivial app."""
    env = {**os.environ, "DRAFTERS_DATABASE_URL": url, "DRAFTERS_HOME": str(home)}
    env.pop("DRAFTERS_HUB_WEBHOOK_SECRET", None)
    argv = ([sys.executable, __file__, "--hello", "--workers", str(workers)] if hello else
            [sys.executable, "-m", "drafters.cli", "serve", "--port", "0", "--workers", str(workers)])
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for _ in range(1000):
        line = process.stdout.readline()
        if "listening on" in line:
            base = line.split("listening on ", 1)[1].split()[0].rstrip("/")
            time.sleep(2.0 if workers > 1 else 0.5)  # the workers import the app after the socket is bound
            return process, base
        if not line:
            break
    raise SystemExit(f"{argv} did not start: {process.stdout.read()}")


async def _hello_app(scope: dict, receive: object, send: object) -> None:
    await send({"type": "http.response.start", "status": 200,  # type: ignore[operator]
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"12")]})
    await send({"type": "http.response.body", "body": b'{"ok":true}\n'})  # type: ignore[operator]


def serve_hello(workers: int) -> None:
    """The floor: uvicorn with the API's own settings (drafters/api/server.py) and process model around an ASGI
    app that does nothing."""
    sock = bind("127.0.0.1", 0)
    print(f"hello listening on http://127.0.0.1:{sock.getsockname()[1]}/", flush=True)
    if workers > 1:
        serve_forked(lambda: make_server(_hello_app).run(sockets=[sock]), sock, workers)
    else:
        make_server(_hello_app).run(sockets=[sock])


def stop_server(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(timeout=30)


def measure(url: str, home: Path, copied: list[str], workers: int, args: argparse.Namespace) -> list[Result]:
    results: list[Result] = []

    def done(result: Result) -> None:
        results.append(result)
        print(f"  {result.name}: {result.requests} requests, {result.errors} errors, "
              f"{result.requests / result.seconds:.0f} req/s, p50 {result.pct(0.5):.1f} ms, p99 {result.pct(0.99):.1f} ms, client CPU "
              f"{result.client_cpu:.0%}", flush=True)

    process, base = start_server(url, home, workers, hello=True)
    try:
        done(timed(closed_loop(base, f"hello-world floor ×{workers}", ["/"], args.requests)))
    finally:
        stop_server(process)
    process, base = start_server(url, home, workers)
    try:
        random.seed(0)
        cold = [f"/v1/targets/{t}/drafters" for t in random.sample(copied, min(len(copied), args.requests))]
        hot = cold[:100]
        done(timed(closed_loop(base, f"/health ×{workers}", ["/health"], args.requests)))
        done(timed(closed_loop(base, f"targets cold ×{workers}", cold, args.requests)))
        # Every worker process has its own cache and each pass opens new connections, which the kernel hands to
        # any worker: with 2 workers a key is still cold in one of them after k passes with chance 2^-k.
        for _ in range(1 if workers == 1 else 12):
            timed(closed_loop(base, "warm-up", hot, len(hot)))
        done(timed(closed_loop(base, f"targets warm ×{workers}", hot, args.requests)))
        etag = httpx.get(base + hot[0]).headers["etag"]
        done(timed(closed_loop(base, f"targets 304 ×{workers}", hot[:1], args.requests, {"If-None-Match": etag})))
        done(timed(burst(base, hot, args.rate, args.burst_s),
                   f"burst {args.rate:.0f}/s × {args.burst_s:g} s ×{workers}"))
        for kind in ("unread runs", "runs", "events") if args.write_interval > 0 else ():
            writer = start_writer(url, [p.removeprefix("/v1/targets/").removesuffix("/drafters") for p in cold],
                                  args.write_interval, home.parent, kind)
            try:
                time.sleep(3.0)  # the writer has opened its store and recorded its first writes
                for _ in range(1 if workers == 1 else 12):
                    timed(closed_loop(base, "warm-up", hot, len(hot)))
                done(timed(closed_loop(base, f"targets warm + {kind} writer ×{workers}", hot, args.writer_requests)))
            finally:
                print(f"  {stop_writer(writer)}", flush=True)
    finally:
        stop_server(process)
    return results


def timed(round_: Any, name: str | None = None) -> Result:
    """Run one round and note the load generator's own CPU share (it runs on the server's cores)."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = asyncio.run(round_)
    share = (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)
    return replace(result, name=name or result.name, client_cpu=share)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--burst-s", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--workers", default=f"1,{default_workers()}",
                        help="comma-separated server process counts to measure, each in turn")
    parser.add_argument("--write-interval", type=float, default=0.2,
                        help="seconds between the writer's runs in the last round (0: no writer round)")
    parser.add_argument("--writer-requests", type=int, default=20_000, help="requests of each writer round")
    parser.add_argument("--hello", action="store_true", help=argparse.SUPPRESS)  # the floor server itself
    parser.add_argument("--writer", help=argparse.SUPPRESS)  # the writer process itself: its database URL
    parser.add_argument("--writer-targets", help=argparse.SUPPRESS)
    parser.add_argument("--writer-kind", default="runs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        run_writer(args.writer, Path(args.writer_targets), args.write_interval, args.writer_kind)
        return
    counts = [int(n) for n in dict.fromkeys(args.workers.split(","))]
    if args.hello:
        serve_hello(counts[0])
        return
    with tempfile.TemporaryDirectory(prefix="bench-api-") as scratch:
        url = f"sqlite:///{scratch}/registry.db"
        started = time.perf_counter()
        copied = build_registry(url, args.targets, args.runs)
        print(f"registry: {args.targets} targets, {args.runs} runs, built in {time.perf_counter() - started:.0f} s;"
              f" {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
        results = [r for n in counts for r in measure(url, Path(scratch) / "home", copied, n, args)]
    print(f"\n{CLIENTS} concurrent clients (bursts: open loop), SQLite, loopback, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the end; ×N = server processes; ratio = p99 / p99 of the hello-world floor "
          "with as many processes")
    print(f"{'round':<32}{'requests':>9}{'errors':>8}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'ratio':>8}"
          f"{'client CPU':>12}")
    floor = 0.0
    for r in results:
        if r.name.startswith("hello-world"):
            floor = r.pct(0.99)
        print(f"{r.name:<32}{r.requests:>9}{r.errors:>8}{r.requests / r.seconds:>9.0f}{r.pct(0.5):>9.1f}"
              f"{r.pct(0.99):>9.1f}{r.pct(0.99) / floor:>8.1f}{r.client_cpu:>12.0%}")
    print("\ngoal: p99 ≤ 50 ms for /v1/targets/{id}/drafters (warm, and warm with the writer); burst with no error")


if __name__ == "__main__":
    main()
