"""Outside text is inert in the dashboard's Markdown: a folder or repo name with a Markdown link, HTML or a bidi
override shows as text in the Pair page's captions and hover tooltips (`help=`), through the one Markdown
sanitizer, dashboard.data.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.data import md
from tests.dashboard.conftest import local_pair_db, point_dashboard_at, run_page

LINK = "[click me](https:evil.example)"


@pytest.mark.parametrize(("raw", "shown"), [
    (LINK, "\\[click me\\]\\(https\\:evil\\.example\\)"),
    ("<img src=x onerror=alert(1)>", "\\<img src\\=x onerror\\=alert\\(1\\)\\>"),
    ("a\u202eb\u2066c\x1b[2Jd", "a b c \\[2Jd"),
])
def test_md_escapes_markdown_html_and_controls(raw: str, shown: str) -> None:
    assert md(raw) == shown


def test_pair_tooltips_and_captions_show_a_hostile_folder_name_as_text(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "models" / f"target {LINK}"
    drafter = tmp_path / "models" / f"drafter {LINK}\u202e"
    point_dashboard_at(local_pair_db(tmp_path, target, drafter), monkeypatch)
    app = run_page("pair")
    assert not app.exception, [e.value for e in app.exception]
    tooltips = [c.proto.help for c in app.caption if c.proto.help]
    assert len(tooltips) >= 2, tooltips
    shown = [*tooltips, *(c.value for c in app.caption), *(m.value for m in app.markdown)]
    for text in shown:
        assert "[click me](" not in text and "\u202e" not in text, text
    assert md(str(target)) in tooltips and md(str(drafter)) in tooltips
