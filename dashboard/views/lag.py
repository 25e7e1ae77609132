"""Lag: how long each target waited for its first exact drafter, and which upgrades are still waiting."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboard import data, panels, queries

st.title("Lag")
db = data.require_database()
today = data.today()

with data.guard("Lag"):
    report = queries.lag_report(db, today)
    targets = report.targets
    if targets.empty:
        panels.empty_hint("No target with a declared drafter yet.", db)
    else:
        waiting = targets[targets["open"]]
        columns = st.columns(4)
        # The same "Targets tracked" as the Overview and Availability; the rows here are those a drafter declares.
        columns[0].metric("Targets tracked", queries.counts(db).targets, help=panels.TARGETS_HELP)
        columns[1].metric("With a drafter declared", len(targets), help="The targets this page lists")
        columns[2].metric("Open lags", len(waiting), help="No exact drafter yet; these grow by a day every day")
        measured = targets["lag_days"].dropna()
        columns[3].metric("Median lag (days)", f"{measured.median():.0f}" if len(measured) else "–")

        st.subheader("Timeline")
        dated = targets[targets["released"].notna()].copy()
        dated["start"] = pd.to_datetime(dated["released"])
        dated["end"] = pd.to_datetime(dated["first_drafter_released"].where(~dated["open"], today))
        dated["state"] = dated["open"].map({True: "open (still growing)", False: "closed"})
        spans = dated[["target_repo_id", "start", "end", "lag_days", "state"]].rename(columns={"target_repo_id": "target"})
        spans["lag_days"] = spans["lag_days"].astype(float)
        order = spans.sort_values("start")["target"].tolist()
        bars = (
            alt.Chart(spans)
            .mark_rule(strokeWidth=3)
            .encode(
                y=alt.Y("target:N", sort=order, title=None, axis=alt.Axis(labelLimit=400)),
                x=alt.X("start:T", title="release date"),
                x2="end:T",
                color=alt.Color("state:N", scale=alt.Scale(domain=["closed", "open (still growing)"],
                                                           range=["#1565c0", "#c62828"])),
                tooltip=["target", "start", "end", "lag_days", "state"],
            )
        )
        points = (
            alt.Chart(report.timeline)
            .mark_point(filled=True, size=60)
            .encode(
                y=alt.Y("target:N", sort=order),
                x="date:T",
                shape=alt.Shape("event:N", scale=alt.Scale(domain=["target released", "drafter released"],
                                                           range=["circle", "triangle-right"])),
                tooltip=["target", "event", "repo", "date"],
            )
        )
        st.altair_chart((bars + points).properties(height=max(200, 18 * len(order))), width="stretch")

        st.subheader("Open lags, still growing")
        if waiting.empty:
            st.success("Every target with a declared drafter has an exact one.")
        else:
            data.dataframe(
                waiting[["target_repo_id", "org", "family", "released", "lag_days"]],
                hide_index=True, width="stretch", key="open_lags",
            )

        st.subheader("Lag distribution")
        distribution = targets[targets["lag_days"].notna()].assign(lag_days=lambda f: f["lag_days"].astype(float))
        left, right = st.columns(2)
        for column, key, frame in ((left, "family", report.by_family), (right, "publisher", report.by_publisher)):
            with column:
                shown = distribution.assign(**{key: distribution[key].fillna("unknown")})
                if key == "publisher":
                    shown = shown[distribution["publisher"].notna()]
                if not shown.empty:
                    box = (
                        alt.Chart(shown, title=f"Lag (days) per {key}")
                        .mark_boxplot(extent="min-max")
                        .encode(x=alt.X("lag_days:Q", title="days"), y=alt.Y(f"{key}:N", title=None))
                    )
                    st.altair_chart(box, width="stretch")
                data.dataframe(frame, hide_index=True, width="stretch", key=f"lag_by_{key}")

        st.subheader("All targets")
        data.dataframe(targets.drop(columns=["exact_drafters"]), hide_index=True, width="stretch", key="lag_targets")

st.subheader("Base upgrades waiting for a drafter")
with data.guard("Upgrades"):
    upgrades = queries.upgrades(db, today)
    if upgrades.empty:
        st.info("No successor of a checkpoint with drafters is tracked yet; the watcher records them as they appear.")
    else:
        waiting, closed = upgrades[upgrades["open"]], upgrades[~upgrades["open"].astype(bool)]
        if waiting.empty:
            st.success(f"None: every one of the {len(closed)} tracked upgrades has an exact drafter (below).")
        else:
            st.caption("A successor of a model that had drafters, still without an exact drafter of its own; longest "
                       "wait first.")
            data.dataframe(waiting.drop(columns=["open"]), hide_index=True, width="stretch", key="upgrades")
        if not closed.empty:
            st.subheader("Upgrades that got their drafter")
            st.caption("lag_days: from the successor's release to its first exact drafter.")
            data.dataframe(closed.drop(columns=["open"]), hide_index=True, width="stretch", key="upgrades_closed")
