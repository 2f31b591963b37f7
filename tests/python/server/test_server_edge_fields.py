"""Edge cases of request fields: max_tokens 0 with echo, logit_bias keys."""
import pytest
import requests

from server_harness import API_KEY, MODEL

HEADERS = {"Authorization": f"Bearer {API_KEY}"}


def _complete(base_url, **fields):
    return requests.post(base_url + "/v1/completions", headers=HEADERS, timeout=60,
                         json={"model": MODEL, "prompt": "Once upon a time", **fields})


def test_max_tokens_0_with_echo_returns_the_prompt_only(base_url):
    r = _complete(base_url, max_tokens=0, echo=True)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["text"] == "Once upon a time"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 0
    r = _complete(base_url, max_tokens=0, echo=True, logprobs=2)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["text"] == "Once upon a time"
    lp = choice["logprobs"]
    assert "".join(lp["tokens"]).replace("\u2581", " ").strip() != ""
    assert lp["token_logprobs"][0] is None and all(x is not None for x in lp["token_logprobs"][1:])
    assert len(lp["tokens"]) == r.json()["usage"]["prompt_tokens"]
    assert _complete(base_url, max_tokens=0).status_code == 400


@pytest.mark.parametrize("key", [" 1", "1 ", "+1", "01", "1.0", "-0", "0x1", ""])
def test_logit_bias_keys_must_be_canonical_token_ids(base_url, key):
    r = _complete(base_url, max_tokens=2, logit_bias={key: 5})
    assert r.status_code == 400, (key, r.text)
    assert "logit_bias" in r.json()["error"]["message"] and repr(key)[1:-1] in r.json()["error"]["message"]


@pytest.mark.parametrize("key", ["0", "1", "42"])
def test_logit_bias_canonical_keys_are_accepted(base_url, key):
    assert _complete(base_url, max_tokens=2, logit_bias={key: 5}).status_code == 200


def test_prompts_and_sequences_per_request_are_bounded(base_url):
    r = requests.post(base_url + "/v1/completions", headers=HEADERS, timeout=60,
                      json={"model": MODEL, "prompt": ["Hi"] * 257, "max_tokens": 1})
    assert r.status_code == 400 and "256" in r.json()["error"]["message"], r.text
    assert r.json()["error"]["param"] == "prompt"
    r = requests.post(base_url + "/v1/completions", headers=HEADERS, timeout=60,
                      json={"model": MODEL, "prompt": ["Hi"] * 9, "n": 128, "max_tokens": 1})
    assert r.status_code == 400 and "1024" in r.json()["error"]["message"], r.text
    assert r.json()["error"]["param"] == "n"
