"""`pagoda bench latency --profile-ops` on the CPU: random-weight models from
tools/make_random_model.py --config-only (--load-format dummy). The per-op
counts of a decode step must equal the calls the family's forward makes, the
times must be positive and their sum must stay within the timed step."""

import json
import os
import subprocess
import sys

import pytest

PAGODA_BIN = os.environ.get("PAGODA_BIN", "/work/main/build/pagoda")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MAKE = os.path.join(REPO, "tools", "make_random_model.py")
STEPS = 3
BATCH = 2


def make_model(tmp_path, *args):
    out = tmp_path / "model"
    subprocess.run([sys.executable, MAKE, "--config-only", "--out", str(out), *args], check=True,
                   capture_output=True)
    return str(out)


def profile(tmp_path, model, *args):
    if not os.path.exists(PAGODA_BIN):
        pytest.fail("no pagoda binary at %s (set PAGODA_BIN)" % PAGODA_BIN)
    out = tmp_path / "result.json"
    cmd = [PAGODA_BIN, "bench", "latency", model, "--device", "cpu", "--load-format", "dummy",
           "--input-len", "24", "--output-len", "32", "--batch-size", str(BATCH), "--num-iters", "2",
           "--warmup", "1", "--ceiling-gbps", "10", "--profile-ops", "--profile-ops-steps",
           str(STEPS), "--result-json", str(out), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if "no engine" in p.stderr:
        pytest.skip("this build has no engine")
    assert p.returncode == 0, p.stderr[-3000:]
    return p, json.loads(out.read_text())


def calls(report):
    return {r["op"]: r["calls_per_step"] for r in report["op_profile"]}


def check_times(report):
    s = report["op_profile_summary"]
    assert s["num_steps"] == STEPS and s["batch_size"] == BATCH
    # input 24 + (32 - 1) / 2 = 39 prompt tokens: the first profiled step's context is 40.
    assert s["context_len"] == 40
    assert all(r["us_per_step"] > 0 and r["us_per_call"] > 0 for r in report["op_profile"])
    total = sum(r["us_per_step"] for r in report["op_profile"])
    assert total == pytest.approx(s["sum_us_per_step"])
    # The ops are part of the timed step (host scheduling, sampling's wait beside).
    assert 0 < s["sum_us_per_step"] <= s["timed_step_us"] * 1.1
    us = [r["us_per_step"] for r in report["op_profile"]]
    assert us == sorted(us, reverse=True)
    for r in report["op_profile"]:
        if r["op"].startswith(("linear", "paged_attention", "moe_experts")):
            assert r["bytes_per_call"] > 0 and r["gbps"] > 0 and r["pct_of_ceiling"] > 0
        else:
            assert r["bytes_per_call"] is None and r["gbps"] is None


def test_llama_counts_every_op_of_a_decode_step(tmp_path):
    model = make_model(tmp_path, "--preset", "tiny")  # 2 layers, hidden 64, 4 / 2 heads of 16
    p, r = profile(tmp_path, model)
    c = calls(r)
    # Per layer: one fused qkv, o, gate_up and down linear; the lm_head once.
    assert c["linear qkv 128x64 f32"] == 2
    assert c["linear o_proj 64x64 f32"] == 2
    assert c["linear gate_up 344x64 f32"] == 2
    assert c["linear down 64x172 f32"] == 2
    assert c["linear lm_head 128256x64 f32"] == 1
    assert c["paged_attention f32"] == 2 and c["qk_norm_rope_kv_write"] == 2
    assert c["silu_mul"] == 2
    # Layer 0's attention input is a plain norm; the other three norms add the residual.
    assert c["rms_norm"] == 1 and c["add_rms_norm"] == 4
    assert c["embedding"] == 1 and c["sample"] == 1
    check_times(r)
    # The lm_head reads V x H f32 every step.
    head = next(x for x in r["op_profile"] if x["op"].startswith("linear lm_head"))
    assert head["bytes_per_call"] >= 128256 * 64 * 4
    assert "Decode step by op" in p.stdout and "linear lm_head 128256x64 f32" in p.stdout
    assert "host steady clock" in r["op_profile_summary"]["method"]


def test_fp8_linears_take_the_producer_path(tmp_path):
    model = make_model(tmp_path, "--preset", "tiny")
    _, r = profile(tmp_path, model, "--quantization", "fp8")
    c = calls(r)
    # Dynamic per-token FP8: the norms and silu_mul quantise their outputs,
    # which the FP8 linears after them consume (issue 15's producer path);
    # o_proj reads the attention output and quantises it itself.
    assert c["linear_fp8_rows qkv 128x64 f8_e4m3"] == 2
    assert c["linear_fp8_rows gate_up 344x64 f8_e4m3"] == 2
    assert c["linear_fp8_rows down 64x172 f8_e4m3"] == 2
    assert c["linear o_proj 64x64 f8_e4m3"] == 2
    assert c["rms_norm_fp8"] == 1 and c["add_rms_norm_fp8"] == 3 and c["silu_mul_fp8"] == 2
    assert c["add_rms_norm"] == 1  # the final norm: the lm_head is not FP8
    assert c["linear lm_head 128256x64 f32"] == 1  # the head stays in the compute dtype
    check_times(r)


def test_moe_counts_router_and_experts(tmp_path):
    model = make_model(tmp_path, "--preset", "qwen3-30b-a3b", "--hidden-size", "64",
                       "--num-hidden-layers", "2", "--num-attention-heads", "4",
                       "--num-key-value-heads", "2", "--head-dim", "16", "--vocab-size", "4096")
    _, r = profile(tmp_path, model)
    c = calls(r)
    assert c["linear router 128x64 f32"] == 2
    assert c["moe_route"] == 2
    assert c["moe_experts 128x1536x64 f32"] == 2  # 128 experts of 768 gate + 768 up rows
    assert not any(op.startswith("linear gate_up") for op in c)
    check_times(r)


def test_help_lists_the_flags():
    p = subprocess.run([PAGODA_BIN, "bench", "latency", "--help"], capture_output=True, text=True)
    assert "--profile-ops" in p.stdout and "--profile-ops-steps" in p.stdout
