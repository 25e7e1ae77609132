"""Verifier tests: one torch thread. The tiny models they share are fixtures in tests/tiny_models.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> Iterator[None]:
    # Tiny models on a shared 2-core machine: OpenMP threads spin against other processes and run
    # an order of magnitude slower than one thread.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
