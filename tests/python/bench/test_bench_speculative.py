"""`pagoda bench latency` with W7 (`--dataset w7`) and the speculation
comparisons (`--speculative-replay K`, `--speculative-random K`) on the tiny
real model ../shared/models/stories260K on the CPU.

W7 reads jinja2 3.1.6's jinja2/lexer.py from the installed package
(requirements-test.txt pins it): the folder of this interpreter's jinja2 is
passed explicitly, and a folder with another version must be refused.
"""

import json
import os
import subprocess

import jinja2
import pytest

PAGODA_BIN = os.environ.get("PAGODA_BIN", "/work/main/build/pagoda")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SHARED = os.environ.get("PAGODA_SHARED_DIR", os.path.join(REPO, "..", "shared"))
STORIES = os.path.join(SHARED, "models", "stories260K")
SITE = os.path.dirname(os.path.dirname(jinja2.__file__))
# stories260K's tokenizer spends ~200 tokens on the instruction; its context is 512.
W7 = ["--dataset", "w7", "--w7-site-packages", SITE, "--input-len", "384"]


def bench_latency(tmp_path, *args):
    if not os.path.exists(PAGODA_BIN):
        pytest.fail("no pagoda binary at %s (set PAGODA_BIN)" % PAGODA_BIN)
    out = tmp_path / "result.json"
    cmd = [PAGODA_BIN, "bench", "latency", STORIES, "--device", "cpu", "--batch-size", "2",
           "--num-iters", "2", "--warmup", "1", "--ceiling-gbps", "10", "--result-json", str(out),
           *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if "no engine" in p.stderr:
        pytest.skip("this build has no engine")
    return p, (json.loads(out.read_text()) if p.returncode == 0 else None)


def test_w7_reads_the_installed_lexer_and_fills_input_len(tmp_path):
    assert jinja2.__version__ == "3.1.6", "requirements-test.txt pins jinja2==3.1.6"
    p, r = bench_latency(tmp_path, *W7, "--output-len", "8")
    assert p.returncode == 0, p.stderr[-2000:]
    assert r["dataset"] == "w7"
    # Whole lines up to the bound: a stories260K line is at most ~40 tokens.
    assert 384 - 60 <= r["mean_prompt_tokens"] <= 384
    assert "lines 24-" in p.stderr and "jinja2/lexer.py" in p.stderr, p.stderr[-2000:]
    assert "spec_num_drafts" not in r  # no speculation, no spec_decode fields


def test_w7_refuses_another_version(tmp_path):
    site = tmp_path / "site"
    (site / "jinja2-3.1.5.dist-info").mkdir(parents=True)
    (site / "jinja2-3.1.5.dist-info" / "METADATA").write_text("Name: Jinja2\nVersion: 3.1.5\n\n")
    (site / "jinja2").mkdir()
    (site / "jinja2" / "lexer.py").write_text("def f():\n    pass\n")
    p, _ = bench_latency(tmp_path, "--dataset", "w7", "--w7-site-packages", str(site))
    assert p.returncode == 1
    assert "jinja2 3.1.6's jinja2/lexer.py is needed" in p.stderr, p.stderr[-2000:]
    assert "3.1.5 in " + str(site) in p.stderr
    assert "pip install jinja2==3.1.6" in p.stderr


def test_replay_accepts_every_draft_in_fewer_steps(tmp_path):
    p, r = bench_latency(tmp_path, *W7, "--output-len", "24", "--speculative-replay", "3")
    assert p.returncode == 0, p.stderr[-2000:]
    assert r["proposer"] == "replay" and r["num_speculative_tokens"] == 3
    assert r["same_outputs"] is True
    base, spec = r["baseline"], r["speculative"]
    assert "spec_num_drafts" not in base
    assert spec["spec_num_drafts"] > 0
    assert spec["spec_num_accepted_tokens"] == spec["spec_num_draft_tokens"]
    assert spec["spec_acceptance_rate"] == 1.0
    assert spec["spec_mean_accepted_length"] > 3.0
    assert len(spec["spec_acceptance_per_position"]) == 3
    assert spec["spec_acceptance_per_position"][0] == 1.0
    # 23 decode tokens per request: 23 plain steps (prefill aside) against
    # ceil(23 / 4) verification steps.
    assert spec["num_steps"] < base["num_steps"] / 2
    assert 0 < r["step_ratio"] < 0.5
    assert r["tpot_speedup"] == pytest.approx(base["tpot_mean_ms"] / spec["tpot_mean_ms"])
    assert "Speculation vs none" in p.stdout and "Same greedy outputs:" in p.stdout


def test_forced_replay_keeps_every_draft_and_follows_positions(tmp_path):
    # On the CPU the target reproduces its greedy output, so the forced replay
    # gives the exact replay's steps and outputs; its drafts follow the
    # recording by position and every one is kept.
    p, r = bench_latency(tmp_path, *W7, "--output-len", "24", "--speculative-replay-forced", "3")
    assert p.returncode == 0, p.stderr[-2000:]
    assert r["proposer"] == "replay-forced" and r["num_speculative_tokens"] == 3
    assert r["same_outputs"] is True
    spec = r["speculative"]
    assert spec["spec_acceptance_rate"] == 1.0
    assert 0 < r["step_ratio"] < 0.5


def test_random_drafts_are_rejected_and_change_nothing(tmp_path):
    p, r = bench_latency(tmp_path, "--input-len", "32", "--output-len", "24",
                         "--speculative-random", "3")
    assert p.returncode == 0, p.stderr[-2000:]
    spec = r["speculative"]
    assert r["proposer"] == "random" and r["same_outputs"] is True
    assert spec["spec_num_draft_tokens"] > 0
    assert spec["spec_acceptance_rate"] < 0.1  # 1 in 512 by chance
    # The back-off cap the engine measured its way to (a power of two, 8..64).
    assert spec["spec_backoff_cap"] in (8, 16, 32, 64)
    assert "back-off cap (steps):" in p.stdout
    # The measured r it was picked from: a number once both kinds of step
    # of the last step's batch size were timed, else null (a short run).
    r_cost = spec["spec_verify_extra_cost"]
    assert r_cost is None or isinstance(r_cost, float), r_cost
    assert "verifying step's extra cost r:" in p.stdout
    # Each step still yields one token: as many steps as without speculation.
    assert r["step_ratio"] == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize("args,message", [
    (["--speculative-replay", "3", "--speculative-config",
      '{"method": "ngram", "num_speculative_tokens": 3}'], "drop --speculative-config"),
    (["--speculative-replay", "3", "--structured-output", "json_object"], "structured output"),
    (["--speculative-replay", "3", "--speculative-random", "3"], "excludes"),
    (["--speculative-replay", "0"], "--speculative-replay"),
    (["--speculative-replay-forced", "3", "--speculative-random", "3"], "excludes"),
])
def test_bad_combinations_are_refused(tmp_path, args, message):
    p, _ = bench_latency(tmp_path, "--input-len", "16", "--output-len", "4", *args)
    assert p.returncode != 0
    assert message in p.stderr + p.stdout, (p.stdout + p.stderr)[-2000:]


def test_speculative_config_runs_report_the_counters(tmp_path):
    p, r = bench_latency(tmp_path, *W7, "--output-len", "24", "--speculative-config",
                         '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2}')
    assert p.returncode == 0, p.stderr[-2000:]
    assert r["spec_num_drafts"] >= 0 and len(r["spec_accepted_per_position"]) == 3
    assert "acceptance rate:" in p.stdout


def test_throughput_takes_w7_and_reports_the_counters(tmp_path):
    out = tmp_path / "t.json"
    p = subprocess.run([PAGODA_BIN, "bench", "throughput", STORIES, "--device", "cpu", *W7, "--output-len", "16",
                        "--num-prompts", "3", "--result-json", str(out), "--speculative-config",
                        '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1}'],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["dataset"] == "w7" and r["total_output_tokens"] == 3 * 16
    assert 3 * (384 - 60) <= r["total_prompt_tokens"] <= 3 * 384
    assert r["spec_num_draft_tokens"] > 0 and len(r["spec_acceptance_per_position"]) == 2
    assert "mean accepted length" in p.stdout
