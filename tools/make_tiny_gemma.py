#!/usr/bin/env python3
"""Tiny random-weight Gemma 2 and Gemma 3 models and their golden references.

Writes (numpy, safetensors and gguf only: no torch)
  tests/data/models/tiny_gemma2/        Gemma2ForCausalLM, HF folder (f32 safetensors)
  tests/data/models/tiny_gemma3/        Gemma3ForCausalLM, HF folder (f32 safetensors)
  tests/data/models/tiny_gemma3.gguf    the same Gemma 3 weights as an f32 GGUF, named and
                                        stored as llama.cpp's convert_hf_to_gguf.py does
                                        (norm weights + 1, llama.cpp's tensor names)
  tests/data/golden/tiny_gemma2.json, tiny_gemma3.json, tiny_gemma3_gguf.json
      greedy ids and top-20 logprobs of tests/python/models/gemma_numpy.py's
      float64 forward (full recompute per step), in tools/make_golden.py's format,
      which golden_tests checks the CPU engine against.

The configs exercise what Gemma adds: head_dim independent of hidden / heads,
GQA, query_pre_attn_scalar != head_dim (gemma2), attention-logit and
final-logit soft-capping with small caps (gemma2), sliding windows shorter
than the prompts (gemma2 alternating, gemma3 five local to one global), the
local rope base and linear rope_scaling on the global layer (gemma3), q/k
norms (gemma3), tied embeddings. The GGUF keeps query_pre_attn_scalar =
head_dim and the 10000 local base, the values llama.cpp assumes for gemma3.

Usage: /work/main/.venv/bin/python tools/make_tiny_gemma.py
"""
import json
import pathlib
import sys

import gguf
import numpy as np
from safetensors.numpy import save_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python" / "models"))
import gemma_numpy  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from numpy_golden import greedy_case, write_golden  # noqa: E402

REFERENCE = "tests/python/models/gemma_numpy.py"

MODELS = ROOT / "tests" / "data" / "models"

COMMON = dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_attention_heads=4,
              num_key_value_heads=2, head_dim=24, max_position_embeddings=256, rms_norm_eps=1e-6,
              bos_token_id=2, eos_token_id=1, pad_token_id=0, tie_word_embeddings=True,
              hidden_activation="gelu_pytorch_tanh", attention_bias=False, torch_dtype="float32")

CONFIGS = {
    "tiny_gemma2": dict(COMMON, architectures=["Gemma2ForCausalLM"], model_type="gemma2",
                        num_hidden_layers=3, query_pre_attn_scalar=32, sliding_window=6,
                        attn_logit_softcapping=2.0, final_logit_softcapping=5.0,
                        rope_theta=10000.0),
    "tiny_gemma3": dict(COMMON, architectures=["Gemma3ForCausalLM"], model_type="gemma3_text",
                        num_hidden_layers=6, query_pre_attn_scalar=24, sliding_window=8,
                        attn_logit_softcapping=None, final_logit_softcapping=None,
                        rope_theta=1000000.0, rope_local_base_freq=10000.0,
                        rope_scaling={"rope_type": "linear", "factor": 2.0}),
}
SEEDS = {"tiny_gemma2": 21, "tiny_gemma3": 22}


def make_weights(config, seed):
    """HF names -> f32 arrays; norms as HF stores them (w of 1 + w)."""
    rng = np.random.default_rng(seed)
    h, d = config["hidden_size"], config["head_dim"]
    q, kv, inter = config["num_attention_heads"] * d, config["num_key_value_heads"] * d, config["intermediate_size"]

    def mat(*shape, std=0.15):
        return (std * rng.standard_normal(shape)).astype(np.float32)

    def norm(n):
        return (0.2 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(config["vocab_size"], h, std=0.3)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(h)
        w[p + "self_attn.q_proj.weight"] = mat(q, h)
        w[p + "self_attn.k_proj.weight"] = mat(kv, h)
        w[p + "self_attn.v_proj.weight"] = mat(kv, h)
        w[p + "self_attn.o_proj.weight"] = mat(h, q)
        if config["model_type"] != "gemma2":
            w[p + "self_attn.q_norm.weight"] = norm(d)
            w[p + "self_attn.k_norm.weight"] = norm(d)
        w[p + "post_attention_layernorm.weight"] = norm(h)
        w[p + "pre_feedforward_layernorm.weight"] = norm(h)
        w[p + "mlp.gate_proj.weight"] = mat(inter, h)
        w[p + "mlp.up_proj.weight"] = mat(inter, h)
        w[p + "mlp.down_proj.weight"] = mat(h, inter)
        w[p + "post_feedforward_layernorm.weight"] = norm(h)
    w["model.norm.weight"] = norm(h)
    return w


GGUF_LAYER_NAMES = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down", "post_feedforward_layernorm": "post_ffw_norm",
}


def write_gguf(path, config, weights):
    """An f32 GGUF as llama.cpp's converter writes Gemma 3 (norms + 1)."""
    arch = "gemma3"
    wr = gguf.GGUFWriter(str(path), arch)
    wr.add_context_length(config["max_position_embeddings"])
    wr.add_embedding_length(config["hidden_size"])
    wr.add_block_count(config["num_hidden_layers"])
    wr.add_feed_forward_length(config["intermediate_size"])
    wr.add_head_count(config["num_attention_heads"])
    wr.add_head_count_kv(config["num_key_value_heads"])
    wr.add_key_length(config["head_dim"])
    wr.add_value_length(config["head_dim"])
    wr.add_layer_norm_rms_eps(config["rms_norm_eps"])
    wr.add_rope_freq_base(config["rope_theta"])
    wr.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
    wr.add_rope_scaling_factor(config["rope_scaling"]["factor"])
    wr.add_sliding_window(config["sliding_window"])
    wr.add_file_type(0)  # all f32
    wr.add_bos_token_id(config["bos_token_id"])
    wr.add_eos_token_id(config["eos_token_id"])
    for name, t in weights.items():
        if name.endswith("norm.weight"):
            t = t + np.float32(1.0)
        if name == "model.embed_tokens.weight":
            g = "token_embd.weight"
        elif name == "model.norm.weight":
            g = "output_norm.weight"
        else:
            layer, rest = name[len("model.layers."):].split(".", 1)
            g = f"blk.{layer}.{GGUF_LAYER_NAMES[rest.rsplit('.', 1)[0]]}.weight"
        wr.add_tensor(g, np.ascontiguousarray(t, dtype=np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def main():
    for name, config in CONFIGS.items():
        weights = make_weights(config, SEEDS[name])
        out = MODELS / name
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
        rng = np.random.default_rng(SEEDS[name] + 100)
        # Prompts shorter and longer than the window (and than a KV block).
        prompts = [[2], [2, 403, 407], [2] + rng.integers(3, 512, size=40).tolist()]
        cases = [greedy_case(gemma_numpy, config, weights, p, 24) for p in prompts]
        write_golden(name, f"tests/data/models/{name}", cases,
                     "tiny random-weight model made by tools/make_tiny_gemma.py", REFERENCE)
        if name == "tiny_gemma3":
            write_gguf(MODELS / "tiny_gemma3.gguf", config, weights)
            write_golden("tiny_gemma3_gguf", "tests/data/models/tiny_gemma3.gguf", cases,
                         "tiny_gemma3's weights as an f32 GGUF (norms + 1, llama.cpp names) made "
                         "by tools/make_tiny_gemma.py; the reference is the HF folder's", REFERENCE)
        print(f"wrote {out} and its golden", file=sys.stderr)


if __name__ == "__main__":
    main()
