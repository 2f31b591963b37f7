#!/usr/bin/env python3
"""The tiny mixture-of-experts models of tools/make_moe_models.py against
Hugging Face transformers (run where torch and transformers >= 5 are, e.g.
the GPU machine; CPU works too).

For each model: transformers' float64 eager forward (full recompute per
step) on every golden case of tests/data/golden/<name>.json, compared with
the file's values, which come from the NumPy reference
(tools/moe_reference.py): greedy ids equal until a near-tie (top-2 margin <
1e-6), top-20 ids equal and logprobs within 1e-9 (both are float64 forwards
of the same weights, so this checks the reference's semantics: routing
order, renormalisation, shared-expert gate, sparse-step layers). Prints a
PASS/FAIL line per model. With --write, rewrites the golden files (and
their _gguf twins) from transformers, as tools/make_golden.py does for the
dense families (tolerance kept at 1e-4).

With --float32, transformers runs in float32 instead and the check is
pagoda's CPU tolerance (logprobs within 1e-4), which is what golden_tests
asks of pagoda.

Usage: python tools/hf_moe_golden.py [--device cuda] [--write] [--float32] [--only NAME ...]
For random bf16 MoE models through `pagoda generate` on the GPU, use
tools/hf_e2e.py --models mixtral,qwen2_moe,qwen3_moe.
"""
import argparse
import json
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_golden  # noqa: E402  (transformers helpers: greedy_case, load_reference, write_golden)
import make_moe_models  # noqa: E402

GOLDEN_DIR = make_golden.GOLDEN_DIR


def compare(ours, ref, tol):
    """Problems of `ref` (transformers) against the file's `ours`; [] if none."""
    problems = []
    for s, (a, b) in enumerate(zip(ours["top_logprobs"], ref["top_logprobs"])):
        margin = b[0][1] - b[1][1]
        if ours["greedy_ids"][s] != ref["greedy_ids"][s]:
            if margin >= tol:
                problems.append(f"step {s}: greedy {ours['greedy_ids'][s]} vs {ref['greedy_ids'][s]}")
            break  # the continuations differ from here on
        diff = max(abs(x[1] - y[1]) for x, y in zip(a, b))
        if diff > tol:
            problems.append(f"step {s}: top-20 logprobs differ by {diff:.3g}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    ok = True
    for name in make_moe_models.MODELS:
        if args.only and name not in args.only:
            continue
        path = make_moe_models.MODELS_DIR / name
        dtype = torch.float32 if args.float32 else torch.float64
        model = make_golden.AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype, attn_implementation="eager").to(args.device).eval()
        doc = json.loads((GOLDEN_DIR / f"{name}.json").read_text())
        tol = 1e-4 if args.float32 else 1e-9
        cases, problems = [], []
        for case in doc["cases"]:
            ref = make_golden.greedy_case(model, case["prompt_ids"], len(case["greedy_ids"]), args.device)
            cases.append(ref)
            problems += [f"prompt of {len(case['prompt_ids'])}: {p}" for p in compare(case, ref, tol)]
        ok = ok and not problems
        print(f"{name}: {'PASS' if not problems else 'FAIL'}" + "".join("\n  " + p for p in problems[:10]),
              flush=True)
        if args.write and not args.float32:
            tolerance = {"logprob": 1e-4, "margin": 1e-4}
            note = "tiny random-weight model made by tools/make_moe_models.py"
            make_golden.write_golden(name, doc["model"], cases, False, tolerance, note)
            gguf = GOLDEN_DIR / f"{name}_gguf.json"
            if gguf.exists():
                model_ref = json.loads(gguf.read_text())["model"]
                make_golden.write_golden(f"{name}_gguf", model_ref, cases, False, tolerance, note)
    print("hf_moe_golden:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
