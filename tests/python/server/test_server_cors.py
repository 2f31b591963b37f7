"""CORS: browser clients can call the API. Preflights (OPTIONS with Origin and
Access-Control-Request-Method) are answered before routing and the API key;
every response to a request with an Origin header, errors and SSE streams
included, carries Access-Control-Allow-Origin. Defaults as vLLM's: any origin,
method and header, no credentials."""
import json

import pytest
import requests

from server_harness import API_KEY, MODEL, launch

AUTH = {"Authorization": f"Bearer {API_KEY}"}
ORIGIN = "http://localhost:3000"


def preflight(base_url, path, origin=ORIGIN, method="POST", headers="authorization, content-type"):
    return requests.options(base_url + path, headers={
        "Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers},
        timeout=30)


@pytest.fixture(scope="module")
def listed_server():
    """Origins, methods and headers given as lists, in both accepted forms."""
    proc = launch(extra_args=["--allowed-origins", json.dumps([ORIGIN, "https://app.example"]),
                              "--allowed-methods", "GET, POST", "--allowed-headers", '["Authorization"]',
                              "--allow-credentials"])
    yield proc
    assert proc.stop() == 0, proc.output()


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models", "/health", "/no/such/route"])
def test_preflight_is_answered_without_the_api_key(base_url, path):
    r = preflight(base_url, path)
    assert r.status_code == 200, r.text
    assert r.headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in r.headers["Access-Control-Allow-Methods"]
    assert r.headers["Access-Control-Allow-Headers"] == "authorization, content-type"
    assert r.headers["Access-Control-Max-Age"] == "600"
    assert "Access-Control-Allow-Credentials" not in r.headers


def test_plain_options_without_preflight_headers_is_still_405(base_url):
    r = requests.options(base_url + "/v1/models", headers=AUTH, timeout=30)
    assert r.status_code == 405
    assert "Access-Control-Allow-Origin" not in r.headers


def test_responses_carry_the_allow_origin_header(base_url):
    headers = {**AUTH, "Origin": ORIGIN}
    ok = requests.get(base_url + "/v1/models", headers=headers, timeout=30)
    assert ok.status_code == 200 and ok.headers["Access-Control-Allow-Origin"] == "*"
    unauthorized = requests.get(base_url + "/v1/models", headers={"Origin": ORIGIN}, timeout=30)
    assert unauthorized.status_code == 401 and unauthorized.headers["Access-Control-Allow-Origin"] == "*"
    bad = requests.post(base_url + "/v1/completions", headers=headers, json={"prompt": "x", "n": 0}, timeout=30)
    assert bad.status_code == 400 and bad.headers["Access-Control-Allow-Origin"] == "*"
    missing = requests.get(base_url + "/nowhere", headers=headers, timeout=30)
    assert missing.status_code == 404 and missing.headers["Access-Control-Allow-Origin"] == "*"
    no_origin = requests.get(base_url + "/v1/models", headers=AUTH, timeout=30)
    assert "Access-Control-Allow-Origin" not in no_origin.headers


def test_sse_stream_carries_the_allow_origin_header(base_url):
    with requests.post(base_url + "/v1/completions", headers={**AUTH, "Origin": ORIGIN}, stream=True, timeout=60,
                       json={"model": MODEL, "prompt": "Once", "max_tokens": 3, "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        assert r.headers["Access-Control-Allow-Origin"] == "*"
        assert b"data: [DONE]" in r.content


def test_listed_origins_are_echoed_and_others_refused(listed_server):
    url = listed_server.url
    r = preflight(url, "/v1/chat/completions", headers="Authorization, Content-Type")
    assert r.status_code == 200, r.text
    assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert r.headers["Vary"] == "Origin"
    assert r.headers["Access-Control-Allow-Credentials"] == "true"
    assert r.headers["Access-Control-Allow-Methods"] == "GET, POST"
    allowed = [h.strip() for h in r.headers["Access-Control-Allow-Headers"].split(",")]
    assert "authorization" in allowed and "content-type" in allowed  # the latter is always safe

    refused = preflight(url, "/v1/models", origin="http://evil.example")
    assert refused.status_code == 400
    assert "origin" in refused.json()["error"]["message"]
    assert "Access-Control-Allow-Origin" not in refused.headers
    assert preflight(url, "/v1/models", method="DELETE").status_code == 400
    assert "headers" in preflight(url, "/v1/models", headers="x-secret").json()["error"]["message"]

    ok = requests.get(url + "/v1/models", headers={**AUTH, "Origin": "https://app.example"}, timeout=30)
    assert ok.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert ok.headers["Vary"] == "Origin"
    other = requests.get(url + "/v1/models", headers={**AUTH, "Origin": "http://evil.example"}, timeout=30)
    assert other.status_code == 200 and "Access-Control-Allow-Origin" not in other.headers


def test_empty_origin_list_turns_cors_off():
    proc = launch(extra_args=["--allowed-origins", "[]"])
    try:
        assert preflight(proc.url, "/v1/models").status_code == 400
        r = requests.get(proc.url + "/v1/models", headers={**AUTH, "Origin": ORIGIN}, timeout=30)
        assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers
    finally:
        assert proc.stop() == 0, proc.output()
