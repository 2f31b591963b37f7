"""`pagoda generate --input` (JSONL batch mode) on stories260K.

The issue's "done when": 200 prompts that share prefixes, run together,
return for every prompt exactly the greedy text that the prompt gets alone
(one request at a time, no prefix cache), also with a KV pool small enough
to force preemption and with 7-token prefill chunks; the prefix-cache hit
rate is reported on stderr. Plus the output line format (choices, logprobs,
prompt_logprobs, stop_reason, usage) and item errors.

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
import json
import os
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
MODEL = SHARED / "models" / "stories260K"

# Ten story openings of 30 to 45 tokens (two or more full KV blocks), each
# shared by 20 prompts.
BASES = [
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. One day, she",
    "Tom and his dog went to the park. The sun was warm and the grass was green. Tom threw a ball and the dog ran after it. Then they",
    "One day, a big bird flew over the house. It had red and blue feathers. The children looked up and pointed at it. The bird",
    "The little cat was very hungry. She looked in the kitchen for some milk, but the bowl was empty. She meowed at her mom and",
    "Sara had a red ball. Every day she played with it in the garden. One morning the ball rolled under the fence. Sara",
    "There was a small boy who loved trains. He had many toy trains in his room. Every night he read a book about trains. One day he",
    "In a big forest, there lived a bear. The bear liked to eat honey and berries. One day, the bear found a tree full of bees. The bear",
    "Mom made a cake for the party. It was big and had pink frosting on top. All the kids came to the party and sang a song. The kids",
    "Ben found a shiny rock near the river. It was smooth and round and it sparkled in the sun. He put it in his pocket and",
    "It was a sunny day and the sky was blue. Anna and her brother went to the beach with their mom and dad. They built a sand castle and",
]
SUFFIXES = [
    " wanted to", " saw a", " was happy", " liked to play", " said,", " ran to", " found a", " felt sad",
    " had a big", " looked at the", " jumped and", " went home", " asked her mom", " smiled and",
    " did not know", " heard a noise", " was very", " gave the", " made a", " played with",
]
MAX_TOKENS = 24
STATS = re.compile(r"prefix cache: (\d+) of (\d+) prompt tokens hit \(([\d.]+)%\); preemptions: (\d+)")


@pytest.fixture(scope="module", autouse=True)
def _binary():
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
    if not (MODEL / "config.json").exists():
        pytest.fail(f"stories260K not found at {MODEL} (set PAGODA_SHARED_DIR)")


def generate(tmp_path, items, *flags, name="run"):
    """Runs `pagoda generate --input`; returns (output lines, stats match, stderr)."""
    inp = tmp_path / f"{name}.in.jsonl"
    out = tmp_path / f"{name}.out.jsonl"
    inp.write_text("".join(json.dumps(it) + "\n" for it in items))
    proc = subprocess.run([str(PAGODA_BIN), "generate", str(MODEL), "--device", "cpu", "--input", str(inp),
                           "--output", str(out), *flags], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == len(items)
    stats = STATS.search(proc.stderr)
    assert stats, f"no prefix-cache line on stderr:\n{proc.stderr}"
    return lines, stats, proc.stderr


def prompts():
    return [b + s for b in BASES for s in SUFFIXES]


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """Each prompt alone: one request at a time, no prefix cache."""
    items = [{"prompt": p, "max_tokens": MAX_TOKENS, "temperature": 0} for p in prompts()]
    lines, stats, _ = generate(tmp_path_factory.mktemp("alone"), items, "--max-num-seqs", "1",
                               "--no-enable-prefix-caching", name="alone")
    assert int(stats.group(1)) == 0
    return items, lines


def test_alone_run_is_well_formed(alone):
    items, lines = alone
    assert len(items) == 200
    for item, line in zip(items, lines):
        assert line["prompt"] == item["prompt"]
        assert line["finish_reason"] == "length"
        assert len(line["token_ids"]) == MAX_TOKENS
        assert line["text"]
        assert "choices" not in line and "logprobs" not in line
        usage = line["usage"]
        assert usage["completion_tokens"] == MAX_TOKENS
        assert usage["total_tokens"] == usage["prompt_tokens"] + MAX_TOKENS


@pytest.mark.parametrize("flags,expect", [
    ([], "hits"),
    (["--num-kv-blocks", "12"], "preemptions"),
    (["--max-num-batched-tokens", "7", "--max-num-seqs", "7"], "hits"),
])
def test_batch_equals_alone(alone, tmp_path, flags, expect):
    items, want = alone
    lines, stats, stderr = generate(tmp_path, items, *flags)
    hits, queries, rate, preemptions = (int(stats.group(1)), int(stats.group(2)), float(stats.group(3)),
                                        int(stats.group(4)))
    for i, (got, ref) in enumerate(zip(lines, want)):
        assert got["token_ids"] == ref["token_ids"], f"item {i}: {items[i]['prompt']!r}"
        assert got["text"] == ref["text"], f"item {i}"
        assert got["finish_reason"] == ref["finish_reason"]
    assert queries > 0 and 0 < hits <= queries, stderr
    assert rate == pytest.approx(100.0 * hits / queries, abs=0.05)
    if expect == "hits":
        # Every prompt shares a base with 19 others: most of the base is cached.
        assert sum(line["usage"]["cached_tokens"] for line in lines) > 0
    else:
        assert preemptions > 0, stderr


def test_single_prompt_mode_matches(alone):
    items, want = alone
    for i in (0, 57, 199):
        proc = subprocess.run([str(PAGODA_BIN), "generate", str(MODEL), "--device", "cpu", "--prompt",
                               items[i]["prompt"], "--temperature", "0", "--max-tokens", str(MAX_TOKENS)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == want[i]["text"] + "\n"


def test_greedy_matches_llama2c_golden(tmp_path):
    golden = json.loads((MODEL / "golden_greedy.json").read_text())
    ids = golden["greedy_ids"]
    assert ids[:5] == [1, 403, 407, 261, 378]  # BOS + "Once upon a time"
    lines, _, _ = generate(tmp_path, [{"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0},
                                      {"prompt": ids[:5], "max_tokens": 40, "temperature": 0}])
    for line in lines:
        assert line["token_ids"] == ids[5:45]
    assert golden["greedy_text"].startswith("Once upon a time" + lines[0]["text"])


def test_output_fields_and_seeded_determinism(tmp_path):
    bird = "One day, a big bird flew over the house. It"
    items = [
        {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 1.0, "seed": 7, "n": 3},
        {"prompt": "Tom and his dog", "max_tokens": 8, "temperature": 0, "logprobs": 2, "prompt_logprobs": 1},
        {"prompt": bird, "max_tokens": 40, "temperature": 0, "stop": ["bird was"]},
        {"prompt": "The little cat was", "max_tokens": 10, "temperature": 1.0, "seed": 3, "best_of": 3},
        {"prompt": "Sara had a red ball.", "max_tokens": 10, "use_beam_search": True, "n": 2, "best_of": 3,
         "temperature": 0},
        {"prompt": bird, "max_tokens": 40, "temperature": 0},
    ]
    runs = [generate(tmp_path, items, name="a")[0],
            generate(tmp_path, items, "--num-kv-blocks", "6", "--max-num-batched-tokens", "16", "--max-num-seqs", "8",
                      name="b")[0]]
    for lines in runs:
        n3, lp, stop, best, beam, no_stop = lines
        assert len(n3["choices"]) == 3
        assert [c["index"] for c in n3["choices"]] == [0, 1, 2]
        assert n3["choices"][0]["text"] == n3["text"] and n3["choices"][0]["token_ids"] == n3["token_ids"]
        assert len({tuple(c["token_ids"]) for c in n3["choices"]}) > 1
        assert n3["usage"]["completion_tokens"] == sum(len(c["token_ids"]) for c in n3["choices"])

        assert len(lp["logprobs"]) == len(lp["token_ids"]) == 8
        for tok, entry in zip(lp["token_ids"], lp["logprobs"]):
            assert entry["token_id"] == tok and entry["rank"] == 1  # greedy
            assert len(entry["top_logprobs"]) == 2
            assert entry["top_logprobs"][0] == {"token_id": tok, "logprob": entry["logprob"]}
            assert entry["logprob"] <= 0
        plp = lp["prompt_logprobs"]
        assert len(plp) == lp["usage"]["prompt_tokens"] and plp[0] is None
        assert all(e["logprob"] <= 0 and len(e["top_logprobs"]) == 1 for e in plp[1:])

        assert stop["finish_reason"] == "stop" and stop["stop_reason"] == "bird was"
        assert "bird was" in no_stop["text"]
        assert stop["text"] == no_stop["text"].split("bird was")[0]
        assert "logprobs" not in stop and "choices" not in stop

        assert "choices" not in best and len(best["token_ids"]) == 10
        assert len(beam["choices"]) == 2 and all(len(c["token_ids"]) == 10 for c in beam["choices"])
    # Identical in both runs (seeded sampling too), except what the cache served.
    for a, b in zip(*runs):
        a["usage"].pop("cached_tokens")
        b["usage"].pop("cached_tokens")
        assert a == b


def test_item_errors_name_the_item(tmp_path):
    inp = tmp_path / "bad.jsonl"
    inp.write_text(json.dumps({"prompt": "Hi", "max_tokens": 4}) + "\n" +
                   json.dumps({"prompt": "Hi", "temperature": 7}) + "\n")
    proc = subprocess.run([str(PAGODA_BIN), "generate", str(MODEL), "--device", "cpu", "--input", str(inp)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "item 2" in proc.stderr and "temperature" in proc.stderr
    inp.write_text("{not json\n")
    proc = subprocess.run([str(PAGODA_BIN), "generate", str(MODEL), "--device", "cpu", "--input", str(inp)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "bad.jsonl:1" in proc.stderr


# OpenAI's batch format (`vllm run-batch`): one request per line, answered as
# the server answers its body; a bad line gets an error line in its place.
def batch_line(custom_id, body, url="/v1/completions", method="POST"):
    return json.dumps({"custom_id": custom_id, "method": method, "url": url, "body": body})


def run_batch_file(tmp_path, lines, *flags, output=None):
    inp = tmp_path / "batch.jsonl"
    inp.write_text("".join(line + "\n" for line in lines))
    out = output or str(tmp_path / "batch.out.jsonl")
    proc = subprocess.run([str(PAGODA_BIN), "generate", str(MODEL), "--device", "cpu", "--input", str(inp),
                           "--output", out, *flags], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout if out == "-" else pathlib.Path(out).read_text()
    return [json.loads(line) for line in text.splitlines()], proc.stderr


def test_openai_batch_format(tmp_path):
    golden = json.loads((MODEL / "golden_greedy.json").read_text())
    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    lines = [
        batch_line("ok-1", {"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 40, "temperature": 0}),
        "{not json",
        batch_line("embed", {"input": "Hi"}, url="/v1/embeddings"),
        batch_line("hot", {"prompt": "Hi", "temperature": 7}),
        batch_line("long", {"prompt": "Once upon a time " * 400, "max_tokens": 4}),
        batch_line("get", {"prompt": "Hi"}, method="GET"),
        batch_line("stream", {"prompt": "Hi", "stream": True}),
        batch_line("other-model", {"model": "gpt-4o", "prompt": "Hi"}),
        batch_line("chat", {"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 8,
                            "temperature": 0, "n": 2}, url="/v1/chat/completions"),
        batch_line("ok-2", {"prompt": [[1, 403, 407, 261, 378]], "max_tokens": 40, "temperature": 0}),
        json.dumps({"custom_id": 7, "method": "POST", "url": "/v1/completions", "body": {}}),
    ]
    out, stderr = run_batch_file(tmp_path, lines, "--chat-template", str(template))
    assert len(out) == len(lines)
    assert [o["custom_id"] for o in out] == ["ok-1", None, "embed", "hot", "long", "get", "stream", "other-model",
                                             "chat", "ok-2", None]
    assert len({o["id"] for o in out}) == len(out) and all(o["id"].startswith("batch_req_") for o in out)
    ok1, not_json, embed, hot, long, get, stream, other, chat, ok2, bad_id = out

    for ok in (ok1, ok2):
        assert ok["error"] is None
        assert ok["response"]["status_code"] == 200 and ok["response"]["request_id"]
        body = ok["response"]["body"]
        assert body["object"] == "text_completion" and body["model"] == "stories260K"
        assert body["id"].startswith("cmpl-")
        assert body["usage"]["completion_tokens"] == 40
        assert golden["greedy_text"].startswith("Once upon a time" + body["choices"][0]["text"])
    assert chat["error"] is None and chat["response"]["status_code"] == 200
    assert chat["response"]["body"]["object"] == "chat.completion"
    assert [c["index"] for c in chat["response"]["body"]["choices"]] == [0, 1]

    for line, code in ((not_json, "invalid_json"), (embed, "unsupported_url"), (get, "invalid_request"),
                       (bad_id, "invalid_request")):
        assert line["response"] is None and line["error"]["code"] == code, line
    assert "/v1/chat/completions" in embed["error"]["message"]
    # Refused bodies carry the server's error answer and sum it up in "error".
    for line, status, param in ((hot, 400, "temperature"), (long, 400, "prompt"), (stream, 400, "stream"),
                                (other, 404, "model")):
        assert line["response"]["status_code"] == status, line
        err = line["response"]["body"]["error"]
        assert err["param"] == param or (param == "model" and err["code"] == "model_not_found"), line
        assert line["error"]["message"] == err["message"] and line["error"]["code"]
    assert "temperature" in hot["error"]["message"]
    assert "8 of 11 requests failed" in stderr
    assert "batch: 100%" in stderr


def test_openai_batch_to_stdout(tmp_path):
    lines = [batch_line(f"r{i}", {"prompt": "Tom and his dog", "max_tokens": 4, "temperature": 0}) for i in range(5)]
    out, stderr = run_batch_file(tmp_path, lines, "--max-num-seqs", "1", output="-")
    assert [o["custom_id"] for o in out] == [f"r{i}" for i in range(5)]
    texts = {o["response"]["body"]["choices"][0]["text"] for o in out}
    assert len(texts) == 1 and all(o["error"] is None for o in out)
    assert "5 requests" in stderr
