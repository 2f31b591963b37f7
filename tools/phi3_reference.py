#!/usr/bin/env python3
"""Phi-3 against Hugging Face transformers, for a machine with torch (the GPU machine).

tools/make_tiny_phi3.py's tiny models (tiny_phi3, and tiny_phi4_mini: partial_rotary_factor
0.75, rotary over 24 of 32 dims, tied embeddings): transformers (float64, eager attention, one
forward without a cache) must give the logits of tests/python/models/phi3_numpy.py, the NumPy
forward whose goldens (tests/data/golden/tiny_phi3*.json, tiny_phi4_mini*.json) the CPU engine
is tested against. This closes the loop: pagoda == NumPy (golden_tests, test_phi3_numpy.py)
and NumPy == transformers (here). Two prompts: 12 tokens (within the original context of 16:
short factors) and 41 tokens (beyond it: long factors; beyond tiny_phi3's window of 24 too).

Usage: python tools/phi3_reference.py [--device cuda]
Needs torch, transformers, numpy, safetensors.
"""
import argparse
import json
import pathlib
import sys

import numpy as np
import torch
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python" / "models"))
import phi3_numpy  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    for name in ("tiny_phi3", "tiny_phi4_mini"):
        check(name, args.device)


def check(name, device):
    folder = ROOT / "tests" / "data" / "models" / name
    config = json.loads((folder / "config.json").read_text())
    weights = load_file(str(folder / "model.safetensors"))
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64,
                                                 attn_implementation="eager").to(device).eval()
    rng = np.random.default_rng(7)
    for n in (11, 40):
        ids = [2] + rng.integers(3, 512, size=n).tolist()
        with torch.no_grad():
            hf = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0]
        ref = phi3_numpy.forward(config, weights, ids)  # transformers' factor rule by default
        err = float(np.abs(hf.double().cpu().numpy() - ref).max())
        print(f"{name}, {len(ids)} tokens: max |transformers - numpy| logit = {err:.3e}")
        # transformers computes the rope tables (inv_freq, cos, sin and the longrope scale) in
        # float32 whatever the model dtype, so float64 forwards agree to ~1e-5, not 1e-12 (the
        # H100 run of 2026-11-27: 5.3e-06 on tiny_phi3's 12-token prompt).
        if err > 1e-4:
            sys.exit(f"{name}: the NumPy reference disagrees with transformers")


if __name__ == "__main__":
    main()
