"""Tool calls through the OpenAI SDK: every parser's calls streamed incrementally
(accumulated as openai-python's stream helpers do) and equal to the non-streamed
ones, parallel_tool_calls, --no-enable-auto-tool-choice, and chat templates that
ignore tools (the X-Pagoda-Warning header, --strict-tools)."""
import json

import openai
import pytest

from server_harness import API_KEY, MODEL, NO_TOOLS_TEMPLATE, launch

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}},
]
CALLS = [("get_weather", {"city": "Paris", "days": 3}), ("get_time", {"zone": "CET"})]

# What a model of each format writes for CALLS (one line: the fake engine says
# the rest of the line after SAY:), and the content before the calls.
# deepseek_v3 is tested in C++ only: stories260K's tokenizer decodes the "▁"
# of its markers as a space.
SCRIPTS = {
    "hermes": ('Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}</tool_call>'
               '<tool_call>{"name": "get_time", "arguments": {"zone": "CET"}}</tool_call>', "Checking."),
    "llama3_json": ('{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}; '
                    '{"name": "get_time", "parameters": {"zone": "CET"}}', None),
    "mistral": ('Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}'
                '[TOOL_CALLS]get_time[ARGS]{"zone": "CET"}', "Checking."),
    "pythonic": ("[get_weather(city='Paris', days=3), get_time(zone=\"CET\")]", None),
    "qwen3_coder": ("<tool_call><function=get_weather><parameter=city>Paris</parameter><parameter=days>3</parameter>"
                    "</function></tool_call><tool_call><function=get_time><parameter=zone>CET</parameter>"
                    "</function></tool_call>", None),
}


def sdk(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def servers():
    """One server per parser name (started on first use) and per extra flag set."""
    started = {}

    def get(*flags, chat_template=None):
        key = (flags, chat_template)
        if key not in started:
            kwargs = {"chat_template": chat_template} if chat_template else {}
            started[key] = launch(extra_args=flags, **kwargs)
        return started[key]

    yield get
    for proc in started.values():
        code = proc.stop()
        assert code == 0, f"server exited with {code}:\n{proc.output()}"


@pytest.mark.parametrize("parser", sorted(SCRIPTS))
def test_streamed_arguments_arrive_incrementally(servers, fake_only, parser):
    script, content = SCRIPTS[parser]
    client = sdk(servers("--tool-call-parser", parser))
    messages = [{"role": "user", "content": "SAY:" + script}]

    whole = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == content
    assert [(t.function.name, json.loads(t.function.arguments)) for t in choice.message.tool_calls] == CALLS
    if parser == "mistral":
        assert all(len(t.id) == 9 and t.id.isalnum() for t in choice.message.tool_calls)

    # Raw deltas: a call's first delta has its id and name with arguments "",
    # later ones only argument text, in several pieces.
    pieces = {}
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, stream=True):
        for t in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            if t.index not in pieces:
                assert t.id and t.type == "function" and t.function.name and t.function.arguments == ""
                pieces[t.index] = []
            else:
                assert t.id is None and t.function.name is None
                pieces[t.index].append(t.function.arguments)
    assert sorted(pieces) == [0, 1]
    for index, call in enumerate(choice.message.tool_calls):
        assert "".join(pieces[index]) == call.function.arguments
    assert len(pieces[0]) >= 2, pieces[0]

    # openai-python's stream helper accumulates the same message.
    arg_events = 0
    with client.chat.completions.stream(model=MODEL, messages=messages, tools=TOOLS) as stream:
        for event in stream:
            arg_events += event.type == "tool_calls.function.arguments.delta"
        final = stream.get_final_completion()
    streamed = final.choices[0].message
    assert arg_events >= 3
    assert [(t.function.name, t.function.arguments) for t in streamed.tool_calls] == \
        [(t.function.name, t.function.arguments) for t in choice.message.tool_calls]
    assert (streamed.content or None) == content
    assert final.choices[0].finish_reason == "tool_calls"


def test_parallel_tool_calls_false_keeps_the_first_call(servers, fake_only):
    script, _ = SCRIPTS["hermes"]
    client = sdk(servers("--tool-call-parser", "hermes"))
    messages = [{"role": "user", "content": "SAY:" + script}]
    both = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, parallel_tool_calls=True)
    assert len(both.choices[0].message.tool_calls) == 2
    one = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, parallel_tool_calls=False)
    assert [t.function.name for t in one.choices[0].message.tool_calls] == ["get_weather"]
    assert one.choices[0].finish_reason == "tool_calls"
    indices = set()
    finish = None
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS,
                                                parallel_tool_calls=False, stream=True):
        for t in chunk.choices[0].delta.tool_calls or []:
            indices.add(t.index)
        finish = chunk.choices[0].finish_reason or finish
    assert indices == {0} and finish == "tool_calls"


def test_template_that_ignores_tools_is_reported(servers):
    server = servers(chat_template=NO_TOOLS_TEMPLATE)
    client = sdk(server)
    messages = [{"role": "user", "content": "Hello"}]
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages, tools=TOOLS, max_tokens=4)
    assert raw.status_code == 200
    assert "ignores 'tools'" in raw.headers["x-pagoda-warning"]
    assert raw.parse().choices[0].message.role == "assistant"
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages, tools=TOOLS, max_tokens=4,
                                                           stream=True)
    assert "ignores 'tools'" in raw.headers["x-pagoda-warning"]
    assert any(chunk.choices and chunk.choices[0].finish_reason for chunk in raw.parse())
    # No tools (or tool_choice none), no warning.
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages, max_tokens=4)
    assert "x-pagoda-warning" not in raw.headers
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages, tools=TOOLS,
                                                           tool_choice="none", max_tokens=4)
    assert "x-pagoda-warning" not in raw.headers
    # Said once in the log, at start-up.
    assert server.output().count("ignores tools") == 1, server.output()


def test_strict_tools_refuses_a_template_that_ignores_tools(servers):
    client = sdk(servers("--strict-tools", chat_template=NO_TOOLS_TEMPLATE))
    messages = [{"role": "user", "content": "Hello"}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, max_tokens=4)
    error = e.value.body
    assert error["param"] == "tools"
    assert "ignores 'tools'" in error["message"] and "--chat-template" in error["message"]
    assert client.chat.completions.create(model=MODEL, messages=messages, max_tokens=4).choices
    # A template that renders tools is not refused.
    strict = sdk(servers("--strict-tools"))
    assert strict.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, max_tokens=4).choices


def test_no_enable_auto_tool_choice_refuses_auto(servers):
    client = sdk(servers("--no-enable-auto-tool-choice"))
    messages = [{"role": "user", "content": "Hello"}]
    for choice in (None, "auto"):
        kwargs = {"tool_choice": choice} if choice else {}
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, max_tokens=4, **kwargs)
        assert e.value.body["param"] == "tool_choice"
        assert "--enable-auto-tool-choice" in e.value.body["message"]
    for choice in ("none", "required", {"type": "function", "function": {"name": "get_time"}}):
        assert client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, tool_choice=choice,
                                              max_tokens=4).choices
    # The vLLM spelling is accepted (and is the default).
    on = sdk(servers("--enable-auto-tool-choice"))
    assert on.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, max_tokens=4).choices
