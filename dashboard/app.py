"""The dashboard's entry point: `streamlit run dashboard/app.py` (or `dashboard.launch`)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="Drafter Registry", layout="wide")
navigation = st.navigation(
    [
        st.Page(PAGES / "overview.py", title="Overview", url_path="overview", default=True),
        st.Page(PAGES / "availability.py", title="Availability", url_path="availability"),
        st.Page(PAGES / "lag.py", title="Lag", url_path="lag"),
        st.Page(PAGES / "benchmarks.py", title="Benchmarks", url_path="benchmarks"),
        st.Page(PAGES / "pair.py", title="Pair", url_path="pair"),
        st.Page(PAGES / "alerts.py", title="Alerts", url_path="alerts"),
        st.Page(PAGES / "plan.py", title="Plan", url_path="plan"),
    ]
)
navigation.run()
