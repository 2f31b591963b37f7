"""Launching and probing the server under test for tests/python/server.

By default the server is build/pagoda_fake_server: the real HTTP server over a
deterministic fake engine (tests/unit/openai/fake_engine.h). With
PAGODA_TEST_REAL_ENGINE=1 it is `pagoda serve` with the tiny real model
../shared/models/stories260K and tests/data/server/simple_chat.jinja, on the
device PAGODA_TEST_DEVICE names (cpu by default; tests/gpu/hooks/e2e.sh runs
the suite with cuda).
Tests that need behaviour only the fake can produce (a tool call, an exact
scripted answer) use the `fake_only` fixture (conftest.py).
"""
import os
import pathlib
import re
import resource
import signal
import subprocess
import threading
import time

import pytest
import requests

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
FAKE_BIN = pathlib.Path(os.environ.get("PAGODA_FAKE_SERVER_BIN", PAGODA_BIN.parent / "pagoda_fake_server"))
REAL = os.environ.get("PAGODA_TEST_REAL_ENGINE") == "1"
DEVICE = os.environ.get("PAGODA_TEST_DEVICE", "cpu")
CHAT_TEMPLATE = ROOT / "tests" / "data" / "server" / "simple_chat.jinja"
NO_TOOLS_TEMPLATE = ROOT / "tests" / "data" / "server" / "no_tools_chat.jinja"  # ignores tools
API_KEY = "sk-pagoda-test"
MODEL = "stories260K"
MAX_BODY_BYTES = 1 << 20

_URL = re.compile(r"listening at (http://[0-9.]+:\d+)")


def _raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


_raise_fd_limit()


class ServerProcess:
    """A server subprocess; `url` is its base URL once it accepts connections."""

    def __init__(self, args):
        self.args = [str(a) for a in args]
        self.log = []
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace")
        self.url = None
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.log.append(line)
                match = _URL.search(line)
                if match and not ready.is_set():
                    self.url = match.group(1)
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout=120) or self.url is None:
            self.stop()
            raise RuntimeError("server did not start: " + " ".join(self.args) + "\n" + "".join(self.log))

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Signals the server and returns its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def output(self):
        return "".join(self.log)


def launch(api_key=API_KEY, max_num_seqs=None, max_waiting=None, fake_step_us=None, max_body_bytes=MAX_BODY_BYTES,
           extra_args=(), chat_template=CHAT_TEMPLATE):
    """Starts a server; the caller stops it. `extra_args`: more flags, taken by
    both servers."""
    if REAL:
        if not PAGODA_BIN.exists():
            pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
        args = [PAGODA_BIN, "serve", SHARED / "models" / "stories260K", "--device", DEVICE,
                "--chat-template", chat_template]
        if max_waiting is not None:
            args += ["--max-waiting-requests", max_waiting]
        if DEVICE == "cuda":  # several servers run at once (the shared one + a test's own)
            args += ["--gpu-memory-utilization", 0.1]
    else:
        if not FAKE_BIN.exists():
            pytest.fail(f"{FAKE_BIN} does not exist (it is built with the tests: ninja -C build)")
        args = [FAKE_BIN, "--tokenizer", SHARED / "models" / "stories260K", "--chat-template", chat_template,
                "--step-us", fake_step_us or 1000]
        if max_waiting is not None:
            args += ["--max-waiting-requests", max_waiting]
    args += ["--served-model-name", MODEL, "--port", 0, "--max-body-bytes", max_body_bytes, *extra_args]
    if max_num_seqs is not None:
        args += ["--max-num-seqs", max_num_seqs]
    if api_key:
        args += ["--api-key", api_key]
    return ServerProcess(args)


def metrics(base_url):
    """Parses /metrics into {"name{labels}": value}."""
    text = requests.get(base_url + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30).text
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        out[key] = float(value)
    return out


def wait_until(predicate, timeout=30.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
