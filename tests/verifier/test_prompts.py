"""Prompt sets: bundled sets, user JSONL files with line-numbered errors, chat-template rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from verifier.loading import LoadedTarget
from verifier.prompts import (
    BUNDLED_SET_NAMES,
    CATEGORY_SET_NAMES,
    Message,
    Prompt,
    PromptFileError,
    bundled_set,
    bundled_sets,
    encode_prompt,
    load_prompt_file,
)


def test_bundled_sets_are_small_distinct_and_render(tiny_target: LoadedTarget) -> None:
    sets = bundled_sets()

    assert [s.name for s in sets] == list(BUNDLED_SET_NAMES)
    assert all(8 <= len(s.prompts) <= 12 for s in sets)
    assert len({s.digest for s in sets}) == len(sets)
    for prompt_set in sets:
        for prompt in prompt_set.prompts:
            ids = encode_prompt(prompt, tiny_target.tokenizer)
            assert tiny_target.tokenizer.decode(ids).endswith("<|assistant|>\n")


def test_unknown_bundled_set_names_the_bundled_ones() -> None:
    with pytest.raises(PromptFileError, match="code, math, chat, multilingual"):
        bundled_set("poetry")


def test_good_file_with_both_kinds_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        json.dumps({"prompt": "def add(a, b):"})
        + "\n\n"
        + json.dumps({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})
        + "\n",
        encoding="utf-8",
    )

    prompt_set = load_prompt_file(path)

    assert prompt_set.name == "mine"
    assert prompt_set.prompts == (
        Prompt(text="def add(a, b):"),
        Prompt(messages=(Message("system", "Be brief."), Message("user", "Hi"))),
    )


def test_digest_ignores_layout_but_not_content(tmp_path: Path) -> None:
    compact = tmp_path / "a.jsonl"
    spaced = tmp_path / "b.jsonl"
    changed = tmp_path / "c.jsonl"
    compact.write_text('{"prompt":"one"}\n{"prompt":"two"}\n', encoding="utf-8")
    spaced.write_text('{ "prompt" : "one" }\n\n{ "prompt": "two" }\n', encoding="utf-8")
    changed.write_text('{"prompt":"one"}\n{"prompt":"three"}\n', encoding="utf-8")

    assert load_prompt_file(compact).digest == load_prompt_file(spaced).digest
    assert load_prompt_file(compact).digest != load_prompt_file(changed).digest


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        ('{"prompt": "unterminated', "not valid JSON"),
        ('["a list"]', "JSON object"),
        ('{"prompt": "x", "messages": []}', "exactly one"),
        ('{"text": "x"}', "exactly one"),
        ('{"prompt": ""}', "non-empty string"),
        ('{"messages": "hello"}', "non-empty list"),
        ('{"messages": [{"role": "user"}]}', "message 0"),
    ],
)
def test_bad_line_error_names_file_and_line(tmp_path: Path, bad_line: str, reason: str) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "fine"}\n\n' + bad_line + '\n{"prompt": "also fine"}\n', encoding="utf-8")

    with pytest.raises(PromptFileError, match=reason) as raised:
        load_prompt_file(path)

    assert f"{path}:3:" in str(raised.value)


@pytest.mark.parametrize(("content", "reason"), [(b"\n \n", "no prompts"), (b'{"prompt": "\xff"}', "UTF-8")])
def test_empty_or_undecodable_file_is_refused(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(content)
    with pytest.raises(PromptFileError, match=reason):
        load_prompt_file(path)


def test_messages_go_through_the_chat_template(tiny_target: LoadedTarget) -> None:
    tokenizer = tiny_target.tokenizer
    prompt = Prompt(
        messages=(
            Message("system", "Be brief."),
            Message("user", "Hello, my name is Ana."),
            Message("assistant", "Hello Ana."),
            Message("user", "What is 2 plus 3?"),
        )
    )

    ids = encode_prompt(prompt, tokenizer, enable_thinking=True)

    assert tokenizer.decode(ids) == (
        "<s><|system|>\nBe brief.\n<|user|>\nHello, my name is Ana.\n<|assistant|>\nHello Ana.</s>\n"
        "<|user|>\nWhat is 2 plus 3?\n<|assistant|>\n"
    )
    assert ids[0] == tokenizer.bos_token_id


def test_raw_prompts_are_tokenized_as_is(tiny_target: LoadedTarget) -> None:
    tokenizer = tiny_target.tokenizer
    ids = encode_prompt(Prompt(text="def add(a, b):\n    return a + b"), tokenizer)
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.decode(ids[1:]) == "def add(a, b):\n    return a + b"


def test_messages_without_a_chat_template_are_a_clear_error(tiny_target_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_target_dir)
    tokenizer.chat_template = None
    with pytest.raises(PromptFileError, match="no chat template"):
        encode_prompt(Prompt(messages=(Message("user", "Hi"),)), tokenizer)


def test_eight_category_sets_of_twenty_prompts_each_are_bundled_and_documented() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "prompts.md").read_text()
    assert len(CATEGORY_SET_NAMES) >= 8
    texts: set[str] = set()
    for name in CATEGORY_SET_NAMES:
        prompt_set = bundled_set(name)
        assert len(prompt_set.prompts) >= 20, name
        assert f"`{name}`" in docs, f"{name} is not described in docs/prompts.md"
        for prompt in prompt_set.prompts:
            assert prompt.messages and prompt.messages[0].content.strip()
            texts.add(prompt.messages[0].content)
    assert len(texts) == 20 * len(CATEGORY_SET_NAMES)  # no prompt counted twice
    # The default of `verify` stays the four small sets: the category sets are asked for by name.
    assert not set(CATEGORY_SET_NAMES) & set(BUNDLED_SET_NAMES)
