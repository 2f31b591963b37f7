"""The jinja2 environment transformers renders chat templates with, built
directly with jinja2 (transformers is not needed): see transformers'
utils/chat_template_utils.py (_cached_compile_jinja_template and
render_jinja_template) and tokenization_utils_base.apply_chat_template.

render_chat() mirrors what apply_chat_template(..., tokenize=False) passes to
the template; render() renders a template with exactly the given variables.
Both return ("ok", text) or ("error", message)."""

import functools
import json
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class _AssistantTracker(Extension):
    """The {% generation %} tag: renders its body (tracking is off when rendering text)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_generation_support")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


class _TemplateDict:
    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                "Chat templates cannot store underscore-prefixed attributes on a namespace, "
                f"but got {name!r}. Please rename the attribute."
            )


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(format):
    return datetime.now().strftime(format)


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_AssistantTracker, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env


_ENV = make_environment()
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


@functools.lru_cache(maxsize=512)
def _compile(source):  # transformers caches compiled templates the same way
    return _ENV.from_string(source)


def render(source, variables):
    """Renders `source` with exactly `variables`."""
    try:
        return ("ok", _compile(source).render(**variables))
    except Exception as e:  # any template failure counts as an error
        return ("error", f"{type(e).__name__}: {e}")


def prepare_messages(messages):
    """apply_chat_template's message preparation (transformers 5.x)."""
    out = []
    for message in messages:
        message = {k: v for k, v in message.items() if v is not None}
        reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def chat_variables(messages, tools=None, documents=None, add_generation_prompt=False,
                   bos_token=None, eos_token=None, **kwargs):
    """The variables apply_chat_template renders a conversation with."""
    variables = {}
    if bos_token:
        variables["bos_token"] = bos_token
    if eos_token:
        variables["eos_token"] = eos_token
    variables.update(kwargs)
    variables.update(messages=prepare_messages(messages), tools=tools, documents=documents,
                     add_generation_prompt=add_generation_prompt)
    return variables


def continue_final(rendered, final_message):
    """apply_chat_template(..., continue_final_message=True)'s cut of the
    rendered text (transformers 4.45+): right after the final message's
    stripped text; its trailing spacing stays only if the template kept it."""
    text = final_message["content"]
    if isinstance(text, (list, tuple)):
        texts = [part["text"] for part in text if "text" in part]
        if not texts:
            raise ValueError("continue_final_message: no text to continue")
        text = texts[-1]
    if text.strip() not in rendered:
        raise ValueError("continue_final_message: the final message does not appear in the chat")
    at = rendered.rindex(text.strip())
    if rendered[at:at + len(text.lstrip())] == text:
        return rendered[:at + len(text.lstrip())]
    return rendered[:at + len(text.strip())]


def render_chat(source, messages, continue_final_message=False, **inputs):
    kind, text = render(source, chat_variables(messages, **inputs))
    if kind != "ok" or not continue_final_message:
        return kind, text
    try:
        return "ok", continue_final(text, messages[-1])
    except ValueError as e:
        return "error", f"ValueError: {e}"
