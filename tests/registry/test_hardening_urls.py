"""Credentials in URLs and where URLs lead: every output path masks every credential a URL carries (one
function, registry.redact.mask_url); a webhook subscription never targets an internal address unless the setting
allows it, and is refused before anything is written; the Hub token goes to the endpoint's origin only. Nothing
here sends traffic anywhere but loopback."""

from __future__ import annotations

import json
import socket
import threading
from datetime import UTC, datetime, timedelta
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, update
from sqlalchemy.engine import make_url

from registry.alerts.egress import delivery_client
from registry.alerts import webhooks as alerts
from registry.alerts.secrets import SecretBox
from registry.domain.records import EventSpec
from registry.hub import HubClient
from registry.redact import mask_url
from registry.store import Store
from registry.store.models import Delivery
from tests.support.cli import drafters, running
from tests.support.receiver import Receiver

SECRETS = ("hunter2pw", "sslpw77", "tok3n99", "k3yvalue", "s3cretv", "apik3y5")
TOKEN = "hf_originTokenValue1234567890"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "drafters-home"


@pytest.fixture
def base_env(home: Path) -> dict[str, str]:
    return {"DRAFTERS_HOME": str(home), "DRAFTERS_WATCHED_ORGS": '["Qwen"]'}


def _leaks(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


# ---- one masking function ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql+psycopg://drafters@db.internal:5432/registry?password=hunter2pw&sslmode=require",
     "postgresql+psycopg://drafters@db.internal:5432/registry?password=***&sslmode=require"),
    ("postgresql+psycopg://drafters:hunter2pw@db:5432/r?sslpassword=sslpw77&sslkey=/k.pem",
     "postgresql+psycopg://drafters:***@db:5432/r?sslpassword=***&sslkey=***"),
    ("https://mirror:hunter2pw@hf-mirror.example/api?token=tok3n99&x=1",
     "https://mirror:***@hf-mirror.example/api?token=***&x=1"),
    ("https://hub.example/?api_key=apik3y5&key=k3yvalue&client_secret=s3cretv&Access-Token=tok3n99",
     "https://hub.example/?api_key=***&key=***&client_secret=***&Access-Token=***"),
    ("https://tok3n99@github.example/x#frag-s3cretv", "https://***@github.example/x#***"),
    ("https://hub.example/?tok3n99", "https://hub.example/?***"),
    ("://u:hunter2pw@nowhere", "://u:***@nowhere"),
    ("u:hunter2pw@host:99999/db", "u:***@host:99999/db"),
    ("sqlite:////home/me/.drafters/registry.db", "sqlite:////home/me/.drafters/registry.db"),
])
def test_mask_url_masks_every_credential_and_keeps_the_rest(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    assert not _leaks(mask_url(url))
    assert not _leaks(mask_url(url, path_is_secret=True))


# ---- every output path ------------------------------------------------------------------------------------------

def test_database_errors_mask_a_password_given_as_a_query_parameter(base_env: dict[str, str]) -> None:
    url = "postgresql+psycopg://drafters@127.0.0.1:1/registry?password=hunter2pw&sslpassword=sslpw77"
    result = drafters("lag", env={**base_env, "DRAFTERS_DATABASE_URL": url})
    assert result.returncode == 1, result.stderr
    assert not _leaks(result.stdout + result.stderr), result.stderr
    assert "password=***" in result.stderr and "127.0.0.1:1/registry" in result.stderr


@pytest.mark.postgres
def test_up_masks_a_password_given_as_a_query_parameter(base_env: dict[str, str], database_url: str) -> None:
    url = make_url(database_url)
    if url.password is None:
        pytest.skip("SQLite: no password to move into the query")
    query_form = url.set(password=None).render_as_string(hide_password=False) + f"?password={url.password}"
    with running(["up", "--no-watch", "--no-worker", "--no-dashboard", "--no-demo"], until=None,
                 env={**base_env, "DRAFTERS_DATABASE_URL": query_form}) as up:
        pass
    first, rest = up.lines[0], up.rest
    assert "at head" in first, first + rest
    assert f"password={url.password}" not in first + rest and "?password=***" in first


@pytest.mark.parametrize("endpoint", ["http://mirror:hunter2pw@127.0.0.1:9", "http://127.0.0.1:9/?token=tok3n99"])
def test_watch_masks_the_hub_endpoint(base_env: dict[str, str], endpoint: str) -> None:
    result = drafters("watch", "--once", env={**base_env, "DRAFTERS_HUB_ENDPOINT": endpoint,
                                              "DRAFTERS_HUB_TIMEOUT_S": "1"})
    assert result.returncode == 1, result.stderr
    assert "did not answer" in result.stderr
    assert not _leaks(result.stdout + result.stderr), result.stdout + result.stderr
    assert mask_url(endpoint) in result.stderr


def test_up_masks_the_hub_endpoint(base_env: dict[str, str]) -> None:
    endpoint = "http://mirror:hunter2pw@127.0.0.1:9/?token=tok3n99"
    with running(["up", "--no-worker", "--no-dashboard", "--no-demo"], until="cannot be reached",
                 env={**base_env, "DRAFTERS_HUB_ENDPOINT": endpoint, "DRAFTERS_HUB_TIMEOUT_S": "1"}) as up:
        pass
    lines, output = up.lines, up.output
    assert any("the Hub at http://mirror:***@127.0.0.1:9/?token=*** cannot be reached" in line for line in lines), \
        output
    assert not _leaks(output), output


def test_the_dashboard_footer_masks_a_password_given_as_a_query_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from registry.settings import get_settings

    monkeypatch.setenv("DRAFTERS_DATABASE_URL",
                       "postgresql+psycopg://drafters@127.0.0.1:1/registry?password=hunter2pw&sslpassword=sslpw77")
    get_settings.cache_clear()
    st.cache_data.clear()
    st.cache_resource.clear()
    page = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "overview.py"
    app = AppTest.from_file(str(page), default_timeout=60).run()
    shown = " ".join(e.value for e in [*app.caption, *app.info, *app.error, *app.markdown])
    assert "database:" in shown, shown
    assert not _leaks(shown), shown
    assert "password\\=\\*\\*\\*" in shown  # masked, then escaped for Markdown
    get_settings.cache_clear()


# ---- subscriptions: internal targets, invalid URLs, nothing written when refused ------------------------------

@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",  # the cloud metadata service (link-local)
    "http://[fe80::1]/hook",
    "http://127.0.0.1:8080/hook",
    "http://localhost/hook",  # resolved from /etc/hosts
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://10.0.0.5/hook",
    "http://192.168.1.20/hook",
    "http://172.16.0.1/hook",
    "http://100.64.0.1/hook",  # shared address space (carrier-grade NAT)
    "http://0.0.0.0/hook",
])
def test_internal_targets_are_refused_and_nothing_is_written(base_env: dict[str, str], home: Path, tmp_path: Path,
                                                             url: str) -> None:
    secret_file = tmp_path / "secret"
    result = drafters("subscribe", url, "--secret-out", str(secret_file), env=base_env)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "internal address" in result.stderr and "DRAFTERS_WEBHOOK_ALLOW_INTERNAL" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not secret_file.exists()
    assert not (home / "secrets.json").exists()
    listed = drafters("subscriptions", "--json", env=base_env)
    assert json.loads(listed.stdout)["items"] == []


@pytest.mark.parametrize(("url", "message"), [
    ("http://example.com:99999/hook", "not a valid URL"),
    ("http://exa mple.com/hook", "not"),
    ("http://example.com:0/hook", "port 0"),
    ("http://ex%41mple.com/hook", "not"),
])
def test_urls_that_can_never_deliver_are_refused(base_env: dict[str, str], tmp_path: Path, url: str,
                                                 message: str) -> None:
    secret_file = tmp_path / "secret"
    result = drafters("subscribe", url, "--secret-out", str(secret_file), env=base_env)
    assert result.returncode == 2 and message in result.stderr, (result.stdout, result.stderr)
    assert not secret_file.exists()


def test_a_refused_event_type_writes_no_secret_file(base_env: dict[str, str], tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    result = drafters("subscribe", "https://hooks.example.com/x", "--events", "nope", "--secret-out",
                      str(secret_file), env=base_env)
    assert result.returncode == 2 and "unknown event types" in result.stderr, result.stderr
    assert not secret_file.exists()


def test_internal_targets_are_allowed_by_the_setting_and_delivered(base_env: dict[str, str], home: Path,
                                                                   tmp_path: Path) -> None:
    allowed = {**base_env, "DRAFTERS_WEBHOOK_ALLOW_INTERNAL": "1"}
    with Receiver() as receiver:
        created = drafters("subscribe", receiver.url, "--unsigned", env=allowed)
        assert created.returncode == 0, created.stderr
        store = Store.open(f"sqlite:///{home / 'registry.db'}")
        store.events.record_event(EventSpec(type="drafter_released", subject="z-lab/m", dedupe_key="d:1",
                                     payload={"message": "m"}, org="z-lab", family="qwen"))
        # Without the setting, delivery refuses the internal address too (the name could resolve there later).
        refused = drafters("deliver", env=base_env)
        assert refused.returncode == 0 and "0 delivered, 1 pending" in refused.stdout, refused.stdout
        assert receiver.attempts == 0
        with store.session() as session:
            assert "internal address" in (session.scalar(select(Delivery.last_error)) or "")
            # Due again now rather than after its backoff.
            session.execute(update(Delivery).values(next_attempt_at=datetime.now(UTC) - timedelta(minutes=1)))
        delivered = drafters("deliver", env=allowed)
        assert "1 delivered" in delivered.stdout, delivered.stdout
        assert len(receiver.received) == 1
        store.engine.dispose()


def test_the_library_refuses_internal_targets_by_default(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'r.db'}")
    box = SecretBox(tmp_path / "secrets.json")
    with pytest.raises(ValueError, match="internal address"):
        alerts.subscribe(store, box, "http://169.254.169.254/latest", secret=alerts.new_secret())
    assert store.subscriptions.subscriptions() == [] and not box.path.exists()
    store.engine.dispose()


# ---- the Hub token and Link: rel="next" ------------------------------------------------------------------------

class _Listing(BaseHTTPRequestHandler):
    """One page of `/api/models`: empty, with a Link to `next_url` when set; records each Authorization."""

    next_url: str | None = None
    seen: list[str | None]

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.seen.append(self.headers.get("Authorization"))
        body = b"[]"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.next_url:
            self.send_header("Link", f'<{self.next_url}>; rel="next"')
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def _serve(host: str, port: int, next_url: str | None) -> tuple[ThreadingHTTPServer, list[str | None]]:
    seen: list[str | None] = []
    handler = type("Listing", (_Listing,), {"next_url": next_url, "seen": seen})
    server = ThreadingHTTPServer((host, port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.fixture
def two_origins(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[str | None], list[str | None]]]:
    """The configured endpoint on 127.0.0.1, whose listing links its next page to another origin: another port
    on 127.0.0.1, or the same port on 127.0.0.2. An origin is (scheme, host, port): either differs, it is
    another server."""
    other_host = request.param
    endpoint, endpoint_seen = _serve("127.0.0.1", 0, None)
    port = endpoint.server_address[1] if other_host == "127.0.0.2" else 0
    other, other_seen = _serve(other_host, port, None)
    endpoint.RequestHandlerClass.next_url = (  # type: ignore[attr-defined]
        f"http://{other_host}:{other.server_address[1]}/api/models?cursor=abc")
    try:
        yield f"http://127.0.0.1:{endpoint.server_address[1]}", endpoint_seen, other_seen
    finally:
        for server in (endpoint, other):
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize("two_origins", ["127.0.0.1", "127.0.0.2"], indirect=True)
def test_the_token_never_follows_a_next_link_to_another_origin(
        two_origins: tuple[str, list[str | None], list[str | None]], tmp_path: Path) -> None:
    endpoint, endpoint_seen, other_seen = two_origins
    # The mirror setting on: the token is meant for this endpoint.
    client = HubClient(endpoint, TOKEN, tmp_path / "cache", timeout=5)
    assert client.list_org_ids("Qwen") == []
    assert endpoint_seen == [f"Bearer {TOKEN}"]
    assert other_seen == [None]  # the next page was read, without the token


def test_public_host_names_stay_valid() -> None:
    # An internationalized name is checked in its IDNA form; an underscore is common in internal-looking but
    # public names. Syntax only: nothing is resolved here.
    for url in ("http://münchen.de/hook", "https://a_b.example.org/x", "https://hooks.slack.com/services/T/B/x"):
        assert alerts.check_url(url) == url


# ---- DNS rebinding: the address the socket connects to is checked ---------------------------------------------

def test_the_delivery_client_refuses_a_name_that_resolves_to_loopback() -> None:
    with Receiver() as receiver:
        url = receiver.url.replace("127.0.0.1", "localhost")  # a name; /etc/hosts answers 127.0.0.1
        with delivery_client(allow_internal=False) as client, pytest.raises(httpx.ConnectError,
                                                                            match="internal address"):
            client.post(url, content=b"{}")
        assert receiver.attempts == 0
        with delivery_client(allow_internal=True) as client:
            assert client.post(url, content=b"{}").status_code < 300
        assert receiver.attempts == 1


def test_a_name_rebound_to_loopback_after_the_check_is_refused_at_connect(home: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(f"sqlite:///{home / 'registry.db'}")
    box = SecretBox(home / "secrets.json")
    real = socket.getaddrinfo
    answers: list[str] = []

    def rebinding(host: str, *args: object, **kwargs: object) -> list:  # type: ignore[type-arg]
        # A rebinding DNS server: the name's first answer is public, every later one the real (loopback) answer.
        if host == "localhost" and not answers:
            answers.append("public")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", args[0] if args else 80))]
        answers.append("real")
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    with Receiver() as receiver:
        url = receiver.url.replace("127.0.0.1", "localhost")
        alerts.subscribe(store, box, url, allow_internal=True)
        store.events.record_event(EventSpec(type="drafter_released", subject="z-lab/m", dedupe_key="d:1",
                                            payload={"message": "m"}, org="z-lab", family="qwen"))
        monkeypatch.setattr(socket, "getaddrinfo", rebinding)
        report = alerts.deliver_pending(store, box, allow_internal=False)
        monkeypatch.undo()
        assert answers[0] == "public" and "real" in answers  # the pre-check passed; the connect resolved again
        assert report.delivered == 0 and report.pending == 1
        assert receiver.attempts == 0
        with store.session() as session:
            assert "internal address" in (session.scalar(select(Delivery.last_error)) or "")
    store.engine.dispose()
