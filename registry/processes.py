"""Child processes that stop with the process that started them."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> None:
    """In the child before exec (Popen's preexec_fn): the kernel sends `sig` when the parent dies, even of
    SIGKILL. Linux only; elsewhere the parent's own clean-up (`stop`) is all there is. The kernel watches the
    *thread* that started the child: start it from one that lives at least as long as the child should."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


def killed_with_parent() -> None:
    """die_with_parent with SIGKILL: for children with nothing to save on the way out (llama-server, the GGUF
    converter), where a SIGTERM they might block or handle slowly would let them outlive us."""
    die_with_parent(signal.SIGKILL)


def stop(process: subprocess.Popen[bytes] | None, *, grace_s: float = 10.0) -> None:
    """Terminate, wait, then kill: a child that ignores SIGTERM still goes."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace_s)
