"""`pagoda serve` flags that migrants from vLLM and llama-server type first:
several served names, --chat-template as a file, a name of the model's
templates or an inline template, per-request logging, --log-level, --threads,
and llama-server's spellings."""
import json
import re
import socket

import pytest
import requests

from server_harness import DEVICE, wait_until
from serve_process import MODEL_DIR, serve

MESSAGES = [{"role": "user", "content": "hello there"}]


def health(url):
    try:
        return requests.get(url + "/health", timeout=5).status_code
    except requests.ConnectionError:
        return None


def rendered(url, model=None):
    """The chat template's rendering of MESSAGES, through /tokenize and /detokenize."""
    body = {"messages": MESSAGES, "add_special_tokens": False}
    if model:
        body["model"] = model
    tokens = requests.post(url + "/tokenize", json=body, timeout=30)
    assert tokens.status_code == 200, tokens.text
    text = requests.post(url + "/detokenize", json={"tokens": tokens.json()["tokens"]}, timeout=30)
    assert text.status_code == 200, text.text
    return text.json()["prompt"]



def test_several_served_model_names(running):
    url = running("--served-model-name", "first", "second", "third").ready_url()
    listed = requests.get(url + "/v1/models", timeout=30).json()["data"]
    assert [card["id"] for card in listed] == ["first", "second", "third"]
    for name in ("first", "second", "third"):
        r = requests.post(url + "/v1/completions", json={"model": name, "prompt": "Once", "max_tokens": 2},
                          timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["model"] == "first"  # responses report the first name
        assert requests.get(url + f"/v1/models/{name}", timeout=30).json()["id"] == name
    other = requests.post(url + "/v1/completions", json={"model": "fourth", "prompt": "Once"}, timeout=30)
    assert other.status_code == 404 and other.json()["error"]["param"] == "model"


def test_inline_chat_template(running):
    template = "{% for m in messages %}[inline {{ m.role }}] {{ m.content }}{% endfor %}"
    url = running("--chat-template", template, chat_template=False).ready_url()
    assert rendered(url) == "[inline user] hello there"


def test_chat_template_by_the_name_of_a_model_template(running, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for item in MODEL_DIR.iterdir():
        (model / item.name).symlink_to(item)
    (model / "additional_chat_templates").mkdir()
    (model / "additional_chat_templates" / "tool_use.jinja").write_text(
        "{% for m in messages %}[named {{ m.role }}] {{ m.content }}{% endfor %}")
    url = running("--chat-template", "tool_use", model=model, chat_template=False).ready_url()
    assert rendered(url) == "[named user] hello there"


def test_unknown_chat_template_name_fails_naming_it():
    proc = serve("--chat-template", "no_such_template", chat_template=False)
    assert proc.proc.wait(timeout=60) == 1
    assert "no_such_template" in proc.output()


def test_requests_are_not_logged_by_default(running):
    proc = running("--disable-log-requests")
    url = proc.ready_url()
    requests.post(url + "/v1/completions", json={"prompt": "Once upon", "max_tokens": 1}, timeout=60)
    assert "prompt:" not in proc.output()


def test_enable_log_requests_logs_id_prompt_and_params(running):
    proc = running("--enable-log-requests", "--max-log-len", "5")
    url = proc.ready_url()
    r = requests.post(url + "/v1/completions", json={"prompt": "Once upon a time", "max_tokens": 3,
                                                     "temperature": 0.5, "seed": 7}, timeout=60)
    assert r.status_code == 200, r.text
    line = proc.wait_for(r"INFO\] request cmpl-\S+-0: .*").group(0)
    assert '"Once "...' in line, line  # five characters, then the cut
    ids = re.search(r"prompt_token_ids: \[([^\]]*)\]", line).group(1).split(", ")
    assert len(ids) <= 6 and (len(ids) < 6 or ids[-1] == "..."), line
    params = json.loads(line.split("params: ", 1)[1])
    assert params["max_tokens"] == 3 and params["temperature"] == 0.5 and params["seed"] == 7, params

    chat = requests.post(url + "/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 2}, timeout=60)
    assert chat.status_code == 200, chat.text
    assert proc.wait_for(r"INFO\] request chatcmpl-\S+-0: prompt: ")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_log_level_warning_hides_info_lines(running):
    port = free_port()  # the URL is logged at INFO: choose it
    proc = running("--log-level", "warning", port=port)
    url = f"http://127.0.0.1:{port}"
    assert wait_until(lambda: health(url) == 200, timeout=60), proc.output()
    requests.post(url + "/v1/completions", json={"prompt": "Once", "max_tokens": 1}, timeout=60)
    assert proc.stop() == 0
    assert "INFO]" not in proc.output(), proc.output()


@pytest.mark.skipif(DEVICE != "cpu", reason="the CPU backend's pool")
def test_threads_flag_sizes_the_cpu_pool(running):
    for flag in ("--threads", "-t"):
        proc = running(flag, "3")
        proc.ready_url()
        assert "cpu (3 threads" in proc.output(), proc.output()


def limits(url, name):
    """What a server reports and allows: its model card and whether n = 3 and
    n = 4 fit --max-num-seqs."""
    card = requests.get(url + f"/v1/models/{name}", timeout=30).json()
    fits = [requests.post(url + "/v1/completions", json={"model": name, "prompt": "Once", "max_tokens": 1, "n": n,
                                                         "temperature": 1}, timeout=60).status_code
            for n in (3, 4)]
    return card["id"], card["max_model_len"], fits


@pytest.mark.parametrize("spelling", [["-c", "128", "-np", "3", "-a", "m"],
                                      ["--ctx-size", "128", "--parallel", "3", "--alias", "m"]], ids=" ".join)
def test_llama_server_spellings_mean_the_same(running, spelling):
    vllm = running("--max-model-len", "128", "--max-num-seqs", "3", "--served-model-name", "m").ready_url()
    llama = running("-m", MODEL_DIR, *spelling, model=None).ready_url()
    assert limits(vllm, "m") == ("m", 128, [200, 400])
    assert limits(llama, "m") == limits(vllm, "m")
