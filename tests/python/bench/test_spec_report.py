"""bench/spec_report.py: the tables of bench/spec.sh from synthetic run files
with known figures (speedups, the cost of random drafts, the draft model's
cost per drafted token and its what-if speedups)."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
REPORT = os.path.join(REPO, "bench", "spec_report.py")


def lat(tpot_ms, batch=1, mal=None, rate=None, steps=100):
    r = {"tpot_mean_ms": tpot_ms, "decode_tok_s": batch * 1000.0 / tpot_ms, "output_tok_s": 1.0,
         "num_steps": steps, "input_len": 2048, "output_len": 1024, "mean_prompt_tokens": 2000.0,
         "model": "m", "device": "d"}
    if mal is not None:
        r.update(spec_mean_accepted_length=mal, spec_acceptance_rate=rate)
    return r


def comparison(base, spec, same=True):
    return {"baseline": base, "speculative": spec, "same_outputs": same,
            "tpot_speedup": base["tpot_mean_ms"] / spec["tpot_mean_ms"]}


def write(out, name, obj):
    (out / (name + ".json")).write_text(json.dumps(obj))
    (out / (name + ".log")).write_text("")


def test_tables_and_draft_costs(tmp_path):
    k = 4
    write(tmp_path, "8b_b1_replay", comparison(lat(5.0), lat(1.25, mal=5.0, rate=1.0, steps=20)))
    write(tmp_path, "8b_b1_random", comparison(lat(5.0), lat(5.5, mal=1.0, rate=0.0)))
    write(tmp_path, "8b_b1_ngram", lat(2.5, mal=3.0, rate=0.5))
    big_random = lat(21.0, 64, mal=1.0, rate=0.0)
    big_random["spec_backoff_cap"] = 32
    write(tmp_path, "8b_big_random", comparison(lat(20.0, 64), big_random, same=False))
    # Draft step 5.5 + 4 x 0.5 = 7.5 ms at one token per step.
    write(tmp_path, "8b_b1_draft", lat(7.5, mal=1.0, rate=0.0))
    p = subprocess.run([sys.executable, REPORT, str(tmp_path), "--k", str(k)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    md = p.stdout
    assert "| replay k=4 | 1 | 1.250 | 800.0 | 1.0 | 4.000x | 5.000 | 1.000 | 20 | yes |" in md, md
    assert "| ngram | 1 | 2.500 | 400.0 | 1.0 | 2.000x |" in md
    assert "| suffix | 1 | not run |" in md
    assert "batch 1: TPOT +10.0%." in md and "batch 64: TPOT +5.0% (back-off cap 32 steps)." in md
    assert "| random k=4 | 64 |" in md and "**NO** |" in md
    assert "**0.500 ms per drafted token** (10.0% of a plain decode step, 5.000 ms)" in md
    e = (1 - 0.7 ** 5) / 0.3
    assert "| 0.7 | %.3f | %.3fx |" % (e, e * 5.0 / 7.5) in md
    assert "replay proposer (every draft accepted, no proposer cost): 4.000x" in md
    assert "greedy output repeating itself" in md


def test_missing_models_are_reported_not_run(tmp_path):
    (tmp_path / "smollm2.missing").write_text("SmolLM2 not found")
    p = subprocess.run([sys.executable, REPORT, str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "## SmolLM2-135M: not run (SmolLM2 not found)" in p.stdout
    assert "stories260K" not in p.stdout  # no files at all: left out
