"""Structured output end to end: every constrained generation is valid.

Generations (real engine only, PAGODA_TEST_REAL_ENGINE=1) run on tiny
random-weight Llamas (random_model.py), the worst case: they wander wherever
the grammar allows. Over the corpora of tests/data/structured:
- JSON Schema: 15 generations per schema on the 512-token vocabulary (~1,000
  in all) through every spelling of the constraint (response_format
  json_schema on chat and completions, vLLM's structured_outputs.json and
  guided_json, llama-server's json_schema), n > 1 and streamed; plus one per
  second schema on SmolLM2's 49,152-token vocabulary, whose tokens (`{"`,
  `":`, `"},` ...) cross JSON elements. Each must finish with "stop", parse
  with json.loads and validate (jsonschema, formats included).
- regex (re.fullmatch), GBNF (each grammar's Python-side check), choice lists
  (exactly one choice), json_object (a JSON object), tool_choice "required"
  and a named function (tool_calls whose arguments validate against the
  tool's parameters; parallel_tool_calls: false gives one call).
Bad constraints are a 400 on the shared server (fake or real engine): an
invalid or unsupported schema names the keyword, an invalid regex or grammar
gives the position, two constraint sources and beam search with a constraint
are refused.

Random weights never choose to stop: a string ends when the model happens to
sample its closing quote. So that generations end well inside max_tokens, each
request raises the logits of the closing tokens (`"`, `}`, `]`, and the
single tokens made of them; for the GBNF corpus also `.`, `!` and `?`, which
end its sentences) and of EOS with logit_bias, to about 1/12 of the
mass of a uniform step. The constraint still decides what is allowed: bias
never makes a masked token possible, which these tests would catch.

Expected time on 2 CPU cores: about 1 to 2 minutes for the generations (the
SmolLM2-vocabulary part is the dearest per token).
"""
import concurrent.futures
import json
import math
import pathlib
import re
import sys

import pytest
import requests

from random_model import TOKENIZERS, write_random_model
from server_harness import API_KEY, CHAT_TEMPLATE, DEVICE, MODEL, PAGODA_BIN, REAL, SHARED, ServerProcess

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "structured"))
import structured_corpus as corpus  # noqa: E402

HEADERS = {"Authorization": f"Bearer {API_KEY}"}
MAX_TOKENS = 2048
SCHEMAS = corpus.schemas()
REGEXES = corpus.regexes()
GRAMMARS = corpus.grammars()
TOOLS = [{"type": "function", "function": {"name": name[len("tool_"):], "description": name,
                                           "parameters": SCHEMAS[name]}}
         for name in ("tool_get_weather", "tool_send_email", "tool_book_flight", "tool_web_search")]
CHOICES = [
    ["yes", "no"],
    ["New York", "New York City", "Newark", "York"],  # one is a prefix of others
    ["positive", "negative", "neutral", "mixed feelings"],
    ["café", "東京", "naïve 🙂"],
    ["A", "B", "C", "D", "E"],
]

# The ways a request can carry a JSON Schema: (route, extra body).
JSON_SPELLINGS = {
    "chat.response_format": ("chat/completions",
                             lambda name, s: {"response_format": {"type": "json_schema", "json_schema": {
                                 "name": name[:64], "schema": s, "strict": True}}}),
    "completions.response_format": ("completions",
                                    lambda name, s: {"response_format": {"type": "json_schema", "json_schema": {
                                        "name": name[:64], "schema": s}}}),
    "chat.structured_outputs": ("chat/completions", lambda name, s: {"structured_outputs": {"json": s}}),
    "completions.guided_json": ("completions", lambda name, s: {"guided_json": s}),
    "chat.json_schema": ("chat/completions", lambda name, s: {"json_schema": s}),  # llama-server's
}


def real_only():
    if not REAL:
        pytest.skip("needs the real engine (PAGODA_TEST_REAL_ENGINE=1): the fake engine does not sample")


# --- servers on random-weight models -----------------------------------------------------------

class RandomModelServer:
    """`pagoda serve` on a random-weight model with one tokenizer; `bias` is
    the logit_bias that lets generations end (module docstring)."""

    def __init__(self, tokenizer, root):
        model = write_random_model(root / tokenizer, tokenizer, SHARED / "models")
        args = [PAGODA_BIN, "serve", model, "--device", DEVICE, "--chat-template", CHAT_TEMPLATE,
                "--served-model-name", MODEL, "--port", 0, "--api-key", API_KEY, "--max-num-seqs", 256,
                "--max-model-len", 4096, "--max-waiting-requests", 4096]
        if DEVICE == "cuda":
            args += ["--gpu-memory-utilization", 0.1]
        self.proc = ServerProcess(args)
        self.url = self.proc.url
        vocab, eos = TOKENIZERS[tokenizer][1], TOKENIZERS[tokenizer][3]
        # The tokens whose text is only closing characters, by their vocabulary
        # entries (a byte-fallback vocabulary spells `}` as <0x7D>).
        entries = json.loads((model / "tokenizer.json").read_text())["model"]["vocab"]
        self.entries = entries
        closers = set()
        for text in ['"', "}", "]", '"}', '"]', "}}", "]}", "}]", "]]", '"}}', '"]}']:
            for spelling in [text] + ([f"<0x{ord(text):02X}>"] if len(text) == 1 else []):
                if spelling in entries:
                    closers.add(entries[spelling])
        assert len(closers) >= 3, closers
        bias = round(math.log(vocab / (12 * len(closers))), 2)
        self.bias = {str(t): bias for t in sorted(closers)}
        self.bias.update({str(t): round(math.log(vocab / 16), 2) for t in eos})

    def stop(self):
        return self.proc.stop()


@pytest.fixture(scope="module")
def random_servers(tmp_path_factory):
    """{"llama2": server, "smollm2": server}, started on first use."""
    if not PAGODA_BIN.exists():
        pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
    root = tmp_path_factory.mktemp("random_models")
    started = {}

    def get(tokenizer):
        folder = SHARED / "models" / TOKENIZERS[tokenizer][0]
        if not folder.is_dir():
            pytest.skip(f"no {folder}: the {tokenizer} random-weight model takes its tokenizer from there")
        if tokenizer not in started:
            started[tokenizer] = RandomModelServer(tokenizer, root)
        return started[tokenizer]

    yield get
    for server in started.values():
        code = server.stop()
        assert code == 0, f"server exited with {code}:\n{server.proc.output()}"


# --- requests ----------------------------------------------------------------------------------

class Job:
    """One request: route, body; after run(), `outputs` is a list of
    (text, finish_reason, tool_calls) per choice, or `error` says why not."""

    def __init__(self, label, route, body, stream=False):
        self.label, self.route, self.body, self.stream = label, route, body, stream
        self.outputs, self.error = [], None


def _body(server, route, seed, extra, n=1):
    body = {"model": MODEL, "max_tokens": MAX_TOKENS, "temperature": 1, "seed": seed, "n": n,
            "logit_bias": server.bias, **extra}
    if route == "chat/completions":
        body["messages"] = [{"role": "user", "content": "Answer in the requested format."}]
    else:
        body["prompt"] = "Answer:"
    return body


def _run_one(url, job):
    try:
        r = requests.post(f"{url}/v1/{job.route}", headers=HEADERS, json={**job.body, "stream": job.stream},
                          stream=job.stream, timeout=900)
        if r.status_code != 200:
            job.error = f"HTTP {r.status_code}: {r.text[:500]}"
            return job
        if not job.stream:
            for choice in sorted(r.json()["choices"], key=lambda c: c["index"]):
                if job.route == "completions":
                    job.outputs.append((choice["text"], choice["finish_reason"], None))
                else:
                    message = choice["message"]
                    job.outputs.append((message.get("content"), choice["finish_reason"], message.get("tool_calls")))
            return job
        texts, finish, calls = {}, {}, {}
        for line in r.iter_lines(decode_unicode=False):
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[len(b"data: "):])
            for choice in chunk.get("choices", []):
                i = choice["index"]
                if job.route == "completions":
                    piece = choice.get("text") or ""
                else:
                    delta = choice.get("delta", {})
                    piece = delta.get("content") or ""
                    for call in delta.get("tool_calls") or []:
                        slot = calls.setdefault(i, {}).setdefault(call["index"], {"name": "", "arguments": ""})
                        fn = call.get("function") or {}
                        slot["name"] += fn.get("name") or ""
                        slot["arguments"] += fn.get("arguments") or ""
                texts[i] = texts.get(i, "") + piece
                if choice.get("finish_reason"):
                    finish[i] = choice["finish_reason"]
        for i in sorted(texts):
            streamed_calls = None
            if i in calls:
                streamed_calls = [{"function": calls[i][k]} for k in sorted(calls[i])]
            job.outputs.append((texts[i], finish.get(i), streamed_calls))
    except Exception as e:  # reported with the job's label, with every other failure
        job.error = f"{type(e).__name__}: {e}"
    return job


def run_jobs(url, jobs):
    with concurrent.futures.ThreadPoolExecutor(max_workers=128) as pool:
        return list(pool.map(lambda job: _run_one(url, job), jobs))


def check_all(jobs, check, expected_outputs):
    """Applies `check(job, text, finish_reason, tool_calls)` (a problem string
    or None) to every output; fails listing every problem."""
    problems = []
    count = 0
    for job in jobs:
        if job.error:
            problems.append(f"{job.label}: {job.error}")
            continue
        n = job.body.get("n", 1)
        if len(job.outputs) != n:
            problems.append(f"{job.label}: {len(job.outputs)} choices, expected {n}")
        for text, finish, calls in job.outputs:
            count += 1
            problem = check(job, text, finish, calls)
            if problem:
                problems.append(f"{job.label}: {problem}; output {text!r:.400}")
    assert not problems, f"{len(problems)} of {count} outputs failed:\n" + "\n".join(problems[:40])
    assert count == expected_outputs


def _json_check(schema):
    def check(job, text, finish, calls):
        if finish != "stop":
            return f"finish_reason {finish!r}"
        try:
            value = json.loads(text)
        except ValueError as e:
            return f"not JSON ({e})"
        errors = corpus.validation_errors(schema, value)
        return f"invalid: {errors[:3]}" if errors else None
    return check


# --- JSON Schema corpus ------------------------------------------------------------------------

def _schema_jobs(server, name, schema, base_seed):
    """15 generations: 2 per spelling, one n = 3 request, two streamed."""
    jobs = []
    for k, (spelling, (route, make)) in enumerate(sorted(JSON_SPELLINGS.items()) * 2):
        jobs.append(Job(f"{name} [{spelling}]", route, _body(server, route, base_seed + k, make(name, schema))))
    route, make = JSON_SPELLINGS["chat.response_format"]
    jobs.append(Job(f"{name} [n=3]", route, _body(server, route, base_seed + 10, make(name, schema), n=3)))
    for k, spelling in enumerate(["chat.response_format", "completions.guided_json"]):
        route, make = JSON_SPELLINGS[spelling]
        jobs.append(Job(f"{name} [{spelling}, streamed]", route,
                        _body(server, route, base_seed + 11 + k, make(name, schema)), stream=True))
    return jobs


def test_json_schema_corpus_random_weights(random_servers):
    real_only()
    server = random_servers("llama2")
    jobs, checks = [], {}
    for i, (name, schema) in enumerate(sorted(SCHEMAS.items())):
        for job in _schema_jobs(server, name, schema, 1000 * i):
            checks[id(job)] = _json_check(schema)
            jobs.append(job)
    jobs = run_jobs(server.url, jobs)
    check_all(jobs, lambda job, *out: checks[id(job)](job, *out), 15 * len(SCHEMAS))
    assert 15 * len(SCHEMAS) >= 990


def test_constrained_and_free_requests_mixed_concurrently(random_servers):
    """48 constrained (a nested-object schema) and 16 free requests at once:
    the steps mix both kinds, planned ahead with the constrained rows'
    sampling deferred and jump-forward taken in flight. Every constrained
    output validates; every free output is exactly what the same seeded
    request gives alone (constrained rows never leak into free ones)."""
    real_only()
    server = random_servers("llama2")
    name = "character_sheet_nested"
    schema = SCHEMAS[name]
    route, make = JSON_SPELLINGS["chat.response_format"]
    constrained = [Job(f"{name} {k}", route, _body(server, route, 7000 + k, make(name, schema)))
                   for k in range(48)]

    def free_job(k):
        return Job(f"free {k}", "completions", {"model": MODEL, "prompt": "Once upon a time",
                                                "max_tokens": 40, "temperature": 1, "seed": 8000 + k})
    free = [free_job(k) for k in range(16)]
    mixed = [job for pair in zip(constrained[:16], free) for job in pair] + constrained[16:]
    run_jobs(server.url, mixed)
    check_all(constrained, lambda job, *out: _json_check(schema)(job, *out), 48)
    for k, job in enumerate(free):
        alone = _run_one(server.url, free_job(k))
        assert job.error is None and alone.error is None, (job.error, alone.error)
        assert job.outputs == alone.outputs, f"free {k}: mixed {job.outputs} vs alone {alone.outputs}"


def _has_string_rules(schema):
    """Whether a schema holds a pattern or a format anywhere: strings that must
    contain characters such as `@` or `/`, which few of a 49,152-token
    vocabulary's tokens hold alone, so that a random model wanders for
    thousands of tokens before it samples them (the 512-token model covers
    these schemas)."""
    if isinstance(schema, dict):
        return "pattern" in schema or "format" in schema or any(_has_string_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_string_rules(v) for v in schema)
    return False


def test_json_schema_corpus_multi_character_tokens(random_servers):
    real_only()
    server = random_servers("smollm2")
    jobs, checks = [], {}
    spellings = sorted(JSON_SPELLINGS.items())
    free = [(name, schema) for name, schema in sorted(SCHEMAS.items()) if not _has_string_rules(schema)]
    assert len(free) >= 25, len(free)
    for i, (name, schema) in enumerate(free):
        spelling, (route, make) = spellings[i % len(spellings)]
        job = Job(f"{name} [{spelling}, smollm2]", route, _body(server, route, 7 + i, make(name, schema)))
        checks[id(job)] = _json_check(schema)
        jobs.append(job)
    jobs = run_jobs(server.url, jobs)
    check_all(jobs, lambda job, *out: checks[id(job)](job, *out), len(jobs))


# --- regex, GBNF, choice, json_object ------------------------------------------------------------

def _spelled(kind, value, k):
    """Body fields carrying a regex / grammar / choice list, rotating through
    the spellings (vLLM's structured_outputs and guided_*, llama-server's
    grammar)."""
    spellings = {
        "regex": [{"structured_outputs": {"regex": value}}, {"guided_regex": value}],
        "grammar": [{"structured_outputs": {"grammar": value}}, {"guided_grammar": value}, {"grammar": value}],
        "choice": [{"structured_outputs": {"choice": value}}, {"guided_choice": value}],
    }[kind]
    return spellings[k % len(spellings)]


def _text_jobs(server, kind, items, per_item, base_seed, tag=""):
    jobs = []
    for i, (label, value) in enumerate(items):
        for k in range(per_item):
            route = "chat/completions" if k % 2 == 0 else "completions"
            stream = k == per_item - 1 and per_item > 2
            body = _body(server, route, base_seed + 100 * i + k, _spelled(kind, value, k + i))
            jobs.append(Job(f"{label} [{route}{', streamed' if stream else ''}{tag}]", route, body, stream=stream))
    return jobs


def _stopped_and(predicate, what):
    def check(job, text, finish, calls):
        if finish != "stop":
            return f"finish_reason {finish!r}"
        return None if predicate(job, text) else f"not {what}"
    return check


@pytest.mark.parametrize("tokenizer, per_item", [("llama2", 5), ("smollm2", 1)])
def test_regex_corpus_random_weights(random_servers, tokenizer, per_item):
    real_only()
    server = random_servers(tokenizer)
    patterns = {e["name"]: e["pattern"] for e in REGEXES}
    items = sorted(patterns.items()) if per_item > 1 else sorted(patterns.items())[::3]
    jobs = run_jobs(server.url, _text_jobs(server, "regex", items, per_item, 50_000, ", " + tokenizer))
    label_pattern = {id(j): patterns[j.label.split(" [")[0]] for j in jobs}
    check_all(jobs, _stopped_and(lambda job, text: re.fullmatch(label_pattern[id(job)], text) is not None,
                                 "a full match"), len(items) * per_item)


@pytest.mark.parametrize("tokenizer, per_item", [("llama2", 5), ("smollm2", 1)])
def test_gbnf_corpus_random_weights(random_servers, tokenizer, per_item):
    real_only()
    server = random_servers(tokenizer)
    items = [(name, text) for name, (text, _) in sorted(GRAMMARS.items())]
    if per_item == 1:
        items = items[::2]
    jobs = _text_jobs(server, "grammar", items, per_item, 60_000, ", " + tokenizer)
    # Sentences end at `.`, `!` or `?`: raised like the closing tokens.
    ends = {str(server.entries[t]): next(iter(server.bias.values())) for t in ".!?" if t in server.entries}
    for job in jobs:
        job.body["logit_bias"] = {**job.body["logit_bias"], **ends}
    jobs = run_jobs(server.url, jobs)
    check_all(jobs, _stopped_and(lambda job, text: corpus.gbnf_accepts(GRAMMARS[job.label.split(" [")[0]][1], text),
                                 "a sentence of the grammar"), len(items) * per_item)


def test_choice_random_weights(random_servers):
    real_only()
    server = random_servers("llama2")
    items = [(f"choice{i}", choices) for i, choices in enumerate(CHOICES)]
    jobs = _text_jobs(server, "choice", items, 8, 70_000)
    jobs = run_jobs(server.url, jobs)
    seen = set()

    def is_choice(job, text):
        seen.add(text)
        return text in CHOICES[int(job.label.split(" [")[0][len("choice"):])]
    check_all(jobs, _stopped_and(is_choice, "one of the choices"), 8 * len(CHOICES))
    assert len(seen) >= 8  # the random model picks different choices, prefixes included


@pytest.mark.parametrize("route", ["chat/completions", "completions"])
def test_json_object_random_weights(random_servers, route):
    real_only()
    server = random_servers("llama2")
    jobs = [Job(f"json_object {k}", route, _body(server, route, 80_000 + k, {"response_format": {"type": "json_object"}},
                                                 n=2 if k % 5 == 0 else 1), stream=k % 4 == 3) for k in range(20)]
    jobs = run_jobs(server.url, jobs)

    def check(job, text, finish, calls):
        if finish != "stop":
            return f"finish_reason {finish!r}"
        try:
            return None if isinstance(json.loads(text), dict) else "not an object"
        except ValueError as e:
            return f"not JSON ({e})"
    check_all(jobs, check, sum(job.body["n"] for job in jobs))


# --- tool_choice -------------------------------------------------------------------------------

def _tool_jobs(server, tool_choice, count, base_seed, **extra):
    jobs = []
    for k in range(count):
        body = _body(server, "chat/completions", base_seed + k, {"tools": TOOLS, "tool_choice": tool_choice, **extra})
        jobs.append(Job(f"tool_choice={json.dumps(tool_choice)} {extra} #{k}", "chat/completions", body,
                        stream=k % 3 == 2))
    return jobs


def _tool_call_check(names, finish_reason, max_calls=None):
    parameters = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}

    def check(job, text, finish, calls):
        if finish != finish_reason:
            return f"finish_reason {finish!r}, expected {finish_reason!r}"
        if not calls:
            return "no tool_calls"
        if max_calls is not None and len(calls) > max_calls:
            return f"{len(calls)} tool calls, at most {max_calls} allowed"
        for call in calls:
            name = call["function"]["name"]
            if name not in names:
                return f"call to {name!r}, expected one of {sorted(names)}"
            try:
                arguments = json.loads(call["function"]["arguments"])
            except ValueError as e:
                return f"{name} arguments are not JSON ({e})"
            errors = corpus.validation_errors(parameters[name], arguments)
            if errors:
                return f"{name} arguments invalid: {errors[:3]}"
        return None
    return check


def test_tool_choice_required(random_servers):
    real_only()
    server = random_servers("llama2")
    names = {t["function"]["name"] for t in TOOLS}
    jobs = run_jobs(server.url, _tool_jobs(server, "required", 24, 90_000))
    check_all(jobs, _tool_call_check(names, "tool_calls"), 24)
    called = {call["function"]["name"] for job in jobs for _, _, calls in job.outputs for call in calls}
    assert len(called) >= 2, called  # the random model is free to pick among the tools


def test_tool_choice_required_without_parallel_calls(random_servers):
    real_only()
    server = random_servers("llama2")
    names = {t["function"]["name"] for t in TOOLS}
    jobs = run_jobs(server.url, _tool_jobs(server, "required", 12, 91_000, parallel_tool_calls=False))
    check_all(jobs, _tool_call_check(names, "tool_calls", max_calls=1), 12)


@pytest.mark.parametrize("name", ["send_email", "book_flight"])
def test_tool_choice_named_function(random_servers, name):
    real_only()
    server = random_servers("llama2")
    choice = {"type": "function", "function": {"name": name}}
    jobs = run_jobs(server.url, _tool_jobs(server, choice, 12, 92_000))
    # As OpenAI and vLLM: a forced function is one call, finish_reason "stop".
    check_all(jobs, _tool_call_check({name}, "stop", max_calls=1), 12)


# --- bad constraints: a 400 naming what is wrong (fake or real engine) ---------------------------

def _post(base_url, route, **fields):
    body = {"model": MODEL, "max_tokens": 8, **fields}
    if route == "chat/completions":
        body["messages"] = [{"role": "user", "content": "Hi"}]
    else:
        body["prompt"] = "Hi"
    return requests.post(f"{base_url}/v1/{route}", headers=HEADERS, json=body, timeout=60)


def _assert_400(r, *words, param_prefix=None):
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error", error
    for word in words:
        assert word in error["message"], (word, error)
    if param_prefix is not None:
        assert (error.get("param") or "").startswith(param_prefix), error
    return error


def _schema_field(schema):
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "bad", "schema": schema}}}


@pytest.mark.parametrize("route", ["chat/completions", "completions"])
@pytest.mark.parametrize("schema, keyword", [
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "integer", "multipleOf": 3}, "multipleOf"),
    ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "patternProperties"),
    ({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}, ("/properties/a", "not")),
    ({"if": {"type": "string"}, "then": {"minLength": 2}}, "if"),
    ({"type": "strin"}, "type"),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "$ref"),
    ({"type": "string", "minLength": 5, "maxLength": 2}, "maxLength"),
    ({"type": "string", "pattern": "[a-z"}, "pattern"),
    ({"type": "integer", "minimum": 10, "maximum": 1}, "minimum"),
    ({"enum": []}, "enum"),
])
def test_invalid_or_unsupported_schema_names_the_keyword(base_url, route, schema, keyword):
    words = keyword if isinstance(keyword, tuple) else (keyword,)
    _assert_400(_post(base_url, route, **_schema_field(schema)), *words, param_prefix="response_format")


@pytest.mark.parametrize("field, value, param", [
    ("guided_json", {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.5}}}, "guided_json"),
    ("structured_outputs", {"json": {"type": "array", "uniqueItems": True}}, "structured_outputs"),
    ("json_schema", {"type": "object", "not": {}}, "json_schema"),
])
def test_unsupported_schema_in_every_spelling_names_the_keyword(base_url, field, value, param):
    keyword = "multipleOf" if field == "guided_json" else "uniqueItems" if field == "structured_outputs" else "not"
    _assert_400(_post(base_url, "chat/completions", **{field: value}), keyword, param_prefix=param)


@pytest.mark.parametrize("pattern", ["[a-z", "(ab", "a{3,1}", "ab)", "x**", "\\"])
def test_invalid_regex_gives_the_position(base_url, pattern):
    for fields, param in [({"structured_outputs": {"regex": pattern}}, "structured_outputs"),
                          ({"guided_regex": pattern}, "guided_regex")]:
        _assert_400(_post(base_url, "completions", **fields), "position", param_prefix=param)


@pytest.mark.parametrize("grammar, words", [
    ('root ::= "abc', ["line 1", "column"]),
    ('root ::= [a-z', ["line 1", "column"]),
    ('root ::= "a"\nitem ::= ( "b" | ', ["line 2", "column"]),
    ('root ::= item', ["item"]),  # referenced, never defined
    ('item ::= "a"', ["root"]),  # no root rule
])
def test_invalid_grammar_gives_the_position(base_url, grammar, words):
    for fields, param in [({"structured_outputs": {"grammar": grammar}}, "structured_outputs"),
                          ({"guided_grammar": grammar}, "guided_grammar"), ({"grammar": grammar}, "grammar")]:
        _assert_400(_post(base_url, "chat/completions", **fields), *words, param_prefix=param)


@pytest.mark.parametrize("fields", [
    {"response_format": {"type": "json_object"}, "guided_regex": "a+"},
    {**_schema_field({"type": "string"}), "structured_outputs": {"choice": ["a", "b"]}},
    {"structured_outputs": {"json": {"type": "string"}, "regex": "a+"}},
    {"guided_json": {"type": "string"}, "guided_choice": ["a"]},
    {"grammar": 'root ::= "a"', "json_schema": {"type": "string"}},
    {"guided_regex": "a+", "structured_outputs": {"regex": "b+"}},
])
@pytest.mark.parametrize("route", ["chat/completions", "completions"])
def test_two_constraint_sources_are_refused(base_url, route, fields):
    r = _post(base_url, route, **fields)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("fields", [{"guided_regex": "a+"}, {"response_format": {"type": "json_object"}},
                                    {"structured_outputs": {"choice": ["x", "y"]}}])
def test_beam_search_with_a_constraint_is_refused(base_url, fields):
    r = _post(base_url, "completions", use_beam_search=True, n=2, **fields)
    _assert_400(r, "beam")


@pytest.mark.parametrize("fields, word", [
    ({"response_format": {"type": "json_schema"}}, "json_schema"),
    ({"response_format": {"type": "xml"}}, "type"),
    ({"guided_choice": []}, "guided_choice"),
    ({"structured_outputs": {"choice": "yes"}}, "choice"),
    ({"guided_regex": 5}, "guided_regex"),
])
def test_malformed_constraint_fields_are_a_400(base_url, fields, word):
    _assert_400(_post(base_url, "chat/completions", **fields), word)


@pytest.mark.parametrize("fields", [
    {"response_format": {"type": "text"}},
    {"response_format": {"type": "json_object"}},
    _schema_field({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
    {"structured_outputs": {"regex": "[0-9]{3}"}},
    {"guided_choice": ["a", "b"]},
    {"grammar": 'root ::= "x" [0-9]'},
])
def test_valid_constraints_are_accepted(base_url, fields):
    r = _post(base_url, "chat/completions", **fields)
    assert r.status_code == 200, r.text
