"""What `pagoda generate` logs while it starts: each fact once, and no ERROR
for a normal start (--device auto without a GPU falls back to the CPU with an
INFO line).

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
MODEL = SHARED / "models" / "stories260K"


def start_log(device):
    assert PAGODA_BIN.exists(), f"pagoda binary not found at {PAGODA_BIN} (set PAGODA_BIN)"
    out = subprocess.run([str(PAGODA_BIN), "generate", str(MODEL), "--device", device, "--prompt", "Once",
                          "--max-tokens", "1"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stderr.splitlines() if line.startswith("[")]


def test_each_start_up_fact_is_logged_once():
    log = start_log("cpu")
    model = [line for line in log if re.search(r"INFO\] model\b", line)]
    kv = [line for line in log if "KV cache:" in line]
    assert len(model) == 1, log
    assert len(kv) == 1, log
    assert "prefix caching on" in kv[0] and "GiB" in kv[0], kv[0]


def test_device_auto_starts_without_an_error():
    log = start_log("auto")
    assert [line for line in log if " ERROR]" in line] == [], log
    assert any("backend:" in line or "cuda backend" in line for line in log), log
