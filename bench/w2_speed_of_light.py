#!/usr/bin/env python3
"""Speed of light of W2 (offline throughput) for a Llama config, bf16 or FP8.

    python3 bench/w2_speed_of_light.py CONFIG_JSON --gbps 4251 --tflops 808 \
        --requests 200 --input-len 1024 --output-len 1024 --batch 200 \
        [--weights fp8 --tflops FP8_CEILING --attn-tflops BF16_CEILING] [--kv-cache-dtype fp8]

Bytes per element follow pagoda's FP8 layout: `--weights fp8` makes the layer
weights one byte (per-channel scales ignored) while the embedding and lm_head
stay bf16; `--kv-cache-dtype fp8` makes the KV one byte. `--tflops` is the
matrix ceiling of the weights' precision (the linear layers' prefill FLOPs);
prefill attention runs in bf16 at `--attn-tflops` (default: --tflops).

The run is bounded below by (a) its prefill at the matrix ceiling: every
prompt token's matmul FLOPs (2 x the layer weights, no lm_head) plus causal
attention (4 * L^2/2 * Hq * D per layer), and (b) its decode at the memory
ceiling: per output token, the decode weights (layers + lm_head) shared by
the batch plus the KV of the mean context (input + output / 2). Output
tokens / (a + b) is the ceiling the measured output tok/s is divided by.
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--gbps", type=float, required=True, help="memory ceiling, GB/s")
    ap.add_argument("--tflops", type=float, required=True,
                    help="matrix ceiling of the weights' precision (bf16, or e4m3 with --weights fp8), TFLOP/s")
    ap.add_argument("--attn-tflops", type=float, help="bf16 matrix ceiling for prefill attention (default: --tflops)")
    ap.add_argument("--weights", choices=["bf16", "fp8"], default="bf16", help="layer weights' precision")
    ap.add_argument("--kv-cache-dtype", choices=["bf16", "fp8"], default="bf16")
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--input-len", type=int, required=True)
    ap.add_argument("--output-len", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True, help="sequences decoding together")
    a = ap.parse_args()
    c = json.load(open(a.config))
    h, inter, layers, vocab = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    hq = c["num_attention_heads"]
    hkv = c.get("num_key_value_heads", hq)
    d = c.get("head_dim", h // hq)
    layer_params = h * (hq * d + 2 * hkv * d) + hq * d * h + 3 * h * inter
    weight_bytes = 1 if a.weights == "fp8" else 2
    decode_bytes = weight_bytes * layers * layer_params + 2 * vocab * h
    kv_bytes_per_token = layers * 2 * hkv * d * (1 if a.kv_cache_dtype == "fp8" else 2)
    prefill_flop_per_token = 2 * layers * layer_params
    attn_flop_per_request = layers * 4 * (a.input_len ** 2 / 2) * hq * d
    attn_tflops = a.attn_tflops or a.tflops
    prefill_s = a.requests * (a.input_len * prefill_flop_per_token / (a.tflops * 1e12)
                              + attn_flop_per_request / (attn_tflops * 1e12))
    mean_ctx = a.input_len + a.output_len / 2
    bytes_per_token = decode_bytes / a.batch + mean_ctx * kv_bytes_per_token
    decode_s = a.requests * a.output_len * bytes_per_token / (a.gbps * 1e9)
    tok = a.requests * a.output_len
    print(json.dumps({"prefill_s": round(prefill_s, 3), "decode_s": round(decode_s, 3),
                      "speed_of_light_out_tok_s": round(tok / (prefill_s + decode_s))}))


if __name__ == "__main__":
    main()
