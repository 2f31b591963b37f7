"""`pagoda serve` listens before it loads the model: a port in use fails at
once, before any loading; while the model loads, GET /health answers 503 with
llama-server's body and every other route 503 `model_loading` with
Retry-After; a signal during the load exits cleanly; a load that fails exits 1.
PAGODA_TEST_LOAD_DELAY_MS (test-only, docs/api.md) holds the load back so that
it can be observed."""
import signal
import socket
import time

import requests

from server_harness import API_KEY
from serve_process import serve

AUTH = {"Authorization": f"Bearer {API_KEY}"}
SLOW_LOAD = {"PAGODA_TEST_LOAD_DELAY_MS": "4000"}


def test_port_in_use_fails_at_once_before_loading():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        start = time.monotonic()
        proc = serve(env=SLOW_LOAD, port=port)
        code = proc.proc.wait(timeout=30)
        elapsed = time.monotonic() - start
    log = proc.output()
    assert code == 1, log
    assert elapsed < 2.0, (elapsed, log)
    assert f"127.0.0.1:{port}" in log and "in use" in log, log
    assert "loading" not in log and "tokenizer:" not in log and " model " not in log, log


def test_health_is_503_while_loading_then_200():
    proc = serve("--api-key", API_KEY, env=SLOW_LOAD)
    try:
        url = proc.accepting_url()
        health = requests.get(url + "/health", timeout=10)
        assert health.status_code == 503
        assert health.json() == {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
        assert health.headers["Retry-After"] == "5"

        completion = requests.post(url + "/v1/completions", json={"prompt": "Once"}, headers=AUTH, timeout=10)
        assert completion.status_code == 503
        error = completion.json()["error"]
        assert error["code"] == "model_loading" and "loading" in error["message"], error
        assert completion.headers["Retry-After"] == "5"
        assert requests.get(url + "/v1/models", headers=AUTH, timeout=10).status_code == 503
        assert requests.get(url + "/v1/models", timeout=10).status_code == 401  # still needs the key

        ready = proc.ready_url()
        assert ready == url
        assert requests.get(url + "/health", timeout=10).status_code == 200
        models = requests.get(url + "/v1/models", headers=AUTH, timeout=10)
        assert models.status_code == 200, models.text
    finally:
        assert proc.stop() == 0, proc.output()


def test_signal_while_loading_exits_cleanly():
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = serve(env={"PAGODA_TEST_LOAD_DELAY_MS": "60000"})
        proc.accepting_url()
        start = time.monotonic()
        proc.proc.send_signal(sig)
        code = proc.proc.wait(timeout=30)
        assert code == 0, proc.output()
        assert time.monotonic() - start < 5
        assert "while loading the model" in proc.output()


def test_a_load_that_fails_exits_1_with_the_error():
    proc = serve(model="/nonexistent/model-dir", chat_template=False)
    code = proc.proc.wait(timeout=60)
    log = proc.output()
    assert code == 1, log
    assert "accepting connections at" in log  # it listened first
    assert "/nonexistent/model-dir" in log.split("accepting connections at", 1)[1], log
