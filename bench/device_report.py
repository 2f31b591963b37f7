#!/usr/bin/env python3
"""Merge the pieces of one bench/run_device.sh run into
bench/results/<date>-<gpu>.md and .json: ceilings, pagoda W1-W6, the HF
transformers baseline, each figure beside its ceiling and ratio.

Usage: python3 bench/device_report.py WORK_DIR OUT_BASENAME
  WORK_DIR holds meta.json, ceilings.json, hf.json and pagoda_*.json (any may
  be missing: the report says what was not run); writes OUT_BASENAME.md/.json.
"""

import json
import os
import sys


def load(work, name):
    path = os.path.join(work, name)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError:
        return None


def model_cost(cfg):
    """Parameter counts of a dense Llama/Qwen config (same arithmetic as src/bench/inproc/model_cost.cpp)."""
    h, layers, v = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    d = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv, inter = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d, cfg["intermediate_size"]
    matmul = layers * (2 * h * q + 2 * h * kv + 3 * h * inter)
    layer_total = matmul + layers * 2 * h
    tied = cfg.get("tie_word_embeddings", False)
    return {"num_params": v * h + layer_total + h + (0 if tied else v * h), "decode_params": layer_total + h + v * h,
            "layer_matmul": matmul, "lm_head": v * h, "kv_elems_per_token": 2 * layers * kv,
            "attn": layers * cfg["num_attention_heads"] * d}


def decode_bytes(cost, batch, context):
    return cost["decode_params"] * 2 + batch * context * cost["kv_elems_per_token"] * 2


def prefill_flops(cost, tokens):
    return 2 * cost["layer_matmul"] * tokens + 2 * cost["lm_head"] + 2 * cost["attn"] * tokens * tokens


def fmt(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)


def section_ceilings(c, cost):
    if not c:
        return ["## Ceilings", "", "not measured", ""]
    sol = decode_bytes(cost, 1, 1024 + 127.5) / (c["d2d_copy_gbps"] * 1e9) if cost else None
    return ["## Ceilings", "",
            "| what | value |", "|---|---|",
            "| GPU | %s (%d SMs, %.0f GiB) |" % (c["gpu"], c["num_sms"], c["memory_gib"]),
            "| memory bandwidth (D2D copy, read + written) | %.0f GB/s |" % c["d2d_copy_gbps"],
            "| bf16 matmul 8192^3 | %.0f TFLOP/s |" % c["bf16_matmul_tflops"],
            "| decode speed of light, batch 1, 1024 in / 256 out (weights + mean KV) | %s ms/token (%s tok/s) |"
            % (fmt(sol * 1e3 if sol else None), fmt(1 / sol if sol else None, ".0f")),
            "", "Method: " + c["method"], ""]


def section_w1(p, hf, c, cost):
    rows = ["## W1 latency (batch 1, 1024-token prompt, 256 generated)", "",
            "| system | TTFT ms | TPOT ms | decode tok/s | TPOT % of speed of light |", "|---|---|---|---|---|"]
    if p:
        rows.append("| pagoda | %s | %s | %s | %s |" % (fmt(p.get("ttft_mean_ms")), fmt(p.get("tpot_mean_ms")),
                                                      fmt(p.get("decode_tok_s"), ".1f"),
                                                      fmt(p.get("pct_of_speed_of_light"), ".1f")))
    if not p and not hf:
        rows.append("| not run | | | | |")
    if hf and c and cost:
        w = hf["w1"]
        sol_ms = decode_bytes(cost, 1, w["input_len"] + (w["output_len"] - 1) / 2) / (c["d2d_copy_gbps"] * 1e9) * 1e3
        rows.append("| HF transformers generate | %.2f | %.2f | %.1f | %.1f |"
                    % (w["ttft_ms"], w["tpot_ms"], w["decode_tok_s"], 100 * sol_ms / w["tpot_ms"]))
    return rows + [""]


def section_w2(p1024, p128, hf):
    rows = ["## W2 offline throughput", "",
            "| system | requests x in/out | output tok/s | total tok/s | req/s |", "|---|---|---|---|---|"]
    for p in (p1024, p128):
        if p:
            rows.append("| pagoda | %d x %d/%d | %.0f | %.0f | %.2f |" % (
                p["num_prompts"], p["input_len"], p["output_len"], p["output_tok_s"], p["total_tok_s"],
                p["requests_per_s"]))
    for s in (hf or {}).get("static", []):
        rows.append("| HF generate, static batch %d | %d x %d/%d | %.0f | %.0f | %.2f |" % (
            s["batch"], s["batch"], s["input_len"], s["output_len"], s["output_tok_s"], s["total_tok_s"],
            s["requests_per_s"]))
    return rows + [""]


def serve_row(label, r):
    return "| %s | %d/%d | %s / %s / %s | %s / %s / %s | %s / %s / %s | %s / %s / %s | %.0f |" % (
        label, r["completed"], r["num_prompts"],
        fmt(r["mean_ttft_ms"]), fmt(r["median_ttft_ms"]), fmt(r.get("p99_ttft_ms")),
        fmt(r["mean_tpot_ms"]), fmt(r["median_tpot_ms"]), fmt(r.get("p99_tpot_ms")),
        fmt(r["mean_itl_ms"]), fmt(r["median_itl_ms"]), fmt(r.get("p99_itl_ms")),
        fmt(r["mean_e2el_ms"]), fmt(r["median_e2el_ms"]), fmt(r.get("p99_e2el_ms")),
        r["output_throughput"])


def section_w3(sweep, r1, util, sat=None):
    rows = ["## W3 online serving (ShareGPT-like lengths, Poisson arrivals)", "",
            "| rate req/s | done | TTFT mean/p50/p99 ms | TPOT mean/p50/p99 ms | ITL mean/p50/p99 ms "
            "| E2E mean/p50/p99 ms | output tok/s |", "|---|---|---|---|---|---|---|"]
    runs = ([r1] if r1 else []) + ((sweep or {}).get("sweep") or [])
    for r in runs:
        rows.append(serve_row(str(r["request_rate"]), r))
    if sat:
        rows.append(serve_row("inf (%d requests, GPU-busy run)" % sat["num_prompts"], sat))
    if not runs:
        rows.append("| not run | | | | | | |")
    busy = (util or {}).get("all")
    saturated = (util or {}).get("saturated")
    return rows + ["", "GPU busy: %s%% (mean of nvidia-smi utilization.gpu every 200 ms over all W3 runs); "
                   "%s%% saturated (every 100 ms over one unbounded-rate run of 200 requests)"
                   % (fmt(busy, ".0f"), fmt(saturated, ".0f")), ""]


def section_w4(on, off, hits):
    rows = ["## W4 shared prefix (2048-token shared prompt + 128 unique, 128 out)", "",
            "| prefix caching | output tok/s | req/s | TTFT mean/p50/p99 ms | hit rate |", "|---|---|---|---|---|"]
    if not on and not off:
        rows.append("| not run | | | | |")
    for label, r in (("on", on), ("off", off)):
        if r:
            rate = (hits or {}).get(label)
            rows.append("| %s | %.0f | %.2f | %s / %s / %s | %s |" % (
                label, r["output_throughput"], r["request_throughput"], fmt(r["mean_ttft_ms"]),
                fmt(r["median_ttft_ms"]), fmt(r.get("p99_ttft_ms")), fmt(rate * 100 if rate is not None else None, ".1f")
                + ("%" if rate is not None else "")))
    return rows + [""]


def section_w5_w6(w5, p6, hf, c, cost):
    rows = ["## W5 startup and W6 long prefill", ""]
    rows.append("W5: process start to the first 200 from /health (8B, warm page cache): %s s" %
                fmt((w5 or {}).get("startup_s")))
    rows += ["", "| W6: one 8192-token prompt | prefill tok/s | TFLOP/s | % of matrix ceiling |", "|---|---|---|---|"]
    if p6:
        rows.append("| pagoda | %s | %s | %s |" % (fmt(p6.get("prefill_tok_s"), ".0f"), fmt(p6.get("prefill_tflops"), ".0f"),
                                                   fmt(p6.get("pct_of_matrix_ceiling"), ".1f")))
    if hf and "w6" in hf and c and cost:
        w = hf["w6"]
        tflops = prefill_flops(cost, w["tokens"]) / (w["elapsed_ms"] / 1e3) / 1e12
        rows.append("| HF transformers forward | %.0f | %.0f | %.1f |" % (
            w["prefill_tok_s"], tflops, 100 * tflops / c["bf16_matmul_tflops"]))
    return rows + [""]


def main():
    work, base = sys.argv[1], sys.argv[2]
    meta = load(work, "meta.json") or {}
    cfg = load(work, "config.json")
    cost = model_cost(cfg) if cfg else None
    parts = {name[:-5]: load(work, name) for name in sorted(os.listdir(work)) if name.endswith(".json")}
    c, hf = parts.get("ceilings"), parts.get("hf")
    lines = ["# pagoda benchmark run: %s on %s" % (meta.get("date", "?"), (c or {}).get("gpu", meta.get("gpu", "?"))),
             "", "- commit: `%s`" % meta.get("commit", "unknown"),
             "- model: %s (random weights, bf16, %s params)" % (meta.get("model", "?"),
                                                               "{:,}".format(cost["num_params"]) if cost else "?"),
             "- script: `%s`, %s s in all" % (meta.get("script", "bench/run_device.sh"), meta.get("elapsed_s", "?")),
             "- pagoda: %s" % meta.get("pagoda_status", "?"), ""]
    if meta.get("reductions"):
        lines += ["Reductions against /work/shared/BENCHMARKS.md (to fit the 9-minute device call):", ""]
        lines += ["- " + r for r in meta["reductions"]] + [""]
    lines += section_ceilings(c, cost)
    lines += section_w1(parts.get("pagoda_w1"), hf, c, cost)
    lines += section_w2(parts.get("pagoda_w2_1024"), parts.get("pagoda_w2_128"), hf)
    lines += section_w3(parts.get("pagoda_w3"), parts.get("pagoda_w3_r1"), parts.get("gpu_util"),
                        parts.get("pagoda_w3_sat"))
    lines += section_w4(parts.get("pagoda_w4_on"), parts.get("pagoda_w4_off"), parts.get("w4_hits"))
    lines += section_w5_w6(parts.get("pagoda_w5"), parts.get("pagoda_w6"), hf, c, cost)
    if meta.get("steps"):
        lines += ["## Steps", ""] + ["- " + x for x in meta["steps"]] + [""]
    if meta.get("commands"):
        lines += ["## Command lines", "", "```"] + meta["commands"] + ["```", ""]
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines))
    for p in parts.values():  # drop the per-request arrays: the .md and aggregates are what is kept
        for run in ([p] if isinstance(p, dict) else []) + (p.get("sweep", []) if isinstance(p, dict) else []):
            for k in ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times", "errors"):
                run.pop(k, None)
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, **parts}, f, indent=2)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
