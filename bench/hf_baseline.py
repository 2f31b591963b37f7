#!/usr/bin/env python3
"""The Hugging Face transformers baseline every device run reports beside
pagoda (/work/shared/BENCHMARKS.md): model.generate, greedy, random prompt
ids, exact output lengths (min_new_tokens = max_new_tokens, so EOS never ends
a sequence early).

  W1  batch 1: TTFT (generate 1 token), TPOT = (E2E(out) - TTFT) / (out - 1)
  W2  static batches: output tok/s and total tok/s of one generate call
  W6  prefill of one long prompt: one forward pass of the decoder (no
      lm_head over every position), prefill tok/s

Usage: python3 bench/hf_baseline.py --model DIR --json OUT.json
           [--w1 1024:256] [--static 32:128:128 8:1024:256] [--prefill 8192] [--iters 2]
"""

import argparse
import json
import statistics
import time

import torch
import transformers


def timed(fn, iters):
    fn()  # warm-up
    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.mean(times)


def random_ids(gen, vocab, batch, length):
    return torch.randint(0, vocab - 1000, (batch, length), generator=gen).cuda()


def generate(model, ids, new_tokens):
    return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                          min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)


def w1(model, vocab, gen, in_len, out_len, iters):
    ids = random_ids(gen, vocab, 1, in_len)
    ttft = timed(lambda: generate(model, ids, 1), iters)
    e2e = timed(lambda: generate(model, ids, out_len), iters)
    return {"input_len": in_len, "output_len": out_len, "ttft_ms": ttft * 1e3, "e2e_ms": e2e * 1e3,
            "tpot_ms": (e2e - ttft) / (out_len - 1) * 1e3, "decode_tok_s": (out_len - 1) / (e2e - ttft)}


def static_batch(model, vocab, gen, batch, in_len, out_len, iters):
    ids = random_ids(gen, vocab, batch, in_len)
    t = timed(lambda: generate(model, ids, out_len), iters)
    return {"batch": batch, "input_len": in_len, "output_len": out_len, "elapsed_s": t,
            "output_tok_s": batch * out_len / t, "total_tok_s": batch * (in_len + out_len) / t,
            "requests_per_s": batch / t}


def prefill(model, vocab, gen, tokens, iters):
    ids = random_ids(gen, vocab, 1, tokens)

    def run():
        with torch.no_grad():
            hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
            model.lm_head(hidden[:, -1:])

    t = timed(run, iters)
    return {"tokens": tokens, "elapsed_ms": t * 1e3, "prefill_tok_s": tokens / t}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--w1", default="1024:256", help="IN:OUT of the batch-1 latency run")
    p.add_argument("--static", nargs="*", default=["32:128:128", "8:1024:256"], help="BATCH:IN:OUT static batches")
    p.add_argument("--prefill", type=int, default=8192, help="tokens of the long-prefill forward pass (0: skip)")
    p.add_argument("--iters", type=int, default=2, help="timed repetitions after one warm-up")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    t0 = time.perf_counter()
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16, device_map="cuda")
    model.eval()
    load_s = time.perf_counter() - t0
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(args.seed)
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "load_s": load_s,
           "attn_implementation": getattr(model.config, "_attn_implementation", None)}
    with torch.no_grad():
        i, o = map(int, args.w1.split(":"))
        out["w1"] = w1(model, vocab, gen, i, o, args.iters)
        print("hf W1: TTFT %.1f ms, TPOT %.2f ms" % (out["w1"]["ttft_ms"], out["w1"]["tpot_ms"]), flush=True)
        out["static"] = []
        for spec in args.static:
            b, i, o = map(int, spec.split(":"))
            r = static_batch(model, vocab, gen, b, i, o, args.iters)
            out["static"].append(r)
            print("hf static %s: %.0f output tok/s" % (spec, r["output_tok_s"]), flush=True)
        if args.prefill > 0:
            out["w6"] = prefill(model, vocab, gen, args.prefill, args.iters)
            print("hf W6: %.0f prefill tok/s" % out["w6"]["prefill_tok_s"], flush=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
