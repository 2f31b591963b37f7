"""allowed_token_ids and bad_words in `pagoda generate --input` on stories260K.

Greedy replies, compared by token id (the JSONL output carries token_ids):
a bad word's token sequence (either tokenization) never appears in the
output and the reply changes where the unconstrained one had it; with
allowed_token_ids every output id is allowed and the reply changes where the
unconstrained one used another id. Bad values name the field.

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
MODEL = SHARED / "models" / "stories260K"
PROMPTS = [
    "Once upon a time, there was a little girl named Lily. She",
    "Tom and his dog went to the park. The sun was warm and",
    "The little cat was very hungry. She looked in the kitchen",
]
MAX_TOKENS = 24


@pytest.fixture(scope="module", autouse=True)
def _binary():
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")


def run(tmp_path, items, name="run"):
    inp, out = tmp_path / f"{name}.in.jsonl", tmp_path / f"{name}.out.jsonl"
    inp.write_text("".join(json.dumps(it) + "\n" for it in items))
    proc = subprocess.run([str(PAGODA_BIN), "generate", str(MODEL), "--device", "cpu", "--input", str(inp),
                           "--output", str(out)], capture_output=True, text=True, timeout=300)
    return proc, ([json.loads(line) for line in out.read_text().splitlines()] if proc.returncode == 0 else None)


def tokenize(text):
    proc = subprocess.run([str(PAGODA_BIN), "tokenize", str(MODEL), text, "--no-special-tokens"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def bad_word_ids(word):
    """vLLM's sequences for one bad word: as given, and after a space when that
    starts with another token and has as many tokens."""
    plain, spaced = tokenize(word.lstrip()), tokenize(" " + word.lstrip())
    return [plain] + ([spaced] if len(spaced) == len(plain) and spaced[0] != plain[0] else [])


def contains(ids, seq):
    return any(ids[i:i + len(seq)] == seq for i in range(len(ids) - len(seq) + 1))


@pytest.fixture(scope="module")
def greedy(tmp_path_factory):
    proc, lines = run(tmp_path_factory.mktemp("greedy"),
                      [{"prompt": p, "max_tokens": MAX_TOKENS, "temperature": 0} for p in PROMPTS])
    assert proc.returncode == 0, proc.stderr
    return lines


def test_bad_words_never_appear_and_change_the_reply(tmp_path, greedy):
    items, banned = [], []
    for p, line in zip(PROMPTS, greedy):
        # Words of the reply: one of a single token and the one of most tokens.
        words = [w.strip(".,!?\"") for w in line["text"].split()]
        single = next(w for w in words if len(tokenize(w)) == 1)
        multi = max(words, key=lambda w: len(tokenize(w)))
        assert len(tokenize(multi)) > 1
        seqs = bad_word_ids(single) + bad_word_ids(multi)
        assert any(contains(line["token_ids"], s) for s in seqs), (line["text"], seqs)
        items.append({"prompt": p, "max_tokens": MAX_TOKENS, "temperature": 0, "bad_words": [single, multi]})
        banned.append(seqs)
    proc, lines = run(tmp_path, items)
    assert proc.returncode == 0, proc.stderr
    for line, before, seqs in zip(lines, greedy, banned):
        assert line["token_ids"] != before["token_ids"]
        for s in seqs:
            assert not contains(line["token_ids"], s), (line["text"], s)


def test_allowed_token_ids_are_the_only_ids_sampled(tmp_path, greedy):
    items, allowed_sets = [], []
    for p, line in zip(PROMPTS, greedy):
        # The reply's own ids minus its first: greedy must pick something else first.
        allowed = sorted(set(line["token_ids"][1:]) | set(tokenize(" the dog and a cat.")))
        allowed = [t for t in allowed if t != line["token_ids"][0]]
        items.append({"prompt": p, "max_tokens": MAX_TOKENS, "temperature": 0, "allowed_token_ids": allowed})
        allowed_sets.append(set(allowed))
    # Random sampling too, with several samples sharing one mask.
    items.append({"prompt": PROMPTS[0], "max_tokens": MAX_TOKENS, "temperature": 1.0, "seed": 7, "n": 4,
                  "allowed_token_ids": sorted(allowed_sets[0])})
    allowed_sets.append(allowed_sets[0])
    proc, lines = run(tmp_path, items)
    assert proc.returncode == 0, proc.stderr
    for line, before, allowed in zip(lines, greedy, allowed_sets):
        assert line["token_ids"][0] != before["token_ids"][0]
        assert set(line["token_ids"]) <= allowed, line["token_ids"]
    for choice in lines[-1]["choices"]:
        assert choice["token_ids"] and set(choice["token_ids"]) <= allowed_sets[-1]


@pytest.mark.parametrize("fields, field", [
    ({"allowed_token_ids": []}, "allowed_token_ids"),
    ({"allowed_token_ids": [1, 10 ** 6]}, "allowed_token_ids"),
    ({"bad_words": [""]}, "bad_words"),
    ({"bad_words": "cat"}, "bad_words"),
    ({"bad_words": ["cat"], "use_beam_search": True, "n": 2}, "bad_words"),
])
def test_bad_values_name_the_field(tmp_path, fields, field):
    proc, _ = run(tmp_path, [{"prompt": "Hi", "max_tokens": 4, **fields}])
    assert proc.returncode == 1
    assert "item 1" in proc.stderr and field in proc.stderr, proc.stderr
