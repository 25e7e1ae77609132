"""Alerts: the events the watcher recorded, filtered, and the Atom feed that carries them."""

from __future__ import annotations

import streamlit as st

from dashboard import data

st.title("Alerts")
url = data.require_database()

with data.guard("Events"):
    options = data.event_options(url)
    columns = st.columns(4)
    types = columns[0].multiselect("Type", options.types, key="alert_types")
    orgs = columns[1].multiselect("Org", options.orgs, key="alert_orgs")
    families = columns[2].multiselect("Family", options.families, key="alert_families")
    since = columns[3].date_input("Since", value=None, key="alert_since")
    shown = data.events(url, tuple(types), tuple(orgs), tuple(families), since)
    if shown.empty and not (types or orgs or families or since):
        st.info("No events yet: `drafters watch --once` records them.")
    elif shown.empty:
        st.info("No event matches these filters.")
    else:
        st.caption(f"{len(shown)} events, newest first")
        data.dataframe(shown, hide_index=True, width="stretch")

st.subheader("Atom feed")
with data.guard("Feed"):
    path = data.feed_path()
    if path.is_file():
        st.markdown(f"The feed is at `{path}` ([open]({path.as_uri()})); subscribe to it in a feed reader.")
        st.download_button("Download feed.atom", path.read_bytes(), file_name="feed.atom", mime="application/atom+xml")
    else:
        st.info(f"No feed at `{path}` yet: `drafters feed` writes it there.")
