"""Outside text is inert in the dashboard's Markdown: a folder or repo name with a Markdown link, HTML or a bidi
override shows as text in the Pair page's captions and hover tooltips (`help=`), through the one Markdown
sanitizer, dashboard.data.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.data import md
from registry.store import Store
from registry.store.runs import Run, record_run
from tests.dashboard.conftest import point_dashboard_at, run_page
from tests.registry.run_fixtures import measured

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
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
    for folder, name in ((target, "Qwen__Qwen3-8B.json"), (drafter, "z-lab__Qwen3-8B-DFlash-b16.json")):
        folder.mkdir(parents=True)
        (folder / "config.json").write_bytes((CONFIGS / name).read_bytes())
    url = f"sqlite:///{tmp_path / 'local.db'}"
    store = Store.open(url)
    record_run(store, Run(target=str(target), drafter=str(drafter), method="dflash", run_id="job1", lossless=True,
                          overall=measured(speedup=1.1), target_weight_bytes=16_000_000_000,
                          drafter_weight_bytes=2_000_000_000))
    store.engine.dispose()
    point_dashboard_at(url, monkeypatch)
    app = run_page("pair")
    assert not app.exception, [e.value for e in app.exception]
    tooltips = [c.proto.help for c in app.caption if c.proto.help]
    assert len(tooltips) >= 2, tooltips
    shown = [*tooltips, *(c.value for c in app.caption), *(m.value for m in app.markdown)]
    for text in shown:
        assert "[click me](" not in text and "\u202e" not in text, text
    assert md(str(target)) in tooltips and md(str(drafter)) in tooltips
