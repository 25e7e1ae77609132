"""Availability: the best drafter of each method for each tracked checkpoint, and a search box for one."""

from __future__ import annotations

import altair as alt
import streamlit as st

from dashboard import data, panels, queries
from dashboard.queries import METHOD_LABELS, NO_VERDICT
from dashboard.search import checkpoint_search

VERDICT_COLORS = {"exact": "#2e7d32", "declared": "#1565c0", "structural": "#f9a825", "unknown": "#9e9e9e", "incompatible": "#c62828",
                  NO_VERDICT: "#e0e0e0"}

st.title("Availability")
db = data.require_database()

st.subheader("What can I use with this checkpoint?")
with data.guard("Search"):
    checkpoint_search(db, key="search")

st.subheader("Checkpoints × drafter methods")
with data.guard("Availability"):
    options = queries.checkpoint_options(db)
    columns = st.columns(3)
    orgs = columns[0].multiselect("Org", options.orgs, key="orgs")
    families = columns[1].multiselect("Family", options.families, key="families")
    sizes = columns[2].multiselect("Size", options.sizes, key="sizes")
    cells = queries.availability(db, orgs=tuple(orgs), families=tuple(families), sizes=tuple(sizes))
    if cells.empty and not (orgs or families or sizes):
        panels.empty_hint("No checkpoints tracked yet.", db)
    elif cells.empty:
        st.info("No checkpoint matches these filters.")
    else:
        checkpoints = cells["checkpoint"].nunique()
        total = queries.counts(db).targets
        shown_of = f"{checkpoints} of the {total} targets tracked" if checkpoints != total else f"{total} targets tracked"
        st.caption(
            f"{shown_of}. Each method's cell: the best verdict (its colour: green exact, blue declared, yellow "
            "structural, grey unknown, red incompatible, pale none) · the drafter holding it · its lag in days after "
            "the checkpoint's release. `pair` opens the best pair's page; `measured speedup` is the best of the "
            "newest run of each series (hardware, engine, conditions), `published τ` the pair's published band, `engines` the engines this registry measures it on."
        )
        matrix = queries.availability_grid(db, orgs=tuple(orgs), families=tuple(families), sizes=tuple(sizes))
        data.dataframe(matrix, hide_index=True, width="stretch", key="matrix",
                       styled=["best", *METHOD_LABELS.values()],
                       column_config={"pair": st.column_config.LinkColumn("pair", display_text="open")})
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
