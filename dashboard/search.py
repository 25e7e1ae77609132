""""What can I use with this checkpoint?": the search box the landing page opens with and the Availability page
repeats, one widget over `queries.ranked_drafters` (the ranking `find` uses)."""

from __future__ import annotations

import streamlit as st

from dashboard import data, queries
from registry.store.read_queries import ReadOnlyQueries


def checkpoint_search(db: ReadOnlyQueries, *, key: str = "search") -> None:
    """A repo id (or a part of one) in, every drafter with a verdict for it out, best first, each linked to its
    Pair page."""
    query = st.text_input("Checkpoint repo id", key=key, placeholder="Qwen/Qwen3-8B").strip()
    if not query:
        return
    found = db.catalog.resolve_checkpoint(query)
    if found is None:
        matches = db.catalog.search_checkpoints(query)
        if len(matches) == 1:
            found = matches[0]
        elif matches:
            found = st.selectbox("Matching checkpoints", matches, key=f"{key}_match")
        else:
            st.warning(
                f"{data.md(query)} is not in the registry: `drafters up` picks up new checkpoints of watched orgs "
                "as they appear (`drafters watch --once` by hand), and `drafters find` looks a repo up on the Hub."
            )
    if found is None:
        return
    fits = queries.ranked_drafters(db, found)
    if fits.empty:
        st.info(f"No drafter in the registry has a verdict for {data.md(found)}.")
        return
    st.markdown(f"**{data.md(found)}**: {len(fits)} drafters with a verdict, best first")
    shown = fits.assign(pair=[data.pair_link(found, drafter) for drafter in fits["drafter"]])
    data.dataframe(shown, hide_index=True, width="stretch", key=f"{key}_result",
                   column_config={"pair": st.column_config.LinkColumn("pair", display_text="open the Pair page")})
