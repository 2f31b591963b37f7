"""One chat-template rule for every command (issue 14): a model folder with
both chat_template.jinja and a tokenizer_config.json chat_template renders the
file's template in `pagoda chat-template`, `pagoda generate --chat` and
`pagoda serve`, as transformers does; `chat-template --template FILE` takes
bos/eos from MODEL."""
import json
import shutil
import socket
import subprocess
import time
import urllib.request

import jinja_harness as h

# Renders the conversation with a marker whose token count tells the templates apart.
FILE_TEMPLATE = "{{ bos_token }}FILE: {% for m in messages %}{{ m['content'] }}{% endfor %}"
CONFIG_TEMPLATE = ("CONFIG CONFIG CONFIG CONFIG CONFIG CONFIG: "
                   "{% for m in messages %}{{ m['content'] }}{% endfor %}")
MESSAGES = [{"role": "user", "content": "Once upon a time"}]


def model_with_both_templates(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(h.SHARED / "models" / "stories260K", folder)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = CONFIG_TEMPLATE
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "chat_template.jinja").write_text(FILE_TEMPLATE, encoding="utf-8")
    return folder, config


def token_ids(folder, text):
    out = h.run("tokenize", folder, text, "--no-special-tokens")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_tokenize(folder):
    port = free_port()
    proc = subprocess.Popen([str(h.BIN), "serve", str(folder), "--device", "cpu", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        body = json.dumps({"messages": MESSAGES, "add_special_tokens": False}).encode()
        deadline = time.monotonic() + 60
        while True:
            try:
                request = urllib.request.Request(f"http://127.0.0.1:{port}/tokenize", data=body,
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=10) as response:
                    return json.loads(response.read())["tokens"]
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode(errors="replace")
                assert time.monotonic() < deadline, "serve did not answer within 60 s"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_chat_template_jinja_wins_in_every_command(tmp_path):
    folder, config = model_with_both_templates(tmp_path)
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps(MESSAGES), encoding="utf-8")
    rendered = h.run("chat-template", folder, "--messages", messages)
    assert rendered.returncode == 0, rendered.stderr
    text = rendered.stdout.decode("utf-8")
    assert text == h.token_text(config, "bos_token") + "FILE: Once upon a time"
    expected = token_ids(folder, text)

    batch_in, batch_out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    batch_in.write_text(json.dumps({"messages": MESSAGES, "max_tokens": 1, "temperature": 0}) + "\n",
                        encoding="utf-8")
    generated = h.run("generate", folder, "--device", "cpu", "--input", batch_in, "--output", batch_out)
    assert generated.returncode == 0, generated.stderr
    line = json.loads(batch_out.read_text(encoding="utf-8").splitlines()[0])
    assert line["usage"]["prompt_tokens"] == len(expected), line

    # --chat --prompt renders the prompt as the one user message.
    chat = h.run("generate", folder, "--device", "cpu", "--chat", "--prompt", MESSAGES[0]["content"],
                 "--max-tokens", "1", "--temperature", "0")
    assert chat.returncode == 0, chat.stderr
    assert f"[{len(expected)} prompt tokens," in chat.stderr.decode("utf-8"), chat.stderr

    assert serve_tokenize(folder) == expected


def test_template_file_takes_the_models_special_tokens(tmp_path):
    folder, config = model_with_both_templates(tmp_path)
    template = tmp_path / "t.jinja"
    template.write_text("[{{ bos_token }}|{{ eos_token }}]", encoding="utf-8")
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps(MESSAGES), encoding="utf-8")
    out = h.run("chat-template", folder, "--template", template, "--messages", messages)
    assert out.returncode == 0, out.stderr
    bos, eos = h.token_text(config, "bos_token"), h.token_text(config, "eos_token")
    assert bos and eos
    assert out.stdout.decode("utf-8") == f"[{bos}|{eos}]"
    # Without MODEL the tokens stay undefined, as before.
    out = h.run("chat-template", "--template", template, "--messages", messages)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode("utf-8") == "[|]"


def test_additional_chat_templates_replace_the_config_list(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": [
        {"name": "default", "template": "config default"},
        {"name": "tool_use", "template": "config tools"}]}), encoding="utf-8")
    (folder / "additional_chat_templates").mkdir()
    (folder / "additional_chat_templates" / "tool_use.jinja").write_text("file tools", encoding="utf-8")
    (folder / "chat_template.jinja").write_text("file default", encoding="utf-8")
    messages = tmp_path / "m.json"
    messages.write_text(json.dumps(MESSAGES), encoding="utf-8")
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "f"}}]), encoding="utf-8")
    assert h.run("chat-template", folder, "--messages", messages).stdout == b"file default"
    assert h.run("chat-template", folder, "--messages", messages, "--tools", tools).stdout == b"file tools"
