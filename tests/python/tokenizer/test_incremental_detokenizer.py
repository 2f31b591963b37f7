"""IncrementalDetokenizer (through `pagoda tokenize --jsonl` op "stream"): for
every tokenizer, the deltas of random id sequences and of the corpus are valid
UTF-8 one by one, and their concatenation plus flush() equals decode() of all
ids exactly, which itself equals Python `tokenizers`' decode."""
import pytest
from tokenizers import Tokenizer

import synthetic_tokenizers
import tok_harness as h
from test_hf_differential import real_folders


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return synthetic_tokenizers.build_all(tmp_path_factory.mktemp("synthetic_stream"))


def check_stream(folder):
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    vocab_size = hf.get_vocab_size(with_added_tokens=True)
    interesting = sorted(hf.get_added_tokens_decoder().keys())
    byte_ids = [hf.token_to_id(f"<0x{b:02X}>") for b in range(0x80, 0x100)]
    interesting += [i for i in byte_ids if i is not None]
    sequences = [hf.encode(s).ids for s in h.corpus()]
    sequences += h.random_id_sequences(150, vocab_size, interesting, max_len=30)

    requests = []
    for ids in sequences:
        for skip in (False, True):
            requests.append({"op": "stream", "ids": ids, "skip_special": skip})
    # With a prompt that ends on a whole character: the deltas are what the new
    # ids add after the prompt's text.
    prompted = []
    for ids in sequences[: len(h.corpus())]:
        if len(ids) < 4:
            continue
        cut = len(ids) // 2
        last = hf.id_to_token(ids[cut - 1]) or ""
        ends_open = (len(last) == 6 and last.startswith("<0x")) or \
            hf.decode(ids[:cut], skip_special_tokens=True).endswith("\ufffd")
        if not ends_open:
            prompted.append((ids[:cut], ids[cut:]))
            requests.append({"op": "stream", "ids": ids[cut:], "prompt": ids[:cut], "skip_special": True})
    replies = h.pagoda_batch(folder, requests)

    failures = []
    for i, ids in enumerate(sequences):
        for k, skip in enumerate((False, True)):
            r = replies[2 * i + k]
            deltas = [h.hex_text(d) for d in r["deltas_hex"]]  # raises on broken UTF-8
            text = "".join(deltas) + h.hex_text(r["flush_hex"])
            expected = hf.decode(ids, skip_special_tokens=skip)
            if text != expected:
                failures.append((ids, skip, expected, text))
    base = 2 * len(sequences)
    for j, (prompt, rest) in enumerate(prompted):
        r = replies[base + j]
        text = "".join(h.hex_text(d) for d in r["deltas_hex"]) + h.hex_text(r["flush_hex"])
        before = hf.decode(prompt, skip_special_tokens=True)
        full = hf.decode(prompt + rest, skip_special_tokens=True)
        if before and full.startswith(before) and text != full[len(before):]:
            failures.append((prompt + rest, "prompt", full[len(before):], text))
    assert not failures, f"{folder.name}: {len(failures)} streams differ, first: {failures[:3]!r}"


@pytest.mark.parametrize("name", list(real_folders()))
def test_stream_real(name):
    folder = real_folders()[name]
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"optional input {folder}/tokenizer.json is absent")
    check_stream(folder)


@pytest.mark.parametrize("name", list(synthetic_tokenizers.BUILDERS))
def test_stream_synthetic(name, synthetic):
    check_stream(synthetic[name])
