"""Alerts: the events the watcher recorded, filtered, and the Atom feed that carries them."""

from __future__ import annotations

import streamlit as st

from dashboard import data, panels, queries

st.title("Alerts")
db = data.require_database()

with data.guard("Events"):
    options = queries.event_options(db)
    columns = st.columns(4)
    types = columns[0].multiselect("Type", options.types, key="alert_types")
    orgs = columns[1].multiselect("Org", options.orgs, key="alert_orgs")
    families = columns[2].multiselect("Family", options.families, key="alert_families")
    since = columns[3].date_input("Since", value=None, key="alert_since")
    shown = queries.events(db, types=tuple(types), orgs=tuple(orgs), families=tuple(families), since=since)
    if shown.empty and not (types or orgs or families or since):
        panels.no_events(db)
    elif shown.empty:
        st.info("No event matches these filters.")
    else:
        st.caption(f"{len(shown)} events, newest first")
        data.dataframe(shown, hide_index=True, width="stretch")

st.subheader("Atom feed")
with data.guard("Feed"):
    path = data.feed_path()
    if path.is_file():
        # No file:// link: a browser refuses one from an http page. The button serves the file over http; a feed
        # reader on this machine subscribes to the path.
        st.markdown(f"`drafters up` keeps the feed at `{path}`: a feed reader on this machine subscribes to "
                    "that file; the button below downloads it.")
        st.download_button("Download feed.atom", path.read_bytes(), file_name="feed.atom", mime="application/atom+xml")
    else:
        st.info(f"No feed at `{path}` yet: `drafters up` writes it as alerts are delivered "
                "(`drafters feed` by hand).")
