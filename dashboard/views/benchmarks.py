"""Benchmarks: speedup and τ per pair and prompt set, their history with revision changes, and acceptance by
draft position. A series is one (hardware, engine, metric version, prompt set): different ones are never drawn as one line."""

from __future__ import annotations

import altair as alt
import streamlit as st

from dashboard import data
from dashboard.queries import revision_changes

st.title("Benchmarks")
url = data.require_database()


def concurrency_section() -> None:
    """Speedup against concurrency from `drafters sweep` on servers users run: where the drafter stops paying."""
    st.subheader("Speedup vs concurrency")
    labels, points = data.speedup_curves(url)
    if points.empty:
        st.info("No concurrency sweep yet: `drafters sweep --url URL --baseline-url URL` measures a pair on your "
                "servers at concurrency 1 to 64.")
        return
    curve = st.selectbox("Sweep", list(labels), format_func=labels.__getitem__, key="curve")
    shown = points[points["curve"] == curve]
    base = alt.Chart(shown).encode(
        x=alt.X("concurrency:Q", title="concurrent requests", scale=alt.Scale(type="log", base=2)),
        y=alt.Y("speedup:Q", title="speedup (tok/s with ÷ without the drafter)"),
        tooltip=["concurrency", "speedup", "tokens_per_s", "baseline_tokens_per_s", "tau"],
    )
    line = base.mark_line(point=True)
    crossing = base.transform_filter("datum.crossover").mark_point(size=160, color="#c62828", filled=True)
    even = alt.Chart(shown.head(1)).mark_rule(strokeDash=[4, 3], color="#555").encode(y=alt.datum(1.0))
    st.altair_chart(line + even + crossing, width="stretch")
    st.caption("Dashed rule: 1.0×, break-even; below it the drafter slows the server down. Red: the crossover, "
               "the first measured concurrency where it stops paying.")
    data.dataframe(shown.drop(columns=["curve"]), hide_index=True, width="stretch", key="curve_points")


with data.guard("Speedup vs concurrency"):
    concurrency_section()


def pair_label(target: str, drafter: str | None) -> str:
    return f"{target} ← {drafter or 'no drafter (baseline)'}"


with data.guard("Benchmarks"):
    pairs = data.benchmark_pairs(url)
    if pairs.empty:
        st.info("No benchmark runs yet: `drafters verify <target> <drafter>` measures a pair and stores the run.")
        st.stop()

    labels = [pair_label(t, d) for t, d in zip(pairs["target"], pairs["drafter"])]
    chosen = st.selectbox("Pair", range(len(labels)), format_func=lambda i: data.plain(f"{labels[i]} ({pairs['runs'][i]} runs)"),
                          key="pair")
    target, drafter = pairs["target"][chosen], pairs["drafter"][chosen]
    drafter = drafter if isinstance(drafter, str) else None

    st.subheader("Speedup and τ per prompt set")
    summary = data.benchmark_summary(url, target, drafter)
    if summary.empty:
        st.info("This pair has no successful run yet; its failed runs are listed below.")
    else:
        # Runs measured under other conditions (metric definitions included) are another series, never one line
        # or bar with these; `conditions` says what each number holds for.
        summary = summary.assign(series=summary["hardware"].fillna("?") + " · " + summary["engine"].fillna("?")
                                 + " · " + summary["prompt_set"] + " · " + summary["conditions"])
        data.dataframe(summary, hide_index=True, width="stretch", key="summary")
        bars = alt.Chart(summary).encode(
            y=alt.Y("series:N", title=None, axis=alt.Axis(labelLimit=400)),
            tooltip=["series", "runs", "speedup_mean", "speedup_std", "tau_mean", "tau_std"],
        )
        speedup = bars.mark_bar().encode(x=alt.X("speedup_mean:Q", title="speedup (mean ± std over runs)"))
        spread = (
            bars.mark_errorbar()
            .encode(x=alt.X("speedup_low:Q", title="speedup (mean ± std over runs)"), x2="speedup_high:Q")
            .transform_calculate(speedup_low="datum.speedup_mean - datum.speedup_std",
                                 speedup_high="datum.speedup_mean + datum.speedup_std")
        )
        st.altair_chart(speedup + spread, width="stretch")

        st.subheader("History")
        history = data.benchmark_history(url, target, drafter)
        changes = revision_changes(history)
        metric = st.radio("Metric", ["speedup", "tau"], horizontal=True, key="metric")
        lines = (
            alt.Chart(history)
            .mark_line(point=True)
            .encode(
                x=alt.X("created_at:T", title="run time"),
                y=alt.Y(f"{metric}:Q", title=metric),
                color=alt.Color("series:N"),
                detail="series:N",
                tooltip=["run_id", "created_at", "series", metric, "target_revision", "drafter_revision"],
            )
        )
        rules = (
            alt.Chart(changes)
            .mark_rule(strokeDash=[4, 3], color="#c62828")
            .encode(x="created_at:T", tooltip=["series:N", "change:N", "run_id:N"])
        )
        st.altair_chart(lines + rules, width="stretch")
        if not changes.empty:
            st.caption("Dashed rules: a run whose target or drafter revision differs from the run before it.")
            data.dataframe(changes, hide_index=True, width="stretch", key="changes")

        st.subheader("Predicted vs measured")
        # Each run as the pricing model predicted it from the OTHER runs (docs/pricing.md); a blank where it could
        # not, with the reason in prediction_note.
        measured = data.runs(url, target, drafter, status="ok")
        predicted = measured[["run_id", "created_at", "hardware", "engine", "tokens_per_s", "speedup"]].merge(
            data.run_predictions(url, target, drafter), on="run_id", how="left")
        data.dataframe(predicted[["run_id", "created_at", "hardware", "engine", "tokens_per_s",
                                  "predicted_tokens_per_s", "tokens_per_s_error", "speedup", "predicted_speedup",
                                  "speedup_error", "prediction_note", "prediction_basis", "prediction_source"]],
                       hide_index=True, width="stretch", key="predictions")

        st.subheader("Acceptance by draft position")
        run_ids = history.sort_values("created_at", ascending=False)["run_id"].drop_duplicates().tolist()
        run_id = st.selectbox("Run", run_ids, key="run")
        positions = data.acceptance_by_position(url, run_id)
        if positions.empty:
            st.info("This run stored no per-position acceptance.")
        else:
            chart = (
                alt.Chart(positions)
                .mark_bar()
                .encode(
                    x=alt.X("position:O", title="draft position"),
                    xOffset="prompt_set:N",
                    y=alt.Y("acceptance:Q", title="acceptance", scale=alt.Scale(domain=[0, 1])),
                    color="prompt_set:N",
                    tooltip=["prompt_set", "position", "acceptance"],
                )
            )
            st.altair_chart(chart, width="stretch")

    failed = data.runs(url, target, drafter, status="failed")
    if not failed.empty:
        st.subheader("Failed runs")
        data.dataframe(failed[["run_id", "created_at", "failure_reason", "hardware", "engine"]], hide_index=True,
                     width="stretch", key="failed")

with data.guard("All pairs"):
    st.subheader("All pairs")
    # Summarising every run of every pair is the costliest read on a big registry: only on request.
    if st.toggle("Summarise every pair", key="all_pairs"):
        data.dataframe(data.benchmark_summary(url), hide_index=True, width="stretch")
