"""Shared helpers of the tokenizer tests: the pagoda binary's `tokenize --jsonl`
batch protocol, the test inputs (corpus, random strings) and the reference
tokenizers (Python `tokenizers`, `sentencepiece`)."""
import json
import os
import random
import re
import subprocess
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BIN = Path(os.environ.get("PAGODA_BIN", REPO / "build" / "pagoda"))
SHARED = Path(os.environ.get("PAGODA_SHARED_DIR", REPO.parent / "shared"))
DATA = REPO / "tests" / "data" / "tokenizer"
TOKENIZERS = SHARED / "models" / "tokenizers"
VOCAB_TESTS = SHARED / "models" / "llama.cpp-vocab-tests"
STORIES = SHARED / "models" / "stories260K"
SEED = int(os.environ.get("TOK_SEED", "20240611"))


def pagoda_batch(model_path, requests, timeout=600):
    """Runs `pagoda tokenize MODEL --jsonl` once over all requests."""
    assert BIN.exists(), f"pagoda binary not found at {BIN} (set PAGODA_BIN)"
    payload = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run([str(BIN), "tokenize", str(model_path), "--jsonl"], input=payload.encode(),
                          capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"pagoda failed on {model_path}: {proc.stderr.decode(errors='replace')}"
    replies = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert len(replies) == len(requests), proc.stderr.decode(errors="replace")
    for r in replies:
        assert "error" not in r, r
    return replies


def hex_text(h):
    """Decodes a *_hex reply field; raises on invalid UTF-8."""
    return bytes.fromhex(h).decode("utf-8")


@lru_cache(maxsize=None)
def corpus():
    strings = json.loads((DATA / "corpus.json").read_text(encoding="utf-8"))
    for inp in sorted(VOCAB_TESTS.glob("*.inp")):
        parts = inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
        strings.extend(p for p in parts[:-1] if p not in strings)
        break  # every .inp holds the same strings
    return strings


@lru_cache(maxsize=None)
def assigned_code_points():
    """Code points assigned in Unicode 16.0 (what tokenizers knows), minus
    surrogates: this Python's, plus the later ones that pagoda lists in
    src/tokenizer/unicode_additions.inc (except cased letters, whose lowercase
    pagoda does not know)."""
    cps = [cp for cp in range(0x110000) if unicodedata.category(chr(cp)) not in ("Cn", "Cs")]
    text = (REPO / "src" / "tokenizer" / "unicode_additions.inc").read_text()
    for lo, hi, gc in re.findall(r"\{0x([0-9A-F]+),0x([0-9A-F]+),(\d+)\}", text):
        if int(gc) not in (1, 3):  # Lu, Lt
            cps.extend(range(int(lo, 16), int(hi, 16) + 1))
    return sorted(set(cps))


def random_strings(n, specials=(), seed=SEED):
    """Mixed random strings: ASCII with whitespace runs, any assigned char,
    corpus fragments and special-token texts."""
    rng = random.Random(seed)
    cps = assigned_code_points()
    base = corpus()
    ascii_pool = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 '\".,!?-_()[]{}<>|/\\:;@#$%^&*+=~`"
    ws = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\n\n"]
    out = []
    for i in range(n):
        kind = i % 4
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if kind == 0 or r < 0.25:
                parts.append("".join(rng.choice(ascii_pool) for _ in range(rng.randint(1, 10))))
            elif r < 0.5:
                parts.append("".join(chr(rng.choice(cps)) for _ in range(rng.randint(1, 6))))
            elif r < 0.7:
                s = rng.choice(base)
                a = rng.randint(0, len(s))
                parts.append(s[a:a + rng.randint(0, 30)])
            elif r < 0.8 and specials:
                parts.append(rng.choice(specials))
            else:
                parts.append(rng.choice(ws))
        out.append("".join(parts))
    return out


def random_id_sequences(n, vocab_size, interesting=(), seed=SEED, max_len=40):
    """Random id sequences over the whole vocabulary, biased to `interesting` ids."""
    rng = random.Random(seed)
    seqs = []
    for _ in range(n):
        seq = []
        for _ in range(rng.randint(1, max_len)):
            if interesting and rng.random() < 0.3:
                seq.append(rng.choice(interesting))
            else:
                seq.append(rng.randrange(vocab_size))
        seqs.append(seq)
    return seqs


def first_mismatches(pairs, limit=5):
    """pairs: (label, expected, got); returns a readable report of the first mismatches."""
    bad = [(label, e, g) for label, e, g in pairs if e != g]
    lines = [f"{len(bad)} of {len(pairs)} differ"]
    for label, e, g in bad[:limit]:
        lines.append(f"  input {label!r}\n    expected {e!r}\n    got      {g!r}")
    return bad, "\n".join(lines)
