#!/usr/bin/env python3
"""Create a random-weight model of a real architecture for benchmarks.

Writes a Hugging Face folder: config.json and generation_config.json (the
fields transformers' config classes write for the family), sharded
safetensors (model-0000K-of-0000N, 5 GB shards by default, with
model.safetensors.index.json) and a real tokenizer copied from
../shared/models/tokenizers/<family> (or --tokenizer).

Weights follow Hugging Face's initialisation without running it: linear and
embedding weights normal(0, 0.02), RMSNorm weights 1, biases 0. Tensors are
drawn on the GPU when there is one (seeded, one tensor at a time, with
PyTorch) and saved shard by shard, so the 8B model takes about a minute,
mostly disk writes.

--config-only writes the config, generation config and tokenizer but no
weights (and needs no PyTorch): the folder for `pagoda ... --load-format
dummy`, which draws random weights of the config's shapes in memory. That is
the way to run shapes too large to write, such as llama3-70b (141 GB in
bf16).

Usage:
  python3 tools/make_random_model.py --preset llama3-8b --out /tmp/llama3-8b
  python3 tools/make_random_model.py --preset tiny --out /tmp/tiny --dtype float32
  python3 tools/make_random_model.py --preset llama3-70b --config-only --out /tmp/llama3-70b
  pagoda serve /tmp/llama3-70b --load-format dummy
Presets: llama3-8b (Llama-3.1-8B shape, the default), llama3-70b
(Llama-3.1-70B shape), llama3-1b (Llama-3.2-1B shape with the same
vocabulary and tokenizer: a draft model for llama3-8b), qwen2.5-0.5b, qwen3-0.6b, qwen3-30b-a3b
(the Qwen3-30B-A3B mixture of experts: 128 experts, top 8; 61 GB in bf16, so normally
--config-only), gemma3-12b (the Gemma-3-12B text decoder, 23.5 GB in bf16, with the Llama 3.1
tokenizer), tiny (a 2-layer Llama with the Llama 3.1 tokenizer). --arch and the shape flags
override a preset's fields (--arch qwen3_moe only from the qwen3-30b-a3b preset, which has the
expert fields).
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("PAGODA_SHARED_DIR", os.path.join(HERE, "..", "..", "shared"))

LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}

PRESETS = {
    "llama3-8b": dict(arch="llama", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=128, intermediate_size=14336, vocab_size=128256,
                      rope_theta=500000.0, rope_scaling=LLAMA3_ROPE, max_position_embeddings=131072,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=128000,
                      eos_token_id=[128001, 128008, 128009], tokenizer="llama3_1"),
    "llama3-70b": dict(arch="llama", hidden_size=8192, num_hidden_layers=80, num_attention_heads=64,
                       num_key_value_heads=8, head_dim=128, intermediate_size=28672, vocab_size=128256,
                       rope_theta=500000.0, rope_scaling=LLAMA3_ROPE, max_position_embeddings=131072,
                       rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=128000,
                       eos_token_id=[128001, 128008, 128009], tokenizer="llama3_1"),
    # The Llama-3.2-1B shape (1.24B parameters, tied embeddings) with the 8B's vocabulary and
    # tokenizer: the 1B-class draft model of llama3-8b (bench/spec.sh).
    "llama3-1b": dict(arch="llama", hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=64, intermediate_size=8192, vocab_size=128256,
                      rope_theta=500000.0, rope_scaling=dict(LLAMA3_ROPE, factor=32.0),
                      max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=True,
                      bos_token_id=128000, eos_token_id=[128001, 128008, 128009], tokenizer="llama3_1"),
    "qwen2.5-0.5b": dict(arch="qwen2", hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, head_dim=64, intermediate_size=4864, vocab_size=151936,
                         rope_theta=1000000.0, rope_scaling=None, max_position_embeddings=32768,
                         rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=151643,
                         eos_token_id=151645, tokenizer="qwen3"),
    "qwen3-0.6b": dict(arch="qwen3", hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, intermediate_size=3072, vocab_size=151936,
                       rope_theta=1000000.0, rope_scaling=None, max_position_embeddings=40960,
                       rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=151643,
                       eos_token_id=151645, tokenizer="qwen3"),
    # The Qwen3-30B-A3B shape: 128 experts, 8 routed per token (3.3B active parameters).
    "qwen3-30b-a3b": dict(arch="qwen3_moe", hidden_size=2048, num_hidden_layers=48, num_attention_heads=32,
                          num_key_value_heads=4, head_dim=128, intermediate_size=6144, vocab_size=151936,
                          num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
                          rope_theta=1000000.0, rope_scaling=None, max_position_embeddings=40960,
                          rms_norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=151643,
                          eos_token_id=151645, tokenizer="qwen3"),
    # The Gemma-3-12B text decoder (Gemma3ForCausalLM: five sliding-window layers of 1024 to one
    # global, q/k norms, sandwich norms, GeGLU, tied embeddings, 11.77B parameters). ../shared has
    # no Gemma tokenizer.json, so it carries the Llama 3.1 tokenizer and its special ids: every id
    # stays below the 262,208-row vocabulary.
    "gemma3-12b": dict(arch="gemma3", hidden_size=3840, num_hidden_layers=48, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=256, intermediate_size=15360, vocab_size=262208,
                       rope_theta=1000000.0, rope_scaling={"rope_type": "linear", "factor": 8.0},
                       max_position_embeddings=131072, rms_norm_eps=1e-6, tie_word_embeddings=True,
                       bos_token_id=128000, eos_token_id=[128001, 128008, 128009], tokenizer="llama3_1",
                       sliding_window=1024, sliding_window_pattern=6, rope_local_base_freq=10000.0,
                       query_pre_attn_scalar=256),
    "tiny": dict(arch="llama", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, intermediate_size=172, vocab_size=128256,
                 rope_theta=500000.0, rope_scaling=LLAMA3_ROPE, max_position_embeddings=131072,
                 rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=128000,
                 eos_token_id=[128001, 128008, 128009], tokenizer="llama3_1"),
}

ARCHS = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
         "qwen3_moe": "Qwen3MoeForCausalLM", "gemma3": "Gemma3ForCausalLM"}
# model_type in config.json where it is not the arch key.
MODEL_TYPES = {"gemma3": "gemma3_text"}
MOE_FIELDS = ["num_experts", "num_experts_per_tok", "moe_intermediate_size"]
SHAPE_FLAGS = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
               "intermediate_size", "vocab_size"]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="llama3-8b", help="architecture and shape")
    p.add_argument("--arch", choices=sorted(ARCHS), help="override the preset's architecture family")
    for name in SHAPE_FLAGS:
        p.add_argument("--" + name.replace("_", "-"), type=int, help="override the preset's " + name)
    p.add_argument("--out", required=True, help="output folder (created; existing model files are replaced)")
    p.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16")
    p.add_argument("--std", type=float, default=0.02, help="standard deviation of weights (HF initializer_range)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shard-gb", type=float, default=5.0, help="maximum shard size in GB (1e9 bytes)")
    p.add_argument("--tokenizer", help="folder with tokenizer.json / tokenizer_config.json "
                                       "(default: ../shared/models/tokenizers/<preset's family>)")
    p.add_argument("--device", default="auto", help="where tensors are drawn: cuda, cpu or auto")
    p.add_argument("--config-only", action="store_true",
                   help="write config.json, generation_config.json and the tokenizer, no weights "
                        "(for pagoda's --load-format dummy)")
    return p.parse_args(argv)


def model_spec(args):
    spec = dict(PRESETS[args.preset])
    if args.arch:
        spec["arch"] = args.arch
    if spec["arch"] == "qwen3_moe" and any(k not in spec for k in MOE_FIELDS):
        sys.exit("make_random_model: --arch qwen3_moe needs the expert fields of the qwen3-30b-a3b preset")
    if spec["arch"] == "gemma3" and "sliding_window" not in spec:
        sys.exit("make_random_model: --arch gemma3 needs the Gemma fields of the gemma3-12b preset")
    for name in SHAPE_FLAGS:
        if getattr(args, name) is not None:
            spec[name] = getattr(args, name)
    return spec


def tensor_shapes(spec):
    """(name, shape, kind) of every weight in Hugging Face naming; kind is
    'normal' (std), 'ones' (norms) or 'zeros' (biases)."""
    h, d = spec["hidden_size"], spec["head_dim"]
    q, kv, inter = spec["num_attention_heads"] * d, spec["num_key_value_heads"] * d, spec["intermediate_size"]
    # Gemma's RMSNorm scales by 1 + w, so w = 0 is its identity; the others' by w.
    norm = "zeros" if spec["arch"] == "gemma3" else "ones"
    out = [("model.embed_tokens.weight", (spec["vocab_size"], h), "normal")]
    for i in range(spec["num_hidden_layers"]):
        p = "model.layers.%d." % i
        out += [(p + "input_layernorm.weight", (h,), norm),
                (p + "self_attn.q_proj.weight", (q, h), "normal"),
                (p + "self_attn.k_proj.weight", (kv, h), "normal"),
                (p + "self_attn.v_proj.weight", (kv, h), "normal")]
        if spec["arch"] == "qwen2":
            out += [(p + "self_attn.q_proj.bias", (q,), "zeros"), (p + "self_attn.k_proj.bias", (kv,), "zeros"),
                    (p + "self_attn.v_proj.bias", (kv,), "zeros")]
        if spec["arch"] in ("qwen3", "qwen3_moe", "gemma3"):
            out += [(p + "self_attn.q_norm.weight", (d,), norm), (p + "self_attn.k_norm.weight", (d,), norm)]
        if spec["arch"] == "gemma3":
            out += [(p + "pre_feedforward_layernorm.weight", (h,), norm),
                    (p + "post_feedforward_layernorm.weight", (h,), norm)]
        out += [(p + "self_attn.o_proj.weight", (h, q), "normal"),
                (p + "post_attention_layernorm.weight", (h,), norm)]
        if spec["arch"] == "qwen3_moe":
            e, mi = spec["num_experts"], spec["moe_intermediate_size"]
            out.append((p + "mlp.gate.weight", (e, h), "normal"))
            for j in range(e):
                out += [(p + "mlp.experts.%d.gate_proj.weight" % j, (mi, h), "normal"),
                        (p + "mlp.experts.%d.up_proj.weight" % j, (mi, h), "normal"),
                        (p + "mlp.experts.%d.down_proj.weight" % j, (h, mi), "normal")]
        else:
            out += [(p + "mlp.gate_proj.weight", (inter, h), "normal"),
                    (p + "mlp.up_proj.weight", (inter, h), "normal"),
                    (p + "mlp.down_proj.weight", (h, inter), "normal")]
    out.append(("model.norm.weight", (h,), norm))
    if not spec["tie_word_embeddings"]:
        out.append(("lm_head.weight", (spec["vocab_size"], h), "normal"))
    return out


def plan_shards(shapes, elem_bytes, shard_bytes):
    shards, current, size = [], [], 0
    for entry in shapes:
        n = math.prod(entry[1]) * elem_bytes
        if current and size + n > shard_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(entry)
        size += n
    if current:
        shards.append(current)
    return shards


def write_config(spec, out, dtype):
    """config.json and generation_config.json with the fields transformers'
    LlamaConfig / Qwen2Config / Qwen3Config write for `spec`."""
    config = {"architectures": [ARCHS[spec["arch"]]], "model_type": MODEL_TYPES.get(spec["arch"], spec["arch"])}
    config.update({k: spec[k] for k in SHAPE_FLAGS})
    config.update({k: spec[k] for k in ["rope_theta", "max_position_embeddings", "rms_norm_eps",
                                        "tie_word_embeddings", "bos_token_id", "eos_token_id"]})
    config.update(rope_scaling=dict(spec["rope_scaling"]) if spec["rope_scaling"] else None,
                  hidden_act="silu", attention_dropout=0.0, initializer_range=0.02, use_cache=True,
                  torch_dtype=dtype)
    if spec["arch"] == "llama":
        config.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    elif spec["arch"] == "gemma3":
        pattern, layers = spec["sliding_window_pattern"], spec["num_hidden_layers"]
        del config["hidden_act"]
        config.update(hidden_activation="gelu_pytorch_tanh", attention_bias=False,
                      sliding_window=spec["sliding_window"], rope_local_base_freq=spec["rope_local_base_freq"],
                      query_pre_attn_scalar=spec["query_pre_attn_scalar"], attn_logit_softcapping=None,
                      final_logit_softcapping=None, pad_token_id=0,
                      layer_types=["full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
                                   for i in range(layers)])
    else:  # qwen2 (biases implied by the family), qwen3, qwen3_moe
        config.update(use_sliding_window=False, sliding_window=None,
                      max_window_layers=spec["num_hidden_layers"])
        if spec["arch"] in ("qwen3", "qwen3_moe"):
            config["attention_bias"] = False
        if spec["arch"] == "qwen3_moe":
            config.update({k: spec[k] for k in MOE_FIELDS})
            config.update(norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
                          output_router_logits=False, router_aux_loss_coef=0.001)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": spec["bos_token_id"], "eos_token_id": spec["eos_token_id"]}, f, indent=2)


def copy_tokenizer(spec, args, out):
    src = args.tokenizer or os.path.join(SHARED, "models", "tokenizers", spec["tokenizer"])
    copied = []
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(out, name))
            copied.append(name)
    if "tokenizer.json" not in copied:
        sys.exit("make_random_model: no tokenizer.json in '%s' (pass --tokenizer DIR)" % src)


def write_weights(spec, args, out):
    import torch
    from safetensors.torch import save_file
    dtype = getattr(torch, args.dtype)
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed)
    shapes = tensor_shapes(spec)
    elem = torch.empty((), dtype=dtype).element_size()
    shards = plan_shards(shapes, elem, int(args.shard_gb * 1e9))
    weight_map, total = {}, 0
    for k, shard in enumerate(shards):
        name = "model-%05d-of-%05d.safetensors" % (k + 1, len(shards)) if len(shards) > 1 else "model.safetensors"
        tensors = {}
        for tname, shape, kind in shard:
            if kind == "normal":
                t = torch.empty(shape, dtype=dtype, device=device).normal_(0.0, args.std, generator=gen)
            elif kind == "ones":
                t = torch.ones(shape, dtype=dtype, device=device)
            else:
                t = torch.zeros(shape, dtype=dtype, device=device)
            tensors[tname] = t.cpu()
            weight_map[tname] = name
            total += t.numel() * elem
        save_file(tensors, os.path.join(out, name), metadata={"format": "pt"})
        print("  wrote %s (%d tensors)" % (name, len(tensors)), flush=True)
    if len(shards) > 1:
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return total, device


def main(argv=None):
    args = parse_args(argv)
    spec = model_spec(args)
    os.makedirs(args.out, exist_ok=True)
    for old in os.listdir(args.out):
        if old.endswith(".safetensors") or old == "model.safetensors.index.json":
            os.remove(os.path.join(args.out, old))
    t0 = time.time()
    write_config(spec, args.out, args.dtype)
    copy_tokenizer(spec, args, args.out)
    if args.config_only:
        print("make_random_model: %s (%s) config and tokenizer, no weights -> %s (load with --load-format dummy)"
              % (args.preset, ARCHS[spec["arch"]], args.out), flush=True)
        return
    total, device = write_weights(spec, args, args.out)
    num_params = total // {"bfloat16": 2, "float16": 2, "float32": 4}[args.dtype]
    print("make_random_model: %s (%s) %d params, %.2f GB %s, drawn on %s, %.1fs -> %s"
          % (args.preset, ARCHS[spec["arch"]], num_params, total / 1e9, args.dtype, device, time.time() - t0,
             args.out), flush=True)


if __name__ == "__main__":
    main()
