"""Secrets stay secret: the Hub token goes only where it is meant to, passwords and webhook credentials are
masked in output, the registry's files are private, and webhook signatures verify with the Standard Webhooks
library. Each check runs the `drafters` command as a process."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from registry.alerts import webhooks as alerts
from registry.alerts.secrets import SecretBox
from registry.domain.records import EventSpec
from registry.store import Store
from tests.fakehub.scenario import Scenario
from tests.fakehub.server import FakeHub
from tests.support.cli import drafters, running
from tests.support.receiver import Receiver

TOKEN = "hf_secretTokenValue1234567890"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "drafters-home"


@pytest.fixture
def base_env(home: Path) -> dict[str, str]:
    # Receivers in these tests listen on 127.0.0.1.
    return {"DRAFTERS_HOME": str(home), "DRAFTERS_WATCHED_ORGS": '["Qwen"]', "DRAFTERS_WEBHOOK_ALLOW_INTERNAL": "1"}


# ---- the Hub token ---------------------------------------------------------------------------------------------

def test_a_dotenv_in_the_current_directory_is_not_read(base_env: dict[str, str], tmp_path: Path) -> None:
    with FakeHub(Scenario.standard().state) as evil:
        workdir = tmp_path / "someone-elses-checkout"
        workdir.mkdir()
        (workdir / ".env").write_text(f"DRAFTERS_HUB_ENDPOINT={evil.url}\nDRAFTERS_SEND_TOKEN_TO_ENDPOINT=true\n")
        drafters("watch", "--once", env={**base_env, "HF_TOKEN": TOKEN, "DRAFTERS_HUB_TIMEOUT_S": "1",
                                         "DRAFTERS_HUB_ENDPOINT": "http://127.0.0.1:9"}, cwd=workdir)
        assert evil.requests == []


def test_the_dotenv_in_drafters_home_is_read(base_env: dict[str, str], home: Path, hub: FakeHub) -> None:
    home.mkdir(parents=True)
    (home / ".env").write_text(f"DRAFTERS_HUB_ENDPOINT={hub.url}\n")
    result = drafters("watch", "--once", env=base_env)
    assert result.returncode == 0, result.stderr
    assert hub.requests


def test_the_token_reaches_another_endpoint_only_when_allowed(base_env: dict[str, str], hub: FakeHub) -> None:
    env = {**base_env, "HF_TOKEN": TOKEN, "DRAFTERS_HUB_ENDPOINT": hub.url}
    assert drafters("watch", "--once", env=env).returncode == 0
    assert hub.requests and {r.authorization for r in hub.requests} == {None}
    hub.clear_requests()
    assert drafters("watch", "--once", env={**env, "DRAFTERS_SEND_TOKEN_TO_ENDPOINT": "1"}).returncode == 0
    assert hub.requests and {r.authorization for r in hub.requests} == {f"Bearer {TOKEN}"}


# ---- passwords and webhook credentials in output ---------------------------------------------------------------

def test_up_does_not_print_the_database_password(base_env: dict[str, str], database_url: str) -> None:
    url = make_url(database_url)
    with running(["up", "--no-watch", "--no-worker", "--no-dashboard", "--no-demo"], until=None,
                 env={**base_env, "DRAFTERS_DATABASE_URL": database_url}) as up:
        pass
    first, rest = up.lines[0], up.rest
    assert "at head" in first, first + rest
    assert up.process.returncode == 0, rest
    if url.password is None:  # SQLite: nothing to hide, the path is shown
        assert str(url.database) in first
    else:
        assert f":{url.password}@" not in first + rest and f"{url.username}:***@" in first


def test_database_urls_are_masked_in_errors(base_env: dict[str, str]) -> None:
    result = drafters("lag", env={**base_env, "DRAFTERS_DATABASE_URL": "postgresql+psycopg://u:hunter2pw@127.0.0.1:1/x"})
    assert result.returncode == 1 and "hunter2pw" not in result.stderr + result.stdout
    result = drafters("lag", env={**base_env, "DRAFTERS_DATABASE_URL": "://u:hunter2pw@nowhere"})
    assert result.returncode == 1 and "hunter2pw" not in result.stderr + result.stdout


@pytest.mark.parametrize(("url", "hidden", "shown"), [
    ("https://hooks.slack.com/services/T0AAAA1/B0BBBB2/XyZsecretSlackPath", "XyZsecretSlackPath",
     "https://hooks.slack.com/services/"),
    ("https://bob:pa55word@example.com/hook", "pa55word", "example.com/hook"),
    ("https://example.com/hook?token=abc123secret", "abc123secret", "example.com/hook"),
])
def test_webhook_urls_are_masked_in_subscribe_and_subscriptions(base_env: dict[str, str], url: str, hidden: str,
                                                                 shown: str) -> None:
    created = drafters("subscribe", url, env=base_env)
    assert created.returncode == 0, created.stderr
    listed = drafters("subscriptions", env=base_env)
    as_json = drafters("subscriptions", "--json", env=base_env)
    for result in (created, listed, as_json):
        assert hidden not in result.stdout + result.stderr
    assert shown in created.stdout and shown in as_json.stdout


def test_mask_url_keeps_what_identifies_the_receiver() -> None:
    assert alerts.mask_webhook_url("http://127.0.0.1:8080/hook") == "http://127.0.0.1:8080/hook"
    assert alerts.mask_webhook_url("https://discord.com/api/webhooks/123456/tokenpart") == \
        "https://discord.com/api/webhooks/***/***"
    assert alerts.mask_webhook_url("https://u:p@[::1]:9/x?y=1") == "https://***@[::1]:9/x?***"


# ---- file modes -------------------------------------------------------------------------------------------------

def test_home_is_0700_and_the_sqlite_file_0600(base_env: dict[str, str], home: Path) -> None:
    result = drafters("catalog", "load", env=base_env)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    for path in home.glob("registry.db*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # A home someone made readable is tightened on the next run.
    home.chmod(0o755)
    (home / "registry.db").chmod(0o644)
    assert drafters("alerts", env=base_env).returncode == 0
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "registry.db").stat().st_mode) == 0o600


# ---- webhook secrets --------------------------------------------------------------------------------------------

def _event(database_url: str, n: int) -> None:
    store = Store.open(database_url)
    store.events.record_event(EventSpec(type="drafter_released", subject=f"z-lab/model-{n}", dedupe_key=f"d:{n}",
                                 payload={"message": f"model {n}"}, org="z-lab", family="qwen"))
    store.engine.dispose()


def test_generated_whsec_secrets_verify_with_the_standardwebhooks_library(base_env: dict[str, str], home: Path,
                                                                         tmp_path: Path) -> None:
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    database_url = f"sqlite:///{home / 'registry.db'}"
    secret_file = tmp_path / "receiver-secret"
    with Receiver() as receiver:
        created = drafters("subscribe", receiver.url, "--secret-out", str(secret_file), env=base_env)
        assert created.returncode == 0, created.stderr
        assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
        secret = secret_file.read_text().strip()
        assert secret.startswith("whsec_") and secret not in created.stdout + created.stderr
        _event(database_url, 1)
        delivered = drafters("deliver", env=base_env)
        assert delivered.returncode == 0, delivered.stderr
        assert len(receiver.received) == 1
        got = receiver.received[0]
        headers = {k.lower(): v for k, v in got.headers.items()}
        # The receiver passes the secret string as it got it, the way the library's README does.
        assert Webhook(secret).verify(got.body, headers)["event"]["subject"] == "z-lab/model-1"
        with pytest.raises(WebhookVerificationError):
            Webhook(alerts.new_secret()).verify(got.body, headers)
    assert secret not in (home / "registry.db").read_bytes().decode("latin-1")


def test_a_plain_secret_verifies_when_the_receiver_passes_bytes(base_env: dict[str, str], home: Path) -> None:
    from standardwebhooks.webhooks import Webhook

    with Receiver() as receiver:
        created = drafters("subscribe", receiver.url, "--secret-env", "HOOK_SECRET",
                           env={**base_env, "HOOK_SECRET": "plain-shared-secret"})
        assert created.returncode == 0, created.stderr
        _event(f"sqlite:///{home / 'registry.db'}", 2)
        assert drafters("deliver", env=base_env).returncode == 0
        got = receiver.received[0]
        Webhook(b"plain-shared-secret").verify(got.body, {k.lower(): v for k, v in got.headers.items()})


@pytest.mark.parametrize(("args", "env", "message"), [
    (("http://[::1/x",), {}, "not a valid URL"),
    (("ftp://example.com/x",), {}, "http(s)"),
    (("http://127.0.0.1:1/x", "--secret-env", "S"), {"S": "whsec_***notbase64***"}, "base64"),
])
def test_bad_subscriptions_are_refused_at_subscribe(base_env: dict[str, str], args: tuple[str, ...],
                                                   env: dict[str, str], message: str) -> None:
    result = drafters("subscribe", *args, env={**base_env, **env})
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_one_broken_subscription_does_not_stop_deliver(base_env: dict[str, str], home: Path) -> None:
    from sqlalchemy import update

    from registry.store.models import Subscription

    database_url = f"sqlite:///{home / 'registry.db'}"
    assert drafters("catalog", "load", env=base_env).returncode == 0
    store = Store.open(database_url)
    box = SecretBox(home / "secrets.json")
    with Receiver() as receiver:
        broken_url = alerts.subscribe(store, box, "http://127.0.0.1:1/placeholder", allow_internal=True)
        broken_secret = alerts.subscribe(store, box, "http://127.0.0.1:1/other", secret=alerts.new_secret(), allow_internal=True)
        good = alerts.subscribe(store, box, receiver.url, secret=alerts.new_secret(), allow_internal=True)
        # Rows written before subscribe validated anything: a URL httpx cannot parse, a secret that is not base64.
        with store.session() as session:
            session.execute(update(Subscription).where(Subscription.uid == broken_url.uid)
                            .values(url="http://[::1/x"))
        box.put(broken_secret.uid, "whsec_***")
        _event(database_url, 3)
        result = drafters("deliver", env=base_env)
        assert result.returncode == 0, result.stderr
        assert "1 delivered, 2 pending" in result.stdout, result.stdout
        assert [r.json["event"]["subject"] for r in receiver.received] == ["z-lab/model-3"]
        assert alerts.verify(box.get(good.uid) or "", receiver.received[0].headers, receiver.received[0].body)
    store.engine.dispose()
