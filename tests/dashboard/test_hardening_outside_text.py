"""Outside text stays inert in the feed and on the dashboard (hardening round 4, item 6).

Probes guarded here:
- `feed.atom` keeps no bidirectional or other format character (U+202E, U+2066, zero-width, BOM) from a Hub name
  or message (registry.alerts.feed.xml_text)
- the Pair page's Target and Drafter selects show a folder name holding U+202E neutralised (dashboard.data.plain,
  through option_label); Markdown text (dashboard.data.md) drops every format character too
- a bare `https://…`, `www.…` or `user@host` in Hub text does not become a live link in Markdown (GFM's autolinker
  reads the text after escapes, so escaping `:` and `.` was not enough; a word joiner breaks the pattern)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dashboard.data import md, plain
from registry.alerts.feed import render_feed
from registry.domain.records import EventRecord
from tests.dashboard.conftest import local_pair_db, point_dashboard_at, run_page

FORMAT = ("\u202e", "\u202d", "\u2066", "\u2069", "\u200b", "\u200f", "\ufeff", "\u00ad", "\U000e0041", "\u2028")
# GFM autolink literals: what must never stand in Markdown text contiguously.
AUTOLINKED = re.compile(r"[A-Za-z]\\?://|\bwww\\?\.|@[A-Za-z0-9]")


def test_the_feed_drops_bidi_and_format_characters() -> None:
    name = "evil/Qwen3-8B-" + "".join(FORMAT) + "gpj.exe"
    event = EventRecord(id=1, type="new_checkpoint", subject=name, org="evil", family="qwen",
                        payload={"message": f"new checkpoint {name}"}, dedupe_key=f"new_checkpoint:{name}",
                        created_at=datetime(2026, 12, 1, tzinfo=UTC))
    feed = render_feed([event]).decode("utf-8")
    assert [c for c in FORMAT if c in feed] == []
    assert "gpj.exe" in feed  # the rest of the text is kept


@pytest.mark.parametrize("raw", [
    "see https://evil.example/login now", "http://127.0.0.1:8501/", "www.evil.example/x", "mail bob@evil.example",
    "HTTPS://EVIL.EXAMPLE", "ftp://files.example",
])
def test_bare_urls_in_markdown_are_not_autolinked(raw: str) -> None:
    shown = md(raw)
    assert not AUTOLINKED.search(shown), shown
    assert shown.replace("\u2060", "").replace("\\", "") == raw  # reads the same


@pytest.mark.parametrize("character", FORMAT)
def test_every_format_character_is_neutralised(character: str) -> None:
    assert character not in md(f"a{character}b") and character not in plain(f"a{character}b")


def test_the_pair_page_selects_neutralise_a_bidi_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "models" / "target\u202eexe.fdp"
    drafter = tmp_path / "models" / "drafter\u2066x\u2069"
    point_dashboard_at(local_pair_db(tmp_path, target, drafter), monkeypatch)
    app = run_page("pair")
    assert not app.exception, [e.value for e in app.exception]
    for key in ("target", "drafter"):
        options = list(app.selectbox(key=key).options)
        assert options, key
        for option in options:
            assert not [c for c in FORMAT if c in option], (key, option)
    assert app.selectbox(key="target").value == str(target)  # the choice itself is the real folder
