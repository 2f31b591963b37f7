#!/usr/bin/env python3
"""Regenerates the committed tokenizer fixtures of the C++ tests and the fuzzer:
two small tokenizer.json files trained with the `tokenizers` library, and
expected.json with Python `tokenizers`' ids and decodings (the independent
reference of tests/unit/tokenizer). The trainer may number rarely seen
characters differently from run to run, so the tokenizer.json files and
expected.json are always written together. Run from the repository root:
    .venv/bin/python tests/data/tokenizer/make_fixtures.py
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python" / "tokenizer"))

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors  # noqa: E402

import synthetic_tokenizers as syn  # noqa: E402
import tok_harness as h  # noqa: E402

STRINGS = [
    "", " ", "Hello world", " Hello world", "Hello\n\n  world\t!", "I've been 'told he's there",
    "3333333 1,000.5", "你好，世界", "🤗 🏳️‍🌈 👍🏽", "e\u0301 \u00e9", "<|im_start|>user\nhi<|im_end|>",
    "<s>Hello</s>", "[SPECIAL]x", "\ufffd", "नमस्ते", "a  b   c", "\u1680x\u180ey\u0085z",
]


def bytelevel():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    syn._train(tok, 600, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
               pre_tokenizers.ByteLevel.alphabet())
    return tok


def metaspace():
    tok = syn.metaspace_first_byte_fallback()
    tok.add_special_tokens([AddedToken("<|im_start|>", special=True)])
    return tok


def describe(tok):
    cases = []
    for s in STRINGS:
        ids = tok.encode(s, add_special_tokens=False).ids
        cases.append({
            "text": s,
            "ids": ids,
            "ids_special": tok.encode(s).ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip": tok.decode(tok.encode(s).ids, skip_special_tokens=True),
        })
    return cases


def main():
    expected = {}
    for name, build in (("bytelevel", bytelevel), ("metaspace", metaspace)):
        tok = build()
        (HERE / name).mkdir(exist_ok=True)
        tok.save(str(HERE / name / "tokenizer.json"))
        expected[name] = describe(tok)
    stories = h.STORIES / "tokenizer.json"
    if stories.exists():
        expected["stories260K"] = describe(Tokenizer.from_file(str(stories)))
    (HERE / "expected.json").write_text(json.dumps(expected, ensure_ascii=True, indent=1) + "\n")
    seeds = HERE / "fuzz_seeds"
    seeds.mkdir(exist_ok=True)
    for i, s in enumerate(STRINGS + h.corpus()[::12]):
        (seeds / f"seed_{i:03d}.txt").write_bytes(s.encode("utf-8"))


if __name__ == "__main__":
    main()
