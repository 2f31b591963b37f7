"""tokenizer.model loaded through libsentencepiece (no tokenizer.json) against
Python `sentencepiece`: ids without special tokens and without special-token
parsing equal sp.encode(), add_special_tokens prepends BOS, and decoding the
ids gives sp.decode()."""
import pytest
import sentencepiece as spm

import tok_harness as h

MODELS = {
    "mistral-v3": h.TOKENIZERS / "mistral-v3" / "tokenizer.model",
    "mistral-v1": h.TOKENIZERS / "mistral-v1" / "tokenizer.model",
    "llama2": h.TOKENIZERS / "llama2" / "tokenizer.model",
    "stories260K": h.STORIES / "tokenizer.model",
}


@pytest.mark.parametrize("name", list(MODELS))
def test_sentencepiece_matches_python(name):
    path = MODELS[name]
    if not path.exists():
        pytest.skip(f"optional input {path} is absent")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    strings = h.corpus() + h.random_strings(200)
    requests = []
    for s in strings:
        requests.append({"op": "encode", "text": s, "add_special": False, "parse_special": False})
        requests.append({"op": "encode", "text": s, "add_special": True, "parse_special": False})
    replies = h.pagoda_batch(path, requests)
    pairs, special = [], []
    for i, s in enumerate(strings):
        expected = sp.encode(s)
        pairs.append((s, expected, replies[2 * i]["ids"]))
        special.append((s, [sp.bos_id()] + expected, replies[2 * i + 1]["ids"]))
    for label, p in (("encode", pairs), ("encode+bos", special)):
        bad, report = h.first_mismatches(p)
        assert not bad, f"{name} {label}: {report}"

    sequences = [p[1] for p in pairs if p[1]]
    replies = h.pagoda_batch(path, [{"op": "decode", "ids": ids} for ids in sequences])
    dec = [(ids, sp.decode(ids), h.hex_text(r["text_hex"])) for ids, r in zip(sequences, replies)]
    bad, report = h.first_mismatches(dec)
    assert not bad, f"{name} decode: {report}"


def test_mistral_v3_control_tokens():
    path = MODELS["mistral-v3"]
    if not path.exists():
        pytest.skip(f"optional input {path} is absent")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    inst, end_inst = sp.piece_to_id("[INST]"), sp.piece_to_id("[/INST]")
    assert sp.is_control(inst) and sp.is_control(end_inst)
    text = "[INST] What is 2+2? [/INST]"
    parsed, plain, info = h.pagoda_batch(path, [
        {"op": "encode", "text": text, "add_special": True, "parse_special": True},
        {"op": "encode", "text": text, "add_special": True, "parse_special": False},
        {"op": "info"}])
    # Control pieces become their ids; the text between is SentencePiece-encoded.
    assert parsed["ids"] == [sp.bos_id(), inst] + sp.encode(" What is 2+2? ") + [end_inst]
    assert plain["ids"] == [sp.bos_id()] + sp.encode(text)
    assert info["bos_id"] == sp.bos_id() and info["eos_id"] == sp.eos_id()
    assert sp.eos_id() in info["eos_ids"]


@pytest.mark.parametrize("name", list(MODELS))
def test_sentencepiece_stream(name):
    path = MODELS[name]
    if not path.exists():
        pytest.skip(f"optional input {path} is absent")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    sequences = [sp.encode(s) for s in h.corpus()]
    sequences += h.random_id_sequences(100, sp.get_piece_size(), list(range(3, 259)))
    requests = [{"op": "stream", "ids": ids, "skip_special": True} for ids in sequences]
    requests += [{"op": "decode", "ids": ids, "skip_special": True} for ids in sequences]
    replies = h.pagoda_batch(path, requests)
    n = len(sequences)
    for ids, stream, dec in zip(sequences, replies[:n], replies[n:]):
        text = "".join(h.hex_text(d) for d in stream["deltas_hex"]) + h.hex_text(stream["flush_hex"])
        assert text == h.hex_text(dec["text_hex"]), ids
    for ids, dec in zip(sequences[:len(h.corpus())], replies[n:]):
        assert h.hex_text(dec["text_hex"]) == sp.decode(ids), ids
