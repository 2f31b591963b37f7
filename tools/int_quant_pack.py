#!/usr/bin/env python3
"""AWQ and GPTQ packing in NumPy, as AutoAWQ (WQLinear_GEMM.from_linear) and AutoGPTQ
(QuantLinear.pack) write their checkpoints, and the dequantization pagoda must match
(io/int_quant_source.h):  w[n, k] = (q[k, n] - z[g, n]) * s[g, n],  g = g_idx[k].

Layouts (K in features, N out features, G group size, b bits):
  AWQ   qweight int32 [K, N/8]   column c of each 8 in nibble AWQ_NIBBLE[c % 8] (AutoAWQ packs
                                 columns 0,2,4,6,1,3,5,7 into nibbles 0..7)
        qzeros  int32 [K/G, N/8] the same;  scales f16 [K/G, N]
  GPTQ  qweight int32 [K*b/32, N] row k in field k % (32/b) of word row k / (32/b)
        qzeros  int32 [K/G, N*b/32] column n in field n % (32/b); v1 (checkpoint_format gptq)
                                 stores z - 1 (pagoda, like vLLM, reads field + 1)
        scales f16 [K/G, N];  g_idx int32 [K] (act order: g_idx[perm[i]] = i // G)

AutoGPTQ's v1 packing ORs (z - 1) as uint32, so z = 0 spills ones into the neighbouring
fields; quantize() never makes z = 0 for v1 (min zero 1), as real GPTQ weights almost never do.

As a command: quantize a Hugging Face folder's linear weights (round-to-nearest, min-max per
group) into an AWQ / GPTQ folder with its quantization_config:
  python tools/int_quant_pack.py SRC DST --format gptq --bits 4 --group 128 [--desc-act]
      [--sym] [--v2] [--seed 0]
lm_head and embeddings stay as they are.
"""
import argparse
import json
import pathlib
import shutil

import numpy as np

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # AutoAWQ: nibble i holds column AWQ_ORDER[i]
# Modules that read the same input as another (and so get its act order).
SHARED_INPUT = {"k_proj": "q_proj", "v_proj": "q_proj", "up_proj": "gate_proj"}
LINEAR_SUFFIXES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                   "qkv_proj", "gate_up_proj")


def quantize(w, bits, group, sym, perm=None, min_zero=0):
    """Round-to-nearest of w [N, K] (float) per group of G rows of K (-1: all K).
    Returns (q [K, N] int64, z [K/G, N] int64, s [K/G, N] float16, g_idx [K] int32).
    With a permutation of K (act order, GPTQ's desc_act) its consecutive runs of G are the
    groups: g_idx[perm[i]] = i // G."""
    n, k = w.shape
    g = k if group < 0 else group
    maxq = (1 << bits) - 1
    perm = np.arange(k) if perm is None else perm
    g_idx = np.empty(k, dtype=np.int32)
    g_idx[perm] = np.arange(k) // g
    wt = w.T.astype(np.float64)  # [K, N]
    num_groups = k // g
    s = np.empty((num_groups, n), dtype=np.float16)
    z = np.empty((num_groups, n), dtype=np.int64)
    for gi in range(num_groups):
        rows = wt[g_idx == gi]
        lo, hi = np.minimum(rows.min(0), 0), np.maximum(rows.max(0), 0)
        if sym:
            scale = np.maximum(np.abs(lo), np.abs(hi)) * 2 / maxq
            zero = np.full(n, (maxq + 1) // 2)
        else:
            scale = (hi - lo) / maxq
            zero = np.round(-lo / np.where(scale == 0, 1, scale))
        scale = np.where(scale == 0, 1.0, scale)
        s[gi] = scale.astype(np.float16)
        z[gi] = np.clip(zero, min_zero, maxq)
    sf = s.astype(np.float64)[g_idx]
    q = np.clip(np.round(wt / sf + z[g_idx]), 0, maxq).astype(np.int64)
    return q, z, s, g_idx


def dequantize(q, z, s, g_idx):
    """The reference weight [N, K] float32: (q - z) * s in float32 (exact: s is f16)."""
    return ((q - z[g_idx]).astype(np.float32) * s.astype(np.float32)[g_idx]).T.copy()


def pack_awq(q, z, s):
    """AutoAWQ GEMM tensors (4-bit) of q [K, N], z [K/G, N], s [K/G, N]."""
    def pack(v):
        rows, cols = v.shape
        out = np.zeros((rows, cols // 8), dtype=np.uint32)
        for i, c in enumerate(AWQ_ORDER):
            out |= (v[:, c::8].astype(np.uint32) & 0xF) << np.uint32(4 * i)
        return out.view(np.int32)
    return {"qweight": pack(q), "qzeros": pack(z), "scales": s.astype(np.float16)}


def pack_gptq(q, z, s, bits, g_idx, v1=True):
    """AutoGPTQ tensors of q [K, N], z [K/G, N], s [K/G, N]; v1 stores z - 1."""
    per = 32 // bits
    k, n = q.shape
    qweight = np.zeros((k // per, n), dtype=np.uint32)
    for j in range(per):
        qweight |= q[j::per].astype(np.uint32) << np.uint32(bits * j)
    zs = (z - 1 if v1 else z).astype(np.int64).astype(np.uint32)  # z - 1 = -1 wraps, as AutoGPTQ
    qzeros = np.zeros((z.shape[0], n // per), dtype=np.uint32)
    for j in range(per):
        qzeros |= zs[:, j::per] << np.uint32(bits * j)
    return {"qweight": qweight.view(np.int32), "qzeros": qzeros.view(np.int32),
            "scales": s.astype(np.float16), "g_idx": g_idx.astype(np.int32)}


def quant_config(fmt, bits, group, sym, desc_act, v2):
    if fmt == "awq":
        return {"quant_method": "awq", "bits": bits, "group_size": group, "zero_point": True,
                "version": "gemm", "modules_to_not_convert": None}
    return {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": desc_act,
            "sym": sym, "checkpoint_format": "gptq_v2" if v2 else "gptq", "static_groups": False,
            "true_sequential": True, "damp_percent": 0.01}


def quantize_weights(weights, fmt, bits, group, sym, desc_act, v2, seed):
    """(packed tensors, dequantized reference tensors) of the linear weights in `weights`
    (HF name -> float array); other tensors are copied to both."""
    rng = np.random.default_rng(seed)
    packed, ref, perms = {}, {}, {}
    for name, w in weights.items():
        base = name[:-len(".weight")]
        if not name.endswith(".weight") or not base.endswith(LINEAR_SUFFIXES):
            packed[name] = ref[name] = w
            continue
        min_zero = 1 if fmt == "gptq" and not v2 else 0
        perm = None
        if desc_act:  # modules of one input (q/k/v, gate/up) share GPTQ's order: its Hessian's
            parent, module = base.rsplit(".", 1)
            key = (parent, SHARED_INPUT.get(module, module))
            perm = perms.setdefault(key, rng.permutation(w.shape[1]))
        q, z, s, g_idx = quantize(w, bits, group, sym, perm, min_zero)
        parts = pack_awq(q, z, s) if fmt == "awq" else pack_gptq(q, z, s, bits, g_idx, not v2)
        for suffix, t in parts.items():
            packed[f"{base}.{suffix}"] = t
        ref[name] = dequantize(q, z, s, g_idx)
    return packed, ref


def main():
    from safetensors.numpy import load_file, save_file
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=pathlib.Path)
    ap.add_argument("dst", type=pathlib.Path)
    ap.add_argument("--format", choices=["awq", "gptq"], required=True)
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--sym", action="store_true")
    ap.add_argument("--desc-act", action="store_true")
    ap.add_argument("--v2", action="store_true", help="GPTQ checkpoint_format gptq_v2")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    weights = {}
    for f in sorted(a.src.glob("*.safetensors")):
        weights.update({k: v.astype(np.float32) for k, v in load_file(str(f)).items()})
    packed, _ = quantize_weights(weights, a.format, a.bits, a.group, a.sym, a.desc_act, a.v2, a.seed)
    a.dst.mkdir(parents=True, exist_ok=True)
    for f in a.src.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and f.name != "model.safetensors.index.json":
            shutil.copy(f, a.dst / f.name)
    save_file(packed, str(a.dst / "model.safetensors"))
    config = json.loads((a.src / "config.json").read_text())
    config["quantization_config"] = quant_config(a.format, a.bits, a.group, a.sym, a.desc_act, a.v2)
    (a.dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")


if __name__ == "__main__":
    main()
