"""A short real run of `pagoda bench serve` against `pagoda serve` with the
tiny real model ../shared/models/stories260K on the CPU.

Skipped (with the reason) while this build has no engine: `pagoda serve
--help` fails or the server never answers /health.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

PAGODA_BIN = os.environ.get("PAGODA_BIN", "/work/main/build/pagoda")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SHARED = os.environ.get("PAGODA_SHARED_DIR", os.path.join(REPO, "..", "shared"))
STORIES = os.path.join(SHARED, "models", "stories260K")
CHAT_TEMPLATE = os.path.join(REPO, "tests", "data", "server", "simple_chat.jinja")
SHAREGPT_MINI = os.path.join(REPO, "tests", "data", "bench", "sharegpt_mini.json")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url):
    try:
        return urllib.request.urlopen(url + "/health", timeout=1).status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.path.exists(PAGODA_BIN):
        pytest.fail("no pagoda binary at %s (set PAGODA_BIN)" % PAGODA_BIN)
    if subprocess.run([PAGODA_BIN, "serve", "--help"], capture_output=True).returncode != 0:
        pytest.skip("`pagoda serve` is not in this build yet (no engine)")
    port = free_port()
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    cmd = [PAGODA_BIN, "serve", STORIES, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    if os.path.exists(CHAT_TEMPLATE):
        cmd += ["--chat-template", CHAT_TEMPLATE]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = "http://127.0.0.1:%d" % port
    deadline = time.time() + 120
    while not healthy(url):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.skip("pagoda serve did not start: " + log_path.read_text()[-1500:])
        time.sleep(0.2)
    yield url
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def bench(url, tmp_path, *args):
    out = tmp_path / "r.json"
    r = subprocess.run([PAGODA_BIN, "bench", "serve", "--base-url", url, "--result-json", str(out), "--no-progress",
                        *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r, json.loads(out.read_text())


def test_random_token_prompts_exact_lengths(server, tmp_path):
    r, j = bench(server, tmp_path, "--num-prompts", 8, "--input-len", 24, "--output-len", 12,
                 "--max-concurrency", 4, "--goodput", "e2el:60000")
    assert j["completed"] == 8 and j["failed"] == 0, j["errors"]
    assert j["output_lens"] == [12] * 8  # ignore_eos + max_tokens: exact
    assert j["input_lens"] == [24] * 8   # the server's usage.prompt_tokens of the id prompts
    assert j["total_output_tokens"] == 96 and j["total_input_tokens"] == 192
    for ttft, lat, itl in zip(j["ttfts"], j["latencies"], j["itls"]):
        assert 0 < ttft <= lat
        assert 1 <= len(itl) + 1 <= 12
        assert abs(ttft + sum(itl) - lat) < 1e-6
    assert j["mean_tpot_ms"] > 0 and j["request_goodput"] == pytest.approx(8 / j["duration"])
    assert "Serving Benchmark Result" in r.stdout


def test_sharegpt_text_prompts_counted_by_server(server, tmp_path):
    r, j = bench(server, tmp_path, "--dataset", "sharegpt", "--dataset-path", SHAREGPT_MINI, "--num-prompts", 4,
                 "--output-len", 6, "--request-rate", 20)
    assert "/tokenize" in r.stdout
    assert j["completed"] == 4 and j["output_lens"] == [6] * 4
    assert all(n >= 4 for n in j["input_lens"])


@pytest.mark.skipif(not os.path.exists(CHAT_TEMPLATE), reason="no chat template for stories260K")
def test_chat_endpoint(server, tmp_path):
    _, j = bench(server, tmp_path, "--endpoint", "/v1/chat/completions", "--num-prompts", 3, "--input-len", 10,
                 "--output-len", 5)
    assert j["completed"] == 3 and j["output_lens"] == [5] * 3
