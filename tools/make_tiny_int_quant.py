#!/usr/bin/env python3
"""Tiny random-weight Llama models in AWQ and GPTQ layouts, and their golden references.

Writes (numpy and safetensors only: no torch)
  tests/data/models/tiny_llama_awq/     AWQ GEMM 4-bit, group 32, zero points
  tests/data/models/tiny_llama_gptq/    GPTQ 4-bit, group 32, asym, desc_act (act order:
                                        K permuted), checkpoint_format gptq (v1 zeros)
  tests/data/models/tiny_llama_gptq8/   GPTQ 8-bit, per channel (group -1), sym, gptq_v2
each LlamaForCausalLM (hidden 64, intermediate 96, GQA 4 / 2, 2 layers, untied f32 lm_head
left unquantized), packed by tools/int_quant_pack.py exactly as AutoAWQ / AutoGPTQ pack.
  tests/data/golden/<name>.json
      greedy ids and top-20 logprobs of the float64 NumPy forward
      (tests/python/models/phi3_numpy.py: Llama is Phi-3 without longrope once q/k/v and
      gate/up are fused) of the DEQUANTIZED weights, (q - z) * s, in tools/make_golden.py's
      format, which golden_tests checks the CPU engine against.

Usage: /work/main/.venv/bin/python tools/make_tiny_int_quant.py
"""
import json
import pathlib
import sys

import numpy as np
from safetensors.numpy import save_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python" / "models"))
import phi3_numpy  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from int_quant_pack import quant_config, quantize_weights  # noqa: E402
from numpy_golden import greedy_case, write_golden  # noqa: E402

REFERENCE = "tests/python/models/phi3_numpy.py (q/k/v and gate/up fused)"
MODELS = ROOT / "tests" / "data" / "models"
SEED = 47

CONFIG = dict(
    architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=512, hidden_size=64,
    intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu",
    attention_bias=False, tie_word_embeddings=False, bos_token_id=2, eos_token_id=1,
    pad_token_id=0, torch_dtype="float32",
)

# name: (format, bits, group, sym, desc_act, v2)
VARIANTS = {
    "tiny_llama_awq": ("awq", 4, 32, False, False, False),
    "tiny_llama_gptq": ("gptq", 4, 32, False, True, False),
    "tiny_llama_gptq8": ("gptq", 8, -1, True, False, True),
}


def make_weights(config, seed):
    """HF names -> f32 arrays."""
    rng = np.random.default_rng(seed)
    h, inter = config["hidden_size"], config["intermediate_size"]
    d = h // config["num_attention_heads"]
    q, kv = config["num_attention_heads"] * d, config["num_key_value_heads"] * d

    def mat(*shape, std=0.15):
        return (std * rng.standard_normal(shape)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(config["vocab_size"], h, std=0.3)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(h)
        w[p + "self_attn.q_proj.weight"] = mat(q, h)
        w[p + "self_attn.k_proj.weight"] = mat(kv, h)
        w[p + "self_attn.v_proj.weight"] = mat(kv, h)
        w[p + "self_attn.o_proj.weight"] = mat(h, q)
        w[p + "post_attention_layernorm.weight"] = norm(h)
        w[p + "mlp.gate_proj.weight"] = mat(inter, h)
        w[p + "mlp.up_proj.weight"] = mat(inter, h)
        w[p + "mlp.down_proj.weight"] = mat(h, inter, std=0.12)
    w["model.norm.weight"] = norm(h)
    w["lm_head.weight"] = mat(config["vocab_size"], h, std=0.3)
    return w


def fused(config, weights):
    """The Phi-3 names phi3_numpy.forward reads."""
    out = dict(weights)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out[p + "self_attn.qkv_proj.weight"] = np.concatenate(
            [weights[p + f"self_attn.{x}_proj.weight"] for x in "qkv"])
        out[p + "mlp.gate_up_proj.weight"] = np.concatenate(
            [weights[p + "mlp.gate_proj.weight"], weights[p + "mlp.up_proj.weight"]])
    return out


def main():
    weights = make_weights(CONFIG, SEED)
    rng = np.random.default_rng(SEED + 100)
    prompts = [[2] + rng.integers(3, 512, size=9).tolist(), [2] + rng.integers(3, 512, size=21).tolist()]
    for i, (name, (fmt, bits, group, sym, desc_act, v2)) in enumerate(VARIANTS.items()):
        packed, ref = quantize_weights(weights, fmt, bits, group, sym, desc_act, v2, SEED + i)
        out = MODELS / name
        out.mkdir(parents=True, exist_ok=True)
        config = dict(CONFIG, quantization_config=quant_config(fmt, bits, group, sym, desc_act, v2))
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_file(packed, str(out / "model.safetensors"), metadata={"format": "pt"})
        cases = [greedy_case(phi3_numpy, CONFIG, fused(CONFIG, ref), p, 16) for p in prompts]
        write_golden(name, f"tests/data/models/{name}", cases,
                     f"tiny random-weight Llama in {fmt} {bits}-bit group {group} layout made by "
                     "tools/make_tiny_int_quant.py; reference = the dequantized weights", REFERENCE)
        print(f"wrote {out} and its golden", file=sys.stderr)


if __name__ == "__main__":
    main()
