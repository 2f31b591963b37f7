#!/usr/bin/env python3
"""A float64 NumPy forward of the mixture-of-experts families, written from
Hugging Face transformers' modeling code (MixtralForCausalLM,
Qwen2MoeForCausalLM, Qwen3MoeForCausalLM) and independent of pagoda:

  x = embed[ids]; per layer: h = x + o_proj(attn(rope(qk_norm(qkv(rms(x))))))
                             x = h + mlp(rms(h))
  logits = lm_head(rms(x))

mlp of a sparse layer (layer i with num_experts > 0, i not in mlp_only_layers,
(i + 1) % decoder_sparse_step == 0), as the HF sparse-MoE blocks compute it:
  p = softmax(x @ gate^T) (in float), the top_k of p (ties: lower expert id;
  torch.topk leaves ties unspecified), renormalised to sum 1 when
  norm_topk_prob (always for Mixtral), out = sum_k p_k * down(silu(gate(x)) * up(x))
  (+ sigmoid(x @ shared_expert_gate^T) * shared_expert(x) for Qwen2-MoE).
Dense layers use the SwiGLU MLP of intermediate_size.

The golden files of the tiny MoE models (tools/make_moe_models.py) come from
here; tests/python/models/test_moe_reference.py checks them again.
"""
import json
import pathlib

import numpy as np
from safetensors.numpy import load_file

TOP_K = 20


def load_model(folder):
    """(config dict, {name: float64 array}) of a Hugging Face folder."""
    folder = pathlib.Path(folder)
    config = json.loads((folder / "config.json").read_text())
    weights = {k: v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    return config, weights


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def rope(x, positions, theta):
    """Rotate-half RoPE on x [T, heads, D]."""
    d = x.shape[-1]
    inv_freq = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    angles = positions[:, None].astype(np.float64) * inv_freq[None, :]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
    half = d // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def route(logits, top_k, renormalize):
    """(ids [T, k], weights [T, k]): top-k of softmax(logits), ties to the lower id."""
    z = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    ids = np.argsort(-p, axis=-1, kind="stable")[:, :top_k]
    w = np.take_along_axis(p, ids, axis=-1)
    if renormalize:
        w = w / w.sum(axis=-1, keepdims=True)
    return ids, w


def swiglu(x, gate, up, down):
    return (silu(x @ gate.T) * (x @ up.T)) @ down.T


class Family:
    """Names and switches of one family (as its HF modeling code has them)."""

    def __init__(self, config):
        arch = config["architectures"][0]
        self.mixtral = arch == "MixtralForCausalLM"
        self.qwen2 = arch == "Qwen2MoeForCausalLM"
        self.qwen3 = arch == "Qwen3MoeForCausalLM"
        assert self.mixtral or self.qwen2 or self.qwen3, arch
        c = config
        self.num_experts = c["num_local_experts"] if self.mixtral else c["num_experts"]
        self.top_k = c["num_experts_per_tok"]
        self.norm_topk = True if self.mixtral else c.get("norm_topk_prob", False)
        self.sparse_step = c.get("decoder_sparse_step", 1)
        self.mlp_only = set(c.get("mlp_only_layers", []))

    def is_sparse(self, layer):
        return layer not in self.mlp_only and self.num_experts > 0 and (layer + 1) % self.sparse_step == 0


def moe_mlp(x, w, p, fam):
    """The sparse block of layer prefix p (each expert computed plainly)."""
    m = p + ("block_sparse_moe." if fam.mixtral else "mlp.")
    ids, weights = route(x @ w[m + "gate.weight"].T, fam.top_k, fam.norm_topk)
    out = np.zeros_like(x)
    names = ("w1", "w3", "w2") if fam.mixtral else ("gate_proj", "up_proj", "down_proj")
    for e in range(fam.num_experts):
        rows, slots = np.nonzero(ids == e)
        if len(rows) == 0:
            continue
        g, u, d = (w[f"{m}experts.{e}.{n}.weight"] for n in names)
        out[rows] += weights[rows, slots][:, None] * swiglu(x[rows], g, u, d)
    if fam.qwen2:
        s = m + "shared_expert."
        shared = swiglu(x, w[s + "gate_proj.weight"], w[s + "up_proj.weight"], w[s + "down_proj.weight"])
        out += 1.0 / (1.0 + np.exp(-(x @ w[m + "shared_expert_gate.weight"].T))) * shared
    return out


def attention(x, w, p, c, fam):
    t = x.shape[0]
    nh, nkv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    d = c.get("head_dim") or c["hidden_size"] // nh
    a = p + "self_attn."
    q, k, v = (x @ w[a + n + "_proj.weight"].T for n in "qkv")
    if fam.qwen2 or c.get("attention_bias", False):
        q, k, v = q + w[a + "q_proj.bias"], k + w[a + "k_proj.bias"], v + w[a + "v_proj.bias"]
    q, k, v = q.reshape(t, nh, d), k.reshape(t, nkv, d), v.reshape(t, nkv, d)
    eps = c["rms_norm_eps"]
    if fam.qwen3:
        q, k = rms_norm(q, w[a + "q_norm.weight"], eps), rms_norm(k, w[a + "k_norm.weight"], eps)
    pos = np.arange(t)
    theta = c.get("rope_theta", 10000.0)
    q, k = rope(q, pos, theta), rope(k, pos, theta)
    rep = nh // nkv
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d)
    s = np.where(np.tril(np.ones((t, t), dtype=bool))[None], s, -np.inf)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    o = np.einsum("hqk,khd->qhd", s, v).reshape(t, nh * d)
    return o @ w[a + "o_proj.weight"].T


def forward(config, w, ids):
    """Logits [T, V] of the token ids (float64, full recompute)."""
    fam = Family(config)
    c = config
    eps = c["rms_norm_eps"]
    x = w["model.embed_tokens.weight"][np.asarray(ids)]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = x + attention(rms_norm(x, w[p + "input_layernorm.weight"], eps), w, p, c, fam)
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        if fam.is_sparse(i):
            x = x + moe_mlp(h, w, p, fam)
        else:
            m = p + "mlp."
            x = x + swiglu(h, w[m + "gate_proj.weight"], w[m + "up_proj.weight"], w[m + "down_proj.weight"])
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else w["lm_head.weight"]
    return x @ head.T


def log_softmax(z):
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


def golden_case(config, w, prompt_ids, steps):
    """{"prompt_ids", "greedy_ids", "top_logprobs"} in tests/data/golden's format:
    greedy argmax (lowest id on ties) and the top-20 log-softmax per step."""
    ids = list(prompt_ids)
    greedy, tops = [], []
    for _ in range(steps):
        lp = log_softmax(forward(config, w, ids)[-1])
        order = np.lexsort((np.arange(lp.size), -lp))[:TOP_K]
        tops.append([[int(i), float(lp[i])] for i in order])
        greedy.append(int(order[0]))
        ids.append(int(order[0]))
    return {"prompt_ids": list(prompt_ids), "greedy_ids": greedy, "top_logprobs": tops}
