"""vLLM request fields pagoda knows but cannot honour yet are a 400 naming the
field, never a 200 that ignored them; their no-op values are accepted
(structured output's own fields: test_server_structured_output.py). Chat
`documents` reach the chat template."""
import pytest
import requests

from server_harness import API_KEY, MODEL

HEADERS = {"Authorization": f"Bearer {API_KEY}"}
MESSAGES = [{"role": "user", "content": "Tell me a story"}]


def _post(base_url, route, **fields):
    body = {"model": MODEL, "max_tokens": 2, **fields}
    if route == "chat/completions":
        body["messages"] = MESSAGES
    else:
        body["prompt"] = "Once upon a time"
    return requests.post(f"{base_url}/v1/{route}", headers=HEADERS, timeout=60, json=body)


REFUSED = [
    ("guided_whitespace_pattern", " "),
    ("guided_decoding_backend", "xgrammar:disable-any-whitespace"),
    ("structural_tag", "{}"),
    ("return_tokens_as_token_ids", True),
    ("spaces_between_special_tokens", False),
    ("logits_processors", ["my.module.Processor"]),
    ("prompt_embeds", "AAAA"),
    ("cache_salt", "tenant-1"),
    ("kv_transfer_params", {"do_remote_decode": True}),
    ("vllm_xargs", {"x": 1}),
]


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
@pytest.mark.parametrize("field, value", REFUSED)
def test_unsupported_field_is_a_400_naming_it(base_url, route, field, value):
    r = _post(base_url, route, **{field: value})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == field and "not supported" in error["message"], error


@pytest.mark.parametrize("field, value", [("echo", True), ("chat_template", "{{ messages }}")])
def test_unsupported_chat_field_is_a_400_naming_it(base_url, field, value):
    r = _post(base_url, "chat/completions", **{field: value})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
def test_no_op_values_are_accepted(base_url, route):
    fields = {"return_tokens_as_token_ids": False, "spaces_between_special_tokens": True,
              "guided_json": None, "cache_salt": None}
    if route == "chat/completions":
        fields["echo"] = False
    r = _post(base_url, route, **fields)
    assert r.status_code == 200, r.text


def _chat_prompt_tokens(base_url, **fields):
    r = requests.post(base_url + "/tokenize", headers=HEADERS, timeout=60,
                      json={"model": MODEL, "messages": MESSAGES, "add_generation_prompt": True, **fields})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def test_documents_reach_the_chat_template(base_url):
    plain = _chat_prompt_tokens(base_url)
    with_docs = _chat_prompt_tokens(base_url, documents=[{"title": "t", "text": "The cat sat."}])
    assert len(with_docs) > len(plain)
    r = _post(base_url, "chat/completions", documents=[{"title": "t", "text": "The cat sat."}],
              return_token_ids=True)
    assert r.status_code == 200, r.text
    assert r.json()["prompt_token_ids"] == with_docs


@pytest.mark.parametrize("documents", ["text", [1, 2], [{"text": "a"}, "b"]])
def test_bad_documents_are_a_400(base_url, documents):
    r = _post(base_url, "chat/completions", documents=documents)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "documents"
