"""A tiny SentencePiece tokenizer trained on the bundled corpus.

SentencePiece (not a tokenizers BPE) because llama.cpp can only convert SentencePiece tokenizers. The folder holds
`tokenizer.model` + `tokenizer_config.json` and loads with transformers' AutoTokenizer as a LlamaTokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

CORPUS_PATH = Path(__file__).with_name("corpus.txt")
DOCUMENT_SEPARATOR = "\n<|doc|>\n"
MASK_TOKEN = "<|MASK|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
# "\n" and indentation runs are symbols so code keeps its layout through encode/decode.
LAYOUT_TOKENS = ("\n", "    ", "        ")
SPECIAL_SYMBOLS = (MASK_TOKEN, *ROLE_TOKENS)
SPECIAL_SYMBOL_FIRST_ID = 4  # right after unk, bos, eos, pad
VOCAB_SIZE = 1000
BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
UNK_TOKEN = "<unk>"
PAD_TOKEN = "<pad>"
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def corpus_documents() -> list[str]:
    """The bundled corpus split into documents (each a chat-formatted user/assistant exchange)."""
    text = CORPUS_PATH.read_text(encoding="utf-8")
    return [doc.strip("\n") for doc in text.split(DOCUMENT_SEPARATOR) if doc.strip()]


def _sentences() -> Iterator[str]:
    yield from corpus_documents()


def build_tokenizer(out_dir: Path) -> Path:
    """Train the tokenizer (deterministic, ~seconds) and write `out_dir/{tokenizer.model,tokenizer_config.json}`."""
    import sentencepiece as spm

    out_dir.mkdir(parents=True, exist_ok=True)
    model_prefix = out_dir / "tokenizer"
    spm.SentencePieceTrainer.train(
        sentence_iterator=_sentences(),
        model_prefix=str(model_prefix),
        vocab_size=VOCAB_SIZE,
        model_type="bpe",
        character_coverage=1.0,
        byte_fallback=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        user_defined_symbols=[*SPECIAL_SYMBOLS, *LAYOUT_TOKENS],
        add_dummy_prefix=False,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=3,
        unk_piece=UNK_TOKEN,
        bos_piece=BOS_TOKEN,
        eos_piece=EOS_TOKEN,
        pad_piece=PAD_TOKEN,
        num_threads=1,
        minloglevel=2,
        max_sentence_length=8192,
    )
    model_prefix.with_suffix(".vocab").unlink()
    tokenizer_config = {
        "tokenizer_class": "LlamaTokenizer",
        "bos_token": BOS_TOKEN,
        "eos_token": EOS_TOKEN,
        "unk_token": UNK_TOKEN,
        "pad_token": PAD_TOKEN,
        "add_bos_token": True,
        "add_eos_token": False,
        "legacy": False,
        "model_max_length": 4096,
        "chat_template": CHAT_TEMPLATE,
        # Without these entries transformers would split the role and mask symbols into bytes.
        "added_tokens_decoder": {
            str(SPECIAL_SYMBOL_FIRST_ID + offset): {
                "content": symbol,
                "special": True,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "single_word": False,
            }
            for offset, symbol in enumerate(SPECIAL_SYMBOLS)
        },
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n", encoding="utf-8")
    return out_dir
