#!/usr/bin/env python3
"""FP8 W8A8 fidelity on a real model (SmolLM2-135M-Instruct): pagoda's CPU engine, which is the
specification of the FP8 arithmetic, against a NumPy reference and against bf16.

From a bf16 Hugging Face folder (tools/smollm2_to_hf.py writes one from the cached GGUF):
  a. writes a compressed-tensors FP8 checkpoint of it with numpy (tools/make_tiny_fp8.py's
     tiny_fp8_dynamic layout: F8_E4M3 weights, per-channel weight_scale [N, 1], dynamic per-token
     activations, lm_head ignored), its scales max(amax / 448, 1 / (448 * 512)) per row in F32,
     the codes e4m3(w / scale): the very codes and scales `--quantization fp8` computes at load;
  b. greedy on fixed prompts: `pagoda generate --quantization fp8` on the bf16 folder and the
     compressed-tensors folder must give the same tokens and logprobs; both against
     tests/python/models/fp8_numpy.py's float64 forward of the FP8 values with per-token
     activation quantisation. The reference runs once over prompt + the engine's tokens: every
     row's activation scale is its own and attention is causal, so row t's logits are those a
     full recompute at step t gives. A step's tokens must be equal unless the reference's top-2
     gap there is under EPSILON (a near-tie); the report gives each prompt's first differing step
     and the largest |logprob difference| of the chosen tokens;
  c. teacher forcing over a fixed English corpus (../shared's ARCHITECTURE.md, STYLE.md and
     BENCHMARKS.md, in windows of WINDOW tokens) with `prompt_logprobs: 1` on bf16 and on
     `--quantization fp8`: the share of positions whose top-1 token agrees, the mean |difference|
     of the actual next token's logprob, and the perplexity under each;
and writes a markdown report.

Usage: python tools/fp8_fidelity.py [--folder DIR] [--work DIR] [--report FILE]
Env: PAGODA_BIN (default: build/pagoda), PAGODA_CACHE, PAGODA_SHARED_DIR (as smollm2_to_hf.py).
"""
import argparse
import hashlib
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests" / "python" / "models"))
import fp8_numpy  # noqa: E402
import smollm2_to_hf  # noqa: E402
from make_tiny_fp8 import LINEARS, quantization_config, write_safetensors  # noqa: E402

PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
CORPUS = [smollm2_to_hf.SHARED / f for f in ("ARCHITECTURE.md", "STYLE.md", "BENCHMARKS.md")]
PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "To make a cup of tea, first",
    "The three primary colors are",
    "def fibonacci(n):\n",
    "Water boils at a temperature of",
    "The best way to learn a new language is",
    "In 1969, the first humans",
]
STEPS = 32
WINDOW = 512
# Near-tie: the reference's top-2 logprob gap under which the engine may pick the other token.
# On this model W8A8 per-token FP8 is chaotic: multiplying the reference's activations by
# (1 + u 2^-24) before they round to float32 (fp8_numpy's jitter, the size of a summation
# order's noise) moves a chosen token's logprob by up to ~0.4 (mean ~0.08), as much as FP8 vs
# the unquantised weights does: an activation on an e4m3 rounding boundary rounds either way
# and the model carries one e4m3 step (6-12%) of it onwards. Both tokens' logprobs of a top-2
# pair move by that much, so gaps under 2 x 0.4, rounded up to 1.0, are ties that neither
# float32 (the engine) nor float64 (the reference) resolves reliably.
EPSILON = 1.0


def read_safetensors(path):
    """name -> float32 array of a safetensors file of F32 / BF16 tensors."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        if info["dtype"] == "BF16":
            t = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] == "F32":
            t = np.frombuffer(raw, dtype="<f4")
        else:
            raise ValueError(f"{path}: tensor {name} is {info['dtype']}, expected F32 or BF16")
        out[name] = t.reshape(info["shape"]).copy()
    return out


def is_linear(name):
    return any(name.endswith(l + ".weight") for l in LINEARS)


def quantise(weights):
    """(file tensors: linears as uint8 e4m3 codes + F32 weight_scale [N, 1], others as given;
    reference tensors: the codes' values (float64) + weight_scale [N], lm_head = the tied
    embedding, and under "unquantised" the linears as given)."""
    file, ref = {}, {}
    for name, w in weights.items():
        if not is_linear(name):
            file[name] = ref[name] = w
            continue
        s = fp8_numpy.token_scale(np.abs(w).max(axis=1))  # the online scheme's clamp too
        values = fp8_numpy.quantize(w, s[:, None])
        file[name] = fp8_numpy.e4m3_codes(values)
        file[name[:-len("weight")] + "weight_scale"] = s[:, None].astype(np.float32)
        ref[name] = values
        ref[name[:-len("weight")] + "weight_scale"] = s.astype(np.float64)
    ref.setdefault("lm_head.weight", ref["model.embed_tokens.weight"])
    return file, ref


def write_compressed_tensors(folder, out):
    """The compressed-tensors FP8 folder of `folder` at `out`; returns (config, reference
    tensors, the unquantised tensors with the lm_head)."""
    config = json.loads((folder / "config.json").read_text())
    plain = read_safetensors(folder / "model.safetensors")
    file, ref = quantise(plain)
    plain.setdefault("lm_head.weight", plain["model.embed_tokens.weight"])
    out.mkdir(parents=True, exist_ok=True)
    ct = dict(config, quantization_config=quantization_config("dynamic"))
    (out / "config.json").write_text(json.dumps(ct, indent=2) + "\n")
    write_safetensors(out / "model.safetensors", file,
                      bf16=[n for n in file if file[n].dtype != np.uint8 and not n.endswith("_scale")])
    shutil.copy(folder / "tokenizer.json", out / "tokenizer.json")
    return config, ref, plain


def tokenizer(folder):
    import tokenizers
    return tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


def run_pagoda(model, items, work, *flags):
    """`pagoda generate --input` on the CPU; one result dict per item."""
    work.mkdir(parents=True, exist_ok=True)
    inp, out = work / "in.jsonl", work / "out.jsonl"
    inp.write_text("".join(json.dumps(it) + "\n" for it in items))
    cmd = [str(PAGODA_BIN), "generate", str(model), "--device", "cpu", "--input", str(inp),
           "--output", str(out), "--log-level", "warning", *flags]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return [json.loads(line) for line in out.read_text().splitlines()]


def greedy(model, prompts_ids, steps, work, *flags):
    """[(token ids, their logprobs)] of `steps` greedy tokens per prompt."""
    items = [{"prompt": p, "max_tokens": steps, "temperature": 0, "logprobs": 1, "ignore_eos": True}
             for p in prompts_ids]
    return [(r["token_ids"], [e["logprob"] for e in r["logprobs"]])
            for r in run_pagoda(model, items, work, *flags)]


def compare_to_reference(config, ref, plain_w, prompt, tokens, logprobs, epsilon=EPSILON, seed=0):
    """The engine's greedy steps against the reference's logits at each step. Returns a dict:
    first_diff (the first step whose token is not the reference's argmax, or None), gaps (the
    reference's top-2 gap at each differing step), hard (differing steps with a gap >= epsilon:
    failures), dlogprob (|engine - reference| logprob of the engine's token per step), jitter
    (|reference - reference with jitter| of the same tokens: the numerics' own sensitivity),
    plain (|reference - the unquantised float64 forward|: what FP8 changes)."""
    ids = list(prompt) + list(tokens)
    start = len(prompt) - 1
    logits = fp8_numpy.forward(config, ref, ids[:-1], {"kind": "dynamic"})[start:]
    jittered = fp8_numpy.forward(config, ref, ids[:-1], {"kind": "dynamic"},
                                 jitter=np.random.default_rng(seed))[start:]
    plain = fp8_numpy.forward(config, plain_w, ids[:-1], None, quantize=False)[start:]
    first, gaps, hard = None, [], []
    d, dj, dp = [], [], []
    for step, (token, lp_engine) in enumerate(zip(tokens, logprobs)):
        lp = fp8_numpy.log_softmax(logits[step])
        top2 = np.sort(lp)[-2:]
        d.append(abs(lp[token] - lp_engine))
        dj.append(abs(lp[token] - fp8_numpy.log_softmax(jittered[step])[token]))
        dp.append(abs(lp[token] - fp8_numpy.log_softmax(plain[step])[token]))
        if token != int(np.argmax(lp)):
            first = step if first is None else first
            gaps.append(float(top2[1] - top2[0]))
            if gaps[-1] >= epsilon:
                hard.append(step)
    return {"first_diff": first, "gaps": gaps, "hard": hard, "dlogprob": d, "jitter": dj, "plain": dp}


def corpus_windows(tok, files=CORPUS, window=WINDOW, max_tokens=None):
    """The corpus as token-id windows of `window` tokens (the last one shorter)."""
    ids = []
    for f in files:
        ids += tok.encode(f.read_text()).ids
    ids = ids[:max_tokens] if max_tokens else ids
    return [ids[i:i + window] for i in range(0, len(ids), window) if len(ids[i:i + window]) > 1]


def scored(results):
    """Per scored position (every prompt token but each window's first): (actual token's
    logprob, the top-1 token)."""
    out = []
    for r in results:
        for entry in r["prompt_logprobs"][1:]:
            out.append((entry["logprob"], entry["top_logprobs"][0]["token_id"]))
    return out


def teacher_forced(bf16_folder, windows, work):
    """Corpus statistics of bf16 against --quantization fp8."""
    items = [{"prompt": w, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 1} for w in windows]
    b = scored(run_pagoda(bf16_folder, items, work / "bf16"))
    f = scored(run_pagoda(bf16_folder, items, work / "fp8", "--quantization", "fp8"))
    lb, lf = np.array([x[0] for x in b]), np.array([x[0] for x in f])
    return {"positions": len(b),
            "agreement": float(np.mean([x[1] == y[1] for x, y in zip(b, f)])),
            "mean_dlogprob": float(np.mean(np.abs(lb - lf))),
            "max_dlogprob": float(np.max(np.abs(lb - lf))),
            "ppl_bf16": math.exp(-float(np.mean(lb))), "ppl_fp8": math.exp(-float(np.mean(lf)))}


def fidelity(bf16_folder, work, prompts=PROMPTS, steps=STEPS, corpus_tokens=None):
    """Everything the report holds, as a dict."""
    t0 = time.time()
    ct_folder = work / "fp8_compressed_tensors"
    config, ref, plain = write_compressed_tensors(bf16_folder, ct_folder)
    tok = tokenizer(bf16_folder)
    prompts_ids = [tok.encode(p).ids for p in prompts]
    online = greedy(bf16_folder, prompts_ids, steps, work / "online", "--quantization", "fp8")
    stored = greedy(ct_folder, prompts_ids, steps, work / "ct")
    bf16 = greedy(bf16_folder, prompts_ids, steps, work / "bf16")
    same = [a[0] == b[0] for a, b in zip(online, stored)]
    d_ct = max(abs(x - y) for a, b in zip(online, stored) for x, y in zip(a[1], b[1]))
    per_prompt = []
    for p, ids, (tokens, lps), (btokens, _) in zip(prompts, prompts_ids, online, bf16):
        c = compare_to_reference(config, ref, plain, ids, tokens, lps)
        c["prompt"] = p
        c["bf16_first_diff"] = next((i for i, (x, y) in enumerate(zip(tokens, btokens)) if x != y), None)
        c["text"] = tok.decode(tokens)
        per_prompt.append(c)
    windows = corpus_windows(tok, max_tokens=corpus_tokens)
    corpus = teacher_forced(bf16_folder, windows, work / "corpus")
    return {"steps": steps, "ct_same_tokens": all(same), "ct_max_dlogprob": d_ct,
            "prompts": per_prompt, "corpus": corpus, "windows": len(windows),
            "seconds": time.time() - t0}


def report(res, args):
    c = res["corpus"]
    files = ", ".join(f"`../shared/{f.name}` (sha256 {hashlib.sha256(f.read_bytes()).hexdigest()[:12]})"
                      for f in CORPUS)
    lines = [
        "# FP8 W8A8 fidelity on SmolLM2-135M-Instruct (CPU)", "",
        f"Made by `{' '.join(['tools/fp8_fidelity.py'] + args)}` with `pagoda` = `{PAGODA_BIN}`, "
        f"in {res['seconds']:.0f} s. The model: the cached SmolLM2-135M-Instruct Q4_1 GGUF "
        "dequantised to a bf16 folder by `tools/smollm2_to_hf.py`; FP8 = per-channel e4m3 "
        "weights, dynamic per-token e4m3 activations (`docs/models.md`, FP8).", "",
        "## Compressed-tensors checkpoint vs `--quantization fp8`", "",
        f"{len(res['prompts'])} prompts x {res['steps']} greedy steps: tokens "
        f"{'identical' if res['ct_same_tokens'] else 'DIFFERENT'}, largest |logprob difference| "
        f"{res['ct_max_dlogprob']:.2e} (the same codes and scales).", "",
        "## `--quantization fp8` vs the NumPy reference of the dequantised FP8 weights", "",
        f"Reference: `tests/python/models/fp8_numpy.py` (float64, per-token activation "
        f"quantisation from float32). Near-tie: the reference's top-2 gap < {EPSILON}. "
        "\"first diff\": the first step whose engine token is not the reference's argmax "
        "(- = none); the engine is teacher-forced into the reference, so later steps are "
        "still compared. \"bf16 diverges\": the first step where greedy bf16 picks another token.", "",
        "The three |Δlogprob| columns, over the engine's tokens (max / mean): engine vs reference; "
        "the reference vs itself with its activations multiplied by (1 + u 2^-24) before their "
        "float32 rounding (jitter: how far e4m3 rounding flips alone move this model); the "
        "reference vs the unquantised float64 forward (what FP8 changes).", "",
        "| prompt | first diff (gap) | differing, not near-ties | engine vs ref | jitter | FP8 vs unquantised | bf16 diverges at |",
        "|---|---|---|---|---|---|---|",
    ]

    def mm(v):
        return f"{max(v):.3f} / {np.mean(v):.3f}"

    for p in res["prompts"]:
        first = "-" if p["first_diff"] is None else f"{p['first_diff']} ({p['gaps'][0]:.3f})"
        bf = "-" if p["bf16_first_diff"] is None else str(p["bf16_first_diff"])
        lines.append(f"| {json.dumps(p['prompt'])[1:-1]} | {first} | {len(p['hard'])} | "
                     f"{mm(p['dlogprob'])} | {mm(p['jitter'])} | {mm(p['plain'])} | {bf} |")
    every = {k: [x for p in res["prompts"] for x in p[k]] for k in ("dlogprob", "jitter", "plain")}
    lines += [
        f"| all {sum(len(p['dlogprob']) for p in res['prompts'])} steps | | "
        f"{sum(len(p['hard']) for p in res['prompts'])} | {mm(every['dlogprob'])} | "
        f"{mm(every['jitter'])} | {mm(every['plain'])} | |", "",
        "## FP8 vs bf16, teacher-forced over a fixed corpus", "",
        f"Corpus: {files}, tokenised with SmolLM2's tokenizer, {res['windows']} windows of up to "
        f"{WINDOW} tokens, {c['positions']} scored positions (`prompt_logprobs: 1`).", "",
        "| measure | value |", "|---|---|",
        f"| top-1 agreement (argmax bf16 == argmax FP8) | {c['agreement']:.2%} |",
        f"| mean \\|Δlogprob\\| of the actual next token | {c['mean_dlogprob']:.4f} |",
        f"| max \\|Δlogprob\\| of the actual next token | {c['max_dlogprob']:.3f} |",
        f"| perplexity, bf16 | {c['ppl_bf16']:.3f} |",
        f"| perplexity, FP8 | {c['ppl_fp8']:.3f} |",
        f"| perplexity ratio FP8 / bf16 | {c['ppl_fp8'] / c['ppl_bf16']:.4f} |", "",
    ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=pathlib.Path,
                        help="the bf16 folder (default: made from the GGUF under --work)")
    parser.add_argument("--work", type=pathlib.Path, default=pathlib.Path("/tmp/fp8_fidelity"))
    parser.add_argument("--report", type=pathlib.Path, help="markdown report (default: stdout)")
    args = parser.parse_args()
    folder = args.folder
    if folder is None:
        folder = args.work / "smollm2_bf16"
        if not (folder / "model.safetensors").exists():
            smollm2_to_hf.convert(folder)
    res = fidelity(folder, args.work)
    text = report(res, sys.argv[1:])
    if args.report:
        args.report.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
