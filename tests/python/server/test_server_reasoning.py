"""--reasoning-parser: chat answers split a reasoning model's <think>...</think>
into message.reasoning_content and message.reasoning (vLLM's older and newer
names), streamed as delta fields whose pieces add up to the non-streamed
answer; the end of the prompt (enable_thinking false, a template that opens
<think>) decides where the output starts; tool calls are parsed from the
answer only; stop strings and usage are unchanged; an unknown parser name
fails at start-up naming the parsers. The fake engine writes the text after
SAY: token by token, so the markers arrive split across tokens and chunks."""
import json

import openai
import pytest
import requests

from server_harness import API_KEY, CHAT_TEMPLATE, MODEL, ROOT, launch
from serve_process import serve

THINK_TEMPLATE = ROOT / "tests" / "data" / "server" / "think_chat.jinja"
TOOLS = [{"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def servers():
    """One server per flag set (started on first use)."""
    started = {}

    def get(*flags, chat_template=THINK_TEMPLATE):
        key = (flags, chat_template)
        if key not in started:
            started[key] = launch(extra_args=flags, chat_template=chat_template)
        return started[key]

    yield get
    for proc in started.values():
        code = proc.stop()
        assert code == 0, f"server exited with {code}:\n{proc.output()}"


def sdk(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def post(server, body):
    reply = requests.post(server.url + "/v1/chat/completions", json={"model": MODEL, **body},
                          headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120)
    assert reply.status_code == 200, reply.text
    return reply.json()


def say(script, **body):
    return {"messages": [{"role": "user", "content": "SAY:" + script}], **body}


def streamed(server, body):
    """The stream's deltas accumulated: (reasoning_content, reasoning, content,
    number of chunks carrying reasoning, finish_reason, usage)."""
    reply = requests.post(server.url + "/v1/chat/completions",
                          json={"model": MODEL, "stream": True, "stream_options": {"include_usage": True}, **body},
                          headers={"Authorization": f"Bearer {API_KEY}"}, stream=True, timeout=120)
    assert reply.status_code == 200, reply.text
    parts = {"reasoning_content": "", "reasoning": "", "content": ""}
    num_reasoning = 0
    finish = usage = None
    for line in reply.iter_lines():
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            delta = choice["delta"]
            assert delta.get("reasoning_content") == delta.get("reasoning"), delta
            for key in parts:
                parts[key] += delta.get(key) or ""
            num_reasoning += bool(delta.get("reasoning"))
            finish = choice["finish_reason"] or finish
    return parts["reasoning_content"], parts["reasoning"], parts["content"], num_reasoning, finish, usage


# (parser, script, chat_template_kwargs, reasoning, content)
CASES = [
    ("deepseek_r1", "<think>Let me see.</think>The answer.", None, "Let me see.", "The answer."),
    ("deepseek_r1", "Pondering it.</think>Done.", None, "Pondering it.", "Done."),
    ("deepseek_r1", "Still pondering", None, "Still pondering", None),
    ("deepseek_r1", "Plain</think>answer", {"enable_thinking": False}, None, "Plain</think>answer"),
    ("qwen3", "<think>Hmm, ok.</think>Fine.", None, "Hmm, ok.", "Fine."),
    ("qwen3", "No thinking </think> here", None, None, "No thinking </think> here"),
    ("qwen3", "Opened by the prompt.</think>Yes.", {"think_in_prompt": True}, "Opened by the prompt.", "Yes."),
]


@pytest.mark.parametrize("parser,script,kwargs,reasoning,content", CASES)
def test_reasoning_is_split_whole_and_streamed(servers, fake_only, parser, script, kwargs, reasoning, content):
    server = servers("--reasoning-parser", parser)
    body = say(script, **({"chat_template_kwargs": kwargs} if kwargs else {}))
    message = post(server, body)["choices"][0]["message"]
    assert message["reasoning_content"] == reasoning
    assert message["reasoning"] == reasoning
    assert message["content"] == content

    r1, r2, text, num_reasoning, finish, _ = streamed(server, body)
    assert r1 == r2 == (reasoning or "")
    assert text == (content or "")
    assert finish == "stop"
    if reasoning and len(reasoning) > 8:
        assert num_reasoning >= 2  # streamed as it is written, not at the end

    # The SDK reads the fields as extras.
    sdk_body = {"messages": body["messages"], "extra_body": {"chat_template_kwargs": kwargs} if kwargs else None}
    sdk_message = sdk(server).chat.completions.create(model=MODEL, **sdk_body).choices[0].message
    assert sdk_message.content == content
    assert getattr(sdk_message, "reasoning_content", None) == reasoning


def test_without_the_flag_the_markers_stay_in_content(servers, fake_only):
    script = "<think>Let me see.</think>The answer."
    message = post(servers(), say(script))["choices"][0]["message"]
    assert message["content"] == script
    assert "reasoning_content" not in message and "reasoning" not in message


def test_tool_calls_are_parsed_from_the_answer_only(servers, fake_only):
    server = servers("--reasoning-parser", "deepseek_r1", "--tool-call-parser", "hermes", chat_template=CHAT_TEMPLATE)
    decoy = '<tool_call>{"name": "get_time", "arguments": {"zone": "UTC"}}</tool_call>'
    real = '<tool_call>{"name": "get_time", "arguments": {"zone": "CET"}}</tool_call>'
    body = say(f"<think>Maybe {decoy}?</think>Checking. {real}", tools=TOOLS)
    choice = post(server, body)["choices"][0]
    assert choice["message"]["reasoning_content"] == f"Maybe {decoy}?"
    assert choice["message"]["content"] == "Checking."
    assert [json.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]] == [{"zone": "CET"}]
    assert choice["finish_reason"] == "tool_calls"

    client = sdk(server)
    with client.chat.completions.stream(model=MODEL, **body) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == [{"zone": "CET"}]
    assert message.content == "Checking."
    r1, _, _, _, finish, _ = streamed(server, body)
    assert r1 == f"Maybe {decoy}?" and finish == "tool_calls"


def test_stop_strings_usage_and_include_reasoning(servers, fake_only):
    plain, parsed = servers(), servers("--reasoning-parser", "deepseek_r1")
    body = say("<think>Think first.</think>Answer STOP more words", stop=["STOP"])
    without = post(plain, body)
    with_parser = post(parsed, body)
    assert without["choices"][0]["message"]["content"] == "<think>Think first.</think>Answer "
    assert with_parser["choices"][0]["message"]["content"] == "Answer "
    assert with_parser["choices"][0]["message"]["reasoning_content"] == "Think first."
    assert with_parser["choices"][0]["stop_reason"] == "STOP"
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        assert with_parser["usage"][key] == without["usage"][key], key
    *_, usage = streamed(parsed, body)
    assert usage["completion_tokens"] == without["usage"]["completion_tokens"]

    hidden = post(parsed, {**body, "include_reasoning": False})["choices"][0]["message"]
    assert hidden["reasoning_content"] is None and hidden["reasoning"] is None
    assert hidden["content"] == "Answer "
    r1, r2, text, num_reasoning, _, _ = streamed(parsed, {**body, "include_reasoning": False})
    assert (r1, r2, text, num_reasoning) == ("", "", "Answer ", 0)


def test_unknown_reasoning_parser_fails_at_start_naming_the_parsers():
    proc = serve("--reasoning-parser", "granite")
    assert proc.proc.wait(timeout=60) != 0
    log = proc.output()
    assert "--reasoning-parser" in log and "deepseek_r1" in log and "qwen3" in log, log
