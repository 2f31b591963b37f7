"""Phi-3 on the CPU engine against the NumPy float64 forward (phi3_numpy.py,
written from transformers' modeling code), through `pagoda generate --input`:
greedy tokens and the top-20 logprobs of every step within 1e-4, on
tools/make_tiny_phi3.py's tiny model (pre-fused tensors, longrope over an
original context of 16 of 64 positions, sliding window 24; stories260K's
512-token tokenizer copied in: the prompts are token ids), plain, at
tensor-parallel 2 (the fused tensors sliced per rank) and pipeline-parallel 2
(block size 4, prefill chunks of 7); and on tiny_phi4_mini, Phi-4-mini's
partial rotary embedding (partial_rotary_factor 0.75: rope over the first 24
of 32 dims of each head, longrope with 12 factors) with tied embeddings.

longrope's factor set follows max_model_len (docs/models.md): the default
(64 > 16) runs the long factors for every prompt, --max-model-len 16 the
short ones; transformers agrees on every forward longer than 16 tokens
(the long prompt) and on every sequence within 16 (the short-factor run).
The tiny GGUF has no tokenizer, so golden_tests covers it: the checked-in
goldens (tests/data/golden/tiny_phi3*.json) are checked here to be what
this reference computes.

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
import json
import pathlib

import numpy as np
import pytest
from safetensors.numpy import load_file

import phi3_numpy
from tiny_engine import PAGODA_BIN, run_engine, with_tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODELS = ROOT / "tests" / "data" / "models"
MODEL = MODELS / "tiny_phi3"
PHI4_MINI = MODELS / "tiny_phi4_mini"
GOLDEN = ROOT / "tests" / "data" / "golden"
STEPS = 12
TOL = 1e-4


def reference(model=MODEL):
    return json.loads((model / "config.json").read_text()), load_file(str(model / "model.safetensors"))


def worst_error(config, weights, cases, results, long_factors):
    worst = 0.0
    for prompt, res in zip(cases, results):
        ids = list(prompt)
        for step, lp_entry in enumerate(res["logprobs"]):
            lp = phi3_numpy.log_softmax(phi3_numpy.forward(config, weights, ids, long_factors)[-1])
            top2 = np.sort(lp)[-2:]
            if top2[1] - top2[0] > 2 * TOL:  # a near-tie may flip
                assert lp_entry["token_id"] == int(np.argmax(lp)), f"prompt {len(prompt)} tokens, step {step}"
            for t in lp_entry["top_logprobs"]:
                worst = max(worst, abs(t["logprob"] - lp[t["token_id"]]))
            ids.append(lp_entry["token_id"])
    return worst


@pytest.mark.parametrize("flags", [(), ("-tp", "2"), ("-pp", "2")], ids=["plain", "tp2", "pp2"])
def test_engine_matches_numpy_forward_with_long_factors(flags, tmp_path):
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
    config, weights = reference()
    rng = np.random.default_rng(5)
    # Shorter than the original context and than the window, and longer than both.
    cases = [[2, 403, 407], [2] + rng.integers(3, 512, size=40).tolist()]
    results = run_engine(with_tokenizer(MODEL, tmp_path), cases, tmp_path, STEPS, *flags)
    worst = worst_error(config, weights, cases, results, long_factors=True)
    assert worst < TOL, f"max |logprob - reference| = {worst}"
    # The short factors give other logprobs: the choice is visible.
    first = results[0]["logprobs"][0]["top_logprobs"]
    short = phi3_numpy.log_softmax(phi3_numpy.forward(config, weights, cases[0], False)[-1])
    assert max(abs(t["logprob"] - short[t["token_id"]]) for t in first) > 1e-3


def test_engine_runs_the_short_factors_within_the_original_context(tmp_path):
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
    config, weights = reference()
    cases = [[2, 403, 407], [2, 9, 300]]  # 3 + 12 tokens <= 16
    results = run_engine(with_tokenizer(MODEL, tmp_path), cases, tmp_path, STEPS, "--max-model-len", "16")
    worst = worst_error(config, weights, cases, results, long_factors=False)
    assert worst < TOL, f"max |logprob - reference| = {worst}"


@pytest.mark.parametrize("flags", [(), ("-tp", "2")], ids=["plain", "tp2"])
def test_engine_matches_numpy_forward_with_partial_rotary(flags, tmp_path):
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
    config, weights = reference(PHI4_MINI)
    assert phi3_numpy.rotary_dim(config) == 24 and phi3_numpy.head_dim(config) == 32
    rng = np.random.default_rng(6)
    cases = [[2, 403, 407], [2] + rng.integers(3, 512, size=40).tolist()]
    results = run_engine(with_tokenizer(PHI4_MINI, tmp_path), cases, tmp_path, STEPS, *flags)
    worst = worst_error(config, weights, cases, results, long_factors=True)
    assert worst < TOL, f"max |logprob - reference| = {worst}"
    # Rotating all 32 dims (with 16 factors extended from the 12) gives other logprobs:
    # the pass-through dims are visible.
    full = dict(config, partial_rotary_factor=1.0)
    scaling = dict(config["rope_scaling"])
    for key in ("short_factor", "long_factor"):
        scaling[key] = scaling[key] + scaling[key][-4:]
    full["rope_scaling"] = scaling
    first = results[1]["logprobs"][0]["top_logprobs"]
    other = phi3_numpy.log_softmax(phi3_numpy.forward(full, weights, cases[1], True)[-1])
    assert max(abs(t["logprob"] - other[t["token_id"]]) for t in first) > 1e-3


def test_reference_rope_passes_the_last_dims_through():
    config, _ = reference(PHI4_MINI)
    freqs, attention = phi3_numpy.rope_params(config, long_factors=True)
    assert freqs.shape == (12,)
    x = np.random.default_rng(1).standard_normal((5, 3, 32))
    y = phi3_numpy.rope(x, np.arange(5, dtype=np.float64) + 7, freqs, attention)
    np.testing.assert_array_equal(y[..., 24:], x[..., 24:])
    assert np.abs(y[..., :24] - x[..., :24]).max() > 0.1
    # Pair (i, i + 12) turns by the angle p * freqs[i], scaled by the attention factor.
    a = 7 * freqs[3]
    np.testing.assert_allclose(y[0, 0, 3], attention * (x[0, 0, 3] * np.cos(a) - x[0, 0, 15] * np.sin(a)))


@pytest.mark.parametrize("golden", ["tiny_phi3", "tiny_phi3_gguf", "tiny_phi4_mini", "tiny_phi4_mini_gguf"])
def test_goldens_are_the_reference(golden):
    doc = json.loads((GOLDEN / f"{golden}.json").read_text())
    config, weights = reference(MODELS / golden.removesuffix("_gguf"))
    for case in doc["cases"]:
        ids = list(case["prompt_ids"])
        assert len(ids) > config["original_max_position_embeddings"]  # transformers: long factors
        for step in range(3):
            lp = phi3_numpy.log_softmax(phi3_numpy.forward(config, weights, ids)[-1])
            for tid, want in case["top_logprobs"][step]:
                assert abs(lp[tid] - want) < 1e-12
            ids.append(case["greedy_ids"][step])
