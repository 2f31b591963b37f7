"""pagoda's tokenizer.json implementation against Python `tokenizers` (the Rust
core of Hugging Face): ids with and without special tokens, special-token text
parsed or not, and decoding (with and without skipping special tokens), on the
committed corpus, the llama.cpp test strings and seeded random strings, for
every real tokenizer.json in shared/ and for synthetic tokenizers that cover the
remaining normalizers, pre-tokenizers, models options, post-processors and
decoders."""
import json

import pytest
from tokenizers import Tokenizer

import synthetic_tokenizers
import tok_harness as h

REAL = ["deepseek_v3", "llama2", "llama3_1", "mistral-v1", "qwen3", "smollm2"]
NUM_RANDOM = int(__import__("os").environ.get("TOK_NUM_RANDOM", "160"))


def real_folders():
    out = {name: h.TOKENIZERS / name for name in REAL}
    out["stories260K"] = h.STORIES
    return out


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return synthetic_tokenizers.build_all(tmp_path_factory.mktemp("synthetic"))


def load_config(folder):
    cfg = folder / "tokenizer_config.json"
    return json.loads(cfg.read_text(encoding="utf-8")) if cfg.exists() else {}


def token_text(value):
    if isinstance(value, dict):
        return value.get("content")
    return value


def special_frame(hf, cfg):
    """The ids add_special_tokens puts before and after the text: the
    post-processor's, adjusted as transformers' Llama-style tokenizers do by
    add_bos_token / add_eos_token of tokenizer_config.json (DeepSeek-V3 adds its
    BOS although its tokenizer.json post-processor does not)."""
    probe_with = hf.encode("a").ids
    probe = hf.encode("a", add_special_tokens=False).ids
    k = next(i for i in range(len(probe_with) - len(probe) + 1) if probe_with[i:i + len(probe)] == probe)
    prefix, suffix = probe_with[:k], probe_with[k + len(probe):]
    for key, tok_key, front in (("add_bos_token", "bos_token", True), ("add_eos_token", "eos_token", False)):
        flag = cfg.get(key)
        text = token_text(cfg.get(tok_key))
        tid = hf.token_to_id(text) if text else None
        if not isinstance(flag, bool) or tid is None:
            continue
        side = prefix if front else suffix
        has = bool(side) and (side[0] == tid if front else side[-1] == tid)
        if flag and not has:
            side.insert(0 if front else len(side), tid)
        elif not flag and has:
            side.pop(0 if front else -1)
    return prefix, suffix


def check_tokenizer(folder):
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    cfg = load_config(folder)
    specials = [t.content for t in hf.get_added_tokens_decoder().values()]
    prefix, suffix = special_frame(hf, cfg)
    strings = h.corpus() + h.random_strings(NUM_RANDOM, specials=specials)

    requests = []
    for s in strings:
        requests.append({"op": "encode", "text": s, "add_special": False, "parse_special": True})
        requests.append({"op": "encode", "text": s, "add_special": True, "parse_special": True})
        requests.append({"op": "encode", "text": s, "add_special": False, "parse_special": False})
    replies = h.pagoda_batch(folder, requests)

    plain, special, unparsed = [], [], []
    for i, s in enumerate(strings):
        without = hf.encode(s, add_special_tokens=False).ids
        plain.append((s, without, replies[3 * i]["ids"]))
        special.append((s, prefix + without + suffix, replies[3 * i + 1]["ids"]))
        hf.encode_special_tokens = True
        unparsed.append((s, hf.encode(s, add_special_tokens=False).ids, replies[3 * i + 2]["ids"]))
        hf.encode_special_tokens = False
    for name, pairs in (("encode", plain), ("encode+special", special), ("encode unparsed", unparsed)):
        bad, report = h.first_mismatches(pairs)
        assert not bad, f"{folder.name} {name}: {report}"

    # Decoding: the ids of every string plus random id sequences.
    vocab_size = hf.get_vocab_size(with_added_tokens=True)
    interesting = sorted(hf.get_added_tokens_decoder().keys())
    interesting += [i for i in (hf.token_to_id(f"<0x{b:02X}>") for b in range(0x80, 0x100)) if i is not None]
    sequences = [p[1] for p in special] + h.random_id_sequences(200, vocab_size, interesting)
    requests = []
    for ids in sequences:
        requests.append({"op": "decode", "ids": ids, "skip_special": False})
        requests.append({"op": "decode", "ids": ids, "skip_special": True})
    replies = h.pagoda_batch(folder, requests)
    pairs = []
    for i, ids in enumerate(sequences):
        pairs.append((ids, hf.decode(ids, skip_special_tokens=False), h.hex_text(replies[2 * i]["text_hex"])))
        pairs.append((ids, hf.decode(ids, skip_special_tokens=True), h.hex_text(replies[2 * i + 1]["text_hex"])))
    bad, report = h.first_mismatches(pairs)
    assert not bad, f"{folder.name} decode: {report}"


@pytest.mark.parametrize("name", list(real_folders()))
def test_real_tokenizer_json(name):
    folder = real_folders()[name]
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"optional input {folder}/tokenizer.json is absent")
    check_tokenizer(folder)


@pytest.mark.parametrize("name", list(synthetic_tokenizers.BUILDERS))
def test_synthetic_tokenizer_json(name, synthetic):
    check_tokenizer(synthetic[name])
