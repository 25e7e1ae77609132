"""Overview, the landing page: what can I use with my checkpoint first, then what the service is doing, the
measured speedups and what happened last."""

from __future__ import annotations

import streamlit as st

from dashboard import data, panels, queries
from dashboard.search import checkpoint_search

st.title("Drafter Registry")
st.caption("Which speculative-decoding drafters exist for your model, whether they fit, and how long it took.")
db = data.require_database()

st.subheader("What can I use with my checkpoint?")
with data.guard("Search"):
    checkpoint_search(db, key="search")

with data.guard("Counts"):
    counts = queries.counts(db)
    columns = st.columns(6)
    columns[0].metric("Targets tracked", counts.targets, help=panels.TARGETS_HELP)
    columns[1].metric("Drafters", counts.drafters)
    columns[5].metric("DFlash v1 drafters", counts.dflash_v1, help="z-lab's published list: 21 checkpoints, 10 families")
    columns[2].metric("Exact pairs", counts.exact_pairs, help="Drafter and checkpoint head revisions that match exactly")
    columns[3].metric("Open lags", counts.open_lags, help="Declared targets with no exact drafter yet")
    columns[4].metric("Benchmark runs", counts.runs, help=f"{counts.failed_runs} of them failed")
    if counts.targets == 0 and counts.drafters == 0:
        panels.empty_hint("The registry is empty.", db)

st.subheader("The service")
with data.guard("The service"):
    parts = queries.service_state(db)
    state = panels.service(db)
    if parts.empty:
        st.info("No `drafters up` has recorded its state in this database yet: it watches the Hub, measures and "
                "serves this dashboard.")
    else:
        lines = [state.watcher or "no watcher", f"verification jobs: {state.queue or 'none waiting'}"]
        if state.last_run:
            lines.append(f"worker: {state.last_run}")
        (st.warning if state.watcher_trouble else st.caption)(
            ("Running: " if state.running else "Not running now (no heartbeat for 15 minutes): ")
            + data.md("; ".join(lines)))
        servers = parts[parts["part"].str.startswith("canary")]
        if not servers.empty:
            problems = servers[servers["state"] != "healthy"]
            if problems.empty:
                st.success(f"{len(servers)} checked server(s): speculation engaged and in band")
            else:
                st.warning(f"{len(problems)} of {len(servers)} checked server(s) need attention "
                           "(`drafters doctor --url URL` says why)")
        data.dataframe(parts, hide_index=True, width="stretch")

st.subheader("Measured speedups")
with data.guard("Measured speedups"):
    speedups = queries.latest_speedups(db)
    if speedups.empty:
        panels.no_measurements(db)
    else:
        panels.slowdown_warning(speedups)
        # The answer first: the pair and its speedup, then what it holds for.
        first = ["target", "drafter", "speedup", "tau", "hardware", "engine"]
        speedups = speedups[[c for c in first if c in speedups.columns]
                            + [c for c in speedups.columns if c not in first]]
        data.dataframe(speedups, hide_index=True, width="stretch", column_config={
            "tau": st.column_config.NumberColumn("τ", format="%.2f")})

st.subheader("The DFlash v1 drafters and their targets' lag")
with data.guard("DFlash v1 drafters"):
    v1 = queries.dflash_v1(db, data.today())
    if v1.empty:
        st.info("The catalog is not loaded yet: `drafters up` loads it at start (`drafters catalog load` by hand).")
    else:
        data.dataframe(v1, hide_index=True, width="stretch")

st.subheader("Latest events")
with data.guard("Latest events"):
    latest = queries.events(db, limit=20)
    if latest.empty:
        panels.no_events(db)
    else:
        data.dataframe(latest, hide_index=True, width="stretch")

st.caption(f"database: {data.md(data.shown_url(db.url))}")
