"""The `drafters` command as a user runs it: a real process, a real database, one-line errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from registry.domain.catalog import load_catalog_data
from registry.store import Store
from tests.support.cli import drafters

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "data" / "configs"


def test_catalog_find_lag(db_env: dict[str, str]) -> None:
    loaded = drafters("catalog", "load", "--json", env=db_env)
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)["dflash_21"] == 21

    found = drafters("find", "Qwen/Qwen3-8B", "--json", env=db_env)
    assert found.returncode == 0, found.stderr
    rows = {r["drafter_repo_id"]: r for r in json.loads(found.stdout)["drafters"]}
    assert rows["z-lab/Qwen3-8B-DFlash-b16"]["verdict"] == "exact"

    table = drafters("find", "Qwen/Qwen3-8B", env=db_env)
    assert "z-lab/Qwen3-8B-DFlash-b16" in table.stdout and "exact" in table.stdout

    lag = drafters("lag", "--json", env=db_env)
    assert lag.returncode == 0, lag.stderr
    lag_rows = {r["target_repo_id"]: r for r in json.loads(lag.stdout)["items"]}
    catalog = load_catalog_data()
    dflash_targets = {t for d in catalog.drafters if d.in_21 for t in d.targets}
    assert dflash_targets <= set(lag_rows)
    # Qwen3.6-27B ships its own MTP head: no wait for a drafter, whatever z-lab's day-1 DFlash did.
    assert (lag_rows["Qwen/Qwen3.6-27B"]["lag_days"], lag_rows["Qwen/Qwen3.6-27B"]["built_in"]) == (0, ["mtp"])
    assert lag_rows["openai/gpt-oss-20b"]["lag_days"] == 197
    assert not lag_rows["Qwen/Qwen3-8B"]["open"]


def test_check_pairs_by_repo_and_folder(db_env: dict[str, str], tmp_path: Path) -> None:
    assert drafters("catalog", "load", env=db_env).returncode == 0
    mismatch = drafters("check", "z-lab/Qwen3-4B-DFlash-b16", "Qwen/Qwen3-8B", "--json", env=db_env)
    assert mismatch.returncode == 0, mismatch.stderr
    result = json.loads(mismatch.stdout)
    assert result["verdict"] == "incompatible"
    assert any("hidden_size 4096 != 2560" in r for r in result["reasons"])

    drafter_dir, target_dir = tmp_path / "drafter", tmp_path / "target"
    drafter_dir.mkdir()
    target_dir.mkdir()
    (drafter_dir / "config.json").write_bytes((CONFIGS / "z-lab__Qwen3-8B-DFlash-b16.json").read_bytes())
    (target_dir / "config.json").write_bytes((CONFIGS / "Qwen__Qwen3-8B.json").read_bytes())
    local = drafters("check", str(drafter_dir), str(target_dir), "--json", env=db_env)
    assert json.loads(local.stdout)["verdict"] == "structural"  # a folder declares nothing, but everything fits

    (target_dir / "config.json").write_bytes(b'{"hidden_size": ')
    broken = drafters("check", str(drafter_dir), str(target_dir), "--json", env=db_env)
    assert broken.returncode == 2 and "target config unusable" in broken.stderr  # as on the drafter side


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("find", "nobody/nothing"), "not in the registry"),
        (("check", "nobody/nothing", "Qwen/Qwen3-8B"), "unknown drafter"),
        (("check", "z-lab/Qwen3-8B-DFlash-b16", "/no/such/folder"), "unknown checkpoint"),
        (("lag", "--by", "color"), "--by takes"),
        (("alerts", "--since", "yesterday"), "--since takes"),
    ],
)
def test_user_mistakes_are_one_line(db_env: dict[str, str], args: tuple[str, ...], message: str) -> None:
    assert drafters("catalog", "load", env=db_env).returncode == 0
    # `find` asks the Hub about an id the registry does not hold: none answers here (no test reaches the network).
    result = drafters(*args, env={**db_env, "DRAFTERS_HUB_ENDPOINT": "http://127.0.0.1:9"})
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_bad_database_url_is_one_line() -> None:
    result = drafters("lag", env={"DRAFTERS_DATABASE_URL": "postgresql+psycopg://x:y@127.0.0.1:1/none"})
    assert result.returncode == 1
    assert "cannot connect" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


PLANTED = '''
import sys
from drafters.cli import main
from drafters.cli.common import app
from registry.errors import DraftersError


class Planted(DraftersError):
    exit_code = 7


@app.command("planted")
def planted() -> None:
    raise Planted("a planted error")


sys.argv = ["drafters", "planted"]
main()
'''


def test_any_drafters_error_leaves_with_its_own_exit_code(tmp_path: Path) -> None:
    """The CLI has one place that turns an error into its status: a new subclass needs no new `except`."""
    result = subprocess.run([sys.executable, "-c", PLANTED], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "DRAFTERS_DATABASE_URL": f"sqlite:///{tmp_path / 'r.db'}"})
    assert result.returncode == 7, (result.stdout, result.stderr)
    assert result.stderr.strip() == "error: a planted error"


def test_the_cli_says_what_to_do_where_it_has_nothing_or_cannot(db_env: dict[str, str]) -> None:
    empty = drafters("runs", env={**db_env, "COLUMNS": "80"})
    assert empty.returncode == 0 and "no runs stored: `drafters verify TARGET DRAFTER`" in empty.stdout
    assert "run_id" not in empty.stdout  # no empty 15-column table
    helped = drafters("unsubscribe", "--help", env=db_env)
    assert "Stop delivering alerts to a subscription" in helped.stdout and "subscription's id" in helped.stdout
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = drafters("serve", "--port", str(port), "--workers", "1", env=db_env, timeout=60)
    assert refused.returncode == 2 and "choose another with --port" in refused.stderr


def test_the_help_overview_lists_every_command_from_its_own_module_without_loading_them() -> None:
    from drafters.cli import COMMANDS, MODULES, load_commands, overview
    from drafters.cli.common import app

    load_commands()
    registered = {c.name or c.callback.__name__: c for c in app.registered_commands}
    groups = {g.name: g for g in app.registered_groups}
    assert set(MODULES) == set(registered) | set(groups), "COMMANDS and the registered commands differ"
    for name, command in registered.items():
        assert MODULES[name] == command.callback.__module__, name
        summary = next(s for _, rows in COMMANDS for n, _, s in rows if n == name)
        words = [[w.strip(".,:;") for w in text.split()[:3]] for text in (summary, command.callback.__doc__ or "")]
        assert words[0] == words[1], (name, summary)  # the overview says what the command's own help says
    for name, group in groups.items():
        assert {c.callback.__module__ for c in group.typer_instance.registered_commands} == {MODULES[name]}
    for columns in (80, 120):
        text = overview(columns)
        assert max(len(line) for line in text.splitlines()) <= columns
        assert text.index("  find ") < text.index("  up ") < text.index("  watch ")  # what a new user asks first
    # `drafters --help` imports no command module (they pull in the API server, the store, the watcher).
    probe = subprocess.run([sys.executable, "-c", "import sys, runpy; sys.argv = ['drafters', '--help']\n"
                            "try:\n    runpy.run_module('drafters.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
                            "print(sorted(m for m in sys.modules if m.startswith(('drafters.cli.', 'sqlalchemy', "
                            "'fastapi', 'torch', 'transformers', 'streamlit', 'pandas', 'alembic', "
                            "'huggingface_hub'))))"], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip().splitlines()[-1] == "['drafters.cli.render']"


@pytest.mark.parametrize("columns", [80, 120])
def test_every_commands_help_names_its_values_and_gives_flags_none(columns: int, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from drafters.cli import MODULES, load_commands
    from drafters.cli.common import command

    monkeypatch.setenv("COLUMNS", str(columns))
    load_commands()
    built = command()
    paths = [(name,) for name in MODULES if name not in ("db", "catalog")]
    paths += [(group, sub) for group in ("db", "catalog") for sub in built.commands[group].commands]  # type: ignore[attr-defined]
    for path in paths:
        with pytest.raises(SystemExit) as done:
            built.main(args=[*path, "--help"], prog_name="drafters")
        assert done.value.code == 0, path
        text = capsys.readouterr().out
        assert "Usage: drafters " + " ".join(path) in text, path
        assert max(len(line) for line in text.splitlines()) <= columns, path
        options = text[text.index("Options"):]
        assert "<bool>" not in options and "<str>" not in options and "<int" not in options, (path, options)
        assert " --help " in options and "Show this message" in options
    verify = _help(built, "verify", capsys)
    assert "TARGET" in verify.split("\n", 3)[1] and "--repeats" in verify and "INTEGER" in verify
    check = _help(built, "check", capsys)
    assert "The drafter: a repo id or a local folder" in check and "The target checkpoint" in check


def _help(built: object, name: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        built.main(args=[name, "--help"], prog_name="drafters")  # type: ignore[attr-defined]
    return capsys.readouterr().out


def test_watch_once_offline_says_it_once_and_what_to_do(db_env: dict[str, str]) -> None:
    with socket.socket() as closed:  # a port nothing listens on: every request is refused, as with no network
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    result = drafters("watch", "--once", env={**db_env, "DRAFTERS_HUB_ENDPOINT": f"http://127.0.0.1:{port}"},
                      columns=80)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.count("ConnectError") == 1, result.stdout  # every watched org failed alike: one line
    assert " orgs (" in result.stdout and "more) not read" in result.stdout
    error = result.stderr.strip()
    assert error.count("\n") == 0 and "did not answer" in error
    assert "HTTPS_PROXY" in error and "DRAFTERS_HUB_ENDPOINT" in error


def test_verify_without_weights_names_the_folder_and_drafters_fetch(db_env: dict[str, str], tmp_path: Path,
                                                                     tiny_target_dir: Path,
                                                                     tiny_dflash_dir: Path) -> None:
    bare = tmp_path / "bare-target"
    bare.mkdir()
    (bare / "config.json").write_text((tiny_target_dir / "config.json").read_text())
    result = drafters("verify", str(bare), str(tiny_dflash_dir), "--repeats", "1", env=db_env, columns=80,
                      timeout=300)
    assert result.returncode != 0
    error = result.stderr.strip().splitlines()[-1]
    assert f"{bare} has no *.safetensors weight files" in error and "drafters fetch REPO --revision SHA" in error
    missing = drafters("verify", "Qwen/Qwen3-8B", str(tiny_dflash_dir), "--repeats", "1", env=db_env, columns=80,
                       timeout=300)
    assert missing.returncode != 0 and "drafters fetch Qwen/Qwen3-8B --revision SHA" in missing.stderr


def test_verify_finds_a_repo_id_that_drafters_fetch_downloaded(db_env: dict[str, str], store: Store,
                                                               tiny_target_dir: Path, tiny_dflash_dir: Path) -> None:
    sha = "a" * 40
    store.downloads.start_download("org/tiny-target", sha, str(tiny_target_dir), bytes_total=1)
    store.downloads.finish_download("org/tiny-target", sha, bytes_done=1, seconds=0.1)
    result = drafters("verify", "org/tiny-target", str(tiny_dflash_dir), "--repeats", "1", "--max-new-tokens", "8",
                      "--sets", "code", env=db_env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    [run] = store.runs.list_runs()
    assert run.target == "org/tiny-target" and run.target_revision == sha and run.status == "ok"  # the fetched commit
