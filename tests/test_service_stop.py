"""`drafters status` after `drafters up` stopped (issue 31 item 5): every part is shown stopped, a part cut short in
its work says so, the demo part says what it queued, and each line ends in the host as it is, not `\\[host]`."""

from __future__ import annotations

import threading
import time

import pytest

from drafters import service as service_module
from drafters.service import Service
from registry.settings import get_settings
from registry.store import Store
from tests.support.cli import invoke


def _wait_for(store: Store, name: str, state: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(s.name == name and s.state == state for s in store.watch_state.service_statuses()):
            return
        time.sleep(0.02)
    raise AssertionError(f"{name} never reached {state}: {store.watch_state.service_statuses()}")


def test_a_clean_stop_leaves_no_part_shown_running_and_the_demo_says_what_it_queued(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRAFTERS_DATABASE_URL", store.engine.url.render_as_string(hide_password=False))
    get_settings.cache_clear()
    # The demo part as `drafters up` runs it, with the model build and queueing replaced by its count: building
    # the tiny models is the verifier's own tests' business.
    monkeypatch.setattr(service_module, "enqueue_demo", lambda *args, **kwargs: 5)
    service = Service(get_settings(), store, lambda _line: None, join_timeout_s=0.2)
    release = threading.Event()
    try:
        service._thread("demo", service._demo)
        # A worker inside a long job (a measurement) does not see the stop before the service exits.
        service._thread("worker", lambda: release.wait(30) and None)
        _wait_for(store, "demo", "done")
        _wait_for(store, "worker", "running")
        assert service.close() is False  # the worker is still inside its job
    finally:
        release.set()
    shown = {s.name: s for s in store.watch_state.service_statuses()}
    assert shown["worker"].state == "stopped"
    assert shown["worker"].detail == "stopped with drafters up in the middle of its work"
    assert shown["demo"].state == "done" and shown["demo"].last_success_at is not None
    assert shown["demo"].detail == "built the demo pairs and queued 5 verification jobs for the worker"

    try:
        output = invoke("status").output
    finally:
        get_settings.cache_clear()  # the next test reads its own environment
    lines = [line for line in output.splitlines() if line.startswith(("demo", "worker"))]
    assert len(lines) == 2, output
    assert all(line.endswith(f"  [{service.instance}]") for line in lines), output
    assert "\\[" not in output
