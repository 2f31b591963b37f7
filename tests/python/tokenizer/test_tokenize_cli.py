"""`pagoda tokenize` and `pagoda detokenize` on the command line."""
import json
import shutil
import subprocess

import pytest
from tokenizers import Tokenizer

import tok_harness as h


def run(*args):
    assert h.BIN.exists(), f"pagoda binary not found at {h.BIN} (set PAGODA_BIN)"
    return subprocess.run([str(h.BIN), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_help_explains_every_flag():
    tok = run("tokenize", "--help")
    assert tok.returncode == 0
    for flag in ("MODEL", "TEXT", "--no-special-tokens", "--no-parse-special", "--pieces", "--jsonl",
                 "--revision", "--download-dir", "repo id"):
        assert flag in tok.stdout
    detok = run("detokenize", "--help")
    assert detok.returncode == 0
    for flag in ("MODEL", "IDS_JSON", "--skip-special-tokens", "--revision", "--download-dir", "repo id"):
        assert flag in detok.stdout


def test_tokenize_and_detokenize_round_trip():
    folder = h.STORIES
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    text = "Once upon a time, there was a little girl named Lily."
    out = run("tokenize", folder, text)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1
    ids = json.loads(lines[0])
    assert ids == hf.encode(text).ids and ids[0] == 1

    out = run("tokenize", folder, "--no-special-tokens", "--pieces", text)
    ids_line, pieces_line = out.stdout.splitlines()
    assert json.loads(ids_line) == hf.encode(text, add_special_tokens=False).ids
    assert json.loads(pieces_line) == hf.encode(text, add_special_tokens=False).tokens

    out = run("detokenize", folder, json.dumps(ids))
    assert out.returncode == 0, out.stderr
    assert out.stdout == hf.decode(ids, skip_special_tokens=False) + "\n"
    out = run("detokenize", "--skip-special-tokens", folder, json.dumps(ids))
    assert out.stdout == text + "\n"


def test_gguf_model_path():
    path = h.VOCAB_TESTS / "ggml-vocab-gpt-2.gguf"
    if not path.exists():
        pytest.skip(f"optional input {path} is absent")
    out = run("tokenize", path, "--no-special-tokens", "Hello world")
    assert json.loads(out.stdout) == [15496, 995]


def test_errors_name_the_problem(tmp_path):
    missing = tmp_path / "nope"
    out = run("tokenize", missing, "hi")
    assert out.returncode != 0 and str(missing) in out.stderr
    (tmp_path / "tokenizer.json").write_text('{"model": {"type": "Unigram", "vocab": []}}')
    out = run("tokenize", tmp_path, "hi")
    assert out.returncode != 0 and "Unigram" in out.stderr
    (tmp_path / "tokenizer.json").write_text("{not json")
    out = run("tokenize", tmp_path, "hi")
    assert out.returncode != 0 and "tokenizer.json" in out.stderr
    out = run("detokenize", h.STORIES, "[1, oops]")
    assert out.returncode != 0 and "IDS_JSON" in out.stderr


def test_repo_id_in_the_hugging_face_cache_resolves_as_in_serve(tmp_path, monkeypatch):
    # The hub cache layout: models--Org--Name/snapshots/<rev>/ with refs/main naming <rev>.
    repo = tmp_path / "hub" / "models--pagoda-test--stories"
    snapshot = repo / "snapshots" / "0123abcd"
    shutil.copytree(h.STORIES, snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    want = run("tokenize", h.STORIES, "Once upon a time")
    got = run("tokenize", "pagoda-test/stories", "Once upon a time")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == json.loads(want.stdout)
    text = run("detokenize", "pagoda-test/stories", got.stdout.strip())
    assert text.returncode == 0, text.stderr
    assert text.stdout == run("detokenize", h.STORIES, got.stdout.strip()).stdout
    assert "Once upon a time" in text.stdout
    missing = run("tokenize", "pagoda-test/absent", "x")
    assert missing.returncode != 0
    assert "pagoda-test/absent" in missing.stderr
