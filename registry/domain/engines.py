"""The one engine table: every engine a run can be stored under, the option that names it on the command line, and
whether the verifier measures with it, reads its counters from a user's running server (`drafters ingest`), or both.
"""

from __future__ import annotations

from dataclasses import dataclass

PYTORCH = "pytorch"
LLAMA_CPP = "llama.cpp"


@dataclass(frozen=True)
class Engine:
    option: str  # what `drafters verify --engine` / `drafters ingest` take
    stored_name: str  # the engine name stored with its runs
    measured: bool  # the verifier runs pairs on it
    ingested: bool  # runs can be read from a user's own server of this kind


TABLE = (
    Engine("pytorch", PYTORCH, measured=True, ingested=False),
    Engine("llamacpp", LLAMA_CPP, measured=True, ingested=True),
    Engine("vllm", "vllm", measured=False, ingested=True),
    Engine("sglang", "sglang", measured=False, ingested=True),
)
# Engine a verify request asks for → the engine name stored with its runs.
VERIFIER_ENGINES: dict[str, str] = {e.option: e.stored_name for e in TABLE if e.measured}
# The stored names of the engines the verifier measures with (the columns of `drafters catalog coverage`).
MEASURED: tuple[str, ...] = tuple(VERIFIER_ENGINES.values())
# Server kinds `drafters ingest` reads → the engine name stored with their runs.
SERVER_ENGINE_NAMES: dict[str, str] = {e.option: e.stored_name for e in TABLE if e.ingested}
SERVER_KINDS: tuple[str, ...] = tuple(SERVER_ENGINE_NAMES)
