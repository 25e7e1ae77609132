"""A fake Hugging Face Hub: a real HTTP server on 127.0.0.1 over an in-memory, mutable model of repositories."""

from tests.fakehub.scenario import Scenario
from tests.fakehub.server import FakeHub, RecordedRequest
from tests.fakehub.state import (
    FakeCommit,
    FakeRepo,
    HubState,
    dflash_drafter_files,
    target_files,
    tiny_tokenizer_json,
)

__all__ = [
    "FakeCommit",
    "FakeHub",
    "FakeRepo",
    "HubState",
    "RecordedRequest",
    "Scenario",
    "dflash_drafter_files",
    "target_files",
    "tiny_tokenizer_json",
]
