"""Plan: every exact pair and what the live workers do about it — measured, queued, downloading, needs N GiB,
gated, no engine — always with the reason; and the downloads the service made."""

from __future__ import annotations

import streamlit as st

from dashboard import data, panels, plan_queries
from registry.settings import get_settings

st.title("Plan")
db = data.require_database()

with data.guard("Plan"):
    view = plan_queries.plan_view(db, structural=get_settings().autoverify_structural)
    if view.worker is None:
        state = panels.service(db)
        st.info("No live worker: `drafters up` states this machine's device, memory and engines, then plans"
                + (f" (the service is running: {data.md(state.watcher or 'started')})." if state.running else "."))
    else:
        worker = view.worker
        st.caption(f"Planned for {worker.device} with {worker.memory_bytes / 2**30:.1f} GiB, engines "
                   f"{', '.join(f'{k} ({v})' for k, v in worker.engines.items()) or 'none'}, download budget "
                   f"{worker.disk_budget_bytes / 2**30:.1f} GiB ({view.workers} live worker(s))")
        columns = st.columns(max(1, len(view.counts)))
        for column, (state, count) in zip(columns, view.counts.items()):
            column.metric(state, count)
        if view.pairs.empty:
            panels.empty_hint("No exact pair recorded yet.", db)
        else:
            data.dataframe(view.pairs, hide_index=True, width="stretch",
                           column_config={"link": st.column_config.LinkColumn("link")})

st.subheader("Downloads")
with data.guard("Downloads"):
    view = plan_queries.plan_view(db, structural=get_settings().autoverify_structural)
    if view.downloads.empty:
        st.info("Nothing downloaded yet: autoverify downloads a pair when it fits this worker.")
    else:
        data.dataframe(view.downloads, hide_index=True, width="stretch")
