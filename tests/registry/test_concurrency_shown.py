"""Where the drafter is chosen (`drafters find`, `drafters launch`, the API) a measured speedup curve says "pays up
to c≈N on HW" with its engine, length and conditions; a curve of tiny test models or from a CPU is labelled and
never speaks for a GPU, and with no curve the answer is "not measured at concurrency > 1"."""

from __future__ import annotations

import functools
import json

from registry.calibration.concurrency import NOT_MEASURED, concurrency_for
from registry.calibration.launch_inputs import pick_gpu
from registry.calibration.recommend import recommendation_body, recommendations
from registry.domain.curve import CurvePoint, SpeedupCurve, SweepConditions
from registry.domain.json_shapes import SCHEMA_VERSION
from registry.store import Store
from tests.support.cli import drafters as run_drafters

TARGET, DRAFTER = "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16"


def _curve(hardware: str | None, speedups: dict[int, float], *, engine: str = "vllm", length: int = 512,
           drafter: str | None = DRAFTER, provenance: dict | None = None) -> SpeedupCurve:
    points = tuple(CurvePoint(concurrency=c, requests=2 * c, output_tokens=100, seconds=1.0, tokens_per_s=100 * s,
                              baseline_tokens_per_s=100.0, latency_per_token_s=0.01,
                              baseline_latency_per_token_s=0.01, tau=3.0, drafts=10) for c, s in speedups.items())
    conditions = SweepConditions(max_new_tokens=length, temperature=0.0, prompt_set="coding", prompt_digest="d",
                                 requests_per_level=0, url="http://127.0.0.1:8000", baseline_url="http://127.0.0.1:8001")
    return SpeedupCurve(target=TARGET, drafter=drafter, engine=engine, engine_version="0.11.0", hardware=hardware,
                        conditions=conditions, points=points, provenance=provenance or {"source": "sweep"})


FALLING = {1: 2.6, 4: 1.36, 16: 1.1, 32: 0.99, 64: 0.9}  # AMD-AGI/Infera#74's shape


def test_a_gpu_curve_says_where_it_pays_and_a_cpu_or_tiny_curve_never_does() -> None:
    h100 = pick_gpu("H100 SXM")
    found = concurrency_for([_curve("NVIDIA H100 80GB HBM3", FALLING)], h100, "vllm")
    assert found.measured
    assert found.text.startswith("pays up to c≈16 on NVIDIA H100 80GB HBM3 (vllm 0.11.0, 512 new tokens, prompts "
                                 "coding, T=0); from c=32 it is a slowdown")
    (fact,) = found.curves
    assert (fact.gpu_class, fact.pays_up_to, fact.crossover, fact.stand_in) == ("H100 SXM", 16, 32, None)
    # Another GPU class, another engine: measured there, not here.
    other = concurrency_for([_curve("NVIDIA H100 80GB HBM3", FALLING)], pick_gpu("A100 80GB"), "vllm")
    assert not other.measured and other.text.startswith(f"{NOT_MEASURED} on A100 80GB with vllm; measured on NVIDIA H100")
    assert not concurrency_for([_curve("NVIDIA H100 80GB HBM3", FALLING)], h100, "sglang").measured
    # A CPU, or tiny test models on a real card: labelled, and never "measured" for the GPU.
    cpu = concurrency_for([_curve("test machine", FALLING, engine="llama.cpp")], h100, None)
    assert not cpu.measured and "only curves from test machine: a CPU" in cpu.text
    assert "c≈16" not in cpu.text and "says nothing about serving on a GPU" in cpu.curves[0].text
    tiny = concurrency_for([_curve("H100 SXM", FALLING, provenance={"test_model": True})], h100, None)
    assert not tiny.measured and tiny.curves[0].stand_in == "tiny test models on H100 SXM"
    assert tiny.curves[0].gpu_class is None
    assert concurrency_for([], h100).text == f"{NOT_MEASURED} on H100 SXM"
    # One line per length, the newest curve of each length standing.
    both = concurrency_for([_curve("H100 SXM", {1: 1.5, 8: 1.2}, length=2048), _curve("H100 SXM", {1: 0.9}, length=2048),
                            _curve("H100 SXM", {1: 2.0, 8: 1.4}, length=128)], h100)
    assert both.text.index("128 new tokens") < both.text.index("2048 new tokens")
    assert "pays at every measured concurrency up to c=8 on H100 SXM (vllm 0.11.0, 2048" in both.text


def test_find_launch_and_the_api_say_it(database_url: str) -> None:
    drafters = functools.partial(run_drafters, env={"DRAFTERS_DATABASE_URL": database_url, "COLUMNS": "200"})
    assert drafters("catalog", "load").returncode == 0
    store = Store.open(database_url)
    store.curves.record_curve(_curve("test machine", {1: 0.98, 2: 0.89}, engine="llama.cpp", length=48))

    def find_json() -> dict:
        result = drafters("find", TARGET, "--json")
        assert result.returncode == 0, result.stderr
        body = json.loads(result.stdout)
        assert body["schema_version"] == SCHEMA_VERSION
        return next(d for d in body["drafters"] if d["drafter_repo_id"] == DRAFTER)

    row = find_json()
    assert row["concurrency"]["measured"] is False and row["concurrency"]["curves"][0]["stand_in"]
    assert row["concurrency"]["text"].startswith(f"{NOT_MEASURED} on H100 SXM; only curves from test machine")
    before = drafters("launch", TARGET, "--engine", "vllm", "--json")
    (launch,) = [x for x in json.loads(before.stdout)["launches"] if x["drafter"] == DRAFTER]
    assert launch["concurrency"]["text"].startswith(f"{NOT_MEASURED} on H100 SXM with vllm; only curves from test")

    store.curves.record_curve(_curve("NVIDIA H100 80GB HBM3", FALLING))
    row = find_json()
    assert row["concurrency"]["measured"] and row["concurrency"]["text"].startswith("pays up to c≈16 on NVIDIA H100")
    assert len(row["concurrency"]["curves"]) == 2
    table = drafters("find", TARGET)
    assert "concurrency: pays up to c≈16 on NVIDIA H100 80GB HBM3 (vllm 0.11.0, 512 new tokens" in table.stdout
    after = drafters("launch", TARGET, "--engine", "vllm", "--json")
    (launch_after,) = [x for x in json.loads(after.stdout)["launches"] if x["drafter"] == DRAFTER]
    assert launch_after["concurrency"]["measured"] and "c≈16" in launch_after["concurrency"]["text"]
    # Shown, never chosen by: the command, draft length and ranking are the same with and without curves.
    assert {k: v for k, v in launch_after.items() if k != "concurrency"} == \
        {k: v for k, v in launch.items() if k != "concurrency"}
    printed = drafters("launch", TARGET, "--engine", "vllm", "--drafter", DRAFTER)
    assert "concurrency: pays up to c≈16 on NVIDIA H100" in printed.stdout
    assert not recommendations(store, TARGET, "sglang", None, drafter=DRAFTER)[0].concurrency.measured
    body = recommendation_body(store, TARGET, "vllm", "H100 SXM")
    chosen = body["recommendation"]
    assert chosen is not None and chosen["concurrency"]["measured"] == (chosen["drafter"] == DRAFTER)
