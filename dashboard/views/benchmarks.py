"""Benchmarks: speedup and τ per pair and prompt set, their history with revision changes, and acceptance by
draft position. A series is one (hardware, engine, metric version, prompt set): different ones are never drawn as one line."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import data, panels, queries
from dashboard.queries import revision_changes
from registry.domain.ref_labels import ref_label

st.title("Benchmarks")
db = data.require_database()


def concurrency_section() -> None:
    """Speedup against concurrency from `drafters sweep` on servers users run: where the drafter stops paying."""
    st.subheader("Speedup vs concurrency")
    labels, points = queries.speedup_curves(db)
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
    st.altair_chart(line + break_even(shown) + crossing, width="stretch")
    st.caption("Dashed rule: 1.0×, break-even; below it the drafter slows the server down. Red: the crossover, "
               "the first measured concurrency where it stops paying.")
    data.dataframe(shown.drop(columns=["curve", "series"]), hide_index=True, width="stretch", key="curve_points")
    same = points[points["series"] == shown["series"].iloc[0]]
    length_section(same[same["prompt_set"] == shown["prompt_set"].iloc[0]])
    category_section(same[same["max_new_tokens"] == shown["max_new_tokens"].iloc[0]])


def break_even(frame: pd.DataFrame) -> alt.Chart:
    """The dashed 1.0× rule: below it the drafter slows the server down."""
    return alt.Chart(frame.head(1)).mark_rule(strokeDash=[4, 3], color="#555").encode(y=alt.datum(1.0))


def curve_chart(chart: alt.Chart, curves: pd.DataFrame, by: str, order: list[str], key: str) -> None:
    """A chart of the pair's curves with the 1.0× rule, then its points as a table: `by`, concurrency, speedup, τ."""
    st.altair_chart(chart + break_even(curves), width="stretch")
    data.dataframe(curves[[by, "concurrency", "speedup", "tau"]].sort_values(order), hide_index=True, width="stretch",
                   key=key)


def length_section(curves: pd.DataFrame) -> None:
    """The selected pair's speedup against output length (beellama.cpp#33: 2.58× at 64 tokens, 0.84× at 2,048)."""
    st.subheader("Speedup vs output length")
    lengths = sorted(curves["max_new_tokens"].unique())
    if len(lengths) < 2:
        st.caption(f"One length measured for this pair ({lengths[0]} tokens): `drafters verify --engine llamacpp "
                   "--concurrency 1,4 --max-new-tokens 128,512,2048` measures a curve per length.")
        return
    chart = alt.Chart(curves).mark_line(point=True).encode(
        x=alt.X("max_new_tokens:Q", title="tokens generated per request", scale=alt.Scale(type="log", base=2)),
        y=alt.Y("speedup:Q", title="speedup"), color=alt.Color("concurrency:N", title="concurrency"),
        tooltip=["max_new_tokens", "concurrency", "speedup", "tau"])
    curve_chart(chart, curves, "max_new_tokens", ["concurrency", "max_new_tokens"], "curve_lengths")


def category_section(curves: pd.DataFrame) -> None:
    """The selected pair's speedup per kind of prompt: category moves τ by 2× or more (z-lab/dflash#60)."""
    st.subheader("Speedup per kind of prompt")
    sets = sorted(curves["prompt_set"].unique())
    if len(sets) < 2:
        st.caption(f"One prompt set measured for this pair ({sets[0]}): `drafters sweep --prompts cat-coding` "
                   "(then cat-math, cat-chat, …) measures one curve per kind of prompt.")
        return
    chart = alt.Chart(curves).mark_bar().encode(
        x=alt.X("prompt_set:N", title="prompt set"), xOffset="concurrency:N",
        y=alt.Y("speedup:Q", title="speedup"), color=alt.Color("concurrency:N", title="concurrency"),
        tooltip=["prompt_set", "concurrency", "speedup", "tau"])
    curve_chart(chart, curves, "prompt_set", ["prompt_set", "concurrency"], "curve_categories")


with data.guard("Speedup vs concurrency"):
    concurrency_section()


def pair_label(target: str, drafter: str | None) -> str:
    return f"{ref_label(target)} ← {ref_label(drafter) if drafter else 'no drafter (baseline)'}"


with data.guard("Benchmarks"):
    pairs = queries.benchmark_pairs(db)
    if pairs.empty:
        panels.no_measurements(db)
        st.stop()

    labels = [pair_label(t, d) for t, d in zip(pairs["target"], pairs["drafter"])]
    chosen = st.selectbox("Pair", range(len(labels)), format_func=lambda i: data.plain(f"{labels[i]} ({pairs['runs'][i]} runs)"),
                          key="pair")
    target, drafter = pairs["target"][chosen], pairs["drafter"][chosen]
    drafter = drafter if isinstance(drafter, str) else None

    st.subheader("Speedup and τ per prompt set")
    summary = queries.benchmark_summary(db, target=target, drafter=drafter)
    if summary.empty:
        st.info("This pair has no successful run yet; its failed runs are listed below.")
    else:
        # Runs measured under other conditions (metric definitions included) are another series, never one line
        # or bar with these; `conditions` says what each number holds for.
        summary = summary.assign(series=summary["hardware"].fillna("?") + " · " + summary["engine"].fillna("?")
                                 + " · " + summary["prompt_set"] + " · " + summary["conditions"])
        panels.slowdown_warning(summary.rename(columns={"speedup_mean": "speedup"}), what="series of this pair")
        data.dataframe(data.labelled(summary), hide_index=True, width="stretch", key="summary")
        bars_data = panels.speedup_bars(summary)
        bars = alt.Chart(bars_data).encode(
            y=alt.Y("series:N", title=None, axis=alt.Axis(labelLimit=400)),
            tooltip=["series", "runs", alt.Tooltip("speedup_mean:Q", format=".2g", title="speedup ×"),
                     "speedup_std", "tau_mean", "tau_std"],
        )
        # The axis always reaches past 1.0× and starts at 0, so a slowdown reads as one next to the break-even rule.
        axis_title = "speedup × (mean ± std over runs; 1× = break-even)"
        axis = alt.X("speedup_mean:Q", title=axis_title, scale=alt.Scale(domain=[0, panels.speedup_axis_top(bars_data)]))
        speedup = bars.mark_bar().encode(
            x=axis, color=alt.Color("side:N", title=None, scale=alt.Scale(
                domain=list(panels.SPEEDUP_SIDES), range=list(panels.SPEEDUP_SIDES.values()))))
        spread = bars.mark_errorbar().encode(x=alt.X("speedup_low:Q", title=axis_title), x2="speedup_high:Q")
        even = alt.Chart(bars_data.head(1)).mark_rule(strokeDash=[4, 3], color="#212121", strokeWidth=2).encode(
            x=alt.datum(1.0))
        st.altair_chart(speedup + spread + even, width="stretch")
        st.caption("Dashed rule: 1×, break-even. A bar left of it (red) is a slowdown: the drafter costs more than "
                   "it saves.")

        st.subheader("History")
        history = queries.benchmark_history(db, target, drafter)
        changes = revision_changes(history)
        metric = st.radio("Metric", ["speedup", "tau"], horizontal=True, key="metric")
        start, end = panels.time_domain(history["created_at"])
        lines = (
            alt.Chart(history)
            .mark_line(point=True)
            .encode(
                # Dates, not milliseconds: one run alone would otherwise get a one-millisecond axis (".946").
                x=alt.X("created_at:T", title="run time (UTC)",
                        scale=alt.Scale(domain=[start.isoformat(), end.isoformat()]),
                        axis=alt.Axis(format="%Y-%m-%d %H:%M", labelAngle=-30, tickCount=6)),
                y=alt.Y(f"{metric}:Q", title="speedup × (1× = break-even)" if metric == "speedup" else "τ",
                        scale=alt.Scale(zero=True)),
                color=alt.Color("series:N", legend=alt.Legend(orient="bottom", labelLimit=600, columns=1)),
                detail="series:N",
                tooltip=["run_id", "created_at", "series", metric, "target_revision", "drafter_revision"],
            )
        )
        rules = (
            alt.Chart(changes)
            .mark_rule(strokeDash=[4, 3], color="#c62828")
            .encode(x="created_at:T", tooltip=["series:N", "change:N", "run_id:N"])
        )
        layers = lines + rules
        if metric == "speedup":
            layers += alt.Chart(history.head(1)).mark_rule(strokeDash=[2, 2], color="#555").encode(y=alt.datum(1.0))
        st.altair_chart(layers.properties(height=320), width="stretch")  # the legend below takes no plot height
        if not changes.empty:
            st.caption("Red dashed rules: a run whose target or drafter revision differs from the run before it.")
            data.dataframe(changes, hide_index=True, width="stretch", key="changes")

        st.subheader("Predicted vs measured")
        measured = queries.runs(db, target=target, drafter=drafter, status="ok")
        predicted = measured[["run_id", "created_at", "hardware", "engine", "tokens_per_s", "speedup"]].merge(
            queries.run_predictions(db, target=target, drafter=drafter), on="run_id", how="left")
        st.markdown(panels.prediction_sentence(predicted))
        data.dataframe(predicted[["run_id", "created_at", "hardware", "engine", "tokens_per_s",
                                  "predicted_tokens_per_s", "tokens_per_s_error", "speedup", "predicted_speedup",
                                  "speedup_error", "prediction_note", "prediction_basis", "prediction_source"]],
                       hide_index=True, width="stretch", key="predictions")

        st.subheader("Acceptance by draft position")
        run_ids = history.sort_values("created_at", ascending=False)["run_id"].drop_duplicates().tolist()
        run_id = st.selectbox("Run", run_ids, key="run")
        positions = queries.acceptance_by_position(db, run_id)
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

    failed = queries.runs(db, target=target, drafter=drafter, status="failed")
    if not failed.empty:
        st.subheader("Failed runs")
        data.dataframe(failed[["run_id", "created_at", "failure_reason", "hardware", "engine"]], hide_index=True,
                     width="stretch", key="failed")

with data.guard("All pairs"):
    st.subheader("All pairs")
    # Summarising every run of every pair is the costliest read on a big registry: only on request.
    if st.toggle("Summarise every pair", key="all_pairs"):
        data.dataframe(data.labelled(queries.benchmark_summary(db)), hide_index=True, width="stretch")
