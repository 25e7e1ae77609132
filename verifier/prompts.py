"""Prompt sets: four small bundled sets (code, math, chat, multilingual, the default of `verify`), eight category
sets of 20 prompts each (`cat-coding`, `cat-math`, `cat-reasoning`, `cat-chat`, `cat-summarization`,
`cat-translation`, `cat-long-context`, `cat-writing`: τ depends on the kind of prompt, so a pair is measured per
kind), and user JSONL files. Every bundled prompt was written for this project (docs/prompts.md).

A JSONL line is `{"prompt": "raw text"}` (tokenized as is, with the tokenizer's usual special tokens) or
`{"messages": [{"role": ..., "content": ...}, ...]}` (rendered with the target tokenizer's chat template and a
generation prompt). Each set carries a digest of its content for provenance.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from registry.errors import UserError

BUNDLED_DIR = Path(__file__).with_name("prompt_sets")
BUNDLED_SET_NAMES = ("code", "math", "chat", "multilingual")
CATEGORY_SET_NAMES = ("cat-coding", "cat-math", "cat-reasoning", "cat-chat", "cat-summarization", "cat-translation",
                      "cat-long-context", "cat-writing")
ALL_SET_NAMES = BUNDLED_SET_NAMES + CATEGORY_SET_NAMES
MAX_PROMPT_FILE_BYTES = 16 * 1024 * 1024


class PromptFileError(UserError, ValueError):
    """A prompt file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class Prompt:
    text: str | None = None
    messages: tuple[Message, ...] | None = None

    def as_json(self) -> dict[str, Any]:
        if self.messages is not None:
            return {"messages": [{"role": m.role, "content": m.content} for m in self.messages]}
        return {"prompt": self.text}


@dataclass(frozen=True)
class PromptSet:
    name: str
    prompts: tuple[Prompt, ...]

    @property
    def digest(self) -> str:
        """sha256 over the canonical JSON of the prompts (independent of file layout)."""
        canonical = json.dumps([p.as_json() for p in self.prompts], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def parse_prompt_line(line: str) -> Prompt:
    """One JSONL line → Prompt; raises ValueError with the reason."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error.msg})") from None
    if not isinstance(record, dict):
        raise ValueError("expected a JSON object with 'prompt' or 'messages'")
    has_prompt, has_messages = "prompt" in record, "messages" in record
    if has_prompt == has_messages:
        raise ValueError("expected exactly one of 'prompt' or 'messages'")
    if has_prompt:
        text = record["prompt"]
        if not isinstance(text, str) or not text:
            raise ValueError("'prompt' must be a non-empty string")
        return Prompt(text=text)
    messages = record["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    parsed = []
    for index, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("role"), str)
            or not message["role"]
            or not isinstance(message.get("content"), str)
        ):
            raise ValueError(f"message {index} must be an object with string 'role' and 'content'")
        parsed.append(Message(role=message["role"], content=message["content"]))
    return Prompt(messages=tuple(parsed))


def load_prompt_file(path: Path, name: str | None = None) -> PromptSet:
    """Read a JSONL prompt file; blank lines are skipped; any bad line is an error naming its line number."""
    path = Path(path)
    if not path.is_file():
        raise PromptFileError(f"{path}: no such file")
    if path.stat().st_size > MAX_PROMPT_FILE_BYTES:
        raise PromptFileError(f"{path}: larger than {MAX_PROMPT_FILE_BYTES} bytes")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise PromptFileError(f"{path}: not UTF-8 text ({error.reason})") from None
    prompts = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            prompts.append(parse_prompt_line(line))
        except ValueError as error:
            raise PromptFileError(f"{path}:{number}: {error}") from None
    if not prompts:
        raise PromptFileError(f"{path}: no prompts")
    return PromptSet(name=name or path.stem, prompts=tuple(prompts))


def bundled_set(name: str) -> PromptSet:
    if name not in ALL_SET_NAMES:
        raise PromptFileError(f"no bundled prompt set {name!r}; bundled sets: {', '.join(ALL_SET_NAMES)}")
    return load_prompt_file(BUNDLED_DIR / f"{name}.jsonl", name=name)


def bundled_sets() -> list[PromptSet]:
    return [bundled_set(name) for name in BUNDLED_SET_NAMES]


def encode_prompt(prompt: Prompt, tokenizer: Any, *, enable_thinking: bool = False) -> list[int]:
    """Token ids for `prompt` with the target's tokenizer (chat template for messages)."""
    if prompt.messages is None:
        return list(tokenizer(prompt.text)["input_ids"])
    if not getattr(tokenizer, "chat_template", None):
        raise PromptFileError("the target's tokenizer has no chat template; use {'prompt': ...} lines instead")
    ids = tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in prompt.messages],
        add_generation_prompt=True,
        enable_thinking=enable_thinking,
        tokenize=True,
        return_dict=False,
    )
    return list(ids)
