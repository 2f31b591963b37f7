"""Raw HTTP against the server: what a hostile or clumsy client can send."""
import json
import signal
import socket
import struct
import threading
import time
from urllib.parse import urlparse

import pytest
import requests

from server_harness import API_KEY, MAX_BODY_BYTES, MODEL, launch, metrics, wait_until

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def address(base_url):
    u = urlparse(base_url)
    return u.hostname, u.port


def post(base_url, path, body, headers=AUTH, **kw):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return requests.post(base_url + path, data=data, headers={"Content-Type": "application/json", **headers},
                         timeout=60, **kw)


def assert_openai_error(response, status, param=None):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    if param is not None:
        assert error["param"] == param, error


def raw_request(method, path, body=b"", headers=None):
    head = f"{method} {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {API_KEY}\r\n"
    for k, v in (headers or {}).items():
        head += f"{k}: {v}\r\n"
    if body or method == "POST":
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def read_response(sock, buf=b""):
    """Reads one Content-Length response; returns (status, headers, body, leftover)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, "connection closed before the headers"
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers["content-length"])
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk
        rest += chunk
    return status, headers, rest[:length], rest[length:]


def test_health_is_open_and_other_routes_need_the_key(base_url):
    assert requests.get(base_url + "/health", timeout=10).status_code == 200
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY}):
        r = requests.get(base_url + "/v1/models", headers=headers, timeout=10)
        assert_openai_error(r, 401)
        assert r.json()["error"]["type"] == "authentication_error"
    r = post(base_url, "/v1/completions", {"prompt": "x"}, headers={})
    assert_openai_error(r, 401)
    assert requests.get(base_url + "/v1/models", headers=AUTH, timeout=10).status_code == 200


def test_malformed_json_and_non_object_bodies(base_url):
    for body in ["{", "{\"prompt\": }", "nul", "", "[1, 2]", "\"prompt\"", "{\"a\": 1} trailing"]:
        assert_openai_error(post(base_url, "/v1/completions", body), 400)
        assert_openai_error(post(base_url, "/v1/chat/completions", body), 400)


def test_invalid_utf8_is_400(base_url):
    for body in [b'{"prompt": "\xff\xfe"}', b'{"prompt": "\xc0\x80"}', b'{"prompt": "\xed\xa0\x80"}']:
        r = post(base_url, "/v1/completions", body)
        assert_openai_error(r, 400)
        assert "UTF-8" in r.json()["error"]["message"]


@pytest.mark.parametrize("field,value", [
    ("max_tokens", "16"), ("max_tokens", 1.5), ("max_tokens", -1), ("temperature", "hot"), ("temperature", 3),
    ("top_p", 0), ("top_p", [1]), ("top_k", -5), ("min_p", 2), ("n", 0), ("n", "2"), ("seed", "1"),
    ("stop", 7), ("stop", ["a", None]), ("presence_penalty", 9), ("frequency_penalty", "x"),
    ("repetition_penalty", 0), ("logit_bias", {"abc": 1}), ("logit_bias", {"1": 500}), ("logprobs", 21),
    ("logprobs", True), ("echo", "yes"), ("stream", 1), ("ignore_eos", "true"), ("min_tokens", -2),
    ("stop_token_ids", [10 ** 9]), ("priority", "high"), ("user", 5), ("suffix", "tail"),
])
def test_completion_field_errors_name_the_field(base_url, field, value):
    r = post(base_url, "/v1/completions", {"model": MODEL, "prompt": "hello", field: value})
    assert_openai_error(r, 400, param=field)


@pytest.mark.parametrize("body,param", [
    ({"messages": []}, "messages"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "user"}]}, "messages[0].content"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]},
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}, "top_logprobs"),
    ({"messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, "tools[0].function"),
    ({"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"}, "tool_choice"),
    ({"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": True}}, "stream_options"),
    ({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": "many"}, "max_completion_tokens"),
])
def test_chat_field_errors_name_the_field(base_url, body, param):
    assert_openai_error(post(base_url, "/v1/chat/completions", body), 400, param=param)


def test_unknown_fields_are_ignored(base_url):
    r = post(base_url, "/v1/completions", {"prompt": "hello", "max_tokens": 2, "no_such_field": {"x": [1]},
                                           "metadata": None})
    assert r.status_code == 200, r.text
    r = post(base_url, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi", "extra": 1}],
                                                "max_tokens": 2, "frobnicate": True})
    assert r.status_code == 200, r.text


def test_routes_404_405_and_model_404(base_url):
    r = requests.get(base_url + "/v1/nothing", headers=AUTH, timeout=10)
    assert_openai_error(r, 404)
    r = requests.get(base_url + "/v1/completions", headers=AUTH, timeout=10)
    assert_openai_error(r, 405)
    assert r.headers["Allow"] == "POST"
    r = requests.delete(base_url + "/v1/models", headers=AUTH, timeout=10)
    assert_openai_error(r, 405)
    r = post(base_url, "/v1/completions", {"model": "gpt-17", "prompt": "x"})
    assert_openai_error(r, 404, param="model")
    assert r.json()["error"]["code"] == "model_not_found"
    assert requests.get(base_url + "/v1/models/nope", headers=AUTH, timeout=10).status_code == 404


def test_huge_body_is_413(base_url):
    body = json.dumps({"prompt": "x" * (MAX_BODY_BYTES + 10)})
    r = post(base_url, "/v1/completions", body)
    assert_openai_error(r, 413)
    # Also when the size is only known while reading (chunked upload).
    def chunks():
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b" " * 65536
    r = requests.post(base_url + "/v1/completions", data=chunks(), headers=AUTH, timeout=60)
    assert_openai_error(r, 413)
    assert requests.get(base_url + "/health", timeout=10).status_code == 200


def test_prompt_longer_than_context_is_400(base_url):
    r = post(base_url, "/v1/completions", {"prompt": "one two three " * 400, "max_tokens": 4})
    assert_openai_error(r, 400, param="prompt")
    assert r.json()["error"]["code"] == "context_length_exceeded"


def test_keep_alive_reuses_one_connection(base_url):
    with socket.create_connection(address(base_url), timeout=30) as sock:
        leftover = b""
        for i in range(4):
            body = json.dumps({"prompt": f"hello {i}", "max_tokens": 3}).encode()
            sock.sendall(raw_request("POST", "/v1/completions", body))
            status, headers, payload, leftover = read_response(sock, leftover)
            assert status == 200
            assert headers["connection"] == "keep-alive"
            assert json.loads(payload)["object"] == "text_completion"
        # Pipelined: two requests in one write, answered in order.
        sock.sendall(raw_request("GET", "/version") + raw_request("GET", "/v1/models"))
        status, _, payload, leftover = read_response(sock, leftover)
        assert "version" in json.loads(payload)
        status, _, payload, leftover = read_response(sock, leftover)
        assert json.loads(payload)["data"][0]["id"] == MODEL


def test_malformed_http_is_400_not_a_crash(base_url):
    for garbage in [b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
                    b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n"]:
        with socket.create_connection(address(base_url), timeout=30) as sock:
            sock.sendall(garbage)
            data = sock.recv(65536)
            assert data.startswith(b"HTTP/1.1 400"), data
    assert requests.get(base_url + "/health", timeout=10).status_code == 200


def running_and_aborted(base_url):
    m = metrics(base_url)
    running = m[f'pagoda:num_requests_running{{model_name="{MODEL}"}}']
    aborted = m[f'pagoda:request_success_total{{model_name="{MODEL}",finished_reason="abort"}}']
    return running, aborted


@pytest.mark.parametrize("stream", [True, False])
def test_disconnect_aborts_the_request(base_url, stream):
    _, aborted_before = running_and_aborted(base_url)
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True, "stream": stream})
    sock = socket.create_connection(address(base_url), timeout=30)
    sock.sendall(raw_request("POST", "/v1/completions", body.encode()))
    assert wait_until(lambda: running_and_aborted(base_url)[0] >= 1), "the request never ran"
    if stream:
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
    sock.close()
    assert wait_until(lambda: running_and_aborted(base_url)[1] >= aborted_before + 1), "not aborted"
    assert wait_until(lambda: running_and_aborted(base_url)[0] == 0)


def test_a_slow_reader_does_not_stall_others(base_url):
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 300, "ignore_eos": True, "stream": True})
    stalled = socket.create_connection(address(base_url), timeout=30)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    stalled.sendall(raw_request("POST", "/v1/completions", body.encode()))
    try:
        start = time.monotonic()
        for _ in range(3):
            r = post(base_url, "/v1/completions", {"prompt": "hi", "max_tokens": 8})
            assert r.status_code == 200
        assert time.monotonic() - start < 20
    finally:
        stalled.close()


def test_sse_stream_format(base_url):
    r = post(base_url, "/v1/completions", {"prompt": "Once", "max_tokens": 6, "stream": True}, stream=True)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/event-stream")
    raw = r.content.decode()
    events = raw.split("\n\n")
    assert events[-1] == ""
    events = events[:-1]
    assert all(e.startswith("data: ") and "\n" not in e for e in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert all(c["object"] == "text_completion" and c["model"] == MODEL for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_tokenize_detokenize_round_trip(base_url):
    text = "The little dog ran home."
    t = post(base_url, "/tokenize", {"prompt": text, "add_special_tokens": False}).json()
    assert t["count"] == len(t["tokens"]) > 0
    assert t["max_model_len"] > 0
    d = post(base_url, "/detokenize", {"tokens": t["tokens"]}).json()
    assert d["prompt"] == text
    chat = post(base_url, "/tokenize", {"messages": [{"role": "user", "content": text}]}).json()
    assert chat["count"] > t["count"]
    assert_openai_error(post(base_url, "/detokenize", {"tokens": ["a"]}), 400, param="tokens")


def test_metrics_exposition(base_url):
    post(base_url, "/v1/completions", {"prompt": "hello", "max_tokens": 3})
    m = metrics(base_url)
    label = f'{{model_name="{MODEL}"}}'
    for name in ["pagoda:num_requests_running", "pagoda:num_requests_waiting", "pagoda:kv_cache_usage_perc",
                 "pagoda:prompt_tokens_total", "pagoda:generation_tokens_total", "pagoda:num_preemptions_total",
                 "pagoda:prefix_cache_queries_total", "pagoda:prefix_cache_hits_total",
                 "pagoda:time_to_first_token_seconds_count", "pagoda:time_per_output_token_seconds_count",
                 "pagoda:e2e_request_latency_seconds_count", "pagoda:request_queue_time_seconds_count"]:
        assert name + label in m, name
    assert m["pagoda:prompt_tokens_total" + label] > 0
    assert m["pagoda:generation_tokens_total" + label] >= 3
    count = m["pagoda:time_to_first_token_seconds_count" + label]
    inf = m[f'pagoda:time_to_first_token_seconds_bucket{{model_name="{MODEL}",le="+Inf"}}']
    assert inf == count >= 1


def test_metrics_parse_with_the_prometheus_client(base_url):
    """Every family of /metrics, read by prometheus_client's text-format parser,
    has its declared type and its samples (a counter whose TYPE line names the
    family without _total reads as an empty counter beside an 'unknown' one)."""
    from prometheus_client.parser import text_string_to_metric_families
    post(base_url, "/v1/completions", {"prompt": "hello", "max_tokens": 3})
    text = requests.get(base_url + "/metrics", headers=AUTH, timeout=30).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert [f.name for f in families.values() if f.type == "unknown"] == []
    assert [f.name for f in families.values() if not f.samples] == []
    counters = [f for f in families.values() if f.type == "counter"]
    assert len(counters) >= 11, sorted(families)
    for f in counters:
        assert not f.name.endswith("_total"), f.name
        assert all(s.name == f.name + "_total" for s in f.samples), f.samples
    assert families["pagoda:generation_tokens"].samples[0].value >= 3
    reasons = {s.labels["finished_reason"] for s in families["pagoda:request_success"].samples}
    assert reasons == {"stop", "length", "abort"}
    for name in ["pagoda:time_to_first_token_seconds", "pagoda:e2e_request_latency_seconds"]:
        assert families[name].type == "histogram"
        assert {s.name for s in families[name].samples} == {name + "_bucket", name + "_sum", name + "_count"}
    for name in ["pagoda:num_requests_running", "pagoda:kv_cache_usage_perc"]:
        assert families[name].type == "gauge" and len(families[name].samples) == 1


def test_metrics_detokenize_seconds_within_step_seconds(base_url):
    post(base_url, "/v1/completions", {"prompt": "hello", "max_tokens": 3})
    m = metrics(base_url)
    label = f'{{model_name="{MODEL}"}}'
    detok = m["pagoda:engine_detokenize_seconds_total" + label]
    assert 0 <= detok <= m["pagoda:engine_step_seconds_total" + label]


def test_queue_full_is_429():
    proc = launch(max_num_seqs=1, max_waiting=1, fake_step_us=20000)
    try:
        body = {"prompt": "Once upon a time", "max_tokens": 50, "ignore_eos": True}
        results = []
        start = threading.Barrier(8)

        def go():
            start.wait()
            results.append(post(proc.url, "/v1/completions", body))

        threads = [threading.Thread(target=go) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = [r.status_code for r in results]
        assert codes.count(429) >= 1, codes
        assert codes.count(200) >= 1, codes
        assert set(codes) <= {200, 429}, codes
        for r in results:
            if r.status_code == 429:
                assert_openai_error(r, 429)
    finally:
        assert proc.stop() == 0


def test_sigterm_drains_in_flight_requests():
    proc = launch(fake_step_us=5000)
    try:
        body = json.dumps({"prompt": "Once", "max_tokens": 100, "ignore_eos": True, "stream": True}).encode()
        sock = socket.create_connection(address(proc.url), timeout=60)
        sock.sendall(raw_request("POST", "/v1/completions", body))
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        proc.proc.send_signal(signal.SIGTERM)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if data.endswith(b"0\r\n\r\n"):
                break
        assert b"data: [DONE]" in data, "the in-flight stream was cut"
        assert b'"finish_reason":"length"' in data
        assert proc.proc.wait(timeout=60) == 0
        with pytest.raises(OSError):
            socket.create_connection(address(proc.url), timeout=5)
    finally:
        proc.stop()


def stream_request(source="127.0.0.1", url=None):
    """A connection from `source` running a long streamed request, once its answer has started."""
    sock = socket.create_connection(address(url), timeout=30, source_address=(source, 0))
    body = json.dumps({"prompt": "Once", "max_tokens": 400, "ignore_eos": True, "stream": True}).encode()
    sock.sendall(raw_request("POST", "/v1/completions", body))
    assert sock.recv(1024).startswith(b"HTTP/1.1 200")
    return sock


def reset(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def assert_refused(url, source):
    """A request from `source` gets 503 too_many_connections, then the server closes."""
    with socket.create_connection(address(url), timeout=30, source_address=(source, 0)) as sock:
        sock.sendall(raw_request("GET", "/health"))
        status, headers, payload, _ = read_response(sock)
        assert status == 503 and headers["connection"] == "close"
        error = json.loads(payload)["error"]
        assert error["type"] == "server_error" and error["code"] == "too_many_connections"
        assert sock.recv(1) == b""


def test_disconnect_after_an_extra_byte_aborts_the_request(fake_only):
    # The fake engine's 20 ms steps keep the request running; stories260K
    # would finish its 400 tokens (0.1 s) before the reset.
    proc = launch(fake_step_us=20000)
    try:
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True}).encode()
        sock = socket.create_connection(address(proc.url), timeout=30)
        sock.sendall(raw_request("POST", "/v1/completions", body))
        assert wait_until(lambda: running_and_aborted(proc.url)[0] == 1), "the request never ran"
        sock.sendall(b"\r")  # one byte more (the start of a next request), then a reset
        time.sleep(0.1)
        reset(sock)
        assert wait_until(lambda: running_and_aborted(proc.url)[1] == 1, timeout=5), "not aborted"
    finally:
        assert proc.stop() == 0


def test_connection_limits_shed_idle_and_refuse_when_busy(fake_only):
    # Busy connections are streams kept running by the fake's 20 ms steps.
    proc = launch(fake_step_us=20000, extra_args=["--max-connections", 8, "--max-connections-per-peer", 4,
                                                   "--header-timeout", 1])
    busy = []
    try:
        # Idle connections beyond the limit: the oldest are closed, new clients get in.
        idle = [socket.create_connection(address(proc.url), timeout=30) for _ in range(12)]
        assert requests.get(proc.url + "/health", timeout=10).status_code == 200
        idle[0].settimeout(5)
        assert idle[0].recv(1) == b"", "the oldest idle connection was not closed"
        for sock in idle:
            sock.close()
        # Busy at the per-peer limit: 503 for that peer only, then at the overall limit for everyone.
        busy = [stream_request("127.0.0.1", proc.url) for _ in range(4)]
        assert_refused(proc.url, "127.0.0.1")
        with socket.create_connection(address(proc.url), timeout=30, source_address=("127.0.0.2", 0)) as sock:
            sock.sendall(raw_request("GET", "/health"))
            assert read_response(sock)[0] == 200  # another peer still gets in
        busy += [stream_request("127.0.0.2", proc.url) for _ in range(4)]
        assert_refused(proc.url, "127.0.0.3")
        for sock in busy:
            reset(sock)
        busy = []
        # A client sending its header a byte at a time is closed after --header-timeout.
        with socket.create_connection(address(proc.url), timeout=30) as sock:
            start = time.monotonic()
            closed = False
            for byte in b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa":
                try:
                    sock.sendall(bytes([byte]))
                    sock.settimeout(0.25)
                    closed = sock.recv(1) == b""
                except socket.timeout:
                    continue
                except OSError:
                    closed = True
                if closed:
                    break
            assert closed and time.monotonic() - start < 4
    finally:
        for sock in busy:
            reset(sock)
        assert proc.stop() == 0
