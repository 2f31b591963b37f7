"""A NumPy forward of a llama model whose linear layers run FP8 e4m3 W8A8, written from the
semantics in src/backend/linear_weight.h and src/core/fp8_quant.h (vLLM's), independent of
pagoda's C++:

  e4m3(v): v clamped to +-448, rounded to nearest-even on the e4m3 grid (3 mantissa bits,
    exponent bias 7, subnormal quantum 2^-9).
  activations x [T, K] (float32, as the CPU backend holds them):
    dynamic per token: s_t = max(max|x_t| / 448, 1 / (448 * 512)) in float32;
    static: s_t = input_scale; block b: s[t, g] = max(max|x_t,g|, 1e-10) / 448 per b columns;
    x_q = e4m3(x / s), the division in float32.
  y[t, n] = (sum_k x_q w_q) * s_t * weight_scale[n]      (per-tensor / per-channel)
  y[t, n] = sum_g (sum_{k in g} x_q w_q) * s[t, g] * weight_scale_inv[n / b, g]   (block)

Everything else (norms, rope, attention, the lm_head) runs in float64 as transformers' llama
(default rope, GQA, untied head). `weights` maps Hugging Face names to arrays; an FP8 linear
`<m>` has `<m>.weight` as the float values of its e4m3 codes plus its scale tensors, as
fp8_linear() reads them from `scheme`.
"""
import math

import numpy as np

E4M3_MAX = 448.0


def e4m3(v):
    """float array -> the nearest e4m3 values (float64), round-to-nearest-even, saturating."""
    v = np.asarray(v, dtype=np.float64)
    a = np.minimum(np.abs(v), E4M3_MAX)
    _, e = np.frexp(a)  # a = m 2^e, m in [0.5, 1): binade 2^(e-1), quantum 2^(e-4)
    quantum = np.where(a < 2.0 ** -6, 2.0 ** -9, np.ldexp(1.0, e - 4))
    return np.copysign(np.rint(a / quantum) * quantum, v)


def e4m3_codes(values):
    """e4m3 values (exactly on the grid) -> their uint8 codes."""
    grid = np.array([e4m3_value(c) for c in range(127)])  # codes 0..126: 0 .. 448 ascending
    a = np.abs(values)
    codes = np.searchsorted(grid, a).astype(np.uint8)
    assert np.array_equal(grid[codes], a), "values not on the e4m3 grid"
    return codes | np.where(np.signbit(values), 0x80, 0).astype(np.uint8)


def e4m3_value(code):
    exp, mant = (code >> 3) & 0xF, code & 0x7
    v = math.ldexp(mant, -9) if exp == 0 else math.ldexp(1.0 + mant / 8.0, exp - 7)
    return -v if code & 0x80 else v


def quantize(x, scale):
    """e4m3(x / scale) with x and scale float32 and the division in float32."""
    return e4m3(np.float32(x) / np.float32(scale))


def token_scale(amax):
    return np.maximum(np.float32(amax) / np.float32(E4M3_MAX), np.float32(1.0 / (448.0 * 512.0)))


def group_scale(amax):
    return np.maximum(np.float32(amax), np.float32(1e-10)) / np.float32(E4M3_MAX)


def fp8_linear(x, w, module, scheme, fused=(), jitter=None):
    """x [T, K] float64 (rounded to float32 first, as the CPU backend holds activations).
    `fused`: the modules fused with `module` into one linear (q/k/v, gate/up), whose largest
    input_scale a static scheme uses (vLLM's rule). `jitter`: None, or a numpy Generator that
    multiplies x by (1 + u 2^-24), u uniform in [-1, 1], before the rounding to float32: noise
    the size of a float32 summation order's, to measure how far e4m3 rounding flips alone
    move a model's outputs."""
    if jitter is not None:
        x = x * (1.0 + jitter.uniform(-1.0, 1.0, x.shape) * 2.0 ** -24)
    x32 = x.astype(np.float32)
    wq = w[module + ".weight"]
    if scheme["kind"] == "block":
        b = scheme["block"]
        ws = w[module + "." + scheme.get("scale_name", "weight_scale_inv")]
        y = np.zeros((x.shape[0], wq.shape[0]))
        rows = np.arange(wq.shape[0]) // b
        for g in range(0, x.shape[1], b):
            xg = x32[:, g:g + b]
            s = group_scale(np.abs(xg).max(axis=1))[:, None]
            acc = quantize(xg, s) @ wq[:, g:g + b].T
            y += acc * s.astype(np.float64) * ws[rows, g // b][None, :]
        return y
    if scheme["kind"] == "static":
        static = max(float(w[m + ".input_scale"].reshape(-1)[0]) for m in (fused or (module,)))
        s = np.full((x.shape[0], 1), np.float32(static))
    else:
        s = token_scale(np.abs(x32).max(axis=1))[:, None]
    ws = w[module + ".weight_scale"].reshape(-1)
    ws = np.broadcast_to(ws, (wq.shape[0],)) if ws.size == 1 else ws
    return (quantize(x32, s) @ wq.T) * s.astype(np.float64) * ws[None, :]


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, positions, theta):
    d = x.shape[-1]
    freqs = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    angles = positions[:, None] * freqs[None, :]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
    half = d // 2
    return x * cos + np.concatenate([-x[..., half:], x[..., :half]], axis=-1) * sin


def forward(config, weights, ids, scheme, quantize=True, jitter=None):
    """Logits [T, vocab] of `ids` from position 0; every layer linear per `scheme` ({"kind":
    "dynamic" | "static" | "block", "block": b}); quantize=False: plain float64 linears of
    unquantised weights (the comparison that shows what FP8 changes); jitter: fp8_linear's."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    kv_heads = config["num_key_value_heads"]
    d = config.get("head_dim", hidden // heads)
    eps, theta = config["rms_norm_eps"], config.get("rope_theta", 10000.0)
    t = len(ids)
    pos = np.arange(t, dtype=np.float64)
    masked = np.arange(t)[None, :] > np.arange(t)[:, None]
    x = w["model.embed_tokens.weight"][np.asarray(ids)]

    def lin(h, m, fused=()):
        return fp8_linear(h, w, m, scheme, fused, jitter) if quantize else h @ w[m + ".weight"].T

    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        qkv = [p + f"self_attn.{n}_proj" for n in "qkv"]
        q = rope(lin(h, qkv[0], qkv).reshape(t, heads, d), pos, theta)
        k = rope(lin(h, qkv[1], qkv).reshape(t, kv_heads, d), pos, theta)
        v = lin(h, qkv[2], qkv).reshape(t, kv_heads, d)
        k, v = np.repeat(k, heads // kv_heads, axis=1), np.repeat(v, heads // kv_heads, axis=1)
        scores = np.where(masked[None], -np.inf, np.einsum("qhd,khd->hqk", q, k) / math.sqrt(d))
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", probs, v).reshape(t, heads * d)
        x = x + lin(o, p + "self_attn.o_proj")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gu = (p + "mlp.gate_proj", p + "mlp.up_proj")
        gate, up = lin(h, gu[0], gu), lin(h, gu[1], gu)
        x = x + lin(up * (gate / (1.0 + np.exp(-gate))), p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    return x @ w["lm_head.weight"].T


def log_softmax(logits):
    m = logits.max()
    return logits - m - math.log(np.exp(logits - m).sum())
