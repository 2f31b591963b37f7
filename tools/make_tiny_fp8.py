#!/usr/bin/env python3
"""Tiny FP8 llama checkpoints, one per published format, and their golden references.

One set of random f32 llama weights (GQA 4 / 2, head_dim 16, 2 layers, vocab 512), quantised
with numpy as each format's tools store it (every scale = amax / 448 in float32, codes =
e4m3(w / scale)), written as (numpy only: no torch; F8_E4M3 tensors written by hand)
  tests/data/models/tiny_fp8_dynamic/  compressed-tensors float-quantized, per-channel
                                       weight_scale [N, 1] (bf16), dynamic per-token
                                       activations, lm_head ignored (f32)
  tests/data/models/tiny_fp8_static/   NVIDIA ModelOpt FP8 described by hf_quant_config.json
                                       only: per-tensor weight_scale [] and input_scale [] (each
                                       linear's static scale: its calibration input's amax / 448)
  tests/data/models/tiny_fp8_block/    quant_method fp8, weight_block_size [32, 32] (the 128 of
                                       published checkpoints does not fit a hidden size of 64),
                                       weight_scale_inv [ceil(N/32), ceil(K/32)], dynamic
  tests/data/golden/tiny_fp8_*.json
      greedy ids and top-20 logprobs of tests/python/models/fp8_numpy.py's forward (full
      recompute per step), which golden_tests checks the CPU engine against. The reference
      quantises activations from float32 as pagoda's CPU backend holds them (the engine
      agreed within 3e-6 when these were made); float64 elsewhere could still move an
      activation across an e4m3 rounding boundary on another CPU's summation order (about
      1e-4 in a logprob), so the tolerance is 1e-3 (the unquantised model differs by ~1e-1).

Usage: /work/main/.venv/bin/python tools/make_tiny_fp8.py
"""
import json
import pathlib
import struct
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python" / "models"))
import fp8_numpy  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from numpy_golden import GOLDEN, greedy_case  # noqa: E402

REFERENCE = "tests/python/models/fp8_numpy.py"
MODELS = ROOT / "tests" / "data" / "models"
SEED = 47
TOLERANCE = 1e-3
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")

CONFIG = dict(
    architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=512, hidden_size=64,
    intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    head_dim=16, max_position_embeddings=128, rms_norm_eps=1e-5, rope_theta=10000.0,
    hidden_act="silu", tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
    torch_dtype="bfloat16",
)
SCHEMES = {
    "dynamic": {"kind": "dynamic"},
    "static": {"kind": "static"},
    "block": {"kind": "block", "block": 32},
}


def make_weights(seed):
    """HF names -> f32 arrays of the unquantised model."""
    rng = np.random.default_rng(seed)
    c = CONFIG
    h, d, inter = c["hidden_size"], c["head_dim"], c["intermediate_size"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d

    def mat(*shape, std=0.15):
        return (std * rng.standard_normal(shape)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(c["vocab_size"], h, std=0.3)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(h)
        w[p + "self_attn.q_proj.weight"] = mat(q, h)
        w[p + "self_attn.k_proj.weight"] = mat(kv, h)
        w[p + "self_attn.v_proj.weight"] = mat(kv, h)
        w[p + "self_attn.o_proj.weight"] = mat(h, q)
        w[p + "post_attention_layernorm.weight"] = norm(h)
        w[p + "mlp.gate_proj.weight"] = mat(inter, h)
        w[p + "mlp.up_proj.weight"] = mat(inter, h)
        w[p + "mlp.down_proj.weight"] = mat(h, inter)
    w["model.norm.weight"] = norm(h)
    w["lm_head.weight"] = mat(c["vocab_size"], h, std=0.3)
    return w


def scale_of(amax):
    return (np.float32(amax) / np.float32(448.0)).astype(np.float32)


def quantise(weights, scheme, rng):
    """(file tensors: name -> array, F8 codes as uint8; reference tensors: name -> float64
    arrays with each FP8 weight as the values of its codes)."""
    file, ref = {}, {}
    for name, t in weights.items():
        module = name[:-len(".weight")]
        if not any(name.endswith(l + ".weight") for l in LINEARS):
            file[name] = t
            ref[name] = t
            continue
        if scheme["kind"] == "block":
            b = scheme["block"]
            nb, kb = -(-t.shape[0] // b), -(-t.shape[1] // b)
            s = np.zeros((nb, kb), dtype=np.float32)
            for r in range(nb):
                for c in range(kb):
                    s[r, c] = scale_of(np.abs(t[r * b:(r + 1) * b, c * b:(c + 1) * b]).max())
            full = np.repeat(np.repeat(s, b, axis=0), b, axis=1)[:t.shape[0], :t.shape[1]]
            scales = {module + ".weight_scale_inv": s}
        elif scheme["kind"] == "dynamic":  # per channel, stored as bf16 [N, 1]
            s = scale_of(np.abs(t).max(axis=1))
            s = bf16_round(s)
            full = np.repeat(s[:, None], t.shape[1], axis=1)
            scales = {module + ".weight_scale": s[:, None]}
        else:  # per tensor, with a static input scale
            s = scale_of(np.abs(t).max())
            full = np.full(t.shape, s, dtype=np.float32)
            calibration = 0.5 + rng.random()  # the amax its calibration saw
            scales = {module + ".weight_scale": np.asarray(s, dtype=np.float32),
                      module + ".input_scale": np.asarray(scale_of(calibration), dtype=np.float32)}
        values = fp8_numpy.e4m3(t.astype(np.float32) / full)
        file[name] = fp8_numpy.e4m3_codes(values)
        ref[name] = values
        for k, v in scales.items():
            file[k] = v
            ref[k] = v.astype(np.float64)
    return file, ref


def bf16_round(x):
    """float32 -> the nearest bfloat16 (round-to-nearest-even), as float32."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32)


def write_safetensors(path, tensors, bf16=()):
    """A safetensors file; uint8 arrays are written as F8_E4M3, names in `bf16` as BF16."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = np.ascontiguousarray(tensors[name])
        if t.dtype == np.uint8:
            dtype, data = "F8_E4M3", t.tobytes()
        elif name in bf16:
            dtype, data = "BF16", (bf16_round(t).view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            dtype, data = "F32", t.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def quantization_config(kind):
    if kind == "dynamic":
        return {"quant_method": "compressed-tensors", "format": "float-quantized",
                "quantization_status": "compressed", "ignore": ["lm_head"],
                "config_groups": {"group_0": {
                    "targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel",
                                "symmetric": True, "dynamic": False},
                    "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                          "symmetric": True, "dynamic": True},
                    "output_activations": None}}}
    if kind == "block":
        return {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                "weight_block_size": [32, 32]}
    return None  # static: ModelOpt's hf_quant_config.json


def write_model(kind, weights, rng):
    file, ref = quantise(weights, SCHEMES[kind], rng)
    out = MODELS / f"tiny_fp8_{kind}"
    out.mkdir(parents=True, exist_ok=True)
    config = dict(CONFIG)
    if quantization_config(kind):
        config["quantization_config"] = quantization_config(kind)
    else:
        (out / "hf_quant_config.json").write_text(json.dumps(
            {"producer": {"name": "modelopt"},
             "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None,
                              "exclude_modules": ["lm_head"]}}, indent=2) + "\n")
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    bf16 = [n for n in file if kind == "dynamic" and n.endswith(".weight_scale")]
    write_safetensors(out / "model.safetensors", file, bf16)
    return out, config, ref


def main():
    weights = make_weights(SEED)
    rng = np.random.default_rng(SEED + 1)
    prompts = [[1] + rng.integers(3, 512, size=9).tolist(), [1] + rng.integers(3, 512, size=30).tolist()]
    for kind in SCHEMES:
        out, config, ref = write_model(kind, weights, rng)

        class Reference:  # greedy_case's interface, bound to this scheme
            log_softmax = staticmethod(fp8_numpy.log_softmax)

            @staticmethod
            def forward(cfg, w, ids, scheme=SCHEMES[kind]):
                return fp8_numpy.forward(cfg, w, ids, scheme)

        cases = [greedy_case(Reference, config, ref, p, 16) for p in prompts]
        doc = {"name": f"tiny_fp8_{kind}",
               "model": {"kind": "repo", "path": f"tests/data/models/tiny_fp8_{kind}"},
               "reference": f"{REFERENCE}, numpy, FP8 W8A8 ({kind}), full recompute per step",
               "note": "tiny FP8 checkpoint made by tools/make_tiny_fp8.py",
               "quantized": True, "tolerance": {"logprob": TOLERANCE, "margin": 2 * TOLERANCE},
               "cases": cases}
        (GOLDEN / f"tiny_fp8_{kind}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        print(f"wrote {out} and its golden", file=sys.stderr)


if __name__ == "__main__":
    main()
