#!/usr/bin/env python3
"""Measure the GPU's ceilings with torch (/work/shared/BENCHMARKS.md):
memory bandwidth as a large device-to-device copy (bytes read + written over
time) and the bf16 matrix rate as an 8192^3 product on random data. Each is the
median of timed repetitions (CUDA events) after warm-ups.

Usage: python3 bench/torch_ceilings.py --json OUT.json
"""

import argparse
import json
import statistics

import torch


def time_ms(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth(gib):
    n = int(gib * (1 << 30))
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), warmup=3, reps=20)
    return 2 * n / (ms / 1e3)


def matmul_rate(n):
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    ms = time_ms(lambda: torch.matmul(a, b), warmup=3, reps=10)
    return 2 * n ** 3 / (ms / 1e3)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", required=True, help="output file")
    p.add_argument("--copy-gib", type=float, default=4.0, help="bytes copied per repetition, GiB")
    p.add_argument("--matmul-n", type=int, default=8192)
    args = p.parse_args()
    props = torch.cuda.get_device_properties(0)
    out = {"gpu": props.name, "num_sms": props.multi_processor_count, "memory_gib": props.total_memory / (1 << 30),
           "torch": torch.__version__,
           "d2d_copy_gbps": copy_bandwidth(args.copy_gib) / 1e9,
           "bf16_matmul_tflops": matmul_rate(args.matmul_n) / 1e12,
           "method": "median of 20 D2D copies of %.1f GiB (read + written); median of 10 bf16 %d^3 matmuls"
                     % (args.copy_gib, args.matmul_n)}
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)
    print("ceilings: %s: copy %.0f GB/s, bf16 matmul %.0f TFLOP/s"
          % (out["gpu"], out["d2d_copy_gbps"], out["bf16_matmul_tflops"]), flush=True)


if __name__ == "__main__":
    main()
