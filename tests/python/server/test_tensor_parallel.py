"""--tensor-parallel-size (-tp) and --pipeline-parallel-size (-pp) on the real
command: stories260K split over 2 cpu ranks, or into 2 pipeline stages (of 1
or 2 ranks), answers a greedy chat completion exactly as one rank does, says
so at start-up and in /metrics, and impossible values fail with an error
naming the flag (and the model field)."""
import re
import subprocess

import pytest
import requests

from server_harness import DEVICE, PAGODA_BIN
from serve_process import MODEL_DIR, serve

MESSAGES = [{"role": "user", "content": "Tell me a story about a dog"}]



def greedy_chat(url):
    r = requests.post(url + "/v1/chat/completions",
                      json={"messages": MESSAGES, "max_tokens": 40, "temperature": 0, "logprobs": True},
                      timeout=120)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return choice["message"]["content"], [t["token"] for t in choice["logprobs"]["content"]]


@pytest.mark.skipif(DEVICE != "cpu", reason="cpu ranks; on GPUs bf16 sums in another order may flip near-ties")
def test_two_ranks_answer_as_one(running):
    one = running().ready_url()
    proc = running("--tensor-parallel-size", "2")
    two = proc.ready_url()
    assert greedy_chat(two) == greedy_chat(one)
    out = proc.output()
    assert re.search(r"backend: cpu .* x 2, tensor parallel 2 \(cpu threads\)", out), out
    assert re.search(r"KV cache: .* GiB per rank; .*; tensor parallel 2 \(cpu threads\)", out), out
    metrics = requests.get(two + "/metrics", timeout=30).text
    assert re.search(r'^pagoda:tensor_parallel_size\{model_name="[^"]*"\} 2\.0$', metrics, re.M), metrics
    one_metrics = requests.get(one + "/metrics", timeout=30).text
    assert re.search(r'^pagoda:tensor_parallel_size\{model_name="[^"]*"\} 1\.0$', one_metrics, re.M)


@pytest.mark.skipif(DEVICE != "cpu", reason="cpu ranks; on GPUs bf16 sums in another order may flip near-ties")
def test_pipeline_stages_answer_as_one(running):
    one = running().ready_url()
    proc = running("--pipeline-parallel-size", "2")
    two = proc.ready_url()
    assert greedy_chat(two) == greedy_chat(one)
    out = proc.output()
    # stories260K's 5 layers: 3 on stage 0, 2 on the last (which also samples)
    assert re.search(r"backend: cpu .* x 2, pipeline parallel 2 \(layers 0-2 \| 3-4\) \(cpu threads\)", out), out
    assert "async scheduling off: pipeline parallelism (2 stages)" in out, out
    grid = running("-tp", "2", "-pp", "2")
    assert greedy_chat(grid.ready_url()) == greedy_chat(one)
    assert re.search(r"x 4, tensor parallel 2 x pipeline parallel 2 \(layers 0-2 \| 3-4\)", grid.output())
    metrics = requests.get(grid.ready_url() + "/metrics", timeout=30).text
    assert re.search(r'^pagoda:pipeline_parallel_size\{model_name="[^"]*"\} 2\.0$', metrics, re.M), metrics
    assert re.search(r'^pagoda:tensor_parallel_size\{model_name="[^"]*"\} 2\.0$', metrics, re.M), metrics


@pytest.mark.skipif(DEVICE != "cpu", reason="cpu ranks")
def test_short_spelling_tp(running):
    proc = running("-tp", "2", "-pp", "1")
    proc.ready_url()
    assert "tensor parallel 2 (cpu threads)" in proc.output()


@pytest.mark.parametrize("args, message", [
    (["--tensor-parallel-size", "0"], "--tensor-parallel-size: must be >= 1, got 0"),
    (["-tp", "-2"], "--tensor-parallel-size: must be >= 1, got -2"),
    (["--pipeline-parallel-size", "0"], "--pipeline-parallel-size: must be >= 1, got 0"),
    (["-tp", "3"], "--tensor-parallel-size 3 does not divide num_attention_heads 8"),
    (["--pipeline-parallel-size", "6"], "--pipeline-parallel-size 6 exceeds num_hidden_layers 5"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_impossible_values_fail_naming_the_flag(args, message):
    proc = serve(*args)
    assert proc.proc.wait(timeout=120) != 0, proc.output()
    assert message in proc.output(), proc.output()


@pytest.mark.skipif(DEVICE != "cpu", reason="cpu ranks")
def test_generate_takes_the_flag_too():
    def run(*flags):
        proc = subprocess.run([str(PAGODA_BIN), "generate", str(MODEL_DIR), "--device", "cpu", "--prompt",
                               "Once upon a time", "--max-tokens", "24", "--temperature", "0", *flags],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout
    assert run("-tp", "2") == run()
    assert run("-pp", "2") == run()


def test_help_explains_the_flags():
    out = subprocess.run([str(PAGODA_BIN), "serve", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "--tensor-parallel-size" in out and "(also -tp)" in out
    assert "--pipeline-parallel-size" in out and "(also -pp)" in out
