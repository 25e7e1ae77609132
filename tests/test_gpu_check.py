"""The prepared GPU check (bench/gpu_check.py) dry-runs on a CPU: every step runs on the tiny models and a small
geometry, and the one JSON it writes says what each step found."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT
from tests.tiny_models import cache_root


def test_the_gpu_check_dry_runs_on_a_cpu(tmp_path: Path, tiny_target_dir: Path, tiny_draft_lm_dir: Path,
                                         tiny_dflash_dir: Path) -> None:
    out = tmp_path / "gpu_check.json"
    done = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "gpu_check.py"), "--dry-run", "--out", str(out),
                           "--cache", str(cache_root())], capture_output=True, text=True, timeout=1200,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["schema_version"] == 1 and report["dry_run"] is True and report["ok"] is True
    steps = report["steps"]
    assert list(steps) == ["environment", "tiny_pairs", "hybrid_rollback", "sampling", "real_size"]
    assert all(step["ok"] for step in steps.values()), steps
    assert steps["environment"]["found"]["transformers"] == steps["environment"]["found"]["transformers_pinned"]
    pairs = steps["tiny_pairs"]["found"]
    assert {(p["method"], p["dtype"]) for p in pairs} == {(m, d) for m in ("draft-lm", "dflash")
                                                          for d in ("float32", "bfloat16")}
    assert all(p["lossless"] is True for p in pairs)
    assert all(p["ties"] == 0 for p in pairs if p["dtype"] == "float32")
    assert steps["hybrid_rollback"]["found"]["one_pass_per_round"] is True
    real = steps["real_size"]["found"]
    assert real["weight_bytes"] > 0 and real["oracle_speedup"]["n"] == 2 and "not a serving engine" in real["engine"]


def test_the_gpu_check_stops_at_a_mismatched_environment(tmp_path: Path) -> None:
    """On a machine without CUDA the real (not dry) run stops at the environment step with the reason."""
    out = tmp_path / "gpu_check.json"
    done = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "gpu_check.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    report = json.loads(out.read_text())
    assert list(report["steps"]) == ["environment"] and report["ok"] is False
    assert "sees no GPU" in report["steps"]["environment"]["reason"]
