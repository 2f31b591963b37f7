"""The engine flags every command shares: --help explains each without CLI11's
raw flag values, and the on/off switches work in either spelling.

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
MODEL = SHARED / "models" / "stories260K"

COMMANDS = [["serve"], ["generate"], ["bench", "latency"], ["bench", "throughput"], ["bench", "serve"],
            ["chat-template"], ["tokenize"], ["detokenize"], ["version"]]


def run(*args):
    assert PAGODA_BIN.exists(), f"pagoda binary not found at {PAGODA_BIN} (set PAGODA_BIN)"
    return subprocess.run([str(PAGODA_BIN), *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_shows_no_raw_flag_values(command):
    out = run(*command, "--help")
    assert out.returncode == 0, out.stderr
    assert "{false}" not in out.stdout and "{true}" not in out.stdout, out.stdout


def test_switches_say_their_default_and_have_an_off_spelling():
    text = run("serve", "--help").stdout
    for name in ("enable-prefix-caching", "async-scheduling", "jump-forward"):
        on = next(line for line in text.splitlines() if line.strip().startswith(f"--{name} "))
        assert "(default on)" in on, on
        assert f"--no-{name}" in text


@pytest.mark.parametrize("flags,state", [([], "on"), (["--no-enable-prefix-caching"], "off"),
                                         (["--no-enable-prefix-caching", "--enable-prefix-caching"], "on"),
                                         (["--enable-prefix-caching", "--no-enable-prefix-caching"], "off")])
def test_prefix_caching_switch_takes_the_last_spelling(flags, state):
    out = run("generate", MODEL, "--device", "cpu", "--prompt", "Once", "--max-tokens", "1", *flags)
    assert out.returncode == 0, out.stderr
    assert f"prefix caching {state}" in out.stderr, out.stderr
