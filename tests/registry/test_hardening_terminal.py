"""Outside text is inert in a terminal: a hostile server's escape sequences (clear screen, OSC title and hyperlink,
8-bit CSI) and bidirectional overrides never reach the output of `drafters ingest` or the tables after it. One
sanitizer, drafters.cli.render.strip_control, stands between outside text and the terminal."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from drafters.cli.render import strip_control
from tests.support.cli import drafters as run_drafters

CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
CSI8 = "\x9b31m"
RLO = "\u202e"
ISOLATE = "\u2066"
HOSTILE_VERSION = f"0.5.9{CLEAR}{TITLE}{CSI8}"
HOSTILE_MODEL = f"Qwen/Qwen3-8B{RLO}gpj.exe{ISOLATE}{LINK}"
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\x9c", RLO, ISOLATE, "\u202a", "\u2069", "\u200f")


def _inert(text: str) -> list[str]:
    return [repr(c) for c in FORBIDDEN if c in text]


@pytest.mark.parametrize(("raw", "shown"), [
    (f"a{CLEAR}b", "ab"),
    (f"a{TITLE}b", "ab"),
    (f"a{LINK}b", "aclickb"),
    (f"a{CSI8}b", "ab"),
    ("a\x1bcb", "ab"),  # RIS: reset the terminal
    ("a\x1b]0;unterminated title", "a"),
    (f"evil{RLO}txt.exe", "evil txt.exe"),
    ("x\u2067y\u2069z\u202ab\u202cc\u200fd", "x y z b c d"),
    ("tab\tbell\x07", "tab bell "),
])
def test_strip_control_removes_sequences_and_bidi_controls(raw: str, shown: str) -> None:
    assert strip_control(raw) == shown


class _Hostile(BaseHTTPRequestHandler):
    """An SGLang server whose version and model name carry terminal escapes and bidi overrides."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path != "/get_server_info":
            self.send_response(404)
            self.end_headers()
            return
        body = json.dumps({"model_path": HOSTILE_MODEL, "served_model_name": HOSTILE_MODEL,
                           "speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 16,
                           "version": HOSTILE_VERSION,
                           "internal_states": [{"avg_spec_accept_length": 4.25, "last_gen_throughput": 212.5}]},
                          ensure_ascii=False).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def hostile_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_ingest_and_runs_print_a_hostile_servers_text_inert(hostile_server: str, tmp_path: Path) -> None:
    drafters = functools.partial(run_drafters, env={"DRAFTERS_HOME": str(tmp_path / "home")})

    ingested = drafters("ingest", "sglang", "--url", hostile_server, "--hardware", "H200")
    assert ingested.returncode == 0, ingested.stderr
    assert "0.5.9" in ingested.stdout and "Qwen/Qwen3-8B" in ingested.stdout
    for result in (ingested, drafters("runs"), drafters("runs", "--limit", "1")):
        assert not _inert(result.stdout + result.stderr), (_inert(result.stdout + result.stderr), result.stdout)
    # Scripts still get the server's text as it was, JSON-escaped.
    as_json = drafters("runs", "--json")
    assert json.loads(as_json.stdout)["items"][0]["engine_version"] == HOSTILE_VERSION
    assert "\x1b" not in as_json.stdout
