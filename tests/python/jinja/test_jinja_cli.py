"""`pagoda chat-template` on the command line: model folders, named
templates, --template files, GGUF files, flags and errors."""
import copy
import json

import pytest

import hf_jinja
import jinja_harness as h

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there!"}]


def write_json(path, value):
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def test_help_explains_every_flag():
    out = h.run("chat-template", "--help")
    assert out.returncode == 0
    for flag in ("MODEL", "--template", "--template-name", "--messages", "--tools", "--documents",
                 "--add-generation-prompt", "--continue-final-message", "--bos-token", "--eos-token",
                 "--kwargs", "--batch", "--revision", "--download-dir", "repo id"):
        assert flag in out.stdout.decode()


def test_continue_final_message_leaves_the_assistant_turn_open(tmp_path):
    folder = h.TOKENIZERS / "qwen3"
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    prefill = MESSAGES + [{"role": "assistant", "content": "Hello! How"}]
    messages = write_json(tmp_path / "m.json", prefill)
    out = h.run("chat-template", folder, "--messages", messages, "--continue-final-message")
    assert out.returncode == 0, out.stderr
    kind, expected = hf_jinja.render_chat(
        config["chat_template"], copy.deepcopy(prefill), continue_final_message=True,
        bos_token=h.token_text(config, "bos_token"), eos_token=h.token_text(config, "eos_token"))
    assert kind == "ok" and expected.endswith("Hello! How")
    assert out.stdout.decode("utf-8") == expected
    both = h.run("chat-template", folder, "--messages", messages, "--continue-final-message",
                 "--add-generation-prompt")
    assert both.returncode == 1 and b"not compatible" in both.stderr


def test_model_folder_uses_its_template_and_tokens(tmp_path):
    folder = h.TOKENIZERS / "qwen3"
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    messages = write_json(tmp_path / "m.json", MESSAGES)
    for flags, kwargs in (([], {}), (["--kwargs", '{"enable_thinking": false}'], {"enable_thinking": False})):
        out = h.run("chat-template", folder, "--messages", messages, "--add-generation-prompt", *flags)
        assert out.returncode == 0, out.stderr
        kind, expected = hf_jinja.render_chat(
            config["chat_template"], copy.deepcopy(MESSAGES), add_generation_prompt=True,
            bos_token=h.token_text(config, "bos_token"), eos_token=h.token_text(config, "eos_token"), **kwargs)
        assert kind == "ok"
        assert out.stdout.decode("utf-8") == expected  # exactly, no added newline


def test_bos_token_from_dict_and_flags_override(tmp_path):
    folder = h.TOKENIZERS / "deepseek_v3"  # bos/eos written as {"__type": "AddedToken", "content": ...}
    messages = write_json(tmp_path / "m.json", MESSAGES)
    out = h.run("chat-template", folder, "--messages", messages)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode("utf-8").startswith("<｜begin▁of▁sentence｜>Be brief.")
    out = h.run("chat-template", folder, "--messages", messages, "--bos-token", "[BOS]")
    assert out.stdout.decode("utf-8").startswith("[BOS]Be brief.")


def test_named_templates_follow_transformers_selection(tmp_path):
    config = {"bos_token": "<s>", "chat_template": [
        {"name": "default", "template": "D{{ messages|length }}{{ bos_token }}"},
        {"name": "tool_use", "template": "T{{ tools|length }}"},
        {"name": "rag", "template": "R{{ documents|length }}"}]}
    write_json(tmp_path / "tokenizer_config.json", config)
    messages = write_json(tmp_path / "m.json", MESSAGES)
    tools = write_json(tmp_path / "t.json", [{"type": "function", "function": {"name": "f"}}])
    docs = write_json(tmp_path / "d.json", [{"title": "a", "text": "b"}, {"title": "c", "text": "d"}])
    cases = [([], "D2<s>"), (["--tools", tools], "T1"), (["--tools", tools, "--template-name", "default"], "D2<s>"),
             (["--documents", docs, "--template-name", "rag"], "R2")]
    for flags, expected in cases:
        out = h.run("chat-template", tmp_path, "--messages", messages, *flags)
        assert out.returncode == 0, out.stderr
        assert out.stdout.decode() == expected, flags
    out = h.run("chat-template", tmp_path, "--messages", messages, "--template-name", "nope")
    assert out.returncode == 1 and b"nope" in out.stderr


def test_chat_template_jinja_file_wins(tmp_path):
    write_json(tmp_path / "tokenizer_config.json", {"chat_template": "from config", "eos_token": "E"})
    (tmp_path / "chat_template.jinja").write_text("from file {{ eos_token }}\n", encoding="utf-8")
    messages = write_json(tmp_path / "m.json", {"messages": MESSAGES})
    out = h.run("chat-template", tmp_path, "--messages", messages)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode() == "from file E"  # a single trailing newline is dropped, as by jinja2


def test_template_file_with_tools_and_kwargs(tmp_path):
    source = (h.TOKENIZERS / "chat-templates" / "meta-llama-Llama-3.2-3B-Instruct.jinja").read_text(encoding="utf-8")
    tools_value = [{"type": "function", "function": {"name": "get_time", "description": "Current time",
                                                      "parameters": {"type": "object", "properties": {}}}}]
    messages = write_json(tmp_path / "m.json", MESSAGES)
    tools = write_json(tmp_path / "t.json", tools_value)
    out = h.run("chat-template", "--template", h.TOKENIZERS / "chat-templates" / "meta-llama-Llama-3.2-3B-Instruct.jinja",
                "--messages", messages, "--tools", tools, "--bos-token", "<|begin_of_text|>",
                "--kwargs", '{"date_string": "01 Jan 2025"}', "--add-generation-prompt")
    assert out.returncode == 0, out.stderr
    kind, expected = hf_jinja.render_chat(source, copy.deepcopy(MESSAGES), tools=tools_value, add_generation_prompt=True,
                                          bos_token="<|begin_of_text|>", date_string="01 Jan 2025")
    assert kind == "ok" and out.stdout.decode("utf-8") == expected


def test_template_error_goes_to_stderr_with_exit_1(tmp_path):
    messages = write_json(tmp_path / "m.json", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    template = h.TOKENIZERS / "chat-templates" / "mistralai-Mistral-Nemo-Instruct-2407.jinja"
    out = h.run("chat-template", "--template", template, "--messages", messages)
    assert out.returncode == 1
    assert out.stdout == b""
    assert b"conversation roles must alternate user/assistant" in out.stderr


def test_bad_arguments_are_reported(tmp_path):
    messages = write_json(tmp_path / "m.json", MESSAGES)
    assert h.run("chat-template", "--messages", messages).returncode == 2  # no MODEL / --template
    out = h.run("chat-template", tmp_path / "missing", "--messages", messages)
    assert out.returncode == 1 and b"missing" in out.stderr
    (tmp_path / "bad.json").write_text("[{", encoding="utf-8")
    out = h.run("chat-template", h.TOKENIZERS / "qwen3", "--messages", tmp_path / "bad.json")
    assert out.returncode == 1 and b"bad.json" in out.stderr
    out = h.run("chat-template", h.TOKENIZERS / "qwen3", "--messages", messages, "--kwargs", "{nope")
    assert out.returncode == 1 and b"--kwargs" in out.stderr


def test_gguf_model(tmp_path):
    if not h.SMOLLM2_GGUF.exists():
        pytest.skip(f"optional input {h.SMOLLM2_GGUF} is absent")
    import gguf
    reader = gguf.GGUFReader(str(h.SMOLLM2_GGUF))

    def field(name):
        f = reader.fields[name]
        return f.contents() if hasattr(f, "contents") else f.parts[f.data[0]]

    template = field("tokenizer.chat_template")
    tokens = field("tokenizer.ggml.tokens")
    bos = tokens[int(field("tokenizer.ggml.bos_token_id"))]
    eos = tokens[int(field("tokenizer.ggml.eos_token_id"))]
    messages = write_json(tmp_path / "m.json", MESSAGES)
    out = h.run("chat-template", h.SMOLLM2_GGUF, "--messages", messages, "--add-generation-prompt")
    assert out.returncode == 0, out.stderr
    kind, expected = hf_jinja.render_chat(template, copy.deepcopy(MESSAGES), add_generation_prompt=True,
                                          bos_token=bos, eos_token=eos)
    assert kind == "ok" and out.stdout.decode("utf-8") == expected
