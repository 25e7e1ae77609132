"""The dashboard's entry point: `streamlit run dashboard/app.py` (or `dashboard.launch`)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="Drafter Registry", layout="wide")
navigation = st.navigation(
    [
        # The landing page lives at the root; Streamlit reserves a default page's url_path without serving it, so
        # /overview is the same script as a hidden page of its own (a bookmark or a typed URL finds it).
        st.Page(PAGES / "overview.py", title="Overview", url_path="home", default=True),
        st.Page(PAGES / "overview.py", title="Overview", url_path="overview", visibility="hidden"),
        st.Page(PAGES / "availability.py", title="Availability", url_path="availability"),
        st.Page(PAGES / "lag.py", title="Lag", url_path="lag"),
        st.Page(PAGES / "benchmarks.py", title="Benchmarks", url_path="benchmarks"),
        st.Page(PAGES / "pair.py", title="Pair", url_path="pair"),
        st.Page(PAGES / "alerts.py", title="Alerts", url_path="alerts"),
        st.Page(PAGES / "plan.py", title="Plan", url_path="plan"),
    ]
)
navigation.run()
