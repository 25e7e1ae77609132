"""The dashboard's pages: scripts that dashboard/app.py runs through st.navigation.

Not named pages/: Streamlit treats a pages/ folder beside the main script as a legacy multipage app and then
ignores st.navigation (its titles, its order, its default page)."""
