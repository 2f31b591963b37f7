#!/usr/bin/env python3
"""Write a random EAGLE-1 head for a Llama target, in the published layout.

The head is what --speculative-config '{"method": "eagle", "model": OUT,
"num_speculative_tokens": k}' loads (docs/speculative-decoding.md,
src/engine/eagle_head.h): OUT/config.json, a one-layer Llama config with the
target's hidden size, heads, intermediate size, vocabulary and rope, and
OUT/model.safetensors with the tensors of the published EAGLE checkpoints
(e.g. yuhuili/EAGLE-LLaMA3-Instruct-8B):
  fc.weight [H, 2H], layers.0.self_attn.{q,k,v,o}_proj.weight,
  layers.0.post_attention_layernorm.weight, layers.0.mlp.{gate,up,down}_proj.weight
and, with --with-embedding, embed_tokens.weight [V, H] (else the target's
embedding is used). No input_layernorm, final norm or lm_head: EAGLE-1 heads
have none. Weights are normal(0, --std) (norm weights 1), seeded: a random
head drafts random tokens, so it is for correctness and cost tests only.

With --eagle3 it writes an EAGLE-3 head instead ("method": "eagle3",
src/engine/eagle_head.h; e.g. yuhuili/EAGLE3-LLaMA3.1-Instruct-8B):
config.json with architectures LlamaForCausalLMEagle3 and draft_vocab_size
(--draft-vocab, default min(V, 1024)), and fc.weight [H, 3H],
midlayer.{input_layernorm,hidden_norm,post_attention_layernorm}.weight,
midlayer.self_attn.{q,k,v}_proj.weight [*, 2H], midlayer.self_attn.o_proj.weight,
midlayer.mlp.*, norm.weight, lm_head.weight [Vd, H], d2t [Vd] (int64, draft d
is target token d + d2t[d]: a random increasing choice of Vd target ids) and
t2d [V] (bool). --aux-layers A,B,C writes
eagle_config.eagle_aux_hidden_state_layer_ids (absent: the published default
2, L/2, L-3, which a target of fewer than 7 layers cannot meet).

Usage:
  python3 tools/make_random_eagle_head.py --target ../shared/models/stories260K --out /tmp/eagle260k
  python3 tools/make_random_eagle_head.py --target /tmp/llama3-8b --out /tmp/eagle8b --dtype bfloat16
  python3 tools/make_random_eagle_head.py --target /tmp/m8 --out /tmp/eagle3-m8 --dtype bfloat16 --eagle3
"""
import argparse
import json
import os
import sys

import numpy as np

# Keys of the target's config.json copied into the head's.
COPIED = ["hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
          "head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta",
          "rope_scaling", "hidden_act", "bos_token_id", "eos_token_id"]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", required=True, help="the target's folder (its config.json)")
    p.add_argument("--out", required=True, help="folder to write the head to")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--std", type=float, default=0.02, help="standard deviation of the weights")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--with-embedding", action="store_true", help="write embed_tokens.weight")
    p.add_argument("--eagle3", action="store_true", help="an EAGLE-3 head (see above)")
    p.add_argument("--aux-layers", default="",
                   help="--eagle3: the target layers A,B,C whose residuals fc reads")
    p.add_argument("--draft-vocab", type=int, default=0,
                   help="EAGLE-3 draft vocabulary size (default min(V, 1024))")
    return p.parse_args(argv)


def head_config(target):
    if target.get("model_type") != "llama":
        sys.exit("the target is a %r, not a llama" % target.get("model_type"))
    config = {k: target[k] for k in COPIED if k in target}
    config.update({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                   "num_hidden_layers": 1, "tie_word_embeddings": False})
    return config


def tensor_shapes(c, with_embedding):
    h, inter = c["hidden_size"], c["intermediate_size"]
    heads = c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads", heads)
    head_dim = c.get("head_dim", h // heads)
    shapes = {
        "fc.weight": (h, 2 * h),
        "layers.0.self_attn.q_proj.weight": (heads * head_dim, h),
        "layers.0.self_attn.k_proj.weight": (kv_heads * head_dim, h),
        "layers.0.self_attn.v_proj.weight": (kv_heads * head_dim, h),
        "layers.0.self_attn.o_proj.weight": (h, heads * head_dim),
        "layers.0.post_attention_layernorm.weight": (h,),
        "layers.0.mlp.gate_proj.weight": (inter, h),
        "layers.0.mlp.up_proj.weight": (inter, h),
        "layers.0.mlp.down_proj.weight": (h, inter),
    }
    if with_embedding:
        shapes["embed_tokens.weight"] = (c["vocab_size"], h)
    return shapes


def eagle3_tensor_shapes(c, with_embedding):
    h, inter = c["hidden_size"], c["intermediate_size"]
    heads = c["num_attention_heads"]
    kv_heads = c.get("num_key_value_heads", heads)
    head_dim = c.get("head_dim", h // heads)
    m = "midlayer."
    shapes = {
        "fc.weight": (h, 3 * h),
        m + "input_layernorm.weight": (h,),
        m + "hidden_norm.weight": (h,),
        m + "self_attn.q_proj.weight": (heads * head_dim, 2 * h),
        m + "self_attn.k_proj.weight": (kv_heads * head_dim, 2 * h),
        m + "self_attn.v_proj.weight": (kv_heads * head_dim, 2 * h),
        m + "self_attn.o_proj.weight": (h, heads * head_dim),
        m + "post_attention_layernorm.weight": (h,),
        m + "mlp.gate_proj.weight": (inter, h),
        m + "mlp.up_proj.weight": (inter, h),
        m + "mlp.down_proj.weight": (h, inter),
        "norm.weight": (h,),
        "lm_head.weight": (c["draft_vocab_size"], h),
    }
    if with_embedding:
        shapes["embed_tokens.weight"] = (c["vocab_size"], h)
    return shapes


def to_dtype(a, dtype):
    """float32 array -> (array, safetensors dtype); bfloat16 as its top 16 bits (rounded)."""
    if dtype == "float32":
        return a
    if dtype == "float16":
        return a.astype(np.float16)
    bits = a.astype(np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def write_safetensors(path, tensors, dtype):
    """A safetensors file: 8-byte header length, JSON header, raw little-endian data.
    Float tensors are written as `dtype`; int64 and bool arrays as I64 / BOOL."""
    st_dtype = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}[dtype]
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        data = np.ascontiguousarray(a).tobytes()
        kind = {np.dtype(np.int64): "I64", np.dtype(np.bool_): "BOOL"}.get(a.dtype, st_dtype)
        header[name] = {"dtype": kind, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)


def main(argv=None):
    args = parse_args(argv)
    with open(os.path.join(args.target, "config.json")) as f:
        config = head_config(json.load(f))
    config["torch_dtype"] = args.dtype
    rng = np.random.default_rng(args.seed)
    if args.eagle3:
        vocab = config["vocab_size"]
        config["architectures"] = ["LlamaForCausalLMEagle3"]
        config["draft_vocab_size"] = args.draft_vocab or min(vocab, 1024)
        if args.aux_layers:
            config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids":
                                      [int(x) for x in args.aux_layers.split(",")]}
        shapes = eagle3_tensor_shapes(config, args.with_embedding)
    else:
        shapes = tensor_shapes(config, args.with_embedding)
    tensors = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            a = np.ones(shape, dtype=np.float32)
        else:
            a = rng.normal(0.0, args.std, size=shape).astype(np.float32)
        tensors[name] = to_dtype(a, args.dtype)
    if args.eagle3:
        vd = config["draft_vocab_size"]
        targets = np.sort(rng.choice(vocab, size=vd, replace=False)).astype(np.int64)
        tensors["d2t"] = targets - np.arange(vd, dtype=np.int64)
        t2d = np.zeros(vocab, dtype=np.bool_)
        t2d[targets] = True
        tensors["t2d"] = t2d
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(args.out, "model.safetensors"), tensors, args.dtype)
    print("wrote %s: %d tensors (%s)" % (args.out, len(tensors), args.dtype))


if __name__ == "__main__":
    main()
