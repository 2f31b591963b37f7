"""The official openai SDK against the server, unchanged, as real clients use it."""
import json

import openai
import pytest
import requests

from server_harness import API_KEY, MAX_BODY_BYTES, MODEL, launch

USER = [{"role": "user", "content": "Tell me a story about a cat."}]


def token_count(base_url, **body):
    r = requests.post(base_url + "/tokenize", json=body, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["count"]


def test_models(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL


def test_completion_and_usage(client, base_url):
    prompt = "Once upon a time"
    c = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0)
    assert c.object == "text_completion"
    assert c.id.startswith("cmpl-")
    assert c.model == MODEL
    assert len(c.choices) == 1 and c.choices[0].index == 0
    assert c.choices[0].finish_reason in ("stop", "length")
    assert c.usage.prompt_tokens == token_count(base_url, prompt=prompt)
    assert 1 <= c.usage.completion_tokens <= 12
    assert c.usage.total_tokens == c.usage.prompt_tokens + c.usage.completion_tokens
    assert c.usage.prompt_tokens_details.cached_tokens >= 0


def test_streamed_completion_equals_the_whole_one(client):
    whole = client.completions.create(model=MODEL, prompt="The dog", max_tokens=20, temperature=0)
    stream = client.completions.create(model=MODEL, prompt="The dog", max_tokens=20, temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
            assert chunk.choices == []
            continue
        text += chunk.choices[0].text
        finish = chunk.choices[0].finish_reason or finish
    assert text == whole.choices[0].text
    assert finish == whole.choices[0].finish_reason
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_chat_completion(client, base_url):
    c = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=16, temperature=0)
    assert c.object == "chat.completion"
    assert c.id.startswith("chatcmpl-")
    message = c.choices[0].message
    assert message.role == "assistant"
    assert isinstance(message.content, str) and message.content
    assert message.tool_calls is None
    assert c.usage.prompt_tokens == token_count(base_url, messages=USER)

    stream = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=16, temperature=0, stream=True)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks)
    assert text == message.content
    assert chunks[-1].choices[0].finish_reason == c.choices[0].finish_reason


def test_chat_content_parts(client):
    parts = [{"type": "text", "text": "Tell me a story"}, {"type": "text", "text": "about a cat."}]
    a = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": parts}], max_tokens=8,
                                       temperature=0)
    b = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Tell me a story\nabout a cat."}],
                                       max_tokens=8, temperature=0)
    assert a.choices[0].message.content == b.choices[0].message.content


def test_n_choices(client, base_url):
    single = client.completions.create(model=MODEL, prompt="A bird", max_tokens=8, temperature=0)
    c = client.completions.create(model=MODEL, prompt="A bird", max_tokens=8, n=3, temperature=0)
    assert [ch.index for ch in c.choices] == [0, 1, 2]
    assert {ch.text for ch in c.choices} == {single.choices[0].text}, "greedy samples agree"
    assert c.usage.completion_tokens == 3 * single.usage.completion_tokens
    assert c.usage.prompt_tokens == single.usage.prompt_tokens
    batch = client.completions.create(model=MODEL, prompt=["A bird", "A fish"], max_tokens=8, n=2, temperature=0)
    assert [ch.index for ch in batch.choices] == [0, 1, 2, 3]
    assert batch.choices[0].text == batch.choices[1].text == single.choices[0].text
    assert batch.usage.prompt_tokens == single.usage.prompt_tokens + token_count(base_url, prompt="A fish")
    chat = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=8, n=2, temperature=1.0, seed=3)
    assert [ch.index for ch in chat.choices] == [0, 1]


def test_stop_strings(client):
    base = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=24, temperature=0,
                                     extra_body={"ignore_eos": True}).choices[0].text
    assert len(base) > 8
    stop = base[len(base) // 2:len(base) // 2 + 3]
    cut = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=24, temperature=0,
                                    stop=[stop, "zzzzzz"], extra_body={"ignore_eos": True})
    assert cut.choices[0].text == base[:base.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    kept = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=24, temperature=0, stop=stop,
                                     extra_body={"ignore_eos": True, "include_stop_str_in_output": True})
    assert kept.choices[0].text == base[:base.index(stop) + len(stop)]


def test_seed_reproducibility(client):
    def sample(seed):
        return client.completions.create(model=MODEL, prompt="The cat", max_tokens=16, temperature=1.0, seed=seed,
                                         extra_body={"ignore_eos": True}).choices[0].text
    assert sample(1234) == sample(1234)
    assert len({sample(s) for s in (1, 2, 3, 4)}) > 1, "different seeds should not all agree"


def test_chat_logprobs(client):
    c = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=8, temperature=0, logprobs=True,
                                       top_logprobs=3)
    content = c.choices[0].logprobs.content
    assert len(content) == c.usage.completion_tokens
    for entry in content:
        assert entry.logprob <= 0
        assert bytes(entry.bytes).decode("utf-8", errors="replace") == entry.token or "\ufffd" in entry.token
        assert len(entry.top_logprobs) == 3
        tops = [t.logprob for t in entry.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        assert entry.top_logprobs[0].token == entry.token  # greedy picks the most likely
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob, abs=1e-4)


def test_completion_logprobs_and_echo(client):
    prompt = "Once upon a time"
    c = client.completions.create(model=MODEL, prompt=prompt, max_tokens=5, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    n = c.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
    assert all(v <= 0 for v in lp.token_logprobs)
    assert all(1 <= len(t) <= 3 for t in lp.top_logprobs)
    assert lp.text_offset == sorted(lp.text_offset)
    echo = client.completions.create(model=MODEL, prompt=prompt, max_tokens=5, temperature=0, logprobs=1, echo=True)
    assert echo.choices[0].text.startswith(prompt)
    assert echo.choices[0].text[len(prompt):] == c.choices[0].text
    elp = echo.choices[0].logprobs
    assert len(elp.tokens) == echo.usage.prompt_tokens + echo.usage.completion_tokens
    assert elp.token_logprobs[0] is None


def test_max_tokens_gives_length(client):
    c = client.completions.create(model=MODEL, prompt="Once", max_tokens=3, extra_body={"ignore_eos": True})
    assert c.choices[0].finish_reason == "length"
    assert c.usage.completion_tokens == 3
    c = client.chat.completions.create(model=MODEL, messages=USER, max_completion_tokens=2,
                                       extra_body={"ignore_eos": True})
    assert c.choices[0].finish_reason == "length"
    assert c.usage.completion_tokens == 2


def test_tool_call_is_parsed(client, fake_only):
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    messages = [{"role": "user", "content": "SAY:" + call}]
    c = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
    choice = c.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [tool_call] = choice.message.tool_calls
    assert tool_call.type == "function" and tool_call.id.startswith("call_")
    assert tool_call.function.name == "get_weather"
    assert json.loads(tool_call.function.arguments) == {"city": "Paris"}

    stream = client.chat.completions.create(model=MODEL, messages=messages, tools=tools, stream=True)
    name, arguments, finish = None, "", None
    for chunk in stream:
        delta = chunk.choices[0].delta
        for t in delta.tool_calls or []:
            assert t.index == 0
            name = t.function.name or name
            arguments += t.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert name == "get_weather" and json.loads(arguments) == {"city": "Paris"} and finish == "tool_calls"

    # The conversation continues with the tool result.
    follow = messages + [choice.message.model_dump(exclude_none=True),
                         {"role": "tool", "tool_call_id": tool_call.id, "content": "sunny"},
                         {"role": "user", "content": "SAY: It is sunny."}]
    c2 = client.chat.completions.create(model=MODEL, messages=follow, tools=tools, tool_choice="auto")
    assert c2.choices[0].message.content == "It is sunny."
    assert c2.choices[0].finish_reason == "stop"


def test_tools_are_rendered_for_every_engine(client, base_url):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    with_tools = token_count(base_url, messages=USER, tools=tools)
    without = token_count(base_url, messages=USER)
    assert with_tools > without
    c = client.chat.completions.create(model=MODEL, messages=USER, tools=tools, tool_choice="none", max_tokens=4)
    assert c.choices[0].message.tool_calls is None


def test_errors_surface_as_sdk_exceptions(client, base_url):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="x", temperature=5)
    assert e.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "word " * 2000}])
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no-such-model", prompt="x")
    bad_key = openai.OpenAI(base_url=base_url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad_key.models.list()
    with pytest.raises(openai.APIStatusError) as e:
        client.completions.create(model=MODEL, prompt="x" * (MAX_BODY_BYTES + 1))
    assert e.value.status_code == 413


def test_rate_limit_error():
    import threading
    proc = launch(max_num_seqs=1, max_waiting=1, fake_step_us=20000)
    try:
        client = openai.OpenAI(base_url=proc.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)
        errors, barrier = [], threading.Barrier(6)

        def go():
            barrier.wait()
            try:
                client.completions.create(model=MODEL, prompt="Once", max_tokens=50, extra_body={"ignore_eos": True})
            except openai.RateLimitError as e:
                errors.append(e)

        threads = [threading.Thread(target=go) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors, "no request was refused with 429"
        assert errors[0].status_code == 429
    finally:
        assert proc.stop() == 0
