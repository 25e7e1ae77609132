"""Text from the Hub cannot break an output: a hostile config value served by the fake Hub, and a hostile event
message, go through the Atom feed (read with feedparser), a webhook body (Slack's escaping), the CLI (no
terminal escapes, no Rich markup) and the dashboard's pages (no Markdown)."""

from __future__ import annotations

import json
from pathlib import Path

import feedparser
import pytest

from registry.alerts import webhooks as alerts
from registry.alerts.feed import render_feed
from registry.alerts.secrets import SecretBox
from registry.domain.drafter_facts import detect_method
from registry.domain.records import EventSpec
from registry.store import Store
from tests.fakehub.scenario import QWEN3_8B_DFLASH_CONFIG, Scenario
from tests.fakehub.server import FakeHub
from tests.fakehub.state import dflash_drafter_files, utc
from tests.support.cli import drafters
from tests.support.receiver import Receiver

HOSTILE = "<!channel> <https://evil.example|click> \x01\x1b[2J [bold red]pwned[/] **bold** & \x07"
EVIL_DRAFTER = "z-lab/Qwen3-8B-Evil-speculator"


def assert_inert(text: str) -> None:
    """No control character (ESC, BEL, SOH) and no live Slack mention or link."""
    assert not any(ord(c) < 32 and c not in "\n\t" for c in text), repr(text)
    assert "<!channel>" not in text and "<https://evil.example|click>" not in text


def test_only_known_method_names_pass() -> None:
    assert detect_method({"speculators_model_type": HOSTILE}) == "unknown"
    assert detect_method({"speculators_model_type": "EAGLE3"}) == "eagle3"
    assert detect_method({"speculators_model_type": "peagle"}) == "peagle"


def test_a_hostile_hub_config_breaks_nothing(tmp_path: Path, scenario: Scenario, hub: FakeHub) -> None:
    home = tmp_path / "home"
    env = {"DRAFTERS_HOME": str(home), "DRAFTERS_HUB_ENDPOINT": hub.url, "DRAFTERS_WATCHED_ORGS": '["Qwen","z-lab"]'}
    assert drafters("watch", "--once", env=env).returncode == 0  # the baseline: nothing is news yet
    evil_config = {**QWEN3_8B_DFLASH_CONFIG, "speculators_model_type": HOSTILE,
                   "speculators_config": {"verifier": {"name_or_path": "Qwen/Qwen3-8B"}}}
    evil_config.pop("auto_map")
    files = dflash_drafter_files(evil_config, 7, target_repo="Qwen/Qwen3-8B")
    files.pop("dflash.py", None)
    scenario.state.add_repo(EVIL_DRAFTER, files=files, date=utc(2026, 1, 6), tags=("speculative-decoding",))
    database_url = f"sqlite:///{home / 'registry.db'}"
    store = Store.open(database_url)
    # Whatever a future message is made of, it may carry Hub text: the outputs must hold up on their own.
    store.events.record_event(EventSpec(type="drafter_released", subject=EVIL_DRAFTER, dedupe_key="hostile:1",
                                 payload={"message": f"drafter says {HOSTILE}"}, org="z-lab", family="qwen"))
    box = SecretBox(home / "secrets.json")
    with Receiver() as receiver:
        alerts.subscribe(store, box, receiver.url, include_past=True, allow_internal=True)
        polled = drafters("watch", "--once", env=env)
        assert polled.returncode == 0, polled.stderr
        assert EVIL_DRAFTER in polled.stdout
        delivered = drafters("deliver", env={**env, "DRAFTERS_WEBHOOK_ALLOW_INTERNAL": "1"})
        assert delivered.returncode == 0, delivered.stderr
        bodies = [r.json for r in receiver.received]
    events = store.events.events()
    assert any(e.subject == EVIL_DRAFTER and e.type == "drafter_released" and e.dedupe_key != "hostile:1"
               for e in events), [(e.type, e.subject) for e in events]

    # The webhook: Slack sees &lt;!channel&gt;, which it shows and does not act on; the JSON keeps the raw value.
    hostile_bodies = [b for b in bodies if b["event"]["subject"] == EVIL_DRAFTER]
    assert len(hostile_bodies) == 2
    for body in hostile_bodies:
        assert_inert(body["text"])
    assert any("&lt;!channel&gt; &lt;https://evil.example|click&gt;" in b["text"] and "&amp;" in b["text"]
               for b in hostile_bodies)

    # The feed: well-formed, and what a reader shows is the text without control characters.
    feed_path = tmp_path / "feed.atom"
    assert drafters("feed", "--out", str(feed_path), env=env).returncode == 0
    parsed = feedparser.parse(feed_path.read_bytes())
    assert parsed.bozo == 0, parsed.get("bozo_exception")
    summaries = [e.summary for e in parsed.entries]
    assert any("<!channel>" in s for s in summaries)  # shown as text, escaped in the XML
    for summary in summaries:
        assert not any(ord(c) < 32 for c in summary), repr(summary)
    assert feedparser.parse(render_feed(events)).bozo == 0

    # The CLI: no escape sequence reaches the terminal, and Rich markup is shown, not applied.
    for args in (("alerts",), ("alerts", "--json"), ("find", "Qwen/Qwen3-8B"), ("check", EVIL_DRAFTER, "Qwen/Qwen3-8B")):
        result = drafters(*args, env={**env, "TERM": "xterm-256color", "FORCE_COLOR": "1"})
        assert result.returncode == 0, (args, result.stderr)
        assert "\x1b[2J" not in result.stdout and "\x01" not in result.stdout and "\x07" not in result.stdout, args
    shown = drafters("alerts", env=env).stdout
    assert "[bold red]pwned[/]" in shown.replace("\n", "").replace("│", "").replace(" ", "") or \
        "[boldred]pwned[/]" in "".join(shown.split())
    assert json.loads(drafters("alerts", "--json", env=env).stdout)["items"]  # JSON carries the raw text, escaped by JSON
    store.engine.dispose()


def test_hostile_names_are_literal_on_the_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard import data
    from registry.store.runs import Run
    from tests.dashboard.conftest import point_dashboard_at, run_page

    # A local folder's name is anyone's text: it reaches the Pair page's Markdown through runs.
    folder = "/tmp/models/**evil** [click](https://evil.example) :red[x] $y$"
    url = f"sqlite:///{tmp_path / 'pages.db'}"
    store = Store.open(url)
    store.runs.record_run(Run(target=folder + "-target", drafter=folder, method="dflash", run_id="job1"))
    store.events.record_event(EventSpec(type="drafter_released", subject=EVIL_DRAFTER, dedupe_key="hostile:page",
                                 payload={"message": HOSTILE}, org="z-lab", family="qwen"))
    store.engine.dispose()
    point_dashboard_at(url, monkeypatch)
    for page in ("pair", "alerts", "overview"):
        app = run_page(page)
        assert not app.exception and not app.error, (page, [e.value for e in app.error])
        shown = " ".join(e.value for kind in ("markdown", "info", "caption", "warning") for e in app.get(kind))
        assert "[click](https://evil.example)" not in shown, (page, shown)
        assert "**evil**" not in shown and ":red[x]" not in shown and "$y$" not in shown, (page, shown)
        assert "\x1b" not in shown
    # U+2060 after the scheme: Markdown's autolinker reads the text after escapes (issue 32 item 6).
    assert data.md("**x** [a](http://e) <b> $y$ :red[z]") == (r"\*\*x\*\* \[a\]\(http\:" + "\u2060"
                                                               + r"//e\) \<b\> \$y\$ \:red\[z\]")
