"""FP8 W8A8 checkpoints on the CPU engine against the NumPy forward of the same semantics
(fp8_numpy.py), through `pagoda generate --input`: greedy tokens and the top-20 logprobs of
every step within the goldens' tolerance, on tools/make_tiny_fp8.py's tiny checkpoints
(compressed-tensors per-channel dynamic, ModelOpt per-tensor static via hf_quant_config.json,
block-wise fp8) and on its unquantised weights run with --quantization fp8 (per-channel
scales computed at load). The checked-in goldens (tests/data/golden/tiny_fp8_*.json, which
golden_tests also checks) are checked here to be what this reference computes, and the
unquantised forward is checked to be far from them (the tolerance can tell FP8 from bf16).

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
import importlib.util
import json
import pathlib

import numpy as np
import pytest

import fp8_numpy
from tiny_engine import PAGODA_BIN, run_engine, with_tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODELS = ROOT / "tests" / "data" / "models"
GOLDEN = ROOT / "tests" / "data" / "golden"
SCHEMES = {"dynamic": {"kind": "dynamic"}, "static": {"kind": "static"},
           "block": {"kind": "block", "block": 32}}


def maker():
    spec = importlib.util.spec_from_file_location("make_tiny_fp8", ROOT / "tools" / "make_tiny_fp8.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def reference_weights(kind):
    """The reference tensors of tiny_fp8_<kind> (the weights as their e4m3 values)."""
    m = maker()
    rng = np.random.default_rng(m.SEED + 1)
    rng.integers(3, 512, size=9), rng.integers(3, 512, size=30)  # the prompts drawn first
    weights = m.make_weights(m.SEED)
    for k in SCHEMES:  # the static scheme's calibration draws follow the earlier schemes'
        _, ref = m.quantise(weights, SCHEMES[k], rng)
        if k == kind:
            return m.CONFIG, ref


def worst_error(config, weights, scheme, cases, results, tol):
    worst = 0.0
    for prompt, res in zip(cases, results):
        ids = list(prompt)
        for step, entry in enumerate(res["logprobs"]):
            lp = fp8_numpy.log_softmax(fp8_numpy.forward(config, weights, ids, scheme)[-1])
            top2 = np.sort(lp)[-2:]
            if top2[1] - top2[0] > 2 * tol:
                assert entry["token_id"] == int(np.argmax(lp)), f"prompt {len(prompt)}, step {step}"
            for t in entry["top_logprobs"]:
                worst = max(worst, abs(t["logprob"] - lp[t["token_id"]]))
            ids.append(entry["token_id"])
    return worst


@pytest.mark.parametrize("kind", list(SCHEMES))
def test_golden_is_the_reference(kind):
    doc = json.loads((GOLDEN / f"tiny_fp8_{kind}.json").read_text())
    config, weights = reference_weights(kind)
    case = doc["cases"][0]
    ids = case["prompt_ids"] + case["greedy_ids"][:3]
    lp = fp8_numpy.log_softmax(fp8_numpy.forward(config, weights, ids, SCHEMES[kind])[-1])
    for token, logprob in case["top_logprobs"][3]:
        assert abs(lp[token] - logprob) < 1e-9
    # The unquantised weights' logprobs are far outside the tolerance.
    m = maker()
    plain = {k: v.astype(np.float64) for k, v in m.make_weights(m.SEED).items()}
    lp_plain = fp8_numpy.log_softmax(
        fp8_numpy.forward(config, plain, ids, {"kind": "none"}, quantize=False)[-1])
    assert np.abs(lp_plain - lp).max() > 20 * doc["tolerance"]["logprob"]


@pytest.mark.parametrize("kind", list(SCHEMES))
def test_engine_matches_numpy_forward(kind, tmp_path):
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
    doc = json.loads((GOLDEN / f"tiny_fp8_{kind}.json").read_text())
    config, weights = reference_weights(kind)
    prompts = [c["prompt_ids"] for c in doc["cases"]]
    results = run_engine(with_tokenizer(MODELS / f"tiny_fp8_{kind}", tmp_path), prompts, tmp_path, 8)
    tol = doc["tolerance"]["logprob"]
    assert worst_error(config, weights, SCHEMES[kind], prompts, results, tol) < tol


def test_online_quantization_matches_numpy_forward(tmp_path):
    """--quantization fp8 on the unquantised weights: per-channel scales max(amax / 448,
    1 / (448 * 512)) of each row, dynamic per-token activations; the lm_head stays f32."""
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
    m = maker()
    weights = m.make_weights(m.SEED)
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(m.CONFIG))
    m.write_safetensors(folder / "model.safetensors", weights)
    ref = {}
    for name, t in weights.items():
        if any(name.endswith(l + ".weight") for l in m.LINEARS):
            s = fp8_numpy.token_scale(np.abs(t).max(axis=1))
            ref[name] = fp8_numpy.quantize(t, s[:, None])
            ref[name[:-len(".weight")] + ".weight_scale"] = s.astype(np.float64)
        else:
            ref[name] = t
    rng = np.random.default_rng(5)
    prompts = [[1] + rng.integers(3, 512, size=12).tolist()]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    results = run_engine(with_tokenizer(folder, run_dir), prompts, run_dir, 8, "--quantization", "fp8")
    assert worst_error(m.CONFIG, ref, {"kind": "dynamic"}, prompts, results, m.TOLERANCE) < m.TOLERANCE


def test_unsupported_quantization_flag_is_refused(tmp_path):
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
    import subprocess
    r = subprocess.run([str(PAGODA_BIN), "generate", str(MODELS / "tiny_fp8_dynamic"), "--device", "cpu",
                        "--quantization", "awq", "--prompt", "x"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--quantization 'awq' is not supported" in r.stderr + r.stdout
