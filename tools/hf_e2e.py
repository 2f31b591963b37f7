#!/usr/bin/env python3
"""End-to-end check of pagoda against Hugging Face transformers (GPU machine).

For every model: create it with transformers (random bf16 weights) or take a
folder, compute the reference greedy continuations of a fixed set of
token-id prompts with transformers in float32 (on the bf16 weights pagoda
runs, upcast, so the reference is exact for that model), run `pagoda
generate` on them (temperature 0, 32 tokens, "logprobs": 5, ignore_eos), and
compare:

  tokens    pagoda's continuation equals the reference until the first step
            where they differ, and there the reference's top-2 margin must be
            below the margin tolerance (a near-tie that bf16 may flip). Every
            pagoda token must also be a near-argmax of the float32 model fed
            pagoda's own prefix (margin to the max below the tolerance).
  logprobs  every reported logprob (chosen token and top-5) within the
            logprob tolerance of the float32 model's, on pagoda's prefix.
  top-5     pagoda's top-5 ids are the float32 top-5 up to near-ties.

Tolerances: logprob tol = max(--logprob-tol (0.05), 2 x the deviation of
transformers' own bf16 inference from the float32 reference, measured on the
same prompts); margin tol = 2 x logprob tol (a flipped choice needs an error
of at least half the margin in each of two logprobs). A PASS/FAIL table is
printed; per-prompt details go to --details (JSON).

Models: llama (GQA 12/4, D 64, llama3 rope scaling), mistral (8/2, D 128),
qwen2 (14/2, D 64, random q/k/v biases, tied embeddings), qwen3 (16/8, D 128,
q/k norms, tied), phi3 (8/4, D 128, pre-fused qkv / gate_up, longrope short
factors with its attention factor, window 64 on every layer), phi4_mini (Phi-4-mini's
24/8, D 128 with partial_rotary_factor 0.75: rotary over 96 dims, longrope with 48
factors, tied 200064-token vocabulary, 4 layers), gemma2 (8/4, D 128,
query_pre_attn_scalar 96, soft-capping, window 64 on even layers), gemma3 (8/2,
D 256, q/k norms, five sliding layers of window 64 to one global with linear rope
scaling), mixtral / qwen2_moe / qwen3_moe (mixtures of
experts, see SPECS), llama8b (the Llama-3.1-8B shape), NAME=FOLDER for an
existing Hugging Face folder (e.g. stories260K), or NAME=FILE.gguf for a GGUF
file (e.g. SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M): transformers loads
it itself (gguf-py dequantizes it to float32, which is exactly the weights
pagoda's quantized kernels multiply by) and pagoda runs the file as users do. Random weights: transformers'
init (std 0.02), then condition_weights(): embeddings std 1, o_proj/down_proj
scaled by 1/sqrt(2 layers), so bf16 inference tracks float32; the small
models also get random norm weights (1 + 0.2 N) and biases (0.5 N) so that
every tensor matters.

Usage (on the GPU machine):
  python3 tools/hf_e2e.py --pagoda BUILD/pagoda --models llama,qwen3,stories=.devcarry/stories260K \\
      --work /tmp/e2e --details $OUT/e2e_details.json [--serve llama] [--eager-too llama]
--device cpu runs both sides on the CPU (a dry run of this script).
"""

import argparse
import gc
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BYTELEVEL_TOKENIZER = os.path.join(REPO, "tests", "data", "tokenizer", "bytelevel", "tokenizer.json")
NUM_STEPS = 32
NUM_TOP = 5
MAX_MODEL_LEN = 2048  # pagoda's --max-model-len (capped to the model's positions)

LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}

# Random models: transformers config class and shape. perturb: random norms and biases.
SPECS = {
    "llama": dict(config="LlamaConfig", perturb=True, hidden_size=768, num_hidden_layers=4,
                  num_attention_heads=12, num_key_value_heads=4, head_dim=64, intermediate_size=2048,
                  vocab_size=32000, rope_theta=500000.0, rope_scaling=LLAMA3_ROPE,
                  max_position_embeddings=131072, tie_word_embeddings=False),
    "mistral": dict(config="MistralConfig", perturb=True, hidden_size=1024, num_hidden_layers=4,
                    num_attention_heads=8, num_key_value_heads=2, head_dim=128, intermediate_size=2816,
                    vocab_size=32768, rope_theta=1000000.0, max_position_embeddings=32768,
                    sliding_window=None, tie_word_embeddings=False),
    "qwen2": dict(config="Qwen2Config", perturb=True, hidden_size=896, num_hidden_layers=4,
                  num_attention_heads=14, num_key_value_heads=2, intermediate_size=2432,
                  vocab_size=151936, rope_theta=1000000.0, max_position_embeddings=32768,
                  tie_word_embeddings=True),
    "qwen3": dict(config="Qwen3Config", perturb=True, hidden_size=1024, num_hidden_layers=4,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, intermediate_size=3072,
                  vocab_size=151936, rope_theta=1000000.0, max_position_embeddings=40960,
                  tie_word_embeddings=True),
    "gemma2": dict(config="Gemma2Config", perturb=True, hidden_size=1024, num_hidden_layers=4,
                   num_attention_heads=8, num_key_value_heads=4, head_dim=128, intermediate_size=2816,
                   vocab_size=32000, rope_theta=10000.0, max_position_embeddings=8192,
                   query_pre_attn_scalar=96, sliding_window=64, attn_logit_softcapping=50.0,
                   final_logit_softcapping=30.0, tie_word_embeddings=True),
    "gemma3": dict(config="Gemma3TextConfig", perturb=True, hidden_size=1024, num_hidden_layers=6,
                   num_attention_heads=8, num_key_value_heads=2, head_dim=256, intermediate_size=2816,
                   vocab_size=32000, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                   rope_scaling={"rope_type": "linear", "factor": 8.0}, max_position_embeddings=32768,
                   query_pre_attn_scalar=256, sliding_window=64, tie_word_embeddings=True),
    # Phi-3.5-mini's rope: longrope with 131072 positions over an original
    # 4096 (attention factor sqrt(1 + ln 32 / ln 4096)); pagoda's max_model_len
    # (2048) and every sequence stay within 4096, so both sides run the short
    # factors (docs/models.md); window 64 on every layer, pre-fused tensors.
    "phi3": dict(config="Phi3Config", perturb=True, hidden_size=1024, num_hidden_layers=4,
                 num_attention_heads=8, num_key_value_heads=4, intermediate_size=2816,
                 vocab_size=32064, rope_theta=10000.0, max_position_embeddings=131072,
                 original_max_position_embeddings=4096, sliding_window=64,
                 rope_scaling={"type": "longrope",
                               "short_factor": [1.0 + 0.03 * i for i in range(64)],
                               "long_factor": [1.0 + 1.0 * i for i in range(64)]},
                 tie_word_embeddings=False),
    # Phi-4-mini-instruct's shape in 4 layers: rope over the first 96 of 128
    # dims of each head (partial_rotary_factor 0.75), longrope with 48 factors
    # (short ones within max_model_len 2048 < 4096), tied embeddings over a
    # 200064-token vocabulary, no sliding window within the context.
    "phi4_mini": dict(config="Phi3Config", perturb=True, hidden_size=3072, num_hidden_layers=4,
                      num_attention_heads=24, num_key_value_heads=8, intermediate_size=8192,
                      vocab_size=200064, rope_theta=10000.0, partial_rotary_factor=0.75,
                      max_position_embeddings=131072, original_max_position_embeddings=4096,
                      sliding_window=262144,
                      rope_scaling={"type": "longrope",
                                    "short_factor": [1.0 + 0.05 * i for i in range(48)],
                                    "long_factor": [1.0 + 1.5 * i for i in range(48)]},
                      tie_word_embeddings=True),
    # Mixtures of experts: top-2 of 8 renormalised; Qwen2-MoE's shared expert
    # (top-4 of 16, not renormalised); Qwen3-MoE's top-8 of 32 with q/k norms.
    "mixtral": dict(config="MixtralConfig", perturb=True, hidden_size=1024, num_hidden_layers=4,
                    num_attention_heads=8, num_key_value_heads=2, head_dim=128, intermediate_size=1408,
                    num_local_experts=8, num_experts_per_tok=2, vocab_size=32000,
                    rope_theta=1000000.0, max_position_embeddings=32768, sliding_window=None,
                    tie_word_embeddings=False),
    "qwen2_moe": dict(config="Qwen2MoeConfig", perturb=True, hidden_size=1024, num_hidden_layers=4,
                      num_attention_heads=16, num_key_value_heads=16, intermediate_size=2816,
                      moe_intermediate_size=352, shared_expert_intermediate_size=1408,
                      num_experts=16, num_experts_per_tok=4, norm_topk_prob=False,
                      vocab_size=151936, rope_theta=1000000.0, max_position_embeddings=8192,
                      tie_word_embeddings=False),
    "qwen3_moe": dict(config="Qwen3MoeConfig", perturb=True, hidden_size=1024, num_hidden_layers=4,
                      num_attention_heads=16, num_key_value_heads=4, head_dim=128, intermediate_size=3072,
                      moe_intermediate_size=384, num_experts=32, num_experts_per_tok=8,
                      norm_topk_prob=True, vocab_size=151936, rope_theta=1000000.0,
                      max_position_embeddings=40960, tie_word_embeddings=False),
    "llama8b": dict(config="LlamaConfig", perturb=False, hidden_size=4096, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=14336,
                    vocab_size=128256, rope_theta=500000.0, rope_scaling=LLAMA3_ROPE,
                    max_position_embeddings=131072, tie_word_embeddings=False),
}


def log(msg):
    print("[hf_e2e %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pagoda", required=True, help="the pagoda binary")
    p.add_argument("--models", required=True,
                   help="comma-separated: %s, NAME=FOLDER for a Hugging Face folder, or NAME=FILE.gguf"
                        % ", ".join(SPECS))
    p.add_argument("--work", required=True, help="scratch folder for models, prompts and outputs")
    p.add_argument("--details", help="write per-model, per-prompt results here (JSON)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="where both sides run")
    p.add_argument("--layers", type=int, help="override num_hidden_layers of llama8b (time-bound runs)")
    p.add_argument("--logprob-tol", type=float, default=0.05, help="floor of the logprob tolerance (nats)")
    p.add_argument("--eager-too", default="", help="comma-separated models also run with --enforce-eager")
    p.add_argument("--serve", default="", help="model to start `pagoda serve` with for one request")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.85,
                   help="passed to pagoda (the reference model stays resident meanwhile)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


# ---- models -----------------------------------------------------------------

def create_model(name, out, args, torch, transformers):
    """Random model `name` built on the device in bf16, saved to `out`; returns it."""
    spec = dict(SPECS[name])
    cls = getattr(transformers, spec.pop("config"))
    perturb = spec.pop("perturb")
    if name == "llama8b" and args.layers:
        spec["num_hidden_layers"] = args.layers
    arch = {"LlamaConfig": "LlamaForCausalLM", "MistralConfig": "MistralForCausalLM",
            "Qwen2Config": "Qwen2ForCausalLM", "Qwen3Config": "Qwen3ForCausalLM",
            "Phi3Config": "Phi3ForCausalLM",
            "Gemma2Config": "Gemma2ForCausalLM", "Gemma3TextConfig": "Gemma3ForCausalLM",
            "MixtralConfig": "MixtralForCausalLM", "Qwen2MoeConfig": "Qwen2MoeForCausalLM",
            "Qwen3MoeConfig": "Qwen3MoeForCausalLM"}[cls.__name__]
    config = cls(architectures=[arch], initializer_range=0.02, bos_token_id=1, eos_token_id=2, **spec)
    torch.manual_seed(args.seed)
    with torch.device(args.device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    condition_weights(model, perturb, args, torch)
    model.eval()
    if os.path.isdir(out):
        shutil.rmtree(out)
    t0 = time.time()
    model.save_pretrained(out, max_shard_size="5GB")
    shutil.copyfile(BYTELEVEL_TOKENIZER, os.path.join(out, "tokenizer.json"))
    n = sum(p.numel() for p in model.parameters())
    log("%s: %.3fB params, saved in %.1fs -> %s" % (name, n / 1e9, time.time() - t0, out))
    return model


def condition_weights(model, perturb, args, torch):
    """Keeps the random model numerically well-conditioned, so that bf16
    inference tracks float32: embeddings std 1 (with transformers' std 0.02
    the residual stream starts tiny and long prompts amplify bf16 rounding:
    transformers' own bf16 run of the 8B shape was 7.4 nats off float32 on a
    1200-token prompt), residual-writing projections (o_proj, down_proj)
    scaled by 1/sqrt(2 layers) (GPT-2's init), and with tied embeddings the
    final norm scaled by 0.02 so logits keep the untied scale. perturb:
    random norm weights (1 + 0.2 N) and biases (0.5 N). Gemma's norms multiply
    by (1 + w): their stored w get the same factors minus 1."""
    layers = model.config.num_hidden_layers
    offset = 1.0 if model.config.model_type.startswith("gemma") else 0.0
    gen = torch.Generator(device=args.device).manual_seed(args.seed + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("embed_tokens.weight"):
                p.normal_(0.0, 1.0, generator=gen)
            elif pname.endswith(("o_proj.weight", "down_proj.weight")):
                p.mul_(1.0 / math.sqrt(2 * layers))
            elif perturb and pname.endswith(("norm.weight", ".bias")):
                noise = torch.randn(p.shape, generator=gen, device=args.device, dtype=torch.float32)
                p.copy_(1.0 - offset + 0.2 * noise if pname.endswith("norm.weight") else 0.5 * noise)
        if model.config.tie_word_embeddings:
            w = model.model.norm.weight
            w.copy_((w + offset) * 0.02 - offset)


def make_prompts(vocab, max_pos, seed):
    """Token-id prompts: lengths 1, 5, 23, 130, one that shares the 130-token
    prompt's first 128 tokens, and a long one (rope scaling, split-KV)."""
    import random
    rng = random.Random(seed)
    draw = lambda n: [rng.randrange(3, vocab) for _ in range(n)]
    long_len = max(8, min(1200, max_pos - NUM_STEPS - 8))
    p130 = draw(130)
    return [draw(1), draw(5), draw(23), p130, p130[:128] + draw(20), draw(long_len)]


# ---- reference --------------------------------------------------------------

def greedy_reference(model, prompts, torch):
    """float32 greedy continuations: tokens, logprobs, top-5 and top-2 margins."""
    dev = next(model.parameters()).device
    refs = []
    with torch.no_grad():
        for ids in prompts:
            out = model(input_ids=torch.tensor([ids], device=dev), use_cache=True, logits_to_keep=1)
            r = {"tokens": [], "logprobs": [], "margins": [], "top_ids": [], "top_logprobs": []}
            for _ in range(NUM_STEPS):
                lp = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
                top = torch.topk(lp, NUM_TOP)
                tok = int(top.indices[0])
                r["tokens"].append(tok)
                r["logprobs"].append(float(top.values[0]))
                r["margins"].append(float(top.values[0] - top.values[1]))
                r["top_ids"].append([int(i) for i in top.indices])
                r["top_logprobs"].append([float(v) for v in top.values])
                out = model(input_ids=torch.tensor([[tok]], device=dev), past_key_values=out.past_key_values,
                            use_cache=True, logits_to_keep=1)
            refs.append(r)
    return refs


def teacher_forced_logprobs(model, prompt, continuation, torch):
    """log_softmax rows [NUM_STEPS, V] (float32) predicting each continuation token."""
    dev = next(model.parameters()).device
    ids = prompt + continuation[:-1]
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], device=dev), logits_to_keep=len(continuation))
        return torch.log_softmax(out.logits[0].float(), dim=-1)


def bf16_deviation(model, prompts, refs, torch):
    """max |logprob| error of transformers' own bf16 inference on the reference
    sequences, over the float32 top-5 of every step. Converts `model` to bf16
    and back in place when its weights are bf16 values (exact both ways),
    else measures on a bf16 copy."""
    exact = all(torch.equal(p, p.to(torch.bfloat16).to(p.dtype)) for p in model.parameters())
    if exact:
        bf16 = model.to(torch.bfloat16)
    else:
        import copy
        bf16 = copy.deepcopy(model).to(torch.bfloat16)
    worst = 0.0
    try:
        for ids, r in zip(prompts, refs):
            lp = teacher_forced_logprobs(bf16, ids, r["tokens"], torch)
            for j in range(NUM_STEPS):
                for tid, want in zip(r["top_ids"][j], r["top_logprobs"][j]):
                    worst = max(worst, abs(float(lp[j, tid]) - want))
    finally:
        if exact:
            model.to(torch.float32)
    return worst


# ---- pagoda -----------------------------------------------------------------

def run_pagoda(args, model_dir, prompts, out_path, eager, max_len):
    """pagoda generate over the prompts; returns (rc, seconds, stderr)."""
    inp = out_path + ".in.jsonl"
    with open(inp, "w") as f:
        for ids in prompts:
            f.write(json.dumps({"prompt": ids, "max_tokens": NUM_STEPS, "temperature": 0, "logprobs": NUM_TOP,
                                "ignore_eos": True}) + "\n")
    cmd = [args.pagoda, "generate", model_dir, "--device", args.device, "--input", inp, "--output", out_path,
           "--max-model-len", str(max_len), "--gpu-memory-utilization", str(args.gpu_memory_utilization)]
    if eager:
        cmd.append("--enforce-eager")
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return proc.returncode, time.time() - t0, proc.stderr


def parse_logprobs(entry):
    """One pagoda logprob entry -> (token_id, logprob, [(id, logprob)] top)."""
    tid = entry.get("token_id", entry.get("id"))
    top = entry.get("top_logprobs", entry.get("top", []))
    if isinstance(top, dict):
        top = [(int(k), float(v)) for k, v in top.items()]
    else:
        top = [(int(t.get("token_id", t.get("id"))), float(t["logprob"])) for t in top]
    return int(tid), float(entry["logprob"]), top


def read_pagoda_output(path):
    """[(token_ids, [(id, logprob, top)] or None)] per prompt, in input order."""
    rows = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            item = json.loads(line)
            lps = item.get("logprobs")
            parsed = None
            if isinstance(lps, dict) and "content" in lps:
                lps = lps["content"]
            if isinstance(lps, list):
                parsed = [parse_logprobs(e) for e in lps]
            rows.append((item.get("token_ids", []), parsed, item.get("error")))
    return rows


# ---- comparison -------------------------------------------------------------

def compare_prompt(model, ids, ref, got_tokens, got_lps, tol_lp, torch):
    """Checks of one prompt; returns a dict with 'ok' and the measured numbers."""
    tol_margin = 2 * tol_lp
    d = {"prompt_len": len(ids), "ok": True, "problems": []}
    if len(got_tokens) != NUM_STEPS:
        d["ok"] = False
        d["problems"].append("pagoda returned %d tokens" % len(got_tokens))
        return d
    same = next((j for j in range(NUM_STEPS) if got_tokens[j] != ref["tokens"][j]), NUM_STEPS)
    d["identical_prefix"] = same
    if same < NUM_STEPS:
        d["divergence_margin"] = ref["margins"][same]
        if ref["margins"][same] >= tol_margin:
            d["problems"].append("step %d: token %d != reference %d with reference margin %.4f"
                                 % (same, got_tokens[same], ref["tokens"][same], ref["margins"][same]))
    lp = teacher_forced_logprobs(model, ids, got_tokens, torch)
    worst_lp = worst_choice = worst_top = 0.0
    for j in range(NUM_STEPS):
        row = lp[j]
        best = float(row.max())
        worst_choice = max(worst_choice, best - float(row[got_tokens[j]]))
        if got_lps is None:
            continue
        tid, val, top = got_lps[j]
        worst_lp = max(worst_lp, abs(val - float(row[tid])))
        want_top = torch.topk(row, NUM_TOP).values
        for k, (t, v) in enumerate(top[:NUM_TOP]):
            worst_lp = max(worst_lp, abs(v - float(row[t])))
            worst_top = max(worst_top, float(want_top[k]) - float(row[t]))
    d.update(max_choice_gap=worst_choice, max_logprob_err=worst_lp, max_top5_gap=worst_top)
    if worst_choice > tol_margin:
        d["problems"].append("a pagoda token is %.4f below the float32 max" % worst_choice)
    if got_lps is None:
        d["problems"].append("pagoda's output has no logprobs")
    elif len(got_lps) != NUM_STEPS:
        d["problems"].append("pagoda returned %d logprob entries" % len(got_lps))
    else:
        if worst_lp > tol_lp:
            d["problems"].append("logprob error %.4f > %.4f" % (worst_lp, tol_lp))
        if worst_top > tol_margin:
            d["problems"].append("top-5 id off by %.4f" % worst_top)
    d["ok"] = not d["problems"]
    return d


def check_model(name, model, model_dir, args, torch, eager_too):
    """Reference, pagoda run(s) and comparison of one model; returns result dicts."""
    cfg = model.config
    prompts = make_prompts(cfg.vocab_size, cfg.max_position_embeddings, args.seed)
    model.to(torch.float32)
    t0 = time.time()
    refs = greedy_reference(model, prompts, torch)
    hf_dev = bf16_deviation(model, prompts, refs, torch)
    tol_lp = max(args.logprob_tol, 2 * hf_dev)
    log("%s: float32 reference in %.1fs; transformers bf16 deviation %.4f -> logprob tol %.4f, margin tol %.4f"
        % (name, time.time() - t0, hf_dev, tol_lp, 2 * tol_lp))
    if args.device == "cuda":
        torch.cuda.empty_cache()  # pagoda sizes its KV pool from the free memory
    results = []
    for eager in ([False, True] if eager_too else [False]):
        label = name + (" (eager)" if eager else "")
        out_path = os.path.join(args.work, label.replace(" ", "_").replace("(", "").replace(")", "") + ".jsonl")
        rc, secs, err = run_pagoda(args, model_dir, prompts, out_path, eager,
                                   min(MAX_MODEL_LEN, cfg.max_position_embeddings))
        res = {"model": label, "hf_bf16_dev": hf_dev, "logprob_tol": tol_lp, "margin_tol": 2 * tol_lp,
               "pagoda_seconds": secs, "prompts": [], "ok": rc == 0, "problems": []}
        graphs = [l for l in err.splitlines() if "decode graphs:" in l]
        res["graph_log"] = graphs[-1].split("] ", 1)[-1] if graphs else None
        if rc != 0:
            res["problems"].append("pagoda exited %d: %s" % (rc, err.strip()[-2000:]))
        elif args.device == "cuda" and not eager and not graphs:
            res["problems"].append("no 'decode graphs:' line in pagoda's log")
        logged_errors = [l for l in err.splitlines() if " ERROR]" in l]
        if logged_errors:
            res["problems"].append("pagoda logged errors: " + " | ".join(logged_errors[:3]))
        if rc == 0:
            rows = read_pagoda_output(out_path)
            if len(rows) != len(prompts):
                res["problems"].append("pagoda wrote %d lines for %d prompts" % (len(rows), len(prompts)))
            for ids, ref, (toks, lps, error) in zip(prompts, refs, rows):
                d = compare_prompt(model, ids, ref, toks, lps, tol_lp, torch)
                if error:
                    d["problems"].append("pagoda error: " + error)
                    d["ok"] = False
                res["prompts"].append(d)
        res["ok"] = not res["problems"] and all(d["ok"] for d in res["prompts"])
        res["stderr_tail"] = err[-3000:]
        results.append(res)
    return results


# ---- serve ------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read().decode())


def completion_request(base, prompt):
    """One greedy completion, through the openai SDK when it is installed."""
    body = {"model": "e2e", "prompt": prompt, "max_tokens": 8, "temperature": 0, "logprobs": 2,
            "ignore_eos": True}
    try:
        import openai
    except ImportError:
        status, resp = http_json(base + "/v1/completions", body)
        return "urllib", status, resp
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused")
    r = client.completions.create(model="e2e", prompt=prompt, max_tokens=8, temperature=0, logprobs=2,
                                  extra_body={"ignore_eos": True})
    return "openai SDK", 200, r.model_dump()


def check_serve(args, model_dir, max_len, prompt="The quick brown fox jumps over the lazy dog"):
    """Starts `pagoda serve`, waits for /health, makes one greedy completions
    request (8 tokens, logprobs) and stops it."""
    port = free_port()
    cmd = [args.pagoda, "serve", model_dir, "--device", args.device, "--host", "127.0.0.1", "--port", str(port),
           "--served-model-name", "e2e", "--gpu-memory-utilization", str(args.gpu_memory_utilization),
           "--max-model-len", str(max_len)]
    log_path = os.path.join(args.work, "serve.log")
    res = {"model": "serve", "ok": False, "problems": [], "prompts": []}
    with open(log_path, "w") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
        try:
            base = "http://127.0.0.1:%d" % port
            deadline = time.time() + 180
            while time.time() < deadline and proc.poll() is None:
                try:
                    if http_json(base + "/health", timeout=2)[0] == 200:
                        break
                except OSError:
                    time.sleep(0.5)
            if proc.poll() is not None:
                res["problems"].append("pagoda serve exited %s" % proc.returncode)
                return finish_serve(res, log_path)
            via, status, resp = completion_request(base, prompt)
            res["via"] = via
            choice = (resp.get("choices") or [{}])[0]
            used = (resp.get("usage") or {}).get("completion_tokens")
            res["response"] = {"status": status, "completion_tokens": used, "text": choice.get("text"),
                               "finish_reason": choice.get("finish_reason")}
            if status != 200 or used != 8 or not isinstance(choice.get("text"), str) or not choice.get("logprobs"):
                res["problems"].append("unexpected response: %s" % json.dumps(resp)[:1000])
        except Exception as e:  # report, never hang the hook
            res["problems"].append("%s: %s" % (type(e).__name__, e))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return finish_serve(res, log_path)


def finish_serve(res, log_path):
    with open(log_path) as f:
        res["stderr_tail"] = f.read()[-3000:]
    res["ok"] = not res["problems"]
    return res


# ---- report -----------------------------------------------------------------

def print_table(results):
    print("\n%-18s %-6s %-24s %-9s %-9s %-9s %s" % ("model", "result", "identical prefix", "lp err",
                                                   "lp tol", "hf bf16", "notes"))
    for r in results:
        prefixes = ",".join("%d%s" % (d.get("identical_prefix", -1), "" if d.get("identical_prefix") in
                                      (NUM_STEPS, None) else "*") for d in r["prompts"])
        err = max([d.get("max_logprob_err", 0.0) for d in r["prompts"]] or [float("nan")])
        notes = "; ".join(r["problems"] + [p for d in r["prompts"] for p in d["problems"]])[:300]
        if r.get("graph_log") and not notes:
            notes = r["graph_log"]
        if r.get("via") and not notes:
            notes = "completion via %s: %s" % (r["via"], json.dumps(r["response"])[:200])
        print("%-18s %-6s %-24s %-9.4f %-9.4f %-9.4f %s" % (
            r["model"], "PASS" if r["ok"] else "FAIL", prefixes or "-", err, r.get("logprob_tol", float("nan")),
            r.get("hf_bf16_dev", float("nan")), notes))
    print("(identical prefix: tokens equal to the float32 reference per prompt; * = first difference, "
          "at a reference top-2 margin below the margin tol)")


def load_folder(path, args, torch, transformers):
    """A Hugging Face folder in float32; on cuda its weights rounded to bf16
    first (what pagoda's CUDA backend runs), so the reference is exact for
    that model and only activation rounding is compared. A .gguf file is
    loaded by transformers' GGUF support and kept in float32: its dequantized
    weights are the ones pagoda's block kernels use (f32 math on the blocks)."""
    if path.endswith(".gguf"):
        folder, name = os.path.split(os.path.abspath(path))
        return transformers.AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, dtype=torch.float32).to(args.device).eval()
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(args.device).eval()
    if args.device == "cuda":
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


def main(argv=None):
    args = parse_args(argv)
    import torch
    import transformers
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.work, exist_ok=True)
    eager_too = set(filter(None, args.eager_too.split(",")))
    results, serve_target = [], None
    for item in filter(None, args.models.split(",")):
        name, _, folder = item.partition("=")
        t0 = time.time()
        try:
            if folder:
                model, model_dir = load_folder(folder, args, torch, transformers), folder
            else:
                model_dir = os.path.join(args.work, name)
                model = create_model(name, model_dir, args, torch, transformers)
            done = check_model(name, model, model_dir, args, torch, name in eager_too)
            print_table(done)  # as it goes: a later model may run past the caller's time limit
            results += done
            if name == args.serve:
                serve_target = (model_dir, min(MAX_MODEL_LEN, model.config.max_position_embeddings))
        except Exception as e:  # one broken model must not hide the others' results
            import traceback
            traceback.print_exc()
            results.append({"model": name, "ok": False, "problems": ["%s: %s" % (type(e).__name__, e)],
                            "prompts": []})
        model = None
        gc.collect()
        if args.device == "cuda":
            torch.cuda.empty_cache()
        log("%s done in %.1fs" % (name, time.time() - t0))
    if args.serve:
        results.append(check_serve(args, *serve_target) if serve_target else
                       {"model": "serve", "ok": False, "problems": ["--serve model %s not run" % args.serve],
                        "prompts": []})
    print_table(results)
    if args.details:
        with open(args.details, "w") as f:
            json.dump(results, f, indent=1)
    ok = all(r["ok"] for r in results)
    print("hf_e2e: %s (%d checks)" % ("PASS" if ok else "FAIL", len(results)), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
