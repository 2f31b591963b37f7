"""Writes the request fuzzer's seed corpus to tests/data/server/fuzz_seeds.

Each seed is one mode byte (see request_fuzzer.cpp) and a payload: JSON bodies
for each route, chat messages with tool calls (arguments nested as JSON inside
a string), and raw HTTP with pipelined requests.
Usage: python3 tests/fuzz/openai/make_seeds.py
"""
import json
import pathlib

OUT = pathlib.Path(__file__).resolve().parents[2] / "data" / "server" / "fuzz_seeds"
COMPLETIONS, CHAT, TOKENIZE, DETOKENIZE = 0 << 2, 1 << 2, 2 << 2, 3 << 2
RAW = 0x80

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TOOL_CHAT = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "get_weather", "arguments": json.dumps({"city": "Paris", "nested": {"a": [[1, [2, {"b": []}]]]}})}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "user", "content": [{"type": "text", "text": "thanks"}, {"type": "text", "text": "more"}]},
]


def body(mode, value):
    return bytes([mode]) + json.dumps(value).encode()


def http(*requests):
    out = b""
    for method, path, payload in requests:
        data = json.dumps(payload).encode() if payload is not None else b""
        out += (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode() + data
    return bytes([RAW]) + out


DEEP_ARGS = "{\"x\": " + "[" * 2000 + "]" * 2000 + "}"  # past the 64-level bound: stays a string

SEEDS = [
    body(COMPLETIONS, {"prompt": "SAY: hello", "max_tokens": 8, "temperature": 0}),
    body(COMPLETIONS, {"prompt": ["a", "b"], "n": 2, "logprobs": 2, "echo": True, "max_tokens": 3,
                       "stop": ["x"], "logit_bias": {"5": -100}, "seed": 7}),
    body(COMPLETIONS, {"prompt": [[1, 2, 3]], "stream": True, "stream_options": {"include_usage": True},
                       "max_tokens": 4, "prompt_logprobs": 1}),
    body(CHAT | 1, {"messages": TOOL_CHAT, "tools": TOOLS, "tool_choice": "auto", "max_tokens": 6}),
    body(CHAT | 2, {"messages": TOOL_CHAT, "tools": TOOLS, "stream": True, "logprobs": True,
                    "top_logprobs": 2, "max_tokens": 6}),
    body(CHAT | 3, {"messages": TOOL_CHAT, "tools": TOOLS,
                    "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    body(CHAT, {"messages": [{"role": "user", "content": "SAY: hi"}], "n": 2, "best_of": 3,
                "presence_penalty": 0.5, "chat_template_kwargs": {"enable_thinking": False}}),
    body(TOKENIZE | 1, {"messages": TOOL_CHAT, "tools": TOOLS, "add_generation_prompt": True}),
    body(CHAT | 2, {"messages": TOOL_CHAT[:2] + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": DEEP_ARGS}}]}], "max_tokens": 2}),
    body(COMPLETIONS, {"prompt": "x", "temperature": 1e308, "logit_bias": {" 1": 1, "01": 2}}),
    # Model output that is a tool call (the fake engine says what follows SAY:).
    body(CHAT | 1, {"messages": [{"role": "user", "content": 'SAY: <tool_call>{"name": "get_weather", '
                                  '"arguments": {"city": [[["Paris"]]]}}</tool_call>'}], "tools": TOOLS,
                    "max_tokens": 40}),
    body(CHAT | 2, {"messages": [{"role": "user", "content": 'SAY: {"name": "get_weather", "parameters": '
                                  '{"city": "Paris"}}'}], "tools": TOOLS, "stream": True, "max_tokens": 40}),
    # Structured output: every constraint field, tool_choice constraints, and
    # the fake engine's "CONSTRAINT?" answer and compiler refusal.
    body(COMPLETIONS, {"prompt": "CONSTRAINT?", "max_tokens": 64, "guided_regex": "[0-9]{3}",
                       "guided_decoding_backend": "xgrammar"}),
    body(CHAT, {"messages": [{"role": "user", "content": "CONSTRAINT?"}], "max_tokens": 64,
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": "w", "strict": True, "schema": TOOLS[0]["function"]["parameters"]}}}),
    body(CHAT | 1, {"messages": [{"role": "user", "content": "SAY: {}"}], "response_format": {"type": "json_object"},
                    "structured_outputs": {"choice": ["a", "b"]}}),
    body(COMPLETIONS, {"prompt": "x", "structured_outputs": {"json": "{\"type\": \"integer\"}",
                                                             "disable_fallback": True}, "max_tokens": 4}),
    body(COMPLETIONS, {"prompt": "x", "guided_json": {"$defs": {"a": {"type": "string"}}},
                       "guided_grammar": "root ::= \"a\"", "grammar": "root ::= [a-z]+", "json_schema": {}}),
    body(COMPLETIONS, {"prompt": "x", "guided_choice": ["REFUSE_CONSTRAINT"], "use_beam_search": False}),
    body(CHAT | 2, {"messages": [{"role": "user", "content": 'SAY: [{"name": "get_weather", "parameters": '
                                  '{"city": "Paris"}}]'}], "tools": TOOLS, "tool_choice": "required",
                    "parallel_tool_calls": False, "stream": True, "max_tokens": 40}),
    body(CHAT | 3, {"messages": [{"role": "user", "content": 'SAY: {"city": "Oslo"}'}], "tools": TOOLS,
                    "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "stream": True}),
    body(TOKENIZE, {"prompt": "Once upon a time", "add_special_tokens": False}),
    body(DETOKENIZE, {"tokens": [1, 2, 300, 4]}),
    http(("POST", "/v1/completions", {"prompt": "SAY: a", "max_tokens": 2}),
         ("GET", "/v1/models", None), ("POST", "/tokenize", {"prompt": "x"})),
    http(("POST", "/v1/chat/completions?x=1", {"messages": TOOL_CHAT, "max_tokens": 2})),
    http(("GET", "/health", None), ("GET", "/metrics", None), ("GET", "/v1/models/fake-model", None)),
]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("seed_*"):
        old.unlink()
    for i, seed in enumerate(SEEDS):
        (OUT / f"seed_{i:03d}").write_bytes(seed)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
