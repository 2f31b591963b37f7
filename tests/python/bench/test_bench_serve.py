"""`pagoda bench serve` against a deterministic fake OpenAI server on loopback.

Two kinds of checks:
  * arithmetic: every aggregate in the result JSON is recomputed here with
    numpy from the per-request raw data in the same JSON (vLLM's formulas);
  * measurement: the per-request raw data match the fake server's schedule
    (TTFT, chunk gaps, token counts, failures) within a timing tolerance.
"""

import json
import math
import os
import subprocess

import numpy as np
import pytest

from fake_openai_server import FakeConfig, FakeServer, word_id

PAGODA_BIN = os.environ.get("PAGODA_BIN", "/work/main/build/pagoda")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SHAREGPT_MINI = os.path.join(REPO, "tests", "data", "bench", "sharegpt_mini.json")
TIME_TOL = 0.04  # seconds: client-side overhead and scheduling jitter on a busy 2-core machine


def run_bench(server_url, tmp_path, *args, check=True, timeout=120):
    out = tmp_path / "result.json"
    cmd = [PAGODA_BIN, "bench", "serve", "--base-url", server_url, "--result-json", str(out),
           "--ready-check-timeout-sec", "0", "--no-progress", *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(out.read_text()) if out.exists() else None
    return r, result


def pct(values, p):
    return float(np.percentile(values, p)) * 1000 if values else 0.0


def check_aggregates(j, percentiles, slo=None):
    """Recompute vLLM's aggregates from the raw per-request arrays."""
    ok = [e == "" for e in j["errors"]]
    ttfts = [t for t, s in zip(j["ttfts"], ok) if s]
    e2els = [t for t, s in zip(j["latencies"], ok) if s]
    itls = [g for gaps, s in zip(j["itls"], ok) if s for g in gaps]
    outs = [n for n, s in zip(j["output_lens"], ok) if s]
    ins = [n for n, s in zip(j["input_lens"], ok) if s]
    tpots = [(l - t) / (n - 1) for t, l, n in zip(ttfts, e2els, outs) if n > 1]
    d = j["duration"]
    assert j["completed"] == sum(ok)
    assert j["failed"] == len(ok) - sum(ok)
    assert j["total_input_tokens"] == sum(ins)
    assert j["total_output_tokens"] == sum(outs)
    assert all(n == 0 for n, s in zip(j["output_lens"], ok) if not s)
    assert j["request_throughput"] == pytest.approx(sum(ok) / d, rel=1e-9)
    assert j["output_throughput"] == pytest.approx(sum(outs) / d, rel=1e-9)
    assert j["total_token_throughput"] == pytest.approx((sum(ins) + sum(outs)) / d, rel=1e-9)
    for key, vals in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        assert j["mean_%s_ms" % key] == pytest.approx(np.mean(vals) * 1000 if vals else 0, rel=1e-9, abs=1e-9)
        assert j["median_%s_ms" % key] == pytest.approx(pct(vals, 50), rel=1e-9, abs=1e-9)
        assert j["std_%s_ms" % key] == pytest.approx(np.std(vals) * 1000 if vals else 0, rel=1e-6, abs=1e-9)
        for p in percentiles:
            word = str(int(p)) if p == int(p) else str(p)
            assert j["p%s_%s_ms" % (word, key)] == pytest.approx(pct(vals, p), rel=1e-9, abs=1e-9)
    if slo is None:
        assert j["request_goodput"] is None
    else:
        good = 0
        all_tpots = [(l - t) / (n - 1) if n > 1 else 0.0 for t, l, n in zip(ttfts, e2els, outs)]
        for t, tp, l in zip(ttfts, all_tpots, e2els):
            if all(limit / 1000 >= v for limit, v in
                   ((slo.get("ttft"), t), (slo.get("tpot"), tp), (slo.get("e2el"), l)) if limit is not None):
                good += 1
        assert j["request_goodput"] == pytest.approx(good / d, rel=1e-9)
        return good
    return None


def test_metrics_follow_the_schedule_and_vllm_arithmetic(tmp_path):
    cfg = FakeConfig(ttft_s=[0.04, 0.16], itl_s=0.015, tokens_per_chunk=2, fail_mod=5, usage_prompt_offset=3)
    with FakeServer(cfg) as s:
        r, j = run_bench(s.url, tmp_path, "--num-prompts", 24, "--input-len", 10, "--output-len", 8,
                         "--range-ratio", 0.5, "--vocab-size", 50, "--max-concurrency", 4,
                         "--goodput", "ttft:100", "--metric-percentiles", "50,90,99", "--seed", 3)
        log = s.log
        max_in_flight = s.max_in_flight
    assert len(log) == 24
    for entry in log:
        b = entry["body"]
        assert b["model"] == "fake-model" and b["stream"] is True and b["ignore_eos"] is True
        assert b["stream_options"] == {"include_usage": True}
        assert 5 <= len(b["prompt"]) <= 15 and all(0 <= t < 50 for t in b["prompt"])
        assert 4 <= b["max_tokens"] <= 12
    # The requests the server saw are the ones the report describes.
    sent = sorted((e["prompt_len"], e["body"]["max_tokens"]) for e in log)
    ok = [e == "" for e in j["errors"]]
    reported = []
    for i, success in enumerate(ok):
        plen = j["input_lens"][i] - 3 if success else j["input_lens"][i]  # usage replaces the dataset length
        assert (plen % 5 == 0) == (not success), j["errors"][i]
        if success:
            reported.append((plen, j["output_lens"][i]))
    assert sorted(reported) == sorted(x for x in sent if x[0] % 5 != 0)
    assert j["failed"] == sum(1 for x in sent if x[0] % 5 == 0) > 0
    # Per-request measurements against the schedule.
    for i, success in enumerate(ok):
        if not success:
            continue
        plen, n = j["input_lens"][i] - 3, j["output_lens"][i]
        chunks = math.ceil(n / 2)
        assert j["ttfts"][i] == pytest.approx(cfg.ttft_s[plen % 2], abs=TIME_TOL)
        assert len(j["itls"][i]) == chunks - 1
        assert np.mean(j["itls"][i]) == pytest.approx(0.015, abs=TIME_TOL) if chunks > 1 else True
        assert j["latencies"][i] == pytest.approx(j["ttfts"][i] + sum(j["itls"][i]), abs=1e-6)
        assert j["latencies"][i] == pytest.approx(cfg.ttft_s[plen % 2] + (chunks - 1) * 0.015, abs=TIME_TOL)
    good = check_aggregates(j, [50, 90, 99], slo={"ttft": 100})
    assert good == sum(1 for i, s_ in enumerate(ok) if s_ and (j["input_lens"][i] - 3) % 2 == 0)
    # The client never has more than --max-concurrency requests open. The fake
    # server's count can exceed it by one: a handler thread leaves its
    # in-flight section only after its last bytes reached the client, which
    # may already have sent the next request.
    assert j["max_concurrent_requests"] <= 4
    assert max_in_flight <= 5
    assert j["max_concurrency"] == 4 and j["request_rate"] == "inf"
    for line in ("Serving Benchmark Result", "Successful requests:", "Failed requests:", "Mean TTFT (ms):",
                 "P90 ITL (ms):", "Median TPOT (ms):", "P99 E2EL (ms):", "Request goodput (req/s):"):
        assert line in r.stdout
    assert "planned failure" in r.stderr


def test_without_usage_chunks_count_as_tokens(tmp_path):
    cfg = FakeConfig(ttft_s=[0.02], itl_s=0.01, tokens_per_chunk=3, send_usage=False, chunked=False)
    with FakeServer(cfg) as s:
        _, j = run_bench(s.url, tmp_path, "--num-prompts", 6, "--input-len", 10, "--output-len", 7,
                         "--vocab-size", 20, "--max-concurrency", 3)
    assert j["completed"] == 6
    assert j["output_lens"] == [3] * 6  # ceil(7 / 3) chunks
    assert j["input_lens"] == [10] * 6  # the dataset's exact lengths
    check_aggregates(j, [90, 99])


def arrival_stats(starts):
    t = np.sort(np.array(starts))
    gaps = np.diff(np.concatenate([[0.0], t]))
    return t[-1], gaps.mean(), gaps.std() / gaps.mean()


@pytest.mark.parametrize("burstiness", [1.0, 4.0])
def test_arrival_process_rate_and_burstiness(tmp_path, burstiness):
    cfg = FakeConfig(ttft_s=[0.001], itl_s=0.0)
    n, rate = 200, 100.0
    with FakeServer(cfg) as s:
        _, j = run_bench(s.url, tmp_path, "--num-prompts", n, "--input-len", 4, "--output-len", 1,
                         "--vocab-size", 10, "--request-rate", rate, "--burstiness", burstiness, "--seed", 5)
    assert j["completed"] == n and j["request_rate"] == rate and j["burstiness"] == burstiness
    last, mean_gap, cv = arrival_stats(j["start_times"])
    assert last == pytest.approx(n / rate, abs=0.05)  # the schedule ends at N / rate
    assert mean_gap == pytest.approx(1 / rate, rel=0.05)
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.25)
    assert all(q >= 0 and q < 0.05 for q in j["queue_times"])


def test_sharegpt_file_counted_by_server_tokenize(tmp_path):
    conversations = json.load(open(SHAREGPT_MINI))
    valid = {}
    for c in conversations:
        if not isinstance(c, dict) or len(c["conversations"]) < 2 or "value" not in c["conversations"][0]:
            continue
        p, a = c["conversations"][0]["value"], c["conversations"][1]["value"]
        if len(p.split()) >= 4 and len(a.split()) >= 4:
            valid[p] = len(a.split())
    assert len(valid) == 4
    with FakeServer(FakeConfig(ttft_s=[0.01], itl_s=0.0, tokens_per_chunk=8)) as s:
        r, j = run_bench(s.url, tmp_path, "--dataset", "sharegpt", "--dataset-path", SHAREGPT_MINI,
                         "--num-prompts", 8)
        log = s.log
    assert "/tokenize" in r.stdout
    prompts = [e["body"]["prompt"] for e in log]
    assert set(prompts) == set(valid) and len(prompts) == 8
    for e in log:
        assert e["body"]["max_tokens"] == valid[e["body"]["prompt"]]
    assert sorted(j["input_lens"]) == sorted(len(p.split()) for p in prompts)
    check_aggregates(j, [90, 99])


def test_sharegpt_file_estimates_without_tokenize(tmp_path):
    with FakeServer(FakeConfig(ttft_s=[0.01], itl_s=0.0, tokens_per_chunk=8, tokenize=False, send_usage=False)) as s:
        r, j = run_bench(s.url, tmp_path, "--dataset", "sharegpt", "--dataset-path", SHAREGPT_MINI,
                         "--num-prompts", 4, "--output-len", 5)
        log = s.log
    assert "chars/4" in r.stdout
    assert sorted(j["input_lens"]) == sorted(math.ceil(len(e["body"]["prompt"]) / 4) for e in log)
    assert all(e["body"]["max_tokens"] == 5 for e in log)


def test_sharegpt_like_lengths_without_a_file(tmp_path):
    with FakeServer(FakeConfig(ttft_s=[0.0], itl_s=0.0, tokens_per_chunk=4096)) as s:
        _, j = run_bench(s.url, tmp_path, "--dataset", "sharegpt", "--num-prompts", 400, "--vocab-size", 100,
                         "--max-concurrency", 16, "--seed", 1)
        log = s.log
    ins = np.array([len(e["body"]["prompt"]) for e in log])
    outs = np.array([e["body"]["max_tokens"] for e in log])
    assert len(log) == 400 and j["completed"] == 400
    assert ins.mean() == pytest.approx(220, rel=0.12) and outs.mean() == pytest.approx(190, rel=0.12)
    assert ins.min() >= 4 and ins.max() <= 1024 and outs.min() >= 4
    assert np.std(np.log(ins)) > 0.5  # log-normal spread, not a constant


def test_prefix_dataset_shares_the_prefix(tmp_path):
    with FakeServer(FakeConfig(ttft_s=[0.0], itl_s=0.0)) as s:
        _, j = run_bench(s.url, tmp_path, "--dataset", "prefix", "--prefix-len", 32, "--input-len", 8,
                         "--output-len", 2, "--num-prompts", 10, "--vocab-size", 1000)
        prompts = [e["body"]["prompt"] for e in s.log]
    assert all(len(p) == 40 and p[:32] == prompts[0][:32] for p in prompts)
    assert len({tuple(p[32:]) for p in prompts}) == 10
    assert j["dataset"] == "prefix" and j["prefix_len"] == 32


def test_random_ids_from_server_tokenize_and_chat_endpoint(tmp_path):
    with FakeServer(FakeConfig(ttft_s=[0.01], itl_s=0.005)) as s:
        _, j = run_bench(s.url, tmp_path, "--endpoint", "/v1/chat/completions", "--num-prompts", 5,
                         "--input-len", 6, "--output-len", 3, "--api-key", "sekrit")
        log = s.log
    # Prompts were built from ids the server's tokenizer produced, then
    # turned into text with /detokenize ("w<id>" words).
    for e in log:
        assert e["path"] == "/v1/chat/completions" and e["auth"] == "Bearer sekrit"
        words = e["body"]["messages"][0]["content"].split()
        assert len(words) == 6 and all(w.startswith("w") and 1 <= int(w[1:]) <= 997 for w in words)
        assert e["body"]["max_completion_tokens"] == 3
    assert j["completed"] == 5 and j["output_lens"] == [3] * 5
    check_aggregates(j, [90, 99])


def test_sweep_writes_one_result_per_rate_and_png_plots(tmp_path):
    plots = tmp_path / "plots"
    with FakeServer(FakeConfig(ttft_s=[0.01, 0.03], itl_s=0.005, tokens_per_chunk=2)) as s:
        r, j = run_bench(s.url, tmp_path, "--num-prompts", 12, "--input-len", 5, "--output-len", 6,
                         "--range-ratio", 0.5, "--vocab-size", 30, "--sweep-rates", "40,inf", "--plots", plots)
    runs = j["sweep"]
    assert [x["request_rate"] for x in runs] == [40, "inf"]
    for x in runs:
        assert x["completed"] == 12
        check_aggregates(x, [90, 99])
    assert r.stdout.count("Serving Benchmark Result") == 2
    for name in ("latency_cdf.png", "sweep_throughput.png", "sweep_latency.png"):
        data = (plots / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name
    cdf = np.loadtxt(plots / "cdf_ttft_0.dat")
    assert cdf.shape == (12, 2) and cdf[-1, 1] == 1.0 and np.all(np.diff(cdf[:, 0]) >= 0)


def test_connection_failures_are_counted_not_fatal(tmp_path):
    _, j = run_bench("http://127.0.0.1:1", tmp_path, "--model", "m", "--num-prompts", 3, "--vocab-size", 10,
                     "--input-len", 4, "--output-len", 2)
    assert j["completed"] == 0 and j["failed"] == 3
    assert all("connect" in e for e in j["errors"])


def test_unreachable_server_and_failing_test_request_are_errors(tmp_path):
    r, _ = run_bench("http://127.0.0.1:1", tmp_path, "--num-prompts", 3, "--vocab-size", 10, check=False)
    assert r.returncode == 1 and "127.0.0.1:1" in r.stderr
    with FakeServer(FakeConfig(fail_mod=1)) as s:
        cmd = [PAGODA_BIN, "bench", "serve", "--base-url", s.url, "--num-prompts", 2, "--vocab-size", 10,
               "--input-len", 4, "--ready-check-timeout-sec", "0.5"]
        r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "initial test request failed" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--request-rate", "0"], "request rate"),
    (["--goodput", "ttft"], "--goodput"),
    (["--goodput", "foo:3"], "--goodput"),
    (["--range-ratio", "1.5"], "range-ratio"),
    (["--base-url", "https://x"], "https"),
    (["--dataset", "random", "--dataset-path", "x.json"], "--dataset-path"),
])
def test_bad_flags_are_reported(args, needle):
    base = [] if "--base-url" in args else ["--base-url", "http://127.0.0.1:1"]
    r = subprocess.run([PAGODA_BIN, "bench", "serve", "--model", "m", "--vocab-size", "10",
                        "--ready-check-timeout-sec", "0", *base, *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and needle in r.stderr, r.stderr
