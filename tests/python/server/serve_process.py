"""`pagoda serve` on stories260K as a subprocess whose log the tests read line
by line: for the start-up and flag tests, which need the real command (its
flags, its start-up order) whatever engine the other server tests use."""
import os
import re
import subprocess
import threading
import time

import pytest

from server_harness import CHAT_TEMPLATE, DEVICE, PAGODA_BIN, SHARED

MODEL_DIR = SHARED / "models" / "stories260K"
_ACCEPTING = re.compile(r"accepting connections at (http://[0-9.]+:\d+)")
_READY = re.compile(r"listening at (http://[0-9.]+:\d+)")


class Serve:
    """Runs `pagoda serve ARGS` (no MODEL added: pass it); `log` collects its
    stdout and stderr lines."""

    def __init__(self, args, env=None, model=MODEL_DIR, port=0):
        if not PAGODA_BIN.exists():
            pytest.fail(f"PAGODA_BIN {PAGODA_BIN} does not exist (build pagoda first)")
        cmd = [str(PAGODA_BIN), "serve", *([str(model)] if model else []), "--device", DEVICE, "--port", str(port),
               *map(str, args)]
        if DEVICE == "cuda":
            cmd += ["--gpu-memory-utilization", "0.1"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace", env={**os.environ, **(env or {})})
        self.log = []
        self._lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            with self._lock:
                self.log.append(line)

    def output(self):
        with self._lock:
            return "".join(self.log)

    def wait_for(self, pattern, timeout=60):
        """The first match of `pattern` in the log, waiting for it; None if the
        process exits (or the time runs out) first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = regex.search(self.output())
            if match:
                return match
            if self.proc.poll() is not None:
                time.sleep(0.1)  # let the pump read the last lines
                return regex.search(self.output())
            time.sleep(0.01)
        return None

    def accepting_url(self, timeout=60):
        match = self.wait_for(_ACCEPTING.pattern, timeout)
        assert match, self.output()
        return match.group(1)

    def ready_url(self, timeout=120):
        match = self.wait_for(_READY.pattern, timeout)
        assert match, self.output()
        return match.group(1)

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def serve(*args, env=None, model=MODEL_DIR, port=0, chat_template=True):
    """A Serve with the tests' chat template unless `chat_template` is False."""
    extra = ["--chat-template", CHAT_TEMPLATE] if chat_template else []
    return Serve([*extra, *args], env=env, model=model, port=port)
