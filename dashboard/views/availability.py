"""Availability: the best drafter of each method for each tracked checkpoint, and a search box for one."""

from __future__ import annotations

import altair as alt
import streamlit as st

from dashboard import data
from dashboard.queries import METHOD_LABELS, NO_VERDICT, availability_matrix

VERDICT_COLORS = {"exact": "#2e7d32", "declared": "#1565c0", "structural": "#f9a825", "unknown": "#9e9e9e", "incompatible": "#c62828",
                  NO_VERDICT: "#e0e0e0"}

st.title("Availability")
url = data.require_database()

st.subheader("What can I use with this checkpoint?")
with data.guard("Search"):
    query = st.text_input("Checkpoint repo id", key="search", placeholder="Qwen/Qwen3-8B").strip()
    if query:
        found = data.resolve_checkpoint(url, query)
        if found is None:
            matches = data.search_checkpoints(url, query)
            if len(matches) == 1:
                found = matches[0]
            elif matches:
                found = st.selectbox("Matching checkpoints", matches, key="search_match")
            else:
                st.warning(
                    f"{data.md(query)} is not in the registry: `drafters watch --once` picks up new checkpoints of watched "
                    "orgs, `drafters catalog load` loads the bundled catalog."
                )
        if found is not None:
            fits = data.drafters_for(url, found)
            if fits.empty:
                st.info(f"No drafter in the registry has a verdict for {data.md(found)}.")
            else:
                st.markdown(f"**{data.md(found)}**: {len(fits)} drafters with a verdict, best first")
                data.dataframe(fits, hide_index=True, width="stretch", key="search_result")

st.subheader("Checkpoints × drafter methods")
with data.guard("Availability"):
    options = data.checkpoint_options(url)
    columns = st.columns(3)
    orgs = columns[0].multiselect("Org", options.orgs, key="orgs")
    families = columns[1].multiselect("Family", options.families, key="families")
    sizes = columns[2].multiselect("Size", options.sizes, key="sizes")
    cells = data.availability(url, tuple(orgs), tuple(families), tuple(sizes))
    if cells.empty and not (orgs or families or sizes):
        data.empty_hint("No checkpoints tracked yet.")
    elif cells.empty:
        st.info("No checkpoint matches these filters.")
    else:
        checkpoints = cells["checkpoint"].nunique()
        st.caption(
            f"{checkpoints} checkpoints; each cell: best verdict (exact, declared, structural, unknown, incompatible, or "
            "none) · the drafter holding it · its lag in days after the checkpoint's release"
        )
        data.dataframe(availability_matrix(cells), hide_index=True, width="stretch", key="matrix")
        tally = cells.assign(method=cells["method"].map(METHOD_LABELS)).groupby(["method", "verdict"]).size()
        tally = tally.rename("checkpoints").reset_index()
        chart = (
            alt.Chart(tally, title="Checkpoints by best verdict per method")
            .mark_bar()
            .encode(
                x=alt.X("checkpoints:Q", title="checkpoints"),
                y=alt.Y("method:N", sort=list(METHOD_LABELS.values()), title=None),
                color=alt.Color(
                    "verdict:N",
                    scale=alt.Scale(domain=list(VERDICT_COLORS), range=list(VERDICT_COLORS.values())),
                ),
                tooltip=["method", "verdict", "checkpoints"],
            )
        )
        st.altair_chart(chart, width="stretch")
