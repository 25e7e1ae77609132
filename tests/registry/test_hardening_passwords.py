"""Database passwords with the characters a URL gives a meaning to (`/ ? # @ :`) are never printed, on any output
path: where the credentials end is read as SQLAlchemy's `make_url` (the engine's own parser) reads it, not by
splitting at the first `/` (registry.redact.mask_url), and a driver's error that quotes a piece of the password
is scrubbed (registry.redact.scrub).

Probes guarded here (hardening round 4, item 1):
- `mask_url` of `postgresql+psycopg://u:Pa/ssw0rd@…` and of passwords with `?`, `#`, `@`, `:` or all of them
- `drafters status` (and every command) failing to connect: the error line
- a URL the parser refuses (a raw `@` that makes the port unreadable): one line, no traceback, no password
- `drafters up`: the line it prints at every start, on a real PostgreSQL role whose password holds `/?#:@`
- the dashboard footer (`database: …`) under a URL it cannot connect to
"""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from registry.redact import mask_url, scrub
from tests.support.cli import drafters, running

# Each letter pair is a piece of a password a leak would show; none occurs anywhere else in the URLs.
PIECES = ("Qz", "Vk", "Wj", "Xq", "Yp", "Zr")
PASSWORDS = ("Qz/Vk0Wj", "Qz?Vk0Wj", "Qz#Vk0Wj", "Qz@Vk0Wj", "Qz:Vk0Wj", "Qz/Vk?Wj#Xq@Yp:Zr", "Qz@Vk@Wj/Xq")


def _leaks(text_: str) -> list[str]:
    return [piece for piece in PIECES if piece in text_]


@pytest.fixture
def base_env(tmp_path: Path) -> dict[str, str]:
    return {"DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_WATCHED_ORGS": '["Qwen"]'}


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize("tail", ["/registry", "/registry?sslmode=disable", ":5432/registry", ""])
def test_mask_url_hides_a_password_holding_url_delimiters(password: str, tail: str) -> None:
    url = f"postgresql+psycopg://drafters:{password}@db.example{tail}"
    shown = mask_url(url)
    assert not _leaks(shown), shown
    assert shown.startswith("postgresql+psycopg://drafters:***@") and "db.example" in shown, shown
    assert not _leaks(mask_url(url, path_is_secret=True))


def test_mask_url_keeps_the_url_readable() -> None:
    assert mask_url("postgresql+psycopg://u:Pa/ssw0rd@db.example:5432/reg?sslmode=require") == \
        "postgresql+psycopg://u:***@db.example:5432/reg?sslmode=require"
    assert mask_url("postgresql://u:Qz@Vk@db.example/reg") == "postgresql://u:***@db.example/reg"
    assert mask_url("https://mirror:Qz#Vk@hf.example/api?x=1") == "https://mirror:***@hf.example/api?x=1"


def test_scrub_masks_pieces_a_driver_quotes() -> None:
    url = "postgresql+psycopg://u:Qz@Vk@db.example/reg"  # the parser reads password "Qz", host "Vk@db.example"
    message = 'failed to resolve host "Vk@db.example": Name or service not known (password Qz)'
    assert not _leaks(scrub(message, url)), scrub(message, url)


@pytest.mark.parametrize("password", PASSWORDS)
def test_status_errors_never_show_the_password(base_env: dict[str, str], password: str) -> None:
    # Nothing listens on port 1: the connection fails and the error names the URL.
    url = f"postgresql+psycopg://drafters:{password}@127.0.0.1:1/registry"
    result = drafters("status", env={**base_env, "DRAFTERS_DATABASE_URL": url})
    assert result.returncode in (1, 2), result.stderr
    assert not _leaks(result.stdout + result.stderr), result.stdout + result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.postgres
def test_up_prints_the_url_of_a_role_whose_password_holds_delimiters_masked(base_env: dict[str, str],
                                                                              database_url: str) -> None:
    """A real PostgreSQL role with the password `Qz/Vk?Wj#Xq:Yp@Zr` owns the test database: the URL writes `/ ? # :`
    raw (SQLAlchemy reads them so) and `@` as %40, and `drafters up` connects with it and prints it masked."""
    admin_url = make_url(database_url)
    if admin_url.get_backend_name() != "postgresql":
        pytest.skip("PostgreSQL: a role with a password")
    password = "Qz/Vk?Wj#Xq:Yp@Zr"
    role = f"pw_{uuid.uuid4().hex[:10]}"
    admin = create_engine(database_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'"))
        connection.execute(text(f"GRANT {role} TO {admin_url.username}"))  # so that its objects can be dropped
        connection.execute(text(f'ALTER DATABASE "{admin_url.database}" OWNER TO {role}'))
        connection.execute(text(f"GRANT ALL ON SCHEMA public TO {role}"))
    url = (f"postgresql+psycopg://{role}:{password.replace('@', quote('@'))}@{admin_url.host}:{admin_url.port}"
           f"/{admin_url.database}")
    assert make_url(url).password == password
    try:
        with running(["up", "--no-watch", "--no-worker", "--no-dashboard", "--no-demo"], until=None,
                     env={**base_env, "DRAFTERS_DATABASE_URL": url}) as up:
            pass
        first = up.lines[0]
        assert "at head" in first, up.output
        assert f"{role}:***@{admin_url.host}:{admin_url.port}/{admin_url.database}" in first, first
        assert not _leaks(up.output), up.output
    finally:
        with admin.connect() as connection:
            connection.execute(text(f"REASSIGN OWNED BY {role} TO {admin_url.username}"))
            connection.execute(text(f"DROP OWNED BY {role}"))
            connection.execute(text(f"DROP ROLE {role}"))
        admin.dispose()


@pytest.mark.parametrize("password", ["Qz/Vk?Wj#Xq@Yp:Zr", "Qz/Vk0Wj"])
def test_the_dashboard_footer_never_shows_the_password(monkeypatch: pytest.MonkeyPatch, password: str) -> None:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from registry.settings import get_settings

    monkeypatch.setenv("DRAFTERS_DATABASE_URL", f"postgresql+psycopg://drafters:{password}@127.0.0.1:1/registry")
    get_settings.cache_clear()
    st.cache_data.clear()
    st.cache_resource.clear()
    page = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "overview.py"
    app = AppTest.from_file(str(page), default_timeout=60).run()
    shown = " ".join(e.value for e in [*app.caption, *app.info, *app.error, *app.markdown, *app.exception])
    assert "database:" in shown, shown
    assert not _leaks(shown), shown
    get_settings.cache_clear()
