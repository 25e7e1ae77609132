"""Every failing `drafters` command exits non-zero with one line on stderr: run as a real process, as a cron job
or a script would."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fakehub.server import FakeHub
from tests.support.cli import drafters

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "data" / "configs"


def one_line_failure(result: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert text in lines[0], lines[0]


@pytest.fixture
def sqlite_env(tmp_path: Path) -> dict[str, str]:
    return {"DRAFTERS_DATABASE_URL": f"sqlite:///{tmp_path / 'registry.db'}"}


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    drafter, target = tmp_path / "drafter", tmp_path / "target"
    for folder, name in ((drafter, "z-lab__Qwen3-8B-DFlash-b16.json"), (target, "Qwen__Qwen3-8B.json")):
        folder.mkdir()
        (folder / "config.json").write_bytes((CONFIGS / name).read_bytes())
    return drafter, target


def test_success_exits_zero(sqlite_env: dict[str, str], tmp_path: Path) -> None:
    drafter, target = _folders(tmp_path)
    result = drafters("check", str(drafter), str(target), env=sqlite_env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "structural" in result.stdout


def test_watch_once_with_every_org_unreachable_exits_1(sqlite_env: dict[str, str]) -> None:
    env = {**sqlite_env, "DRAFTERS_HUB_ENDPOINT": "http://127.0.0.1:9", "DRAFTERS_WATCHED_ORGS": '["Qwen","z-lab"]',
           "DRAFTERS_HUB_TIMEOUT_S": "2"}
    result = drafters("watch", "--once", env=env)
    one_line_failure(result, 1, "no watched org could be read")


def test_watch_once_that_reads_its_orgs_exits_0(sqlite_env: dict[str, str], hub: FakeHub) -> None:
    env = {**sqlite_env, "DRAFTERS_HUB_ENDPOINT": hub.url, "DRAFTERS_WATCHED_ORGS": '["Qwen"]'}
    result = drafters("watch", "--once", env=env)
    assert result.returncode == 0, result.stderr


def test_watch_once_with_a_repo_that_failed_exits_3_and_keeps_what_it_read(
        sqlite_env: dict[str, str], hub: FakeHub) -> None:
    """A cron job must see a partial poll: exit 3, one line naming what failed; the rest is recorded, and the next
    poll, with the Hub healthy again, reads the failed repo and exits 0."""
    env = {**sqlite_env, "DRAFTERS_HUB_ENDPOINT": hub.url, "DRAFTERS_WATCHED_ORGS": '["Qwen"]'}
    hub.state.inject(r"^/api/models/Qwen/Qwen3-8B/revision/", "truncated", times=None, mode="short")
    result = drafters("watch", "--once", env=env)
    one_line_failure(result, 3, "the poll is incomplete (1 repo(s) failed)")
    # The drafter whose target's revision could not be read failed (once, though two tag queries list it).
    assert "1 repo(s) failed and are retried later: z-lab/Qwen3-8B-DFlash-b16\n" in result.stdout
    hub.state.clear_faults()
    healed = drafters("watch", "--once", env=env)
    assert healed.returncode == 0, healed.stderr


def test_check_on_a_malformed_target_config_exits_2_like_the_drafter_side(
        sqlite_env: dict[str, str], tmp_path: Path) -> None:
    drafter, target = _folders(tmp_path)
    (target / "config.json").write_bytes(b'{"hidden_size": ')
    one_line_failure(drafters("check", str(drafter), str(target), env=sqlite_env), 2, "target config unusable")
    (target / "config.json").write_bytes((CONFIGS / "Qwen__Qwen3-8B.json").read_bytes())
    (drafter / "config.json").write_bytes(b"[1, 2")
    one_line_failure(drafters("check", str(drafter), str(target), env=sqlite_env), 2, "drafter config unusable")


def test_an_empty_id_does_not_read_the_current_directory(sqlite_env: dict[str, str], tmp_path: Path) -> None:
    drafter, target = _folders(tmp_path)
    # The current directory is a perfectly good model folder: '' must still not mean it.
    one_line_failure(drafters("check", "", "target", env=sqlite_env, cwd=target.parent), 2, "the drafter is empty")
    one_line_failure(drafters("check", str(drafter), "", env=sqlite_env, cwd=target), 2, "the target is empty")
    one_line_failure(drafters("find", " ", env=sqlite_env), 2, "the checkpoint is empty")


def test_a_10_kb_id_is_one_line(sqlite_env: dict[str, str]) -> None:
    huge = "a/" + "b" * 10_000
    one_line_failure(drafters("check", huge, "Qwen/Qwen3-8B", env=sqlite_env), 2, "not a repo id or a folder path")
    one_line_failure(drafters("find", huge, env=sqlite_env), 2, "not a repo id or a folder path")
    long_name = "x" * 300  # longer than a file name may be, short enough for an id
    result = drafters("check", long_name, "Qwen/Qwen3-8B", env=sqlite_env)
    one_line_failure(result, 1, "unknown drafter")


def test_a_bad_prompts_file_exits_2(sqlite_env: dict[str, str], tmp_path: Path) -> None:
    pytest.importorskip("torch")
    drafter, target = _folders(tmp_path)
    bad = tmp_path / "prompts.jsonl"
    bad.write_text('{"prompt": "fine"}\nnot json\n')
    one_line_failure(drafters("verify", str(target), str(drafter), "--prompts", str(bad), env=sqlite_env), 2,
                     "prompts.jsonl:2")
    one_line_failure(drafters("verify", str(target), str(drafter), "--prompts", str(tmp_path / "none.jsonl"),
                              env=sqlite_env), 2, "does not exist")


def test_a_failed_verify_run_exits_1(sqlite_env: dict[str, str], tmp_path: Path) -> None:
    pytest.importorskip("torch")
    drafter, target = _folders(tmp_path)  # configs without weights: the run fails while loading
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hello"}\n')
    result = drafters("verify", str(target), str(drafter), "--prompts", str(prompts), "--repeats", "1",
                      "--max-new-tokens", "2", "--device", "cpu", env=sqlite_env, timeout=300)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1 and "the run failed" in result.stderr, result.stderr


def test_usage_errors_and_unknown_commands_exit_2(sqlite_env: dict[str, str]) -> None:
    assert drafters("no-such-command", env=sqlite_env).returncode == 2
    assert drafters("lag", "--by", env=sqlite_env).returncode == 2


def test_json_output_still_exits_nonzero_on_failure(sqlite_env: dict[str, str]) -> None:
    # `find` asks the Hub about an id the registry does not hold: none answers here (no test reaches the network).
    offline = {**sqlite_env, "DRAFTERS_HUB_ENDPOINT": "http://127.0.0.1:9"}
    result = drafters("find", "nobody/nothing", "--json", env=offline)
    one_line_failure(result, 1, "not in the registry")
    assert result.stdout == ""  # no half JSON document for a script to misread


# ---- round 3: validate first, usage errors, a database from a newer install ---------------------------------------

def test_feed_out_with_markup_in_the_path_writes_and_exits_zero(sqlite_env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "feeds[" / "]x [/] [bold]y.atom"
    result = drafters("feed", "--out", str(out), env={**sqlite_env, "DRAFTERS_HOME": str(tmp_path / "home")})
    assert result.returncode == 0 and result.stderr == "", (result.returncode, result.stderr)
    assert out.is_file() and out.read_text().startswith("<?xml")
    assert str(out) in " ".join(result.stdout.split())  # printed literally, not read as markup


def test_feed_out_refuses_a_directory_before_writing(sqlite_env: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    result = drafters("feed", "--out", str(folder), env={**sqlite_env, "DRAFTERS_HOME": str(tmp_path / "home")})
    one_line_failure(result, 2, "is a directory")
    assert list(folder.iterdir()) == [] and list(tmp_path.glob("*.tmp")) == []


@pytest.mark.parametrize("limit", ["-5", "0"])
def test_runs_limit_below_one_is_a_usage_error(sqlite_env: dict[str, str], limit: str) -> None:
    result = drafters("runs", "--limit", limit, env=sqlite_env)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "--limit" in result.stderr and result.stdout == ""


def test_a_database_from_a_newer_install_says_so(sqlite_env: dict[str, str], tmp_path: Path) -> None:
    import sqlite3

    from registry.store.read_only import open_read_only, schema_problem

    assert drafters("db", "upgrade", env=sqlite_env).returncode == 0
    with sqlite3.connect(tmp_path / "registry.db") as connection:
        connection.execute("UPDATE alembic_version SET version_num = '0042_from_the_future'")
    for args in (("lag",), ("db", "upgrade")):
        result = drafters(*args, env=sqlite_env)
        one_line_failure(result, 1, "database is newer than this install (revision 0042_from_the_future")
        assert "install drafter-registry >" in result.stderr and "Can't locate" not in result.stderr
    # The dashboard says the same.
    engine = open_read_only(sqlite_env["DRAFTERS_DATABASE_URL"])
    problem = schema_problem(engine)
    engine.dispose()
    assert problem is not None and problem.startswith("database is newer than this install"), problem
