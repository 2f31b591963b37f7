"""Overload and fairness (issue 23): a burst beyond the queue gets 429 (never
a 200 without text), a response too large to build is refused up front, a
light request answers while huge prompts are in flight, and SIGTERM stops a
server that is still reading or tokenizing a large request."""
import asyncio
import json
import signal
import statistics
import threading
import time
from urllib.parse import urlparse

import requests

from server_harness import API_KEY, MODEL, launch

HEADERS = {"Authorization": f"Bearer {API_KEY}"}


async def _post(host, port, path, payload):
    """One request on its own connection; returns (status, parsed body)."""
    body = json.dumps(payload).encode()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write((f"POST {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {API_KEY}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                  ).encode() + body)
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(rest) if rest else None


def test_burst_beyond_the_queue_gets_429_never_an_empty_200():
    """400 concurrent completions against 16 running + 32 waiting: each one is
    a complete 200 or a 429 with an OpenAI error body."""
    proc = launch(max_num_seqs=16, max_waiting=32)
    try:
        host, port = urlparse(proc.url).hostname, urlparse(proc.url).port
        payload = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 8, "ignore_eos": True}

        async def main():
            return await asyncio.wait_for(
                asyncio.gather(*(_post(host, port, "/v1/completions", payload) for _ in range(400))), timeout=120)

        results = asyncio.run(main())
        ok = refused = 0
        for status, body in results:
            if status == 200:
                choice = body["choices"][0]
                assert choice["text"] and choice["finish_reason"] in ("stop", "length"), body
                ok += 1
            else:
                assert status == 429, (status, body)
                assert body["error"]["message"] and body["error"]["type"], body
                refused += 1
        assert ok >= 32 and refused > 0, (ok, refused)  # at least the waiting bound is accepted
    finally:
        assert proc.stop() == 0


def test_response_larger_than_the_bound_is_refused_up_front(base_url):
    payload = {"model": MODEL, "prompt": "Hi", "n": 128, "max_tokens": 500, "logprobs": 20}
    start = time.monotonic()
    r = requests.post(base_url + "/v1/completions", json=payload, headers=HEADERS, timeout=60)
    elapsed = time.monotonic() - start
    assert r.status_code == 400, r.text
    assert elapsed < 1.0
    message = r.json()["error"]["message"]
    for word in ("max_tokens", "n", "logprobs", "--max-response-bytes"):
        assert word in message, message
    # Streamed, each event is small: not bounded.
    payload.update(stream=True, n=1, max_tokens=4)
    assert requests.post(base_url + "/v1/completions", json=payload, headers=HEADERS, timeout=60).status_code == 200


def test_response_bound_is_configurable():
    """A request under --max-response-bytes is served; the same request with
    more samples is refused."""
    proc = launch(extra_args=["--max-response-bytes", 1 << 20])
    try:
        payload = {"model": MODEL, "prompt": "Once upon a time", "n": 4, "max_tokens": 16, "logprobs": 5}
        r = requests.post(proc.url + "/v1/completions", json=payload, headers=HEADERS, timeout=60)
        assert r.status_code == 200, r.text
        payload.update(n=64, max_tokens=200)
        r = requests.post(proc.url + "/v1/completions", json=payload, headers=HEADERS, timeout=60)
        assert r.status_code == 400 and "1048576" in r.json()["error"]["message"], r.text
    finally:
        assert proc.stop() == 0


def _huge_prompt(num_bytes):
    return ("Once upon a time there was a little cat. " * (num_bytes // 42 + 1))[:num_bytes]


def test_light_request_answers_while_huge_prompts_are_in_flight():
    proc = launch(max_body_bytes=64 << 20)
    try:
        heavy_status = []

        def heavy():
            r = requests.post(proc.url + "/v1/completions", headers=HEADERS, timeout=300,
                              json={"model": MODEL, "prompt": _huge_prompt(25 << 20), "max_tokens": 4})
            heavy_status.append(r.status_code)

        threads = [threading.Thread(target=heavy) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # both bodies are on their way or being worked on
        latencies, statuses = [], []

        def light():
            start = time.monotonic()
            r = requests.post(proc.url + "/v1/completions", headers=HEADERS, timeout=300,
                              json={"model": MODEL, "prompt": "Once upon a time", "max_tokens": 4})
            latencies.append(time.monotonic() - start)
            statuses.append(r.status_code)

        lights = [threading.Thread(target=light) for _ in range(5)]
        for t in lights:
            t.start()
        for t in lights + threads:
            t.join()
        assert statuses == [200] * 5
        print("light request latencies (s):", [round(x, 3) for x in latencies], "heavy:", heavy_status)
        assert statistics.median(latencies) < 1.0, latencies
        assert heavy_status == [400, 400]
    finally:
        assert proc.stop() == 0


def test_sigterm_while_large_requests_are_worked_on_exits_promptly():
    proc = launch(max_body_bytes=64 << 20)
    senders = [threading.Thread(target=lambda: _post_ignoring_errors(proc.url, _huge_prompt(30 << 20)))
               for _ in range(2)]
    for t in senders:
        t.start()
    time.sleep(1.5)  # the bodies are read; parsing or tokenizing them
    start = time.monotonic()
    proc.proc.send_signal(signal.SIGTERM)
    try:
        code = proc.proc.wait(timeout=60)
    except Exception:
        proc.stop(signal.SIGKILL)
        raise AssertionError("the server was still running 60 s after SIGTERM:\n" + proc.output())
    elapsed = time.monotonic() - start
    for t in senders:
        t.join()
    print(f"exited {elapsed:.2f} s after SIGTERM")
    assert code == 0, proc.output()
    assert elapsed < 3.0, proc.output()


def _post_ignoring_errors(url, prompt):
    try:
        requests.post(url + "/v1/completions", headers=HEADERS, timeout=120,
                      json={"model": MODEL, "prompt": prompt, "max_tokens": 4})
    except requests.RequestException:
        pass


def test_a_request_the_engine_fails_is_never_a_200(base_url, fake_only):
    """The fake's "FAIL:" prompt ends every sample with an engine error (as a
    failed model step does): a 500, or an SSE error event once streaming."""
    payload = {"model": MODEL, "prompt": "FAIL: boom", "max_tokens": 4, "n": 2}
    r = requests.post(base_url + "/v1/completions", json=payload, headers=HEADERS, timeout=60)
    assert r.status_code == 500, r.text
    assert r.json()["error"]["code"] == "internal_error"
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "FAIL: boom"}], "max_tokens": 4}
    r = requests.post(base_url + "/v1/chat/completions", json=chat, headers=HEADERS, timeout=60)
    assert r.status_code == 500, r.text
    r = requests.post(base_url + "/v1/completions", json={**payload, "stream": True}, headers=HEADERS, timeout=60)
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    assert events and "error" in events[-1], r.text
    assert all("error" in e or e["choices"][0]["finish_reason"] is None for e in events), r.text


def test_sigterm_does_not_wait_long_for_a_request_still_being_parsed(fake_only):
    """Two 61 MB chat bodies of 1.8M messages take about 5.6 s each to parse
    and render on the heavy lane; shutdown waits --worker-timeout-s (1 s) for
    them once nothing else is being answered, then exits 0."""
    proc = launch(max_body_bytes=64 << 20, extra_args=["--worker-timeout-s", 1])
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "x"}] * 1800000, "max_tokens": 4})

    def send():
        try:
            requests.post(proc.url + "/v1/chat/completions", data=body, timeout=120,
                          headers={**HEADERS, "Content-Type": "application/json"})
        except requests.RequestException:
            pass

    senders = [threading.Thread(target=send) for _ in range(2)]
    for t in senders:
        t.start()
    time.sleep(2.0)  # both bodies are read; the first is being parsed
    start = time.monotonic()
    proc.proc.send_signal(signal.SIGTERM)
    try:
        code = proc.proc.wait(timeout=60)
    except Exception:
        proc.stop(signal.SIGKILL)
        raise AssertionError("the server was still running 60 s after SIGTERM:\n" + proc.output())
    elapsed = time.monotonic() - start
    for t in senders:
        t.join()
    print(f"exited {elapsed:.2f} s after SIGTERM")
    assert code == 0, proc.output()
    assert elapsed < 3.0, proc.output()
