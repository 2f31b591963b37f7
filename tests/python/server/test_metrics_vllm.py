"""vLLM's /metrics families beside pagoda's, after real requests against the
real engine (PAGODA_TEST_REAL_ENGINE=1, stories260K): the whole exposition
read by prometheus_client's parser, and values consistent with what the
clients were told. Also the periodic engine stats line of
--stats-log-interval: written while busy, not while idle."""
import collections
import json
import re
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from server_harness import API_KEY, MODEL, REAL, launch, wait_until

AUTH = {"Authorization": f"Bearer {API_KEY}"}

pytestmark = pytest.mark.skipif(not REAL, reason="the engine's metrics need the real engine (PAGODA_TEST_REAL_ENGINE=1)")


def families(url):
    text = requests.get(url + "/metrics", headers=AUTH, timeout=30).text
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(fams, family, sample=None, **labels):
    """The one sample of `family` named `sample` (default: the family's own
    name, or name_total for a counter) whose labels include `labels`."""
    f = fams[family]
    sample = sample or (family + "_total" if f.type == "counter" else family)
    hits = [s.value for s in f.samples if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (family, sample, labels, f.samples)
    return hits[0]


def check_exposition(fams):
    """Every family well-formed as the text format and vLLM's label sets want."""
    assert [n for n, f in fams.items() if f.type == "unknown"] == []
    assert [n for n, f in fams.items() if not f.samples] == []
    for name, f in fams.items():
        if f.type == "counter":
            assert not name.endswith("_total") and all(s.name == name + "_total" for s in f.samples), name
        if f.type == "histogram":
            names = {s.name for s in f.samples}
            assert names == {name + "_bucket", name + "_sum", name + "_count"}, (name, names)
            buckets = [s for s in f.samples if s.name == name + "_bucket"]
            assert buckets[-1].labels["le"] == "+Inf", name
            bounds = [float(s.labels["le"]) for s in buckets]
            counts = [s.value for s in buckets]
            assert bounds == sorted(bounds) and len(set(bounds)) == len(bounds), name
            assert counts == sorted(counts), (name, counts)  # cumulative
            count = [s.value for s in f.samples if s.name == name + "_count"]
            assert count == [counts[-1]], name
        if name.startswith("vllm:"):
            for s in f.samples:
                assert s.labels["model_name"] == MODEL and s.labels["engine"] == "0", (name, s.labels)
        else:
            assert name.startswith("pagoda:"), name


VLLM_FAMILIES = {
    "gauge": ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
              "vllm:gpu_cache_usage_perc"],
    "counter": ["vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success", "vllm:num_preemptions",
                "vllm:prefix_cache_queries", "vllm:prefix_cache_hits"],
    "histogram": ["vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                  "vllm:time_per_output_token_seconds", "vllm:request_time_per_output_token_seconds",
                  "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
                  "vllm:request_inference_time_seconds", "vllm:request_prefill_time_seconds",
                  "vllm:request_decode_time_seconds", "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
                  "vllm:request_max_num_generation_tokens", "vllm:request_params_n",
                  "vllm:request_params_max_tokens", "vllm:request_prefill_kv_computed_tokens",
                  "vllm:iteration_tokens_total"],
}


@pytest.fixture(scope="module")
def server():
    proc = launch()
    yield proc
    assert proc.stop() == 0, proc.output()


def idle(url):
    fams = families(url)
    return value(fams, "vllm:num_requests_running") == 0 and value(fams, "vllm:num_requests_waiting") == 0


def finished_total(url):
    fams = families(url)
    return sum(value(fams, "vllm:request_success", finished_reason=r) for r in ("stop", "length", "abort"))


def test_vllm_metrics_match_the_requests(server):
    url = server.url
    long_prompt = "Once upon a time there was a little girl who liked to play in the park with her dog. " * 2
    bodies = [
        ("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 5}),
        ("/v1/completions", {"prompt": "The cat", "max_tokens": 12, "temperature": 0}),
        ("/v1/completions", {"prompt": "Lily went", "max_tokens": 40, "stop": ["."], "temperature": 0}),
        ("/v1/completions", {"prompt": "Tom had a ball", "max_tokens": 60, "stop": [" "], "seed": 3}),
        ("/v1/completions", {"prompt": long_prompt, "max_tokens": 7}),
        ("/v1/completions", {"prompt": long_prompt, "max_tokens": 9, "stream": True,
                             "stream_options": {"include_usage": True}}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}),
    ]
    prompt_tokens = completion_tokens = cached = itl = 0
    reasons = collections.Counter()
    for path, body in bodies:
        r = requests.post(url + path, json={"model": MODEL, **body}, headers=AUTH, timeout=60)
        assert r.status_code == 200, r.text
        if body.get("stream"):
            chunks = [line[6:] for line in r.text.split("\n") if line.startswith("data: ") and line != "data: [DONE]"]
            parsed = [json.loads(c) for c in chunks]
            usage = parsed[-1]["usage"]
            finish = [c["choices"][0]["finish_reason"] for c in parsed if c["choices"] and
                      c["choices"][0]["finish_reason"]]
            reasons[finish[-1]] += 1
        else:
            usage = r.json()["usage"]
            reasons[r.json()["choices"][0]["finish_reason"]] += 1
        prompt_tokens += usage["prompt_tokens"]
        completion_tokens += usage["completion_tokens"]
        cached += (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        itl += usage["completion_tokens"] - 1
    assert reasons["stop"] >= 1 and reasons["length"] >= 1, reasons
    n = len(bodies)
    # A request's success is counted just after its last event reaches the
    # client: wait for all n, not only for an idle scheduler.
    assert wait_until(lambda: idle(url) and finished_total(url) == n)

    fams = families(url)
    check_exposition(fams)
    for kind, names in VLLM_FAMILIES.items():
        for name in names:
            assert fams[name].type == kind, name
    # Counters: what the clients were told.
    assert value(fams, "vllm:prompt_tokens") == prompt_tokens == value(fams, "pagoda:prompt_tokens")
    assert value(fams, "vllm:generation_tokens") == completion_tokens == value(fams, "pagoda:generation_tokens")
    for reason in ("stop", "length", "abort"):
        assert value(fams, "vllm:request_success", finished_reason=reason) == reasons[reason], reason
    assert value(fams, "vllm:prefix_cache_hits") == value(fams, "pagoda:prefix_cache_hits") >= cached > 0
    assert value(fams, "vllm:prefix_cache_queries") >= value(fams, "vllm:prefix_cache_hits")
    assert value(fams, "vllm:kv_cache_usage_perc") == value(fams, "vllm:gpu_cache_usage_perc")
    assert 0 <= value(fams, "vllm:kv_cache_usage_perc") <= 1

    def count(name):
        return value(fams, name, sample=name + "_count")

    def total(name):
        return value(fams, name, sample=name + "_sum")

    # One observation per request (all finished), one per token after a sample's first.
    for name in ["vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                 "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
                 "vllm:request_decode_time_seconds", "vllm:request_inference_time_seconds",
                 "vllm:request_time_per_output_token_seconds", "vllm:request_prompt_tokens",
                 "vllm:request_generation_tokens", "vllm:request_params_n", "vllm:request_params_max_tokens",
                 "vllm:request_max_num_generation_tokens", "vllm:request_prefill_kv_computed_tokens"]:
        assert count(name) == n, name
    assert count("vllm:inter_token_latency_seconds") == itl == count("vllm:time_per_output_token_seconds")
    assert total("vllm:request_prompt_tokens") == prompt_tokens
    assert total("vllm:request_generation_tokens") == completion_tokens
    assert total("vllm:request_max_num_generation_tokens") == completion_tokens  # n = 1
    assert total("vllm:request_prefill_kv_computed_tokens") == prompt_tokens - cached
    assert total("vllm:request_params_max_tokens") == sum(b["max_tokens"] for _, b in bodies)
    assert total("vllm:request_params_n") == n
    # Phases: queue + prefill + decode <= e2e; inference = prefill + decode.
    e2e = total("vllm:e2e_request_latency_seconds")
    phases = [total(f"vllm:request_{p}_time_seconds") for p in ("queue", "prefill", "decode")]
    assert all(p >= 0 for p in phases) and sum(phases) <= e2e + 1e-6
    assert abs(total("vllm:request_inference_time_seconds") - phases[1] - phases[2]) < 1e-6
    assert total("vllm:time_to_first_token_seconds") <= e2e + 1e-6
    # Every launched step was counted, and ran at least the prompt tokens not
    # cached and one token per decode.
    assert count("vllm:iteration_tokens_total") == value(fams, "pagoda:engine_steps")
    assert total("vllm:iteration_tokens_total") >= prompt_tokens - cached + itl


STATS = re.compile(r"engine stats: Avg prompt throughput: ([0-9.]+) tokens/s, Avg generation throughput: "
                   r"([0-9.]+) tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs, KV cache usage: ([0-9.]+)%, "
                   r"Prefix cache hit rate: ([0-9.]+)%")


def stats_lines(proc):
    return [m for m in (STATS.search(line) for line in list(proc.log)) if m]


def test_stats_log_line_while_busy_and_not_while_idle():
    proc = launch(extra_args=["--stats-log-interval", "1"])
    try:
        time.sleep(2.5)
        assert stats_lines(proc) == [], "an idle server logged stats"
        # Busy for a few intervals.
        start = time.monotonic()
        generated = 0
        while time.monotonic() - start < 3.5:
            r = requests.post(proc.url + "/v1/completions", headers=AUTH, timeout=60,
                              json={"model": MODEL, "prompt": "Once upon a time", "max_tokens": 300,
                                    "ignore_eos": True})
            assert r.status_code == 200
            generated += r.json()["usage"]["completion_tokens"]
        assert wait_until(lambda: len(stats_lines(proc)) >= 2, timeout=5), proc.output()
        lines = stats_lines(proc)
        assert any(float(m.group(2)) > 0 for m in lines), [m.group(0) for m in lines]
        assert all(int(m.group(3)) <= 1 and int(m.group(4)) == 0 for m in lines)
        # Idle again: at most the interval that straddled the end, then silence.
        time.sleep(1.5)
        settled = len(stats_lines(proc))
        time.sleep(3)
        assert len(stats_lines(proc)) == settled, "an idle server kept logging stats"
    finally:
        assert proc.stop() == 0, proc.output()


def test_stats_log_interval_zero_is_off():
    proc = launch(extra_args=["--stats-log-interval", "0"])
    try:
        start = time.monotonic()
        while time.monotonic() - start < 2.5:
            r = requests.post(proc.url + "/v1/completions", headers=AUTH, timeout=60,
                              json={"model": MODEL, "prompt": "Once", "max_tokens": 200, "ignore_eos": True})
            assert r.status_code == 200
        assert stats_lines(proc) == []
    finally:
        assert proc.stop() == 0, proc.output()
