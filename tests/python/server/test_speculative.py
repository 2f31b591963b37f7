"""--speculative-config on the real command: stories260K served with n-gram,
suffix or draft-model speculation answers greedy chat and completion
requests (streamed or not, logprobs included) exactly as without it, says so
at start-up, exports the spec_decode counters under pagoda's and vLLM's names
(and only when speculation is on) with the back-off cap, lets a request opt out with
`speculative_decoding: false`, and refuses a bad configuration at start with
the key named; EAGLE heads draft alike from model.safetensors and from
pytorch_model.bin."""
import json
import re

import pytest
import requests

from server_harness import DEVICE
from serve_process import MODEL_DIR, serve

# A prompt that repeats itself, so that the n-gram and suffix proposers find
# matches and drafts get accepted.
STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
         "One day, she saw a big, red ball. ")
PROMPT = STORY + STORY + "Once upon a time, there was a little girl named Lily. She"
MESSAGES = [{"role": "user", "content": STORY + "Tell me a story about Lily."}]

METHODS = {
    "ngram": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4},
    "suffix": {"method": "suffix", "num_speculative_tokens": 6},
    "draft_model": {"method": "draft_model", "model": str(MODEL_DIR), "num_speculative_tokens": 3},
}



def answers(url):
    """Greedy completion and chat answers (with logprobs) and a streamed completion's text."""
    out = []
    r = requests.post(url + "/v1/completions",
                      json={"prompt": PROMPT, "max_tokens": 48, "temperature": 0, "logprobs": 2}, timeout=120)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    out.append((choice["text"], choice["logprobs"]["tokens"], choice["logprobs"]["top_logprobs"],
                choice["finish_reason"]))
    r = requests.post(url + "/v1/chat/completions",
                      json={"messages": MESSAGES, "max_tokens": 40, "temperature": 0, "logprobs": True},
                      timeout=120)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    out.append((choice["message"]["content"], [t["token"] for t in choice["logprobs"]["content"]]))
    with requests.post(url + "/v1/completions",
                       json={"prompt": PROMPT, "max_tokens": 48, "temperature": 0, "stream": True,
                             "stop": ["ball"]},
                       stream=True, timeout=120) as r:
        assert r.status_code == 200, r.text
        text = ""
        for line in r.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                for c in json.loads(line[6:])["choices"]:
                    text += c["text"]
        out.append(text)
    return out


def spec_counters(url):
    text = requests.get(url + "/metrics", timeout=30).text
    values = {}
    for line in text.splitlines():
        m = re.match(r'^((?:pagoda|vllm):spec_decode_\w+)\{([^}]*)\} (\S+)$', line)
        if m:
            values[(m.group(1), m.group(2))] = float(m.group(3))
    return values, text


def backoff_cap(url):
    """pagoda:spec_backoff_cap, or None when /metrics has none."""
    text = requests.get(url + "/metrics", timeout=30).text
    m = re.search(r'^pagoda:spec_backoff_cap\{[^}]*\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def total(values, name):
    return sum(v for (n, _), v in values.items() if n == name)


@pytest.mark.skipif(DEVICE != "cpu", reason="compares two engines' f32 greedy runs")
@pytest.mark.parametrize("method", sorted(METHODS))
def test_answers_equal_plain_decoding(running, method):
    plain = running().ready_url()
    proc = running("--speculative-config", json.dumps(METHODS[method]))
    spec = proc.ready_url()
    assert answers(spec) == answers(plain)
    assert f"speculative decoding: {method}" in proc.output()
    values, text = spec_counters(spec)
    for prefix in ("pagoda", "vllm"):
        drafts = total(values, f"{prefix}:spec_decode_num_drafts_total")
        drafted = total(values, f"{prefix}:spec_decode_num_draft_tokens_total")
        accepted = total(values, f"{prefix}:spec_decode_num_accepted_tokens_total")
        per_pos = total(values, f"{prefix}:spec_decode_num_accepted_tokens_per_pos_total")
        assert drafts > 0 and 0 < accepted <= drafted, text
        assert per_pos == accepted, text
    assert re.search(r'^vllm:spec_decode_num_accepted_tokens_per_pos_total\{[^}]*position="0"\} ', text, re.M), text
    plain_values, plain_text = spec_counters(plain)
    assert not plain_values, plain_text  # no spec_decode families without speculation
    assert backoff_cap(spec) in (8, 16, 32, 64), text
    assert backoff_cap(plain) is None, plain_text
    # r, when measured, is a number; never shown without speculation.
    m = re.search(r'^pagoda:spec_verify_extra_cost\{[^}]*\} (\S+)$', text, re.M)
    assert m is None or float(m.group(1)) == float(m.group(1)), text
    assert "pagoda:spec_verify_extra_cost" not in plain_text, plain_text


def test_requests_can_opt_out(running):
    url = running("--speculative-config", json.dumps(METHODS["ngram"])).ready_url()
    body = {"prompt": PROMPT, "max_tokens": 24, "temperature": 0, "speculative_decoding": False}
    r = requests.post(url + "/v1/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    values, text = spec_counters(url)
    assert total(values, "pagoda:spec_decode_num_drafts_total") == 0, text
    body["speculative_decoding"] = True
    r = requests.post(url + "/v1/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    values, text = spec_counters(url)
    assert total(values, "pagoda:spec_decode_num_drafts_total") > 0, text
    body["speculative_decoding"] = "no"
    r = requests.post(url + "/v1/completions", json=body, timeout=120)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "speculative_decoding", r.text


def test_zero_miss_cost_budget_keeps_the_backoff_cap_at_8(running):
    config = dict(METHODS["ngram"], miss_cost_budget=0)
    url = running("--speculative-config", json.dumps(config)).ready_url()
    r = requests.post(url + "/v1/completions",
                      json={"prompt": PROMPT, "max_tokens": 48, "temperature": 0}, timeout=120)
    assert r.status_code == 200, r.text
    assert backoff_cap(url) == 8


@pytest.mark.parametrize("config, words", [
    ('{"method": "ngram"}', "num_speculative_tokens: required"),
    ('{"method": "ngram", "num_speculative_tokens": 0}', "num_speculative_tokens: 0 is out of range"),
    ('{"method": "eagle3", "num_speculative_tokens": 3, "model": "/no/such/head"}', "EAGLE head '/no/such/head'"),
    ('{"method": "eagle", "num_speculative_tokens": 3, "model": "/no/such/head"}', "EAGLE head '/no/such/head'"),
    ('{"method": "ngram", "num_speculative_tokens": 3, "typo": 1}', "typo: unknown key"),
    ('[1, 2]', "must be a JSON object"),
    ('{"method": "ngram", "num_speculative_tokens": 3, "miss_cost_budget": 2}', "miss_cost_budget: 2 is out of range"),
    ('{"method": "draft_model", "num_speculative_tokens": 3, "model": "/no/such/draft"}', "/no/such/draft"),
])
def test_bad_configs_fail_at_start_naming_the_key(config, words):
    proc = serve("--speculative-config", config)
    try:
        assert proc.proc.wait(timeout=120) != 0
    finally:
        proc.stop()
    assert words in proc.output(), proc.output()


@pytest.mark.skipif(DEVICE != "cpu", reason="compares two engines' f32 greedy runs")
def test_a_random_eagle_head_drafts_and_answers_as_plain(tmp_path, running):
    """tools/make_random_eagle_head.py writes a head that drafts for
    stories260K: the answers are those without speculation and drafts are
    verified; a head missing a tensor is refused at start naming it."""
    import pathlib
    import subprocess
    import sys
    tool = pathlib.Path(__file__).resolve().parents[3] / "tools" / "make_random_eagle_head.py"
    head = tmp_path / "head"
    subprocess.run([sys.executable, str(tool), "--target", str(MODEL_DIR), "--out", str(head)], check=True)
    config = json.dumps({"method": "eagle", "model": str(head), "num_speculative_tokens": 3})
    plain = running().ready_url()
    proc = running("--speculative-config", config)
    spec = proc.ready_url()
    assert answers(spec) == answers(plain)
    assert "speculative decoding: eagle" in proc.output()
    values, text = spec_counters(spec)
    assert total(values, "pagoda:spec_decode_num_draft_tokens_total") > 0, text

    from safetensors.numpy import load_file, save_file
    tensors = load_file(str(head / "model.safetensors"))
    del tensors["layers.0.mlp.up_proj.weight"]
    save_file(tensors, str(head / "model.safetensors"))
    proc = serve("--speculative-config", config)
    try:
        assert proc.proc.wait(timeout=120) != 0
    finally:
        proc.stop()
    assert "tensor 'layers.0.mlp.up_proj.weight' is missing" in proc.output(), proc.output()


@pytest.mark.skipif(DEVICE != "cpu", reason="compares two engines' f32 greedy runs")
def test_an_eagle3_head_drafts_and_bad_ones_are_refused(tmp_path, running):
    """An EAGLE-3 head (tools/make_random_eagle_head.py --eagle3) is read and
    checked against the target: one that fits drafts over its draft
    vocabulary and the answers are those without speculation; one whose aux
    layers the target lacks, or whose d2t maps outside the target's
    vocabulary, is refused at start naming that."""
    import pathlib
    import subprocess
    import sys
    import numpy as np
    from safetensors.numpy import load_file, save_file
    tool = pathlib.Path(__file__).resolve().parents[3] / "tools" / "make_random_eagle_head.py"

    def config(head):
        return json.dumps({"method": "eagle3", "model": str(head), "num_speculative_tokens": 3})

    def refusal(head):
        proc = serve("--speculative-config", config(head))
        try:
            assert proc.proc.wait(timeout=120) != 0
        finally:
            proc.stop()
        return proc.output()

    head = tmp_path / "head"
    subprocess.run([sys.executable, str(tool), "--target", str(MODEL_DIR), "--out", str(head),
                    "--eagle3", "--draft-vocab", "100", "--aux-layers", "0,2,4"], check=True)
    plain = running().ready_url()
    want = answers(plain)
    proc = running("--speculative-config", config(head))
    spec = proc.ready_url()
    assert answers(spec) == want
    assert "speculative decoding: eagle3" in proc.output()
    assert "the target's embedding, draft vocabulary 100" in proc.output(), proc.output()
    values, text = spec_counters(spec)
    assert total(values, "pagoda:spec_decode_num_draft_tokens_total") > 0, text

    # A head with its own embedding (over the target's vocabulary) uses it.
    own = tmp_path / "own"
    subprocess.run([sys.executable, str(tool), "--target", str(MODEL_DIR), "--out", str(own),
                    "--eagle3", "--draft-vocab", "100", "--aux-layers", "0,2,4",
                    "--with-embedding"], check=True)
    proc = running("--speculative-config", config(own))
    assert answers(proc.ready_url()) == want
    assert "the target's embedding" not in proc.output(), proc.output()

    # stories260K has 5 layers: the default 2, L/2, L-3 is layer 2 three times.
    default = tmp_path / "default"
    subprocess.run([sys.executable, str(tool), "--target", str(MODEL_DIR), "--out", str(default),
                    "--eagle3"], check=True)
    out = refusal(default)
    assert "aux hidden-state layers [2, 2, 2]" in out, out

    tensors = load_file(str(head / "model.safetensors"))
    d2t = tensors["d2t"].copy()
    d2t[7] = 10_000
    tensors["d2t"] = d2t.astype(np.int64)
    save_file(tensors, str(head / "model.safetensors"))
    out = refusal(head)
    assert "d2t[7] = 10000" in out, out


@pytest.mark.skipif(DEVICE != "cpu", reason="compares two engines' f32 greedy runs")
def test_eagle_heads_from_pytorch_model_bin_draft_as_from_safetensors(tmp_path, running):
    """A head folder holding pytorch_model.bin (tools/torch_checkpoint.py, the
    layout torch.save writes) instead of model.safetensors loads through the
    PyTorch checkpoint reader and drafts exactly as the safetensors head: the
    same answers and the same draft / accepted counts per position. EAGLE-1:
    a random head, every tensor in one shared storage (its drafts are not
    accepted, so only loading and the answers are compared). EAGLE-3, in two
    shards with pytorch_model.bin.index.json: a copying head (as
    tests/unit/engine/eagle_test_heads.h's: its first draft is the target's
    greedy token one position back, the current token x) whose d2t maps x to
    the token that followed x in the plain run, so drafts are accepted and
    their counts tell the heads apart. A checkpoint with compressed entries
    is refused at start naming the entry."""
    import pathlib
    import shutil
    import subprocess
    import sys
    import zipfile
    import numpy as np
    from safetensors.numpy import load_file, save_file
    tools = pathlib.Path(__file__).resolve().parents[3] / "tools"
    target = load_file(str(MODEL_DIR / "model.safetensors"))

    plain = running().ready_url()
    r = requests.post(plain + "/v1/completions",
                      json={"prompt": PROMPT, "max_tokens": 48, "temperature": 0, "return_token_ids": True},
                      timeout=120)
    assert r.status_code == 200, r.text
    ids = r.json()["choices"][0]["prompt_token_ids"] + r.json()["choices"][0]["token_ids"]
    follower = dict(zip(ids[:-1], ids[1:]))

    def bigram_copying(head):
        t = load_file(str(head / "model.safetensors"))
        h, v = t["fc.weight"].shape[0], t["lm_head.weight"].shape[0]
        t["fc.weight"] = np.concatenate([np.eye(h, dtype=np.float32),
                                         np.zeros((h, 2 * h), np.float32)], axis=1)  # aux 0 = layer L
        for name in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
            t["midlayer." + name] = np.zeros_like(t["midlayer." + name])
        t["norm.weight"] = target["model.norm.weight"]
        t["lm_head.weight"] = target["model.embed_tokens.weight"]  # tied: the target's logits
        t["d2t"] = np.array([follower.get(d, d) - d for d in range(v)], np.int64)
        save_file(t, str(head / "model.safetensors"))

    def make_heads(name, head_args, convert_args, out_name):
        st, pt = tmp_path / (name + "-st"), tmp_path / (name + "-pt")
        subprocess.run([sys.executable, str(tools / "make_random_eagle_head.py"), "--target",
                        str(MODEL_DIR), "--out", str(st)] + head_args, check=True)
        if "--eagle3" in head_args:
            bigram_copying(st)
        pt.mkdir()
        shutil.copy(st / "config.json", pt / "config.json")
        subprocess.run([sys.executable, str(tools / "torch_checkpoint.py"), str(st / "model.safetensors"),
                        str(pt / out_name), "--writer", "python"] + convert_args, check=True)
        return st, pt

    def drafts(method, head):
        config = json.dumps({"method": method, "model": str(head), "num_speculative_tokens": 3})
        proc = running("--speculative-config", config)
        url = proc.ready_url()
        got = answers(url)
        values, text = spec_counters(url)
        counts = {k: v for k, v in values.items() if k[0].startswith("pagoda:spec_decode_num_")}
        assert total(values, "pagoda:spec_decode_num_draft_tokens_total") > 0, text
        return got, counts, proc.output()

    want_answers = answers(plain)
    eagle = make_heads("eagle", [], ["--share-storage"], "pytorch_model.bin")
    eagle3 = make_heads("eagle3", ["--eagle3", "--draft-vocab", "512", "--aux-layers", "5,1,3"],
                        ["--shards", "2"], "")
    for method, (st, pt) in (("eagle", eagle), ("eagle3", eagle3)):
        want, want_counts, _ = drafts(method, st)
        got, got_counts, out = drafts(method, pt)
        assert "pytorch_model.bin (" in out or "2 PyTorch checkpoint shards" in out, out
        assert got == want == want_answers
        assert got_counts == want_counts
        if method == "eagle3":
            assert total(got_counts, "pagoda:spec_decode_num_accepted_tokens_total") > 0, got_counts

    bin_path = eagle[1] / "pytorch_model.bin"
    with zipfile.ZipFile(bin_path) as z:
        entries = [(i.filename, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(bin_path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            z.writestr(name, data)
    proc = serve("--speculative-config",
                 json.dumps({"method": "eagle", "model": str(eagle[1]), "num_speculative_tokens": 3}))
    try:
        assert proc.proc.wait(timeout=120) != 0
    finally:
        proc.stop()
    assert re.search(r"pytorch_model\.bin: zip entry 'archive/\S+' is compressed \(method 8\)",
                     proc.output()), proc.output()


def counter(url, name):
    """The value of counter `name` (pagoda:..., exported as name_total) on /metrics."""
    text = requests.get(url + "/metrics", timeout=30).text
    m = re.search(r'^' + re.escape(name) + r'_total(?:\{[^}]*\})? (\S+)$', text, re.M)
    assert m, text
    return float(m.group(1))


@pytest.mark.skipif(DEVICE != "cpu", reason="compares two engines' f32 runs")
@pytest.mark.parametrize("method", ["eagle", "eagle3"])
def test_eagle_drafts_after_a_prefix_cache_hit_and_for_n_2(tmp_path, running, method):
    """Chat requests sharing a long opening (two copies of STORY): the second
    hits the prefix cache for it, and is drafted all the same (the head's
    state starts where the target's hidden rows do); a seeded n = 2 request
    is drafted too. Every answer is the plain server's."""
    import pathlib
    import subprocess
    import sys
    tool = pathlib.Path(__file__).resolve().parents[3] / "tools" / "make_random_eagle_head.py"
    head = tmp_path / "head"
    extra = ["--eagle3", "--draft-vocab", "100", "--aux-layers", "0,2,4"] if method == "eagle3" else []
    subprocess.run([sys.executable, str(tool), "--target", str(MODEL_DIR), "--out", str(head)] + extra,
                   check=True)
    config = json.dumps({"method": method, "model": str(head), "num_speculative_tokens": 3})
    plain = running().ready_url()
    spec = running("--speculative-config", config).ready_url()

    def chat(url, question):
        messages = [{"role": "user", "content": STORY + STORY + question}]
        r = requests.post(url + "/v1/chat/completions",
                          json={"messages": messages, "max_tokens": 24, "temperature": 0}, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]["content"]

    def drafted_and_hits():
        return (counter(spec, "pagoda:spec_decode_num_draft_tokens"),
                counter(spec, "pagoda:prefix_cache_hits"))

    questions = ["Tell me about Lily.", "What did the ball do?"]
    got = [chat(spec, questions[0])]
    drafted0, hits0 = drafted_and_hits()
    got.append(chat(spec, questions[1]))
    drafted1, hits1 = drafted_and_hits()
    assert hits1 - hits0 >= 64, (hits0, hits1)  # the shared opening: 4+ blocks of 16
    assert drafted1 > drafted0, (drafted0, drafted1)
    assert got == [chat(plain, q) for q in questions]

    body = {"prompt": PROMPT, "max_tokens": 24, "temperature": 0.8, "seed": 5, "n": 2}

    def texts(url):
        r = requests.post(url + "/v1/completions", json=body, timeout=120)
        assert r.status_code == 200, r.text
        return sorted((c["index"], c["text"]) for c in r.json()["choices"])

    drafted2, _ = drafted_and_hits()
    assert texts(spec) == texts(plain)
    assert counter(spec, "pagoda:spec_decode_num_draft_tokens") > drafted2
