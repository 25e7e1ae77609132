"""`LlamaServer` runs one `llama-server` on a free loopback port and always stops it, also on errors and timeouts.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from registry.domain.llama_commands import server_draft_args
from registry.processes import killed_with_parent
from verifier.counters import LLAMACPP_PREFIX, NO_COUNTS, SpecCounters, parse_prometheus, spec_counters
from verifier.engines.llamacpp.install import ServerBinary, last_lines


# Where llama-server listens and who may call it are ours to decide, never DRAFTERS_LLAMACPP_ARGS's.
PROTECTED_SERVER_ARGS = frozenset({"--host", "--port", "--api-key", "--api-key-file", "--ssl-key-file",
                                   "--ssl-cert-file", "--path"})


_LOG_TIMESTAMP = re.compile(r"^\d+\.\d+\.\d+\.\d+ [A-Z] ")


class ServerFailed(RuntimeError):
    """llama-server could not start, died, or answered with an error; the message carries its own reason."""


def default_threads() -> int:
    """Half the CPUs this process may run on, at least one.

    llama-server's own default is every physical core, and ggml's threads spin at each barrier: when anything else
    runs, a descheduled thread stalls the rest. On the tiny Gemma-4 target with 10 busy processes on 2 cores that
    measured 3-35 tok/s at the default against ~900 tok/s on one thread (~4,000 on an idle machine), which is how
    bench/RESULTS.md once printed a llama.cpp baseline of 10.1 tok/s.
    """
    return max(1, len(os.sched_getaffinity(0)) // 2)


@dataclass(frozen=True)
class LlamaCppOptions:
    """How to run llama-server; `from_env` reads DRAFTERS_LLAMACPP_{THREADS,PORT,ARGS}."""

    threads: int | None = None  # -t and -td; None: llama-server's default (`from_env` always picks a number)
    port: int | None = None  # None: a free loopback port
    extra_args: tuple[str, ...] = ()  # e.g. ("-ngl", "99") for a GPU build
    gguf_cache: Path | None = None  # None: <models dir>/gguf
    source_dir: Path | None = None  # None: llama_cpp_source()
    startup_timeout_s: float = 300.0
    request_timeout_s: float = 600.0

    @classmethod
    def from_env(cls) -> LlamaCppOptions:
        threads = os.environ.get("DRAFTERS_LLAMACPP_THREADS")
        port = os.environ.get("DRAFTERS_LLAMACPP_PORT")
        extra_args = tuple(shlex.split(os.environ.get("DRAFTERS_LLAMACPP_ARGS", "")))
        protected = sorted({a.split("=", 1)[0] for a in extra_args if a.split("=", 1)[0] in PROTECTED_SERVER_ARGS})
        if protected:
            raise ValueError(f"DRAFTERS_LLAMACPP_ARGS may not set {', '.join(protected)}: llama-server listens on "
                             "127.0.0.1 with a key of its own (DRAFTERS_LLAMACPP_PORT picks the port)")
        try:
            return cls(threads=int(threads) if threads else default_threads(), port=int(port) if port else None,
                       extra_args=extra_args)
        except ValueError:
            raise ValueError("DRAFTERS_LLAMACPP_THREADS and DRAFTERS_LLAMACPP_PORT must be integers") from None


@dataclass(frozen=True)
class Draft:
    gguf: Path
    spec_type: str
    draft_length: int


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _exit_description(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def server_errors(log: str, limit: int = 3) -> str:
    """llama-server's own reasons: failed GGML asserts first, then its error lines (level E), without timestamps."""
    asserts: list[str] = []
    errors: list[str] = []
    for line in log.splitlines():
        text = line.strip()
        if "GGML_ASSERT" in text:
            # "/build/path/llama.cpp/src/llama-graph.cpp:1413: GGML_ASSERT(...) failed" → from "src/..." on
            asserts.append(text.split("llama.cpp/", 1)[-1])
        elif re.match(r"^\d+\.\d+\.\d+\.\d+ E ", text) and "this warning is normal" not in text:
            errors.append(_LOG_TIMESTAMP.sub("", text).strip())
    found = list(dict.fromkeys(asserts + errors))
    return "; ".join(found[:limit]) if found else last_lines(log, 2)


@dataclass
class LlamaServer:
    """One llama-server on 127.0.0.1: `with LlamaServer(...) as server:` starts it and always stops it."""

    binary: ServerBinary
    model: Path
    draft: Draft | None
    ctx_size: int
    options: LlamaCppOptions = field(default_factory=LlamaCppOptions)
    device_args: tuple[str, ...] = ()
    log_dir: Path | None = None
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log_path: Path | None = field(default=None, repr=False)
    _client: Any = field(default=None, repr=False)
    _peak_rss_bytes: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_key(self) -> str:
        """The key this running server was started with, for a client of its own (`drafters sweep`'s benchmark)."""
        return str(self._client.headers["Authorization"]).removeprefix("Bearer ")

    def arguments(self, port: int, api_key_file: Path | None = None) -> list[str]:
        args = [str(self.binary.path), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(port),
                "-np", "1", "-c", str(self.ctx_size), "--metrics", "--no-warmup", "--no-webui", "--log-colors", "off"]
        extra = [a for a in self.options.extra_args if a.split("=", 1)[0] not in PROTECTED_SERVER_ARGS]
        if self.options.threads is not None:
            args += ["-t", str(self.options.threads)]
        if self.draft is not None:
            # The drafter arguments `drafters launch` prints (registry.domain.llama_commands).
            args += server_draft_args(str(self.draft.gguf), self.draft.spec_type, self.draft.draft_length)
            if self.options.threads is not None:
                args += ["-td", str(self.options.threads)]
        # Loopback and the key come last as well: the last occurrence of an option wins.
        own = ["--host", "127.0.0.1", "--port", str(port)]
        if api_key_file is not None:
            own += ["--api-key-file", str(api_key_file)]
        return args + list(self.device_args) + extra + own

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        if self.options.port is not None and _port_taken(self.options.port):
            raise ServerFailed(f"port {self.options.port} on 127.0.0.1 is already taken; llama-server cannot listen "
                               "there (unset DRAFTERS_LLAMACPP_PORT to use a free port)")
        self._client = httpx.Client(timeout=self.options.request_timeout_s, trust_env=False)
        attempts = 1 if self.options.port is not None else 3
        for attempt in range(attempts):
            self.port = self.options.port or free_port()
            try:
                self._launch()
                return
            except ServerFailed as error:
                # Another process can take a free port between our probe and llama-server's bind: try another.
                if "couldn't bind" not in str(error) or attempt + 1 == attempts:
                    self.stop()
                    raise

    def _launch(self) -> None:
        log_dir = self.log_dir or Path(tempfile.mkdtemp(prefix="llama-server-"))
        self._log_path = log_dir / f"llama-server-{self.port}.log"
        # Another local user could otherwise drive (or read) the server on its loopback port.
        key = secrets.token_urlsafe(32)
        key_file = log_dir / f"llama-server-{self.port}.key"
        key_file.unlink(missing_ok=True)
        with os.fdopen(os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(key + "\n")
        self._client.headers["Authorization"] = f"Bearer {key}"
        with self._log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.arguments(self.port, key_file), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=killed_with_parent,  # noqa: PLW1509 - only prctl, before exec
            )
        deadline = time.monotonic() + self.options.startup_timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                self.process = None
                raise ServerFailed(f"llama-server {_exit_description(code)} before it was ready: {self._errors()}")
            try:
                if self._client.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            time.sleep(0.05)
        self.stop()
        raise ServerFailed(f"llama-server was not ready within {self.options.startup_timeout_s:.0f} s: "
                           f"{self._errors()}")

    def _errors(self) -> str:
        if self._log_path is None or not self._log_path.is_file():
            return "no log"
        return server_errors(self._log_path.read_text(encoding="utf-8", errors="replace"))

    def _died(self) -> ServerFailed | None:
        code = self.process.poll() if self.process is not None else None
        if code is None:
            return None
        self.process = None
        return ServerFailed(f"llama-server {_exit_description(code)} while serving: {self._errors()}")

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        if self.process is None:
            raise ServerFailed("llama-server is not running")
        self._sample_rss(self.process)
        try:
            response = self._client.request(method, f"{self.url}{path}", **kwargs)
        except httpx.TimeoutException:
            self.stop()
            raise ServerFailed(f"llama-server gave no answer to {path} within {self.options.request_timeout_s:.0f} s "
                               "and was stopped") from None
        except httpx.HTTPError as error:
            time.sleep(0.2)  # let a crashing server finish exiting so its exit status and log are complete
            died = self._died()
            raise (died or ServerFailed(f"llama-server connection failed on {path}: {error}")) from None
        if response.status_code != 200:
            message = response.text[:300]
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                pass
            raise ServerFailed(f"llama-server refused {path} (HTTP {response.status_code}): {message}")
        return response

    def complete(self, prompt_ids: Sequence[int], *, max_new_tokens: int, temperature: float, seed: int
                 ) -> dict[str, Any]:
        body = {
            "prompt": list(prompt_ids), "n_predict": max_new_tokens, "temperature": temperature, "seed": seed,
            # Plain temperature sampling, as the PyTorch engine does: no top-k / top-p / min-p truncation.
            "top_k": 0, "top_p": 1.0, "min_p": 0.0, "cache_prompt": False, "return_tokens": True, "stream": False,
        }
        answer = self._request("POST", "/completion", json=body).json()
        if not isinstance(answer.get("tokens"), list) or not isinstance(answer.get("timings"), dict):
            raise ServerFailed("llama-server's /completion answer has no tokens or timings")
        return answer

    def counters(self) -> SpecCounters:
        return spec_counters(parse_prometheus(self._request("GET", "/metrics").text), LLAMACPP_PREFIX) or NO_COUNTS

    def _sample_rss(self, process: subprocess.Popen[bytes]) -> None:
        """Keep the server's peak resident memory (Linux VmHWM) while it still runs."""
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:
            return
        match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        if match:
            self._peak_rss_bytes = max(self._peak_rss_bytes, int(match.group(1)) * 1024)

    @property
    def peak_rss_bytes(self) -> int:
        return self._peak_rss_bytes

    def stop(self) -> None:
        """Terminate (then kill) the server; safe to call twice."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            self._sample_rss(process)
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if self._client is not None:
            self._client.close()
            self._client = None
