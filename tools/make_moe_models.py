#!/usr/bin/env python3
"""Tiny random mixture-of-experts models and their golden references.

Writes, for each model of MODELS:
  tests/data/models/<name>/          config.json, generation_config.json and
                                     model.safetensors (f32, per-expert tensors
                                     under the family's Hugging Face names)
  tests/data/models/<name>.gguf      the same weights as a GGUF (f32; experts
                                     stacked into *_exps tensors as llama.cpp's
                                     converter writes them), for GGUF_MODELS
  tests/data/golden/<name>.json      greedy ids and top-20 logprobs from the
  tests/data/golden/<name>_gguf.json float64 NumPy reference (tools/moe_reference.py)
                                     on the HF folder; the GGUF golden has the same
                                     cases, pointed at the .gguf

golden_tests (tests/golden/models) runs pagoda's CPU backend against every
golden file; tools/hf_moe_golden.py compares them with transformers.

Usage: /work/main/.venv/bin/python tools/make_moe_models.py [--only NAME ...]
(deterministic: fixed seeds; needs numpy, safetensors, gguf).
"""
import argparse
import json
import pathlib
import sys

import numpy as np
from safetensors.numpy import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import moe_reference  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "tests" / "data" / "models"
GOLDEN_DIR = ROOT / "tests" / "data" / "golden"
STEPS = 24
PROMPTS = [[1], [1, 17, 93, 250], [1] + [int(x) for x in np.random.default_rng(5).integers(3, 300, 30)]]

COMMON = dict(vocab_size=320, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
              bos_token_id=1, eos_token_id=2, tie_word_embeddings=False, torch_dtype="float32",
              hidden_act="silu")

# name -> (config, seed). Mixtral: top-2 of 8, renormalised. Qwen2-MoE: top-3
# of 6 without renormalisation, the gated shared expert, a dense layer through
# mlp_only_layers. Qwen3-MoE: top-4 of 16 renormalised, head_dim 32 != 64/4,
# decoder_sparse_step 2 (layer 0 dense).
MODELS = {
    "tiny_mixtral": (dict(COMMON, architectures=["MixtralForCausalLM"], model_type="mixtral",
                          intermediate_size=48, num_hidden_layers=2, num_local_experts=8,
                          num_experts_per_tok=2, sliding_window=None), 101),
    "tiny_qwen2_moe_shared": (dict(COMMON, architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe",
                                   intermediate_size=80, num_hidden_layers=3, num_experts=6,
                                   num_experts_per_tok=3, moe_intermediate_size=40,
                                   shared_expert_intermediate_size=56, norm_topk_prob=False,
                                   decoder_sparse_step=1, mlp_only_layers=[1],
                                   use_sliding_window=False), 102),
    "tiny_qwen3_moe": (dict(COMMON, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                            head_dim=32, intermediate_size=96, num_hidden_layers=2, num_experts=16,
                            num_experts_per_tok=4, moe_intermediate_size=24, norm_topk_prob=True,
                            decoder_sparse_step=2, mlp_only_layers=[], attention_bias=False,
                            use_sliding_window=False), 103),
}
GGUF_MODELS = ["tiny_mixtral", "tiny_qwen2_moe_shared", "tiny_qwen3_moe"]


def random_weights(c, seed):
    """{HF name: f32 array}; routers scaled up so that routing is far from uniform."""
    rng = np.random.default_rng(seed)
    fam = moe_reference.Family(c)
    h, v = c["hidden_size"], c["vocab_size"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or h // nh
    w = {}

    def lin(name, rows, cols, scale=1.0):
        w[name] = (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    def norm(name, n):
        w[name] = (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w["model.embed_tokens.weight"] = rng.standard_normal((v, h)).astype(np.float32)
    norm("model.norm.weight", h)
    lin("lm_head.weight", v, h, 2.0)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        norm(p + "input_layernorm.weight", h)
        norm(p + "post_attention_layernorm.weight", h)
        a = p + "self_attn."
        lin(a + "q_proj.weight", nh * d, h)
        lin(a + "k_proj.weight", nkv * d, h)
        lin(a + "v_proj.weight", nkv * d, h)
        lin(a + "o_proj.weight", h, nh * d)
        if fam.qwen2:
            for n, rows in (("q", nh * d), ("k", nkv * d), ("v", nkv * d)):
                w[a + n + "_proj.bias"] = (0.1 * rng.standard_normal(rows)).astype(np.float32)
        if fam.qwen3:
            norm(a + "q_norm.weight", d)
            norm(a + "k_norm.weight", d)
        if not fam.is_sparse(i):
            inter = c["intermediate_size"]
            lin(p + "mlp.gate_proj.weight", inter, h)
            lin(p + "mlp.up_proj.weight", inter, h)
            lin(p + "mlp.down_proj.weight", h, inter)
            continue
        m = p + ("block_sparse_moe." if fam.mixtral else "mlp.")
        inter = c["intermediate_size"] if fam.mixtral else c["moe_intermediate_size"]
        lin(m + "gate.weight", fam.num_experts, h, 4.0)
        names = ("w1", "w3", "w2") if fam.mixtral else ("gate_proj", "up_proj", "down_proj")
        for e in range(fam.num_experts):
            x = f"{m}experts.{e}."
            lin(x + names[0] + ".weight", inter, h)
            lin(x + names[1] + ".weight", inter, h)
            lin(x + names[2] + ".weight", h, inter)
        if fam.qwen2:
            s = c["shared_expert_intermediate_size"]
            lin(m + "shared_expert.gate_proj.weight", s, h)
            lin(m + "shared_expert.up_proj.weight", s, h)
            lin(m + "shared_expert.down_proj.weight", h, s)
            lin(m + "shared_expert_gate.weight", 1, h, 2.0)
    return w


GGUF_ARCH = {"mixtral": "llama", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe"}


def llama_permute(x, n_head):
    """llama.cpp's convert_hf_to_gguf permutation of q/k rows (llama arch)."""
    return (x.reshape(n_head, 2, x.shape[0] // n_head // 2, *x.shape[1:])
            .swapaxes(1, 2).reshape(x.shape))


def write_gguf(path, c, w):
    """The model as llama.cpp's converter lays it out: experts stacked per
    projection ([E, rows, cols]) in ffn_{gate,up,down}_exps, the router in
    ffn_gate_inp, Qwen2-MoE's shared expert in *_shexp (and its gate in
    ffn_gate_inp_shexp); Mixtral as arch "llama" with permuted q/k rows."""
    import gguf
    fam = moe_reference.Family(c)
    arch = GGUF_ARCH[c["model_type"]]
    wr = gguf.GGUFWriter(str(path), arch)
    h, nh = c["hidden_size"], c["num_attention_heads"]
    nkv = c["num_key_value_heads"]
    wr.add_context_length(c["max_position_embeddings"])
    wr.add_embedding_length(h)
    wr.add_block_count(c["num_hidden_layers"])
    wr.add_feed_forward_length(c["intermediate_size"])
    wr.add_head_count(nh)
    wr.add_head_count_kv(nkv)
    if "head_dim" in c:
        wr.add_key_length(c["head_dim"])
        wr.add_value_length(c["head_dim"])
    wr.add_layer_norm_rms_eps(c["rms_norm_eps"])
    wr.add_rope_freq_base(c["rope_theta"])
    wr.add_expert_count(fam.num_experts)
    wr.add_expert_used_count(fam.top_k)
    if not fam.mixtral:
        wr.add_expert_feed_forward_length(c["moe_intermediate_size"])
    if fam.qwen2:
        wr.add_expert_shared_feed_forward_length(c["shared_expert_intermediate_size"])
    if fam.qwen3 or fam.mixtral:
        wr.add_bool(f"{arch}.expert_weights_norm", bool(fam.norm_topk))
    wr.add_file_type(0)
    wr.add_tokenizer_model("gpt2")
    wr.add_token_list([f"<t{i}>" for i in range(c["vocab_size"])])
    wr.add_bos_token_id(c["bos_token_id"])
    wr.add_eos_token_id(c["eos_token_id"])
    t = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
         "lm_head.weight": "output.weight"}
    for hf, g in t.items():
        wr.add_tensor(g, w[hf])
    layer_map = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                 "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
                 "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
                 "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
                 "self_attn.v_proj.bias": "attn_v.bias", "self_attn.q_norm.weight": "attn_q_norm.weight",
                 "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
                 "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
                 "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
                 "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
                 "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight"}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for hf, g in layer_map.items():
            if p + hf not in w:
                continue
            x = w[p + hf]
            if fam.mixtral and hf == "self_attn.q_proj.weight":
                x = llama_permute(x, nh)
            if fam.mixtral and hf == "self_attn.k_proj.weight":
                x = llama_permute(x, nkv)
            wr.add_tensor(f"blk.{i}.{g}", x)
        if not fam.is_sparse(i):
            continue
        m = p + ("block_sparse_moe." if fam.mixtral else "mlp.")
        names = ("w1", "w3", "w2") if fam.mixtral else ("gate_proj", "up_proj", "down_proj")
        wr.add_tensor(f"blk.{i}.ffn_gate_inp.weight", w[m + "gate.weight"])
        for n, g in zip(names, ("gate", "up", "down")):
            stacked = np.stack([w[f"{m}experts.{e}.{n}.weight"] for e in range(fam.num_experts)])
            wr.add_tensor(f"blk.{i}.ffn_{g}_exps.weight", stacked)
        if fam.qwen2:
            wr.add_tensor(f"blk.{i}.ffn_gate_inp_shexp.weight", w[m + "shared_expert_gate.weight"][0])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def golden(name, c, model, cases, suffix=""):
    return {"name": name + suffix, "model": model,
            "reference": "NumPy float64 forward of the HF modeling semantics (tools/moe_reference.py), "
                         "full recompute per step",
            "note": "tiny random-weight model made by tools/make_moe_models.py",
            "quantized": False, "tolerance": {"logprob": 1e-4, "margin": 1e-4}, "cases": cases}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    for name, (c, seed) in MODELS.items():
        if args.only and name not in args.only:
            continue
        folder = MODELS_DIR / name
        folder.mkdir(parents=True, exist_ok=True)
        w = random_weights(c, seed)
        (folder / "config.json").write_text(json.dumps(c, indent=2) + "\n")
        (folder / "generation_config.json").write_text(
            json.dumps({"bos_token_id": 1, "eos_token_id": 2}, indent=2) + "\n")
        save_file(w, str(folder / "model.safetensors"))
        config, w64 = moe_reference.load_model(folder)
        cases = [moe_reference.golden_case(config, w64, p, STEPS) for p in PROMPTS]
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        (GOLDEN_DIR / f"{name}.json").write_text(
            json.dumps(golden(name, c, {"kind": "repo", "path": f"tests/data/models/{name}"}, cases)) + "\n")
        if name in GGUF_MODELS:
            write_gguf(MODELS_DIR / f"{name}.gguf", c, w)
            (GOLDEN_DIR / f"{name}_gguf.json").write_text(json.dumps(golden(
                name, c, {"kind": "repo", "path": f"tests/data/models/{name}.gguf"}, cases, "_gguf")) + "\n")
        print(f"{name}: {len(cases)} cases", flush=True)


if __name__ == "__main__":
    main()
