"""AWQ / GPTQ checkpoints on the CPU engine (io/int_quant_source.h) through `pagoda generate`,
on tools/make_tiny_int_quant.py's tiny Llama models (stories260K's tokenizer copied in: the
prompts are token ids):

- the checked-in models and goldens are what tools/int_quant_pack.py and the NumPy forward of
  the dequantized weights make (the goldens themselves are checked by golden_tests);
- the engine matches that reference within 1e-4 in logprob plain, at tensor-parallel 2
  (row-parallel o_proj / down split their K: the act-order model's are dequantized, logged)
  and with --gguf-dequantize (every module read as f32);
- a deliberately wrong zero point changes the output (the check can fail);
- the startup log names the format and the group-format bytes;
- --load-format dummy gives random blocks of the checkpoint's format (plain and at -tp 2, where
  the fused qkv / gate_up parts share one act-order permutation);
- refused configs and tensors name the field / tensor.

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "python" / "models"))
sys.path.insert(0, str(ROOT / "tools"))
import make_tiny_int_quant  # noqa: E402
from int_quant_pack import AWQ_ORDER, dequantize, pack_awq, pack_gptq, quantize  # noqa: E402
from tiny_engine import PAGODA_BIN, run_engine, with_tokenizer  # noqa: E402

MODELS = ROOT / "tests" / "data" / "models"
GOLDEN = ROOT / "tests" / "data" / "golden"
NAMES = list(make_tiny_int_quant.VARIANTS)
TOL = 1e-4
STEPS = 8


def require_bin():
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")


def worst_error(golden, results, check_tokens=True):
    """max |logprob - golden| over the engine's top logprobs; with check_tokens the greedy
    picks must match where the reference has no near-tie."""
    worst = 0.0
    for case, res in zip(golden["cases"], results):
        for step, entry in enumerate(res["logprobs"]):
            ref = dict((int(t), lp) for t, lp in case["top_logprobs"][step])
            top = sorted(ref.values())[-2:]
            if check_tokens and top[1] - top[0] > 2 * TOL:
                assert entry["token_id"] == case["greedy_ids"][step], f"step {step}"
            for t in entry["top_logprobs"]:
                if t["token_id"] in ref:
                    worst = max(worst, abs(t["logprob"] - ref[t["token_id"]]))
            if entry["token_id"] != case["greedy_ids"][step]:
                break  # a near-tie flipped: the sequences differ from here
    return worst


def run(name, tmp_path, *flags, model=None):
    golden = json.loads((GOLDEN / f"{name}.json").read_text())
    prompts = [c["prompt_ids"] for c in golden["cases"]]
    return golden, run_engine(with_tokenizer(model or MODELS / name, tmp_path), prompts, tmp_path,
                              STEPS, *flags)


def test_packing_matches_the_checked_in_models():
    weights = make_tiny_int_quant.make_weights(make_tiny_int_quant.CONFIG, make_tiny_int_quant.SEED)
    for i, (name, variant) in enumerate(make_tiny_int_quant.VARIANTS.items()):
        packed, _ = make_tiny_int_quant.quantize_weights(weights, *variant, make_tiny_int_quant.SEED + i)
        stored = load_file(str(MODELS / name / "model.safetensors"))
        assert sorted(stored) == sorted(packed), name
        for k, v in packed.items():
            assert np.array_equal(stored[k], v), f"{name} {k}"


def test_awq_nibble_order_is_autoawqs():
    # Column c of each 8 sits in nibble i with AWQ_ORDER[i] = c: unpack one word by hand.
    q = np.arange(8).reshape(1, 8) % 16
    word = int(pack_awq(q, q, np.ones((1, 8), np.float16))["qweight"].view(np.uint32)[0, 0])
    assert [(word >> (4 * i)) & 0xF for i in range(8)] == AWQ_ORDER


def test_gptq_act_order_groups():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 64)).astype(np.float32)
    q, z, s, g_idx = quantize(w, 4, 32, False, rng.permutation(64), min_zero=1)
    assert sorted(np.bincount(g_idx)) == [32, 32] and not np.array_equal(g_idx, np.arange(64) // 32)
    packed = pack_gptq(q, z, s, 4, g_idx, v1=True)
    assert packed["qweight"].shape == (8, 16) and packed["qzeros"].shape == (2, 2)
    assert np.abs(dequantize(q, z, s, g_idx) - w).max() < 0.5


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("flags", [(), ("-tp", "2"), ("--gguf-dequantize",)], ids=["plain", "tp2", "dequantized"])
def test_engine_matches_the_dequantized_reference(name, flags, tmp_path):
    require_bin()
    golden, results = run(name, tmp_path, *flags)
    worst = worst_error(golden, results)
    assert worst < TOL, f"max |logprob - reference| = {worst}"


def test_wrong_zero_point_changes_the_output(tmp_path):
    require_bin()
    model = tmp_path / "bad"
    shutil.copytree(MODELS / "tiny_llama_awq", model)
    tensors = load_file(str(model / "model.safetensors"))
    z = tensors["model.layers.0.mlp.down_proj.qzeros"].view(np.uint32)
    tensors["model.layers.0.mlp.down_proj.qzeros"] = (z ^ np.uint32(0x11111111)).view(np.int32)  # z xor 1
    save_file(tensors, str(model / "model.safetensors"))
    (tmp_path / "run").mkdir()
    golden, results = run("tiny_llama_awq", tmp_path / "run", model=model)
    assert worst_error(golden, results, check_tokens=False) > 1e-3


def startup(model, tmp_path, *flags):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"prompt": [2, 5, 9], "max_tokens": 1}) + "\n")
    return subprocess.run([str(PAGODA_BIN), "generate", str(model), "--device", "cpu", "--input", str(inp),
                           "--output", str(tmp_path / "out.jsonl"), *flags],
                          capture_output=True, text=True, timeout=120)


def test_startup_log_names_the_format(tmp_path):
    require_bin()
    r = startup(with_tokenizer(MODELS / "tiny_llama_gptq", tmp_path), tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "gptq 4-bit group 32 desc_act (v1 zeros)" in r.stderr
    assert "w4g32_perm 8 tensors" in r.stderr  # qkv, o_proj, gate_up, down of 2 layers


def test_dummy_weights_take_the_quantized_format(tmp_path):
    require_bin()
    model = with_tokenizer(MODELS / "tiny_llama_gptq", tmp_path)
    for flags in [(), ("-tp", "2")]:
        r = startup(model, tmp_path, "--load-format", "dummy", *flags)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "random gptq 4-bit group 32 desc_act (v1 zeros) blocks" in r.stderr
        assert "w4g32_perm" in r.stderr


def edited(tmp_path, name, config_edit=None, drop=None):
    model = with_tokenizer(MODELS / name, tmp_path)
    if config_edit:
        cfg = json.loads((model / "config.json").read_text())
        cfg["quantization_config"].update(config_edit)
        (model / "config.json").write_text(json.dumps(cfg))
    if drop:
        tensors = load_file(str(model / "model.safetensors"))
        del tensors[drop]
        save_file(tensors, str(model / "model.safetensors"))
    return model


@pytest.mark.parametrize("edit,needle", [
    ({"version": "gemv"}, "quantization_config.version"),
    ({"bits": 3}, "quantization_config.bits"),
    ({"zero_point": False}, "quantization_config.zero_point"),
])
def test_refused_configs_name_the_field(edit, needle, tmp_path):
    require_bin()
    r = startup(edited(tmp_path, "tiny_llama_awq", edit), tmp_path)
    assert r.returncode != 0 and needle in r.stderr, r.stderr[-2000:]


def test_missing_tensor_is_named(tmp_path):
    require_bin()
    r = startup(edited(tmp_path, "tiny_llama_gptq", drop="model.layers.1.self_attn.k_proj.g_idx"), tmp_path)
    assert r.returncode != 0 and "model.layers.1.self_attn.k_proj.g_idx" in r.stderr, r.stderr[-2000:]
