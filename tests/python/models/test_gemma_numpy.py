"""Gemma 2 / 3 on the CPU engine against the NumPy float64 forward
(gemma_numpy.py, written from transformers' modeling code), through
`pagoda generate --input`: greedy tokens and the top-20 logprobs of every
step within 1e-4, for prompts shorter and longer than the sliding window
(block size 4, prefill chunks of 7), on the HF folders of
tools/make_tiny_gemma.py's tiny models (which get stories260K's 512-token
tokenizer copied in: the prompts are token ids). The tiny GGUF has no
tokenizer, so golden_tests covers it: the checked-in goldens
(tests/data/golden/tiny_gemma*.json) are checked here to be what this
reference computes.

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
import json
import pathlib

import numpy as np
import pytest
from safetensors.numpy import load_file

import gemma_numpy
from tiny_engine import PAGODA_BIN, run_engine, with_tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODELS = ROOT / "tests" / "data" / "models"
GOLDEN = ROOT / "tests" / "data" / "golden"
STEPS = 12
TOL = 1e-4


def reference(name):
    folder = MODELS / name
    return json.loads((folder / "config.json").read_text()), load_file(str(folder / "model.safetensors"))


def prompts(config):
    rng = np.random.default_rng(5)
    window = config["sliding_window"]
    # Shorter than the window, and 2.5 windows long.
    return [[2, 403, 407], [2] + rng.integers(3, 512, size=int(2.5 * window)).tolist()]


@pytest.mark.parametrize("flags", [(), ("-tp", "2"), ("-pp", "2")], ids=["plain", "tp2", "pp2"])
@pytest.mark.parametrize("name", ["tiny_gemma2", "tiny_gemma3"])
def test_engine_matches_numpy_forward(name, flags, tmp_path):
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
    config, weights = reference(name)
    cases = prompts(config)
    results = run_engine(with_tokenizer(MODELS / name, tmp_path), cases, tmp_path, STEPS, *flags)
    worst = 0.0
    for prompt, res in zip(cases, results):
        ids = list(prompt)
        for step, lp_entry in enumerate(res["logprobs"]):
            lp = gemma_numpy.log_softmax(gemma_numpy.forward(config, weights, ids)[-1])
            want = int(np.argmax(lp))
            top2 = np.sort(lp)[-2:]
            if top2[1] - top2[0] > 2 * TOL:  # a near-tie may flip
                assert lp_entry["token_id"] == want, f"prompt {len(prompt)} tokens, step {step}"
            for t in lp_entry["top_logprobs"]:
                worst = max(worst, abs(t["logprob"] - lp[t["token_id"]]))
            ids.append(lp_entry["token_id"])
    assert worst < TOL, f"max |logprob - reference| = {worst}"


@pytest.mark.parametrize("name", ["tiny_gemma2", "tiny_gemma3"])
def test_fp8_kv_cache_matches_numpy_e4m3(name, tmp_path):
    """--kv-cache-dtype fp8 (scales 1.0): the reference with every k and v rounded to e4m3
    (gemma_numpy.e4m3_round, written from the format, not from pagoda's code), through both KV
    groups (full and sliding window), soft-capping (Gemma 2) and chunked prefill, within TOL
    (measured: 8e-7 and 2.4e-6; the engine rounds f32 k/v, the reference f64 ones, which could
    put an element on a rounding boundary one e4m3 step apart, but the data is fixed). Against
    the unrounded reference the same logprobs are 0.08 and 0.23 off."""
    config, weights = reference(name)
    cases = prompts(config)
    results = run_engine(with_tokenizer(MODELS / name, tmp_path), cases, tmp_path, STEPS,
                         "--kv-cache-dtype", "fp8")
    worst = unrounded = 0.0
    for prompt, res in zip(cases, results):
        ids = list(prompt)
        for lp_entry in res["logprobs"]:
            lp = gemma_numpy.log_softmax(gemma_numpy.forward(config, weights, ids, gemma_numpy.e4m3_round)[-1])
            exact = gemma_numpy.log_softmax(gemma_numpy.forward(config, weights, ids)[-1])
            for t in lp_entry["top_logprobs"]:
                worst = max(worst, abs(t["logprob"] - lp[t["token_id"]]))
                unrounded = max(unrounded, abs(t["logprob"] - exact[t["token_id"]]))
            ids.append(lp_entry["token_id"])
    print(f"{name}: max |logprob - e4m3 reference| {worst:.2e}, - unrounded reference {unrounded:.2e}")
    assert worst < TOL
    assert unrounded > 100 * TOL  # the cache does round: the test can tell


@pytest.mark.parametrize("golden", ["tiny_gemma2", "tiny_gemma3", "tiny_gemma3_gguf"])
def test_goldens_are_the_reference(golden):
    doc = json.loads((GOLDEN / f"{golden}.json").read_text())
    config, weights = reference(golden.removesuffix("_gguf"))
    case = doc["cases"][-1]
    ids = list(case["prompt_ids"])
    for step in range(3):
        lp = gemma_numpy.log_softmax(gemma_numpy.forward(config, weights, ids)[-1])
        for tid, want in case["top_logprobs"][step]:
            assert abs(lp[tid] - want) < 1e-12
        ids.append(case["greedy_ids"][step])
