"""vLLM's request fields beyond OpenAI's: truncate_prompt_tokens /
truncation_side, return_token_ids, prompt_logprobs and chat's
continue_final_message, checked against the server's own /tokenize and
/detokenize and against echo + logprobs (meaningful with the real engine too:
PAGODA_TEST_REAL_ENGINE=1)."""
import json

import pytest
import requests

from server_harness import API_KEY, MODEL, REAL

HEADERS = {"Authorization": f"Bearer {API_KEY}"}
PROMPT = "Once upon a time there was a little girl who liked to play in the park with her dog"
USER = [{"role": "user", "content": "Tell me a story about a dog and a cat."}]
GREEDY = {"temperature": 0, "max_tokens": 8}


def post(base_url, route, body):
    return requests.post(base_url + route, headers=HEADERS, timeout=120, json={"model": MODEL, **body})


def ok(r):
    assert r.status_code == 200, r.text
    return r.json()


def tokenize(base_url, **body):
    return ok(post(base_url, "/tokenize", body))["tokens"]


def detokenize(base_url, ids):
    return ok(post(base_url, "/detokenize", {"tokens": ids}))["prompt"]


def assert_ids_spell(base_url, prompt_ids, ids, text, finish_reason):
    """`ids` are the tokens whose text follows the prompt's (the detokenizer's
    rule: decode(prompt + ids) = decode(prompt) + text); an end-of-sequence id
    that stopped the choice has no text. The fake engine's scripted text may
    differ in its leading space."""
    if finish_reason == "stop" and ids:
        ids = ids[:-1] if detokenize(base_url, ids[-1:]).startswith("<") else ids
    base = detokenize(base_url, prompt_ids)
    spelled = detokenize(base_url, prompt_ids + ids)[len(base):]
    assert spelled == text if REAL else spelled.strip() == text.strip()


def stream_events(base_url, route, body):
    r = requests.post(base_url + route, headers=HEADERS, timeout=120, stream=True,
                      json={"model": MODEL, "stream": True, **body})
    assert r.status_code == 200, r.text
    events = []
    for line in r.iter_lines():
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            events.append(json.loads(line[len(b"data: "):]))
    return events


def assert_param_error(r, param, words=()):
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param, error
    for word in words:
        assert word in error["message"], error


# --- truncate_prompt_tokens --------------------------------------------------

def test_truncation_keeps_the_last_tokens_and_counts_them(base_url):
    ids = tokenize(base_url, prompt=PROMPT)
    assert len(ids) > 12
    cut = ok(post(base_url, "/v1/completions", {"prompt": PROMPT, "truncate_prompt_tokens": 6, **GREEDY}))
    assert cut["usage"]["prompt_tokens"] == 6
    # The same answer as for the last 6 tokens given directly.
    tail = ok(post(base_url, "/v1/completions", {"prompt": ids[-6:], **GREEDY}))
    assert cut["choices"][0]["text"] == tail["choices"][0]["text"]
    whole = ok(post(base_url, "/v1/completions", {"prompt": PROMPT, **GREEDY}))
    assert whole["usage"]["prompt_tokens"] == len(ids)
    # A prompt shorter than the limit is kept whole; token-id prompts are truncated too.
    assert ok(post(base_url, "/v1/completions", {"prompt": PROMPT, "truncate_prompt_tokens": 500, **GREEDY,
                                                 "max_tokens": 4}))["usage"]["prompt_tokens"] == len(ids)
    r = ok(post(base_url, "/v1/completions", {"prompt": ids, "truncate_prompt_tokens": 3, "return_token_ids": True,
                                              **GREEDY}))
    assert r["choices"][0]["prompt_token_ids"] == ids[-3:]


def test_truncation_side_right_keeps_the_first_tokens(base_url):
    ids = tokenize(base_url, prompt=PROMPT)
    r = ok(post(base_url, "/v1/completions", {"prompt": PROMPT, "truncate_prompt_tokens": 5, "truncation_side": "right",
                                              "return_token_ids": True, **GREEDY}))
    assert r["choices"][0]["prompt_token_ids"] == ids[:5]
    head = ok(post(base_url, "/v1/completions", {"prompt": ids[:5], **GREEDY}))
    assert r["choices"][0]["text"] == head["choices"][0]["text"]


def test_truncation_echoes_the_tokens_kept(base_url):
    ids = tokenize(base_url, prompt=PROMPT)
    r = ok(post(base_url, "/v1/completions", {"prompt": PROMPT, "truncate_prompt_tokens": 4, "echo": True,
                                              "max_tokens": 0}))
    assert r["choices"][0]["text"] == detokenize(base_url, ids[-4:])


def test_truncation_limits(base_url):
    max_model_len = ok(post(base_url, "/tokenize", {"prompt": "x"}))["max_model_len"]
    # -1: max_model_len - max_tokens, so a prompt of any length fits.
    long_prompt = " ".join(["park"] * (2 * max_model_len))
    r = ok(post(base_url, "/v1/completions", {"prompt": long_prompt, "truncate_prompt_tokens": -1, "max_tokens": 4}))
    assert r["usage"]["prompt_tokens"] == max_model_len - 4
    r = post(base_url, "/v1/completions", {"prompt": PROMPT, "truncate_prompt_tokens": max_model_len, "max_tokens": 4})
    assert_param_error(r, "truncate_prompt_tokens", [str(max_model_len - 4), "max_tokens"])
    for bad in (0, -2, "5", 1.5):
        assert_param_error(post(base_url, "/v1/completions", {"prompt": PROMPT, "truncate_prompt_tokens": bad}),
                           "truncate_prompt_tokens")
    assert_param_error(post(base_url, "/v1/completions", {"prompt": PROMPT, "truncation_side": "middle",
                                                          "truncate_prompt_tokens": 3}), "truncation_side")
    assert_param_error(post(base_url, "/v1/completions", {"prompt": PROMPT, "truncation_side": "left"}),
                       "truncation_side")


def test_chat_truncation_cuts_the_rendered_prompt(base_url):
    ids = tokenize(base_url, messages=USER)
    r = ok(post(base_url, "/v1/chat/completions", {"messages": USER, "truncate_prompt_tokens": 7,
                                                   "return_token_ids": True, **GREEDY}))
    assert r["usage"]["prompt_tokens"] == 7
    assert r["prompt_token_ids"] == ids[-7:]
    r = post(base_url, "/v1/chat/completions", {"messages": USER, "truncate_prompt_tokens": 10 ** 6})
    assert_param_error(r, "truncate_prompt_tokens", ["max_model_len"])


# --- return_token_ids ---------------------------------------------------------

def test_completion_token_ids(base_url):
    r = ok(post(base_url, "/v1/completions", {"prompt": [PROMPT, "The dog"], "n": 2, "return_token_ids": True,
                                              "temperature": 0.8, "seed": 5, "max_tokens": 8}))
    for i, choice in enumerate(r["choices"]):
        assert choice["prompt_token_ids"] == tokenize(base_url, prompt=[PROMPT, "The dog"][i // 2])
        assert_ids_spell(base_url, choice["prompt_token_ids"], choice["token_ids"], choice["text"],
                         choice["finish_reason"])
    assert sum(len(c["token_ids"]) for c in r["choices"]) == r["usage"]["completion_tokens"]
    # Echo: token_ids are still the generated ids only.
    r = ok(post(base_url, "/v1/completions", {"prompt": PROMPT, "echo": True, "return_token_ids": True, **GREEDY}))
    choice = r["choices"][0]
    assert choice["text"].startswith(PROMPT)
    assert_ids_spell(base_url, choice["prompt_token_ids"], choice["token_ids"], choice["text"][len(PROMPT):],
                     choice["finish_reason"])
    # Not asked for: not there.
    plain = ok(post(base_url, "/v1/completions", {"prompt": PROMPT, **GREEDY}))["choices"][0]
    assert "token_ids" not in plain and "prompt_token_ids" not in plain


def test_streamed_completion_token_ids(base_url):
    body = {"prompt": PROMPT, "return_token_ids": True, **GREEDY}
    whole = ok(post(base_url, "/v1/completions", body))["choices"][0]
    events = stream_events(base_url, "/v1/completions", body)
    choices = [c for e in events for c in e["choices"]]
    assert choices[0]["prompt_token_ids"] == whole["prompt_token_ids"]
    assert all("prompt_token_ids" not in c for c in choices[1:])
    assert all("token_ids" in c for c in choices)
    assert [i for c in choices for i in c["token_ids"]] == whole["token_ids"]


def test_chat_token_ids(base_url):
    body = {"messages": USER, "return_token_ids": True, **GREEDY}
    r = ok(post(base_url, "/v1/chat/completions", body))
    assert r["prompt_token_ids"] == tokenize(base_url, messages=USER)
    choice = r["choices"][0]
    assert "prompt_token_ids" not in choice
    assert_ids_spell(base_url, r["prompt_token_ids"], choice["token_ids"], choice["message"]["content"],
                     choice["finish_reason"])
    assert len(choice["token_ids"]) == r["usage"]["completion_tokens"]
    events = stream_events(base_url, "/v1/chat/completions", body)
    assert events[0]["prompt_token_ids"] == r["prompt_token_ids"]
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all("prompt_token_ids" not in e for e in events[1:])
    later = [c for e in events[1:] for c in e["choices"]]
    assert all("token_ids" in c for c in later)
    assert [i for c in later for i in c["token_ids"]] == choice["token_ids"]


# --- prompt_logprobs ----------------------------------------------------------

def check_prompt_logprobs(entries, prompt_ids, num_top):
    assert len(entries) == len(prompt_ids)
    assert entries[0] is None
    for entry, token in zip(entries[1:], prompt_ids[1:]):
        keys = list(entry)
        assert keys[0] == str(token)  # the prompt token first, then the alternatives, each once
        for value in entry.values():
            assert set(value) == {"logprob", "rank", "decoded_token"}
            assert value["logprob"] <= 0 and value["rank"] >= 1
        own, top = entry[keys[0]], [entry[k] for k in keys[1:]]
        assert len(keys) == (num_top if own["rank"] <= num_top else num_top + 1)
        ranks = [v["rank"] for v in top]
        assert ranks == sorted(set(ranks)) and all(r <= num_top for r in ranks)
        assert all(a["logprob"] >= b["logprob"] for a, b in zip(top, top[1:]))


def test_completion_prompt_logprobs_match_echo(base_url):
    ids = tokenize(base_url, prompt=PROMPT)
    r = ok(post(base_url, "/v1/completions", {"prompt": PROMPT, "prompt_logprobs": 2, "return_token_ids": True,
                                              **GREEDY}))
    entries = r["choices"][0]["prompt_logprobs"]
    check_prompt_logprobs(entries, ids, 2)
    # The same scores as echo + logprobs gives for the prompt tokens.
    echo = ok(post(base_url, "/v1/completions", {"prompt": PROMPT, "echo": True, "logprobs": 2, "max_tokens": 0}))
    lp = echo["choices"][0]["logprobs"]
    for i, token in enumerate(ids[1:], start=1):
        scored = entries[i][str(token)]
        assert scored["logprob"] == pytest.approx(lp["token_logprobs"][i], abs=1e-4)
        assert scored["decoded_token"] == lp["tokens"][i]
    # Echo with logprobs carries them too (vLLM: prompt_logprobs defaults to logprobs then).
    check_prompt_logprobs(echo["choices"][0]["prompt_logprobs"], ids, 2)
    # The answer itself is unchanged.
    plain = ok(post(base_url, "/v1/completions", {"prompt": PROMPT, **GREEDY}))
    assert plain["choices"][0]["text"] == r["choices"][0]["text"]
    assert "prompt_logprobs" not in plain["choices"][0]


def test_prompt_logprobs_0_lists_the_prompt_token_only(base_url):
    ids = tokenize(base_url, prompt=PROMPT)
    r = ok(post(base_url, "/v1/completions", {"prompt": PROMPT, "prompt_logprobs": 0, "n": 2, "temperature": 1,
                                              "max_tokens": 2}))
    for choice in r["choices"]:
        entries = choice["prompt_logprobs"]
        check_prompt_logprobs(entries, ids, 0)
        assert all(len(e) == 1 for e in entries[1:])


def test_chat_prompt_logprobs_on_the_response(base_url):
    ids = tokenize(base_url, messages=USER)
    r = ok(post(base_url, "/v1/chat/completions", {"messages": USER, "prompt_logprobs": 3, **GREEDY}))
    check_prompt_logprobs(r["prompt_logprobs"], ids, 3)
    assert "prompt_logprobs" not in r["choices"][0]


@pytest.mark.parametrize("route,body", [("/v1/completions", {"prompt": PROMPT}),
                                        ("/v1/chat/completions", {"messages": USER})])
def test_prompt_logprobs_refused(base_url, route, body):
    r = post(base_url, route, {**body, "prompt_logprobs": 1, "stream": True})
    assert_param_error(r, "prompt_logprobs", ["stream"])
    assert_param_error(post(base_url, route, {**body, "prompt_logprobs": 21}), "prompt_logprobs")
    assert_param_error(post(base_url, route, {**body, "prompt_logprobs": -1}), "prompt_logprobs")


# --- continue_final_message ---------------------------------------------------

PREFILL = [{"role": "user", "content": "Tell me a story."}, {"role": "assistant", "content": "Once upon a"}]


def test_continue_final_message_leaves_the_assistant_turn_open(base_url):
    # tests/data/server/simple_chat.jinja ends every message with "\n".
    open_ids = tokenize(base_url, prompt="user: Tell me a story.\nassistant: Once upon a")
    closed_ids = tokenize(base_url, prompt="user: Tell me a story.\nassistant: Once upon a\n")
    assert tokenize(base_url, messages=PREFILL, add_generation_prompt=False, continue_final_message=True) == open_ids
    assert tokenize(base_url, messages=PREFILL, continue_final_message=True) == open_ids  # agp defaults to false
    assert tokenize(base_url, messages=PREFILL, add_generation_prompt=False) == closed_ids
    r = ok(post(base_url, "/v1/chat/completions", {"messages": PREFILL, "add_generation_prompt": False,
                                                   "continue_final_message": True, "return_token_ids": True,
                                                   **GREEDY}))
    assert r["prompt_token_ids"] == open_ids
    assert r["usage"]["prompt_tokens"] == len(open_ids)
    # The model continues the message: the same as completing the open prompt.
    completion = ok(post(base_url, "/v1/completions", {"prompt": open_ids, **GREEDY}))
    assert r["choices"][0]["message"]["content"] == completion["choices"][0]["text"]


def test_continue_final_message_errors(base_url):
    r = post(base_url, "/v1/chat/completions", {"messages": PREFILL, "add_generation_prompt": True,
                                                "continue_final_message": True})
    assert_param_error(r, "continue_final_message", ["add_generation_prompt"])
    r = post(base_url, "/v1/chat/completions", {"messages": USER, "add_generation_prompt": False,
                                                "continue_final_message": True})
    assert_param_error(r, "continue_final_message", ["assistant"])
    r = post(base_url, "/tokenize", {"messages": USER, "continue_final_message": True})
    assert_param_error(r, "continue_final_message", ["assistant"])
    r = post(base_url, "/v1/chat/completions", {"messages": PREFILL, "continue_final_message": "yes"})
    assert_param_error(r, "continue_final_message")
