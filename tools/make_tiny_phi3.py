#!/usr/bin/env python3
"""Tiny random-weight Phi-3 models and their golden references.

Writes (numpy, safetensors and gguf only: no torch)
  tests/data/models/tiny_phi3/       Phi3ForCausalLM, HF folder (f32 safetensors): pre-fused
                                     qkv_proj / gate_up_proj, longrope (8 short and 8 long
                                     factors, 64 positions over an original 16), sliding
                                     window 24 on every layer, GQA 4 / 2, untied lm_head
  tests/data/models/tiny_phi3.gguf   the same weights as an f32 GGUF written as llama.cpp's
                                     convert_hf_to_gguf.py writes phi3 (attn_qkv, ffn_up
                                     holding gate + up, rope_factors_long / _short tensors,
                                     rope.scaling.original_context_length, attn_factor)
  tests/data/models/tiny_phi4_mini/   Phi-4-mini's shape in small: head_dim 32 with
  tests/data/models/tiny_phi4_mini.gguf  partial_rotary_factor 0.75 (rotary over the first 24
                                     dims of each head, 8 passed through; GGUF
                                     rope.dimension_count 24), longrope with 12 short / 12
                                     long factors, tied embeddings, no sliding window
  tests/data/golden/tiny_phi3.json, tiny_phi3_gguf.json, tiny_phi4_mini*.json
      greedy ids and top-20 logprobs of tests/python/models/phi3_numpy.py's float64
      forward (full recompute per step), in tools/make_golden.py's format, which
      golden_tests checks the CPU engine against. Every prompt is longer than the
      original context (16), so transformers runs the long factors throughout, as
      pagoda does with a max_model_len above 16 (docs/models.md).

Usage: /work/main/.venv/bin/python tools/make_tiny_phi3.py
"""
import json
import math
import pathlib
import sys

import gguf
import numpy as np
from safetensors.numpy import save_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python" / "models"))
import phi3_numpy  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from numpy_golden import greedy_case, write_golden  # noqa: E402

REFERENCE = "tests/python/models/phi3_numpy.py"

MODELS = ROOT / "tests" / "data" / "models"
CONFIG = dict(
    architectures=["Phi3ForCausalLM"], model_type="phi3", vocab_size=512, hidden_size=64,
    intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=64, original_max_position_embeddings=16, rms_norm_eps=1e-5,
    rope_theta=10000.0, sliding_window=24, hidden_act="silu", attention_bias=False,
    tie_word_embeddings=False, bos_token_id=2, eos_token_id=1, pad_token_id=0,
    torch_dtype="float32",
    rope_scaling={
        "type": "longrope",
        "short_factor": [1.0, 1.05, 1.1, 1.3, 1.6, 2.0, 2.4, 2.8],
        "long_factor": [1.1, 1.4, 2.5, 4.0, 7.5, 12.0, 15.5, 16.0],
    },
)

# Phi-4-mini-instruct's features (partial rotary 0.75, longrope, tied embeddings, a window
# longer than the context) at a tiny size: head_dim 32 -> 24 rotary dims, 12 factors each.
PHI4_MINI_CONFIG = dict(
    architectures=["Phi3ForCausalLM"], model_type="phi3", vocab_size=512, hidden_size=128,
    intermediate_size=160, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=64, original_max_position_embeddings=16, rms_norm_eps=1e-5,
    rope_theta=10000.0, partial_rotary_factor=0.75, sliding_window=None, hidden_act="silu",
    attention_bias=False, tie_word_embeddings=True, bos_token_id=2, eos_token_id=1,
    pad_token_id=0, torch_dtype="float32",
    rope_scaling={
        "type": "longrope",
        "short_factor": [1.0 + 0.08 * i for i in range(12)],
        "long_factor": [1.0 + 1.5 * i for i in range(12)],
    },
)

# name -> (config, weight seed)
TINY_MODELS = {"tiny_phi3": (CONFIG, 31), "tiny_phi4_mini": (PHI4_MINI_CONFIG, 41)}


def make_weights(config, seed):
    """HF names -> f32 arrays."""
    rng = np.random.default_rng(seed)
    h = config["hidden_size"]
    d = h // config["num_attention_heads"]
    q, kv, inter = config["num_attention_heads"] * d, config["num_key_value_heads"] * d, config["intermediate_size"]

    def mat(*shape, std=0.15):
        return (std * rng.standard_normal(shape)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(config["vocab_size"], h, std=0.3)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(h)
        w[p + "self_attn.qkv_proj.weight"] = mat(q + 2 * kv, h)
        w[p + "self_attn.o_proj.weight"] = mat(h, q)
        w[p + "post_attention_layernorm.weight"] = norm(h)
        w[p + "mlp.gate_up_proj.weight"] = mat(2 * inter, h)
        w[p + "mlp.down_proj.weight"] = mat(h, inter)
    w["model.norm.weight"] = norm(h)
    if not config["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(config["vocab_size"], h, std=0.3)
    return w


GGUF_NAMES = {
    "input_layernorm": "attn_norm", "self_attn.qkv_proj": "attn_qkv", "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm", "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}


def write_gguf(path, config, weights):
    """An f32 GGUF with the keys and tensors llama.cpp's Phi3MiniModel writes."""
    orig, max_pos = config["original_max_position_embeddings"], config["max_position_embeddings"]
    scale = max_pos / orig
    wr = gguf.GGUFWriter(str(path), "phi3")
    wr.add_context_length(max_pos)
    wr.add_rope_scaling_orig_ctx_len(orig)
    wr.add_embedding_length(config["hidden_size"])
    wr.add_feed_forward_length(config["intermediate_size"])
    wr.add_block_count(config["num_hidden_layers"])
    wr.add_head_count(config["num_attention_heads"])
    wr.add_head_count_kv(config["num_key_value_heads"])
    wr.add_layer_norm_rms_eps(config["rms_norm_eps"])
    wr.add_rope_dimension_count(phi3_numpy.rotary_dim(config))
    wr.add_rope_freq_base(config["rope_theta"])
    wr.add_file_type(0)  # all f32
    if config["sliding_window"]:
        wr.add_sliding_window(config["sliding_window"])
    wr.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1 else 1.0)
    wr.add_bos_token_id(config["bos_token_id"])
    wr.add_eos_token_id(config["eos_token_id"])
    rs = config["rope_scaling"]
    wr.add_tensor("rope_factors_long.weight", np.asarray(rs["long_factor"], dtype=np.float32))
    wr.add_tensor("rope_factors_short.weight", np.asarray(rs["short_factor"], dtype=np.float32))
    for name, t in weights.items():
        if name == "model.embed_tokens.weight":
            g = "token_embd.weight"
        elif name == "model.norm.weight":
            g = "output_norm.weight"
        elif name == "lm_head.weight":
            g = "output.weight"
        else:
            layer, rest = name[len("model.layers."):].split(".", 1)
            g = f"blk.{layer}.{GGUF_NAMES[rest.rsplit('.', 1)[0]]}.weight"
        wr.add_tensor(g, np.ascontiguousarray(t, dtype=np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def make_model(name, config, seed):
    weights = make_weights(config, seed)
    out = MODELS / name
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    rng = np.random.default_rng(seed + 100)
    # Longer than the original context (16); the longer one also than tiny_phi3's window (24).
    prompts = [[2] + rng.integers(3, 512, size=18).tolist(), [2] + rng.integers(3, 512, size=36).tolist()]
    cases = [greedy_case(phi3_numpy, config, weights, p, 20) for p in prompts]
    write_golden(name, f"tests/data/models/{name}", cases,
                 "tiny random-weight model made by tools/make_tiny_phi3.py", REFERENCE)
    write_gguf(MODELS / f"{name}.gguf", config, weights)
    write_golden(f"{name}_gguf", f"tests/data/models/{name}.gguf", cases,
                 f"{name}'s weights as an f32 GGUF (llama.cpp's phi3 names and keys) made by "
                 "tools/make_tiny_phi3.py; the reference is the HF folder's", REFERENCE)
    print(f"wrote {out}, {name}.gguf and their goldens", file=sys.stderr)


def main():
    for name, (config, seed) in TINY_MODELS.items():
        make_model(name, config, seed)


if __name__ == "__main__":
    main()
