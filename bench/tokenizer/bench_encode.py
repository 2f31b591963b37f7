#!/usr/bin/env python3
"""Encode throughput of pagoda's tokenizer beside Python `tokenizers` (the Rust
core of Hugging Face), single thread, no batching, in the same run.

Both encode the same few MB of mixed text (corpus strings, llama.cpp test
strings, seeded random multilingual strings, grouped into ~4 KB documents),
one `encode(doc)` call per document, best of `--rounds`. pagoda times itself
in-process (`pagoda tokenize --jsonl`, op "bench"); `tokenizers` runs with
RAYON_NUM_THREADS=1. Writes a Markdown report with the command line.

  .venv/bin/python bench/tokenizer/bench_encode.py --bin build/pagoda \\
      --out bench/results/$(date +%F)-tokenizer-cpu.md
"""
import argparse
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its pool
os.environ["TOKENIZERS_PARALLELISM"] = "false"

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "python" / "tokenizer"))
import tok_harness as h  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

NAMES = ["qwen3", "llama3_1", "deepseek_v3", "smollm2", "llama2", "mistral-v1"]


def build_documents(total_bytes, seed=1234):
    """~4 KB documents: 3 in 4 pieces from the corpus (natural text, code,
    multilingual, emoji), 1 in 4 seeded random strings."""
    rng = random.Random(seed)
    natural = h.corpus()
    random_pool = h.random_strings(4000, seed=seed)
    docs, size = [], 0
    while size < total_bytes:
        parts, n = [], 0
        while n < 4096:
            s = rng.choice(natural) if rng.random() < 0.75 else rng.choice(random_pool)
            parts.append(s)
            n += len(s.encode())
        doc = " ".join(parts)
        docs.append(doc)
        size += len(doc.encode())
    return docs


def time_hf(tok, docs, rounds):
    best, num_tokens = float("inf"), 0
    for _ in range(rounds):
        start = time.perf_counter()
        n = 0
        for d in docs:
            n += len(tok.encode(d).ids)
        best = min(best, time.perf_counter() - start)
        num_tokens = n
    return best, num_tokens


def time_pagoda(binary, folder, docs, rounds):
    req = json.dumps({"op": "bench", "texts": docs, "rounds": rounds}) + "\n"
    proc = subprocess.run([binary, "tokenize", str(folder), "--jsonl"], input=req.encode(),
                          capture_output=True, check=True)
    r = json.loads(proc.stdout)
    return r["seconds"], r["num_tokens"]


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(h.BIN), help="pagoda binary")
    ap.add_argument("--mb", type=float, default=3.0, help="MB of text to encode per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; the best is kept")
    ap.add_argument("--out", help="write the Markdown report here")
    ap.add_argument("--tokenizers", nargs="*", default=NAMES, help="folders under shared/models/tokenizers")
    args = ap.parse_args()

    import tokenizers
    docs = build_documents(int(args.mb * 1e6))
    total = sum(len(d.encode()) for d in docs)
    rows = []
    for name in args.tokenizers:
        folder = h.TOKENIZERS / name
        if not (folder / "tokenizer.json").exists():
            continue
        hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
        hf_s, hf_n = time_hf(hf, docs, args.rounds)
        pg_s, pg_n = time_pagoda(args.bin, folder, docs, args.rounds)
        rows.append((name, total / hf_s / 1e6, total / pg_s / 1e6, hf_s / pg_s, hf_n, pg_n))
        print(f"{name:12s} tokenizers {total / hf_s / 1e6:7.2f} MB/s   pagoda {total / pg_s / 1e6:7.2f} MB/s"
              f"   ratio {hf_s / pg_s:5.2f}x   tokens {hf_n} vs {pg_n}", flush=True)

    lines = [
        f"# Tokenizer encode throughput, CPU, single thread ({datetime.date.today()})",
        "",
        f"Command: `{' '.join([Path(sys.executable).name] + sys.argv)}`",
        "",
        f"- Machine: {cpu_name()}, {os.cpu_count()} logical CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end (both sides run in turn in the same run); Python "
        f"`tokenizers` {tokenizers.__version__} with RAYON_NUM_THREADS=1",
        f"- Input: {len(docs)} documents of ~4 KB, {total / 1e6:.2f} MB of mixed text (3/4 corpus and "
        "llama.cpp test strings, 1/4 seeded random multilingual strings); one encode() per document, "
        f"special tokens added, best of {args.rounds} rounds",
        "- pagoda times itself in-process (`pagoda tokenize MODEL --jsonl`, op `bench`); token counts "
        "differ only where the configured BOS differs (DeepSeek-V3: tokenizer_config.json add_bos_token)",
        "",
        "| tokenizer | tokenizers MB/s | pagoda MB/s | pagoda / tokenizers | tokens (tokenizers) | tokens (pagoda) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, hf_mb, pg_mb, ratio, hf_n, pg_n in rows:
        lines.append(f"| {name} | {hf_mb:.2f} | {pg_mb:.2f} | {ratio:.2f}x | {hf_n} | {pg_n} |")
    report = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(report)
    print(report)


if __name__ == "__main__":
    main()
