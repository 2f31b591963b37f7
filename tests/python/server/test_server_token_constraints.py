"""allowed_token_ids and bad_words (vLLM's fields) on both generation endpoints.

Bad values are a 400 naming the field (fake and real engine). With the real
engine (PAGODA_TEST_REAL_ENGINE=1, stories260K, greedy), a reply under
allowed_token_ids holds only allowed tokens and a reply under bad_words never
holds a banned word's tokens, and both differ from the unconstrained reply.
"""
import pytest
import requests

from server_harness import API_KEY, MODEL, REAL

HEADERS = {"Authorization": f"Bearer {API_KEY}"}
PROMPT = "Once upon a time, there was a little girl named Lily. She"


def _post(base_url, route, **fields):
    body = {"model": MODEL, "max_tokens": 4, **fields}
    if route == "chat/completions":
        body["messages"] = [{"role": "user", "content": "Tell me a story"}]
    else:
        body["prompt"] = PROMPT
    return requests.post(f"{base_url}/v1/{route}", headers=HEADERS, timeout=60, json=body)


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
@pytest.mark.parametrize("fields, field, text", [
    ({"allowed_token_ids": []}, "allowed_token_ids", "at least one token id"),
    ({"allowed_token_ids": [1, 100000]}, "allowed_token_ids", "100000"),
    ({"allowed_token_ids": ["1"]}, "allowed_token_ids", ""),
    ({"allowed_token_ids": [5], "use_beam_search": True, "n": 2}, "allowed_token_ids", "beam search"),
    ({"bad_words": [""]}, "bad_words", "no tokens"),
    ({"bad_words": ["cat", "  "]}, "bad_words", "[1]"),
    ({"bad_words": "cat"}, "bad_words", "list of strings"),
    ({"bad_words": ["cat", 1]}, "bad_words", "must be a string"),
    ({"bad_words": ["cat"], "use_beam_search": True, "n": 2}, "bad_words", "beam search"),
])
def test_bad_values_are_a_400_naming_the_field(base_url, route, fields, field, text):
    r = _post(base_url, route, **fields)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == field and text in error["message"], error


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
def test_valid_values_are_accepted(base_url, route):
    r = _post(base_url, route, allowed_token_ids=list(range(3, 500)), bad_words=["cat", " the dog"])
    assert r.status_code == 200, r.text


def _tokenize(base_url, text):
    r = requests.post(base_url + "/tokenize", headers=HEADERS, timeout=60,
                      json={"model": MODEL, "prompt": text, "add_special_tokens": False, "return_token_strs": True})
    assert r.status_code == 200, r.text
    body = r.json()
    return body["tokens"], [s.replace("\u2581", " ") for s in body["token_strs"]]


def _greedy(base_url, **fields):
    r = requests.post(base_url + "/v1/completions", headers=HEADERS, timeout=60,
                      json={"model": MODEL, "prompt": PROMPT, "max_tokens": 16, "temperature": 0, "logprobs": 0,
                            **fields})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return choice["text"], choice["logprobs"]["tokens"]


@pytest.fixture
def real_only():
    if not REAL:
        pytest.skip("needs the real engine's sampler (PAGODA_TEST_REAL_ENGINE=1)")


def test_greedy_reply_holds_only_allowed_tokens(base_url, real_only):
    text, tokens = _greedy(base_url)
    ids, strs = _tokenize(base_url, " the dog and a cat.")
    assert tokens[0] not in strs  # so the constraint must change the reply
    constrained, constrained_tokens = _greedy(base_url, allowed_token_ids=ids)
    assert constrained != text
    assert constrained_tokens and set(constrained_tokens) <= set(strs), (constrained_tokens, strs)


def test_greedy_reply_never_holds_a_bad_word(base_url, real_only):
    text, tokens = _greedy(base_url)
    word = tokens[0].strip()  # the reply's first word, banned as given and after a space
    banned = [_tokenize(base_url, word)[1], _tokenize(base_url, " " + word)[1]]
    constrained, constrained_tokens = _greedy(base_url, bad_words=[word])
    assert constrained != text
    for seq in banned:
        n = len(seq)
        assert all(constrained_tokens[i:i + n] != seq for i in range(len(constrained_tokens) - n + 1)), (
            constrained_tokens, seq)
