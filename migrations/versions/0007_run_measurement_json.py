"""a run's JSON is its measurement's parts only (registry.domain.run.Run); no schema change

Before this revision a run's `metrics` JSON also repeated its headline numbers under their own keys (tau,
marginal, speedup_spread, ...) and some of its columns (method, lossless, ...), a run stored before metric versions
carried no version, and a run read from a server's counters (`drafters ingest`) kept its numbers only under those
keys. Upgrade writes every row in the one shape the store reads: the version (1 where missing), an `overall` set
for every successful run that lacks one (an ingested run's acceptance rebuilt from its stored counters, or SGLang's
reported τ; any other run's from its columns), a set row's measurement from its columns where it has none, and no
repeated keys. Downgrade puts the repeated keys back, so the code before this revision reads every row as it did.

Revision ID: 0007_run_measurement_json
Revises: 0006_w12_drafter_alias
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007_run_measurement_json"
down_revision = "0006_w12_drafter_alias"
branch_labels = None
depends_on = None

# Keys the metrics JSON held before this revision that repeat what the measurement's parts already say.
REPEATED = ("tau", "tau_emitted", "acceptance_rate", "per_position_acceptance", "acceptance_histogram",
            "identity_check", "baseline_tokens_per_s", "tokens_per_s", "speedup", "speedup_spread", "decode_speedup",
            "decode_speedup_spread", "ideal_speedup", "efficiency", "ttft_s", "tpot_s", "draft_time_share",
            "repeats", "marginal", "per_set", "provenance")
# Keys that repeated a column of the run (the column is what is read).
COLUMN_COPIES = ("method", "lossless", "draft_length", "peak_memory_bytes", "target_weight_bytes",
                 "drafter_weight_bytes")
LIVE_TRAFFIC = "live-traffic"

runs = sa.table("benchmark_run", *(sa.column(name, sa.Integer) for name in ("id", "draft_length", "peak_memory_bytes",
                                                                           "target_weight_bytes",
                                                                           "drafter_weight_bytes")),
                *(sa.column(name, sa.Float) for name in ("tau", "tokens_per_s", "baseline_tokens_per_s", "speedup",
                                                         "efficiency")),
                sa.column("status", sa.String), sa.column("method", sa.String), sa.column("lossless", sa.Boolean),
                sa.column("metrics", sa.JSON), sa.column("provenance", sa.JSON))
set_rows = sa.table("run_set_result", sa.column("id", sa.Integer), sa.column("run_pk", sa.Integer),
                    sa.column("prompt_set", sa.String), sa.column("prompt_set_digest", sa.String),
                    *(sa.column(name, sa.Float) for name in ("tau", "tokens_per_s", "baseline_tokens_per_s",
                                                             "speedup")),
                    sa.column("lossless", sa.Boolean), sa.column("metrics", sa.JSON))


def _one_reading(value: float | None) -> dict[str, Any] | None:
    if value is None:
        return None
    return {"median": value, "minimum": value, "maximum": value, "q1": value, "q3": value, "n": 1}


def _ingested_overall(tau: float | None, tokens_per_s: float | None, metrics: dict[str, Any],
                      provenance: dict[str, Any]) -> dict[str, Any]:
    """The measurement of a run read from a server, from what the old layout kept of it."""
    spec = ((provenance.get("counters") or {}).get("spec")) or {}
    positions = metrics.get("per_position_acceptance") or {}
    acceptance = None
    if spec.get("drafts") and tau is not None:
        marginal = list(positions.get("marginal") or metrics.get("marginal") or [])
        acceptance = {
            "rounds": spec["drafts"], "drafted": spec.get("draft_tokens"), "accepted": spec.get("accepted"),
            "tau": tau, "acceptance_rate": metrics.get("acceptance_rate"),
            "histogram": list(metrics.get("acceptance_histogram") or []), "marginal": marginal,
            "conditional": list(positions.get("conditional") or []),
            "uniform_draft_length": bool(marginal) and spec.get("draft_tokens") == spec["drafts"] * len(marginal),
            "identity_gap": tau - (1.0 + sum(marginal)),
        }
    return {"name": LIVE_TRAFFIC, "prompts": 0, "digest": LIVE_TRAFFIC, "tokens_per_s": _one_reading(tokens_per_s),
            "acceptance": acceptance, "reported_tau": tau if acceptance is None else None}


def _from_columns(name: str, digest: str, row: Any) -> dict[str, Any]:
    """A measurement of which only the columns were kept (a row written by hand, or by code before the JSON)."""
    return {"name": name, "prompts": 0, "digest": digest, "reported_tau": row["tau"],
            "baseline_tokens_per_s": _one_reading(row["baseline_tokens_per_s"]),
            "tokens_per_s": _one_reading(row["tokens_per_s"]), "speedup": _one_reading(row["speedup"]),
            "lossless": row["lossless"]}


def upgrade() -> None:
    connection = op.get_bind()
    for row in connection.execute(sa.select(runs)).mappings().all():
        metrics = dict(row["metrics"] or {})
        provenance = dict(row["provenance"] or {})
        updated = {k: v for k, v in metrics.items() if k not in REPEATED + COLUMN_COPIES}
        updated.setdefault("metric_version", 1)
        ingested = provenance.get("source") == "ingested"
        if row["status"] == "ok" and "overall" not in metrics:
            if ingested:
                overall = _ingested_overall(row["tau"], row["tokens_per_s"], metrics, provenance)
                connection.execute(set_rows.update().where(set_rows.c.run_pk == row["id"]).values(metrics=overall))
            else:
                overall = {**_from_columns("overall", "", row), "efficiency": row["efficiency"]}
            updated["overall"] = overall
        if updated != metrics:
            connection.execute(runs.update().where(runs.c.id == row["id"]).values(metrics=updated))
    for set_row in connection.execute(sa.select(set_rows)).mappings().all():
        if "name" not in (set_row["metrics"] or {}):  # ingested ones were written above
            measured = _from_columns(set_row["prompt_set"], set_row["prompt_set_digest"], set_row)
            connection.execute(set_rows.update().where(set_rows.c.id == set_row["id"]).values(metrics=measured))


def _spread_median(value: dict[str, Any] | None) -> float | None:
    return value.get("median") if isinstance(value, dict) else None


def downgrade() -> None:
    connection = op.get_bind()
    for row in connection.execute(sa.select(runs)).mappings().all():
        metrics = dict(row["metrics"] or {})
        overall = metrics.get("overall")
        if not isinstance(overall, dict):
            continue
        acceptance = overall.get("acceptance") or {}
        measured = overall.get("speculative") or overall.get("baseline") or {}
        marginal = list(acceptance.get("marginal") or [])
        metrics.update({name: row[name] for name in COLUMN_COPIES})
        metrics.update({
            "tau": acceptance.get("tau", overall.get("reported_tau")),
            "tau_emitted": overall.get("tau_emitted"),
            "acceptance_rate": acceptance.get("acceptance_rate"),
            "marginal": marginal,
            "per_position_acceptance": ({"marginal": marginal, "conditional": list(acceptance.get("conditional") or [])}
                                        if acceptance else None),
            "acceptance_histogram": list(acceptance.get("histogram") or []) if acceptance else None,
            "baseline_tokens_per_s": _spread_median(overall.get("baseline_tokens_per_s")),
            "tokens_per_s": _spread_median(overall.get("tokens_per_s")),
            "speedup": _spread_median(overall.get("speedup")),
            "speedup_spread": overall.get("speedup"),
            "decode_speedup": _spread_median(overall.get("decode_speedup")),
            "decode_speedup_spread": overall.get("decode_speedup"),
            "ideal_speedup": overall.get("ideal_speedup"),
            "efficiency": overall.get("efficiency"),
            "ttft_s": measured.get("ttft_s"),
            "tpot_s": measured.get("tpot_s"),
            "draft_time_share": (overall.get("speculative") or {}).get("draft_time_share"),
            "repeats": (metrics.get("settings") or {}).get("repeats"),
        })
        connection.execute(runs.update().where(runs.c.id == row["id"]).values(metrics=metrics))
