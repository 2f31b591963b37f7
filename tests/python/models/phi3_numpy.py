"""A float64 NumPy forward of Phi-3 / Phi-3.5 (Phi3ForCausalLM), written from
Hugging Face transformers' modeling_phi3.py (eager attention) and
modeling_rope_utils.py's longrope, independent of pagoda's C++:

  x = embed[ids]
  per layer i:
    x += attn(rms(x) * w_in)
    x += mlp(rms(x) * w_post_attn)
  logits = (rms(x) * w_final) @ lm_head.T
  attn: qkv = h @ qkv_proj.T split [Hq D | Hkv D | Hkv D]; RoPE (rotate-half)
    over the first R = int(D * partial_rotary_factor) dims of each head (R = D
    without the field; Phi-4-mini: 96 of 128), the other D - R passed through,
    with inv_freq = 1 / (ext_i * theta^(2i/R)) (i < R/2) and cos / sin times the
    attention factor; scores = q.k / sqrt(D), causal, and keys at positions
    <= q - sliding_window masked when sliding_window is set; softmax; o_proj.
  mlp: gate, up = split(h @ gate_up_proj.T); down(up * silu(gate)).

longrope: ext = long_factor when `long_factors`, else short_factor;
attention factor = rope_scaling.attention_factor or
sqrt(1 + ln(s) / ln(original)) with s = max_position_embeddings / original
(1 when s <= 1). transformers picks the long factors for a forward whose
sequence is longer than original_max_position_embeddings: forward()'s
default (long_factors=None) is that rule for this full-recompute forward.

`weights` maps Hugging Face tensor names to float arrays.
"""
import math

import numpy as np


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def original_context(config):
    scaling = config.get("rope_scaling") or {}
    return (config.get("original_max_position_embeddings")
            or scaling.get("original_max_position_embeddings")
            or config["max_position_embeddings"])


def head_dim(config):
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def rotary_dim(config):
    """transformers' int(head_dim * partial_rotary_factor)."""
    return int(head_dim(config) * config.get("partial_rotary_factor", 1.0))


def rope_params(config, long_factors):
    """(inv_freq [R/2], attention factor) of the config's rope."""
    d = rotary_dim(config)
    theta = config.get("rope_theta", 10000.0)
    powers = theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    scaling = config.get("rope_scaling") or {}
    if scaling.get("rope_type", scaling.get("type")) not in ("longrope", "su"):
        return 1.0 / powers, 1.0
    orig = original_context(config)
    ext = np.asarray(scaling["long_factor" if long_factors else "short_factor"], dtype=np.float64)
    assert ext.shape == (d // 2,), f"{len(ext)} longrope factors for {d} rotary dims"
    factor = config["max_position_embeddings"] / orig
    attention = scaling.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1.0 + math.log(factor) / math.log(orig))
    return 1.0 / (ext * powers), attention


def rope(x, positions, freqs, attention):
    """x [T, heads, D]: rotate-half pairing (i, i + R/2) over x[..., :R] with
    R = 2 len(freqs); x[..., R:] passes through (transformers' Phi-3
    apply_rotary_pos_emb)."""
    angles = positions[:, None] * freqs[None, :]  # [T, R/2]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :] * attention
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :] * attention
    r = 2 * len(freqs)
    x_rot, x_pass = x[..., :r], x[..., r:]
    half = r // 2
    rotated = np.concatenate([-x_rot[..., half:], x_rot[..., :half]], axis=-1)
    return np.concatenate([x_rot * cos + rotated * sin, x_pass], axis=-1)


def forward(config, weights, ids, long_factors=None):
    """Logits [T, vocab] (float64) of the token ids `ids` from position 0."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    d = head_dim(config)
    eps = config.get("rms_norm_eps", 1e-5)
    window = config.get("sliding_window")
    ids = np.asarray(ids)
    t = len(ids)
    if long_factors is None:
        long_factors = t > original_context(config)
    freqs, attention = rope_params(config, long_factors)
    pos = np.arange(t, dtype=np.float64)
    x = w["model.embed_tokens.weight"][ids]
    q_idx, k_idx = np.arange(t)[:, None], np.arange(t)[None, :]
    masked = k_idx > q_idx
    if window:
        masked = masked | (k_idx <= q_idx - window)
    qn, kvn = heads * d, kv_heads * d
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        qkv = h @ w[p + "self_attn.qkv_proj.weight"].T
        q = qkv[:, :qn].reshape(t, heads, d)
        k = qkv[:, qn:qn + kvn].reshape(t, kv_heads, d)
        v = qkv[:, qn + kvn:].reshape(t, kv_heads, d)
        q, k = rope(q, pos, freqs, attention), rope(k, pos, freqs, attention)
        group = heads // kv_heads
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(d)
        scores = np.where(masked[None], -np.inf, scores)
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", probs, v).reshape(t, heads * d)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = np.split(h @ w[p + "mlp.gate_up_proj.weight"].T, 2, axis=-1)
        x = x + (up * silu(gate)) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.T


def log_softmax(logits):
    m = logits.max()
    return logits - m - math.log(np.exp(logits - m).sum())
