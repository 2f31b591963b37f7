#!/usr/bin/env python3
"""The Markdown tables of bench/spec.sh from its runs' JSON files.

  python3 bench/spec_report.py OUT_DIR --k 4 --big-batch 64 --device cuda

Per model (stories, smollm2, 8b; a model without files is left out, one whose
files say "missing" is reported as not run) and row: TPOT, decode tok/s
(batch / TPOT), end-to-end output tok/s, the ratio of decode tok/s to the
plain run's (for replay and random, the plain run of the same call; for
ngram, suffix and the draft model, the replay call's plain run), the mean
accepted length and acceptance rate, engine steps and whether the greedy
outputs matched the plain run's (replay and random check it); under the
tables, the cost of random drafts at each batch with the back-off cap the
engine measured its way to.

The draft model's cost per drafted token is (draft step - random step) / k,
where a step's time is TPOT x tokens per step (the mean accepted length):
both verify k + 1 positions, so the difference is what drafting costs. The
speedup it would give at per-token acceptance a is E(a) x plain TPOT / draft
step, with E(a) = (1 - a^(k+1)) / (1 - a) tokens per step (i.i.d.
acceptance, Leviathan et al.): random weights accept nothing, so a is a
what-if, not a measurement.
"""
import argparse
import json
import os
import sys

MODELS = [("stories", "stories260K"), ("smollm2", "SmolLM2-135M"), ("8b", "Llama-3.1-8B shape, dummy weights")]


def load(out, name):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(v, spec=".2f"):
    return "n/a" if v is None else format(v, spec)


def step_ms(r):
    """Time of one engine step at decode: TPOT x tokens per step."""
    if not r or r.get("tpot_mean_ms") is None:
        return None
    return r["tpot_mean_ms"] * (r.get("spec_mean_accepted_length") or 1.0)


def row(label, batch, r, plain, same="-"):
    if r is None:
        return "| %s | %s | not run | | | | | | | |" % (label, batch)
    tok_s = r.get("decode_tok_s")
    base = plain.get("decode_tok_s") if plain else None
    ratio = tok_s / base if tok_s and base else None
    return "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        label, batch, fmt(r.get("tpot_mean_ms"), ".3f"), fmt(tok_s, ".1f"), fmt(r.get("output_tok_s"), ".1f"),
        fmt(ratio, ".3f") + ("x" if ratio else ""), fmt(r.get("spec_mean_accepted_length"), ".3f"),
        fmt(r.get("spec_acceptance_rate"), ".3f"), r.get("num_steps", "n/a"), same)


def same(c):
    if c is None:
        return "-"
    return "yes" if c.get("same_outputs") else "**NO**"


def model_section(out, key, title, k, big_batch):
    names = [key + s for s in ("_b1_replay", "_b1_random", "_b1_ngram", "_b1_suffix", "_big_random", "_b1_draft")]
    if os.path.exists(os.path.join(out, key + ".missing")):
        return ["## %s: not run (%s)" % (title, open(os.path.join(out, key + ".missing")).read().strip()), ""]
    if not any(os.path.exists(os.path.join(out, n + ".log")) for n in names):
        return []
    replay, rand, ngram, suffix, big, draft = (load(out, n) for n in names)
    plain = replay["baseline"] if replay else (rand["baseline"] if rand else None)
    first = plain or (ngram or {})
    lines = ["## %s" % title, "",
             "W7 at %s in (mean prompt %s tokens) / %s out; k = %d; model %s on %s." % (
                 first.get("input_len", "?"), fmt(first.get("mean_prompt_tokens"), ".0f"),
                 first.get("output_len", "?"), k, first.get("model", "?"), first.get("device", "?")), "",
             "| row | batch | TPOT ms | decode tok/s | output tok/s (E2E) | vs plain | mean accepted length "
             "| acceptance | steps | same outputs |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines.append(row("plain", 1, plain, plain))
    lines.append(row("ngram", 1, ngram, plain))
    lines.append(row("suffix", 1, suffix, plain))
    forced = bool(replay) and replay.get("proposer") == "replay-forced"
    lines.append(row(("replay (forced) k=%d" if forced else "replay k=%d") % k, 1,
                     replay and replay["speculative"], plain, same(replay)))
    lines.append(row("plain (random's call)", 1, rand and rand["baseline"], rand and rand["baseline"]))
    lines.append(row("random k=%d" % k, 1, rand and rand["speculative"], rand and rand["baseline"], same(rand)))
    big_plain = big and big["baseline"]
    lines.append(row("plain", big_batch, big_plain, big_plain))
    lines.append(row("random k=%d" % k, big_batch, big and big["speculative"], big_plain, same(big)))
    if key == "8b":
        lines.append(row("draft model (llama3-1b shape) k=%d" % k, 1, draft, plain))
    lines.append("")
    for label, c in (("batch 1", rand), ("batch %d" % big_batch, big)):
        if c and c.get("tpot_speedup"):
            cap = c["speculative"].get("spec_backoff_cap")
            lines.append("Cost of speculation when nothing is accepted, %s: TPOT +%.1f%%%s." % (
                label, 100.0 * (1.0 / c["tpot_speedup"] - 1.0),
                " (back-off cap %d steps)" % cap if cap else ""))
    if key == "8b":
        lines += ["", "Random weights: the prompt means nothing to this model, so ngram and suffix acceptance "
                  "comes only from its greedy output repeating itself (random-weight greedy decoding falls into "
                  "short cycles, which prompt lookup and the suffix tree then match)."]
    if key == "8b" and draft:
        lines += [""] + draft_lines(draft, rand, plain, replay, k)
    return lines + [""]


def draft_lines(draft, rand, plain, replay, k):
    d, r = step_ms(draft), step_ms(rand and rand["speculative"])
    p = plain.get("tpot_mean_ms") if plain else None
    if d is None or r is None or not p:
        return ["Draft model: not enough runs for its cost (needs the draft and random rows)."]
    cost = (d - r) / k
    lines = ["Draft model: step %.3f ms against %.3f ms for a random draft of the same k (both verify %d "
             "positions): **%.3f ms per drafted token** (%.1f%% of a plain decode step, %.3f ms). Measured "
             "acceptance %s (random weights: ~nothing, so the speedups below are what-ifs from the measured "
             "costs)." % (d, r, k + 1, cost, 100.0 * cost / p, p, fmt(draft.get("spec_acceptance_rate"), ".3f")),
             "", "| acceptance a | tokens per step E(a) | speedup (E x plain TPOT / draft step) |", "|---|---|---|"]
    for a in (0.5, 0.6, 0.7, 0.8, 0.9):
        e = (1 - a ** (k + 1)) / (1 - a)
        lines.append("| %.1f | %.3f | %.3fx |" % (a, e, e * p / d))
    if replay and replay.get("tpot_speedup"):
        lines += ["", "Beside it, the replay proposer (every draft accepted, no proposer cost): %.3fx." %
                  replay["tpot_speedup"]]
    return lines


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--big-batch", type=int, default=64)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args(argv)
    lines = ["# Speculative decoding (bench/spec.sh, %s)" % a.device, "",
             "decode tok/s = batch / mean TPOT; vs plain = ratio of decode tok/s to the plain run's "
             "(ngram, suffix and the draft model against the replay call's plain run); mean accepted length = "
             "tokens per verification step (1 + accepted / drafts); greedy (temperature 0), ignore_eos.", ""]
    for key, title in MODELS:
        lines += model_section(a.out, key, title, a.k, a.big_batch)
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
