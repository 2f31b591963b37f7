"""A float64 NumPy forward of Gemma 2 / Gemma 3 text models, written from
Hugging Face transformers' modeling_gemma2.py / modeling_gemma3.py (eager
attention), independent of pagoda's C++:

  x = embed[ids] * sqrt(hidden)
  per layer i:
    h = attn(rms(x) * (1 + w_in));  x += rms(h) * (1 + w_post_attn)
    h = mlp(rms(x) * (1 + w_pre_ff)); x += rms(h) * (1 + w_post_ff)
  logits = (rms(x) * (1 + w_final)) @ embed.T, then cap * tanh(logits / cap)
  attn: q/k/v projections; Gemma 3: q and k RMSNorm (1 + w) per head; RoPE
    (rotate-half) with the sliding layers' own base (Gemma 3:
    rope_local_base_freq, unscaled) or rope_theta (+ linear rope_scaling);
    scores = q.k * query_pre_attn_scalar^-0.5, cap * tanh(scores / cap) when
    attn_logit_softcapping is set, causal mask, and on sliding layers keys at
    positions <= q - sliding_window masked; softmax; o_proj.
  mlp: down(gelu_tanh(gate(h)) * up(h)).

Layer types: config "layer_types" if present, else Gemma 2 alternates
(even layers slide) and Gemma 3 slides unless (i + 1) % sliding_window_pattern
== 0 (default 6).

`weights` maps Hugging Face tensor names to float arrays (the norms as stored
in HF files: w, not 1 + w).
"""
import math

import numpy as np


def layer_is_sliding(config, i):
    if config.get("sliding_window") is None:
        return False
    if config.get("layer_types"):
        return config["layer_types"][i] == "sliding_attention"
    if config["model_type"] == "gemma2":
        return i % 2 == 0
    return (i + 1) % config.get("sliding_window_pattern", 6) != 0


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def inv_freq(head_dim, theta, linear_factor=1.0):
    return 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)) / linear_factor


def rope(x, positions, freqs):
    """x [T, heads, D], rotate-half pairing (i, i + D/2)."""
    angles = positions[:, None] * freqs[None, :]  # [T, D/2]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def e4m3_round(x):
    """x rounded to OCP float8 e4m3fn values (round half to even, saturating at +-448): what an
    FP8 KV cache (--kv-cache-dtype fp8, scale 1) gives back. Normals have 3 mantissa bits
    (quantum 2^(e-3) for |x| in [2^e, 2^(e+1)), e >= -6); below 2^-6 the quantum is 2^-9."""
    a = np.minimum(np.abs(x), 448.0)
    e = np.floor(np.log2(np.maximum(a, 2.0 ** -6)))
    quantum = 2.0 ** (e - 3)
    return np.sign(x) * np.minimum(np.rint(a / quantum) * quantum, 448.0)


def forward(config, weights, ids, kv_round=None):
    """Logits [T, vocab] (float64) of the token ids `ids` from position 0. kv_round: applied to
    every layer's k (after rope) and v, as a KV cache of another element type stores them."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    gemma3 = config["model_type"] != "gemma2"
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    kv_heads, d = config.get("num_key_value_heads", heads), config.get("head_dim", 256)
    eps = config.get("rms_norm_eps", 1e-6)
    window = config.get("sliding_window")
    attn_cap = config.get("attn_logit_softcapping", None if gemma3 else 50.0)
    final_cap = config.get("final_logit_softcapping", None if gemma3 else 30.0)
    scale = config.get("query_pre_attn_scalar", 256) ** -0.5
    theta = config.get("rope_theta", 1000000.0 if gemma3 else 10000.0)
    scaling = config.get("rope_scaling") or {}
    factor = scaling.get("factor", 1.0) if scaling.get("rope_type", scaling.get("type")) == "linear" else 1.0
    global_freqs = inv_freq(d, theta, factor)
    local_freqs = inv_freq(d, config.get("rope_local_base_freq", 10000.0)) if gemma3 else global_freqs

    ids = np.asarray(ids)
    t = len(ids)
    pos = np.arange(t, dtype=np.float64)
    x = w["model.embed_tokens.weight"][ids] * math.sqrt(hidden)
    q_idx, k_idx = np.arange(t)[:, None], np.arange(t)[None, :]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        sliding = layer_is_sliding(config, i)
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(t, heads, d)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(t, kv_heads, d)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(t, kv_heads, d)
        if gemma3:
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        freqs = local_freqs if sliding else global_freqs
        q, k = rope(q, pos, freqs), rope(k, pos, freqs)
        if kv_round is not None:
            k, v = kv_round(k), kv_round(v)
        group = heads // kv_heads
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * scale
        if attn_cap:
            scores = np.tanh(scores / attn_cap) * attn_cap
        masked = k_idx > q_idx
        if sliding:
            masked = masked | (k_idx <= q_idx - window)
        scores = np.where(masked[None], -np.inf, scores)
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", probs, v).reshape(t, heads * d)
        o = o @ w[p + "self_attn.o_proj.weight"].T
        x = x + rms_norm(o, w[p + "post_attention_layernorm.weight"], eps)
        h = rms_norm(x, w[p + "pre_feedforward_layernorm.weight"], eps)
        m = gelu_tanh(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        m = m @ w[p + "mlp.down_proj.weight"].T
        x = x + rms_norm(m, w[p + "post_feedforward_layernorm.weight"], eps)
    x = rms_norm(x, w["model.norm.weight"], eps)
    logits = x @ w["model.embed_tokens.weight"].T
    if final_cap:
        logits = np.tanh(logits / final_cap) * final_cap
    return logits


def log_softmax(logits):
    m = logits.max()
    return logits - m - math.log(np.exp(logits - m).sum())
