"""Overview: how much the registry knows, and what happened last."""

from __future__ import annotations

import streamlit as st

from dashboard import data

st.title("Drafter Registry")
st.caption("Which speculative-decoding drafters exist for your model, whether they fit, and how long it took.")
url = data.require_database()

with data.guard("Counts"):
    counts = data.counts(url)
    columns = st.columns(5)
    columns[0].metric("Targets tracked", counts.targets)
    columns[1].metric("Drafters", counts.drafters)
    columns[2].metric("Exact pairs", counts.exact_pairs, help="Drafter and checkpoint head revisions that match exactly")
    columns[3].metric("Open lags", counts.open_lags, help="Declared targets with no exact drafter yet")
    columns[4].metric("Benchmark runs", counts.runs, help=f"{counts.failed_runs} of them failed")
    if counts.targets == 0 and counts.drafters == 0:
        data.empty_hint("The registry is empty.")

st.subheader("Latest events")
with data.guard("Latest events"):
    latest = data.events(url, limit=20)
    if latest.empty:
        st.info("No events yet: `drafters watch --once` records new drafters, revisions and lags as events.")
    else:
        st.dataframe(latest, hide_index=True, width="stretch")

st.caption(f"database: {data.shown_url(url)}")
