"""`drafters sweep` on this machine: the tiny Qwen3 pair's speedup against concurrency on llama.cpp, and what the
sweep itself costs, so it never limits what it measures.

    .venv/bin/python bench/sweep.py [--concurrency 1,2,4,8] [--max-new-tokens 48] [--slots 8] [--threads 1]

Starts two llama-servers on loopback (the tiny target with its draft LM, and the target alone), each with `--slots`
parallel slots, and runs `verifier.sweep.run_sweep` against them into a scratch SQLite registry. On a CPU with tiny
models a forward costs about a millisecond, so read the curve's shape (how the speedup falls with concurrency, the
crossover) and the ratios, not the speedups. The sweep's own cost is its client CPU time per request (this
process's CPU seconds during the sweep ÷ requests), printed against the mean request latency measured in the same
run: the ratio is the share of a request the client spends; well under 1 means the sweep does not limit the servers.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from registry.domain.curve import describe  # noqa: E402
from registry.store import Store  # noqa: E402
from verifier.engines.llamacpp.convert import cached_gguf  # noqa: E402
from verifier.engines.llamacpp.install import fetch_llama_cpp_source, find_server  # noqa: E402
from verifier.engines.llamacpp.server import Draft, LlamaCppOptions, LlamaServer  # noqa: E402
from verifier.sweep import run_sweep  # noqa: E402
from verifier.tiny.qwen3 import cached_draft_lm, cached_target  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache", type=Path, default=REPO_ROOT / ".cache" / "test-models")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    console = Console()
    console.print("building (or reusing) the tiny Qwen3 target and draft LM, and their GGUF conversions")
    binary = find_server()
    source = fetch_llama_cpp_source(args.cache, binary.version)
    target_dir = cached_target(args.cache)
    draft_dir = cached_draft_lm(args.cache, target_dir, trained=True)
    options = LlamaCppOptions(threads=args.threads, gguf_cache=args.cache / "gguf", source_dir=source,
                              extra_args=("-np", str(args.slots)))
    target = cached_gguf(target_dir, options.gguf_cache, source=source, build=binary.build).path
    draft = cached_gguf(draft_dir, options.gguf_cache, source=source, build=binary.build).path
    ctx = 256 * args.slots
    spec = LlamaServer(binary=binary, model=target, draft=Draft(draft, "draft-simple", 4), ctx_size=ctx, options=options)
    base = LlamaServer(binary=binary, model=target, draft=None, ctx_size=ctx, options=options)
    with tempfile.TemporaryDirectory() as scratch, spec, base:
        store = Store.open(f"sqlite:///{Path(scratch) / 'registry.db'}")
        cpu, wall = time.process_time(), time.perf_counter()
        curve = run_sweep(store, spec.url, base.url, concurrency=levels, max_new_tokens=args.max_new_tokens,
                          hardware=f"this machine (CPU, {args.threads} thread per server)", drafter="tiny draft LM",
                          api_key=spec.api_key, baseline_api_key=base.api_key)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    table = Table("concurrency", "requests", "tok/s with", "tok/s without", "speedup", "vs c=1", "τ",
                  title=f"tiny Qwen3 + draft LM on llama.cpp {curve.engine_version}, {args.slots} slots")
    first = curve.points[0].speedup
    for point in curve.points:
        table.add_row(str(point.concurrency), str(point.requests), f"{point.tokens_per_s:.0f}",
                      f"{point.baseline_tokens_per_s:.0f}", f"{point.speedup:.2f}×", f"{point.speedup / first:.2f}",
                      f"{point.tau:.2f}" if point.tau else "—")
    console.print(table)
    console.print(describe(curve))
    requests = 2 * sum(p.requests for p in curve.points)  # both servers
    latency = sum(p.latency_per_token_s * p.output_tokens for p in curve.points) / sum(p.requests for p in curve.points)
    per_request_cpu = cpu / requests
    console.print(f"sweep client: {per_request_cpu * 1e3:.2f} ms CPU per request over {requests} requests "
                  f"({wall:.1f} s wall); mean request latency {latency * 1e3:.1f} ms; "
                  f"client CPU ÷ latency = {per_request_cpu / latency:.3f}")


if __name__ == "__main__":
    main()
