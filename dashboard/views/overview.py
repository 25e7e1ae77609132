"""Overview: how much the registry knows, and what happened last."""

from __future__ import annotations

import streamlit as st

from dashboard import data

st.title("Drafter Registry")
st.caption("Which speculative-decoding drafters exist for your model, whether they fit, and how long it took.")
url = data.require_database()

with data.guard("Counts"):
    counts = data.counts(url)
    columns = st.columns(6)
    columns[0].metric("Targets tracked", counts.targets)
    columns[1].metric("Drafters", counts.drafters)
    columns[5].metric("DFlash v1 drafters", counts.dflash_v1, help="z-lab's published list: 21 checkpoints, 10 families")
    columns[2].metric("Exact pairs", counts.exact_pairs, help="Drafter and checkpoint head revisions that match exactly")
    columns[3].metric("Open lags", counts.open_lags, help="Declared targets with no exact drafter yet")
    columns[4].metric("Benchmark runs", counts.runs, help=f"{counts.failed_runs} of them failed")
    if counts.targets == 0 and counts.drafters == 0:
        data.empty_hint("The registry is empty.")

st.subheader("The service")
with data.guard("The service"):
    parts = data.service_state(url)
    jobs = data.job_states(url)
    if parts.empty:
        st.info("No `drafters up` has recorded its state in this database yet.")
    else:
        if jobs:
            st.caption("Verification jobs: " + ", ".join(f"{n} {state}" for state, n in sorted(jobs.items())))
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
    speedups = data.latest_speedups(url)
    if speedups.empty:
        st.info("No measurements yet: `drafters verify TARGET DRAFTER` or `drafters demo` measures a pair.")
    else:
        slower = speedups[speedups["speedup"] < 1.0]
        if not slower.empty:
            cpu = slower["hardware"].fillna("").str.lower().str.startswith("cpu")
            st.warning(f"{len(slower)} of {len(speedups)} pairs are slower with their drafter (speedup below 1×: "
                       "the drafter costs more than it saves)."
                       + (" On a CPU with tiny models that is expected: the decode loop's overhead outweighs the "
                          "forwards a drafter saves." if cpu.all() else ""))
        data.dataframe(speedups, hide_index=True, width="stretch", column_config={
            "speedup": st.column_config.NumberColumn("speedup", format="%.2f×", help="1.0× is break-even"),
            "tau": st.column_config.NumberColumn("τ", format="%.2f")})

st.subheader("The DFlash v1 drafters and their targets' lag")
with data.guard("DFlash v1 drafters"):
    v1 = data.dflash_v1(url, data.today())
    if v1.empty:
        st.info("The catalog is not loaded: `drafters catalog load`.")
    else:
        data.dataframe(v1, hide_index=True, width="stretch")

st.subheader("Latest events")
with data.guard("Latest events"):
    latest = data.events(url, limit=20)
    if latest.empty:
        st.info("No events yet: `drafters watch --once` records new drafters, revisions and lags as events.")
    else:
        data.dataframe(latest, hide_index=True, width="stretch")

st.caption(f"database: {data.md(data.shown_url(url))}")
