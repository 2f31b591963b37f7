"""What `pagoda generate` logs while it starts: each fact once, and no ERROR
for a normal start (--device auto without a GPU falls back to the CPU with an
INFO line); how the CPU KV pool was sized; the sampling defaults in use.

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


def start_log(device, *flags, model=MODEL):
    assert PAGODA_BIN.exists(), f"pagoda binary not found at {PAGODA_BIN} (set PAGODA_BIN)"
    out = subprocess.run([str(PAGODA_BIN), "generate", str(model), "--device", device, "--prompt", "Once",
                          "--max-tokens", "1", *flags], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stderr.splitlines() if line.startswith("[")]


KV_LINE = re.compile(r"KV cache: (\d+) blocks x (\d+) tokens = (\d+) tokens \(([\d.]+) GiB; sized by ([^)]*)\)")


def kv_line(*flags):
    lines = [KV_LINE.search(line) for line in start_log("cpu", *flags)]
    found = [m for m in lines if m]
    assert len(found) == 1, lines
    return int(found[0].group(1)), found[0].group(5)


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


def test_cpu_kv_pool_is_sized_from_max_model_len_and_max_num_seqs():
    # stories260K: 512 positions; blocks of 16 tokens.
    assert kv_line("--max-model-len", "64", "--max-num-seqs", "4") == (16, "room for 4 seqs x 64 tokens")
    assert kv_line("--max-model-len", "64", "--max-num-seqs", "8") == (32, "room for 8 seqs x 64 tokens")
    assert kv_line("--max-model-len", "128", "--max-num-seqs", "8") == (64, "room for 8 seqs x 128 tokens")
    blocks, how = kv_line("--max-num-seqs", "2")  # max_model_len from the config
    assert (blocks, how) == (64, "room for 2 seqs x 512 tokens")


def test_kv_cache_memory_bytes_sets_the_pool():
    # A block: 2 (k, v) x 5 layers x 16 tokens x 4 kv heads x 8 dims x 4 bytes = 20 KiB.
    assert kv_line("--kv-cache-memory-bytes", "2MiB") == (102, "--kv-cache-memory-bytes 2.0 MiB")
    assert kv_line("--kv-cache-memory", "1048576", "--max-num-seqs", "4")[0] == 51
    assert kv_line("--kv-cache-memory-bytes", "2MiB", "--num-kv-blocks", "7") == (7, "--num-kv-blocks")
    out = subprocess.run([str(PAGODA_BIN), "generate", str(MODEL), "--device", "cpu", "--prompt", "Once",
                          "--kv-cache-memory-bytes", "lots"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "'lots' is not a byte size" in out.stderr, out.stderr


def sampling_line(*flags, model=MODEL):
    lines = [line for line in start_log("cpu", *flags, model=model) if "sampling defaults:" in line]
    assert len(lines) == 1, lines
    return lines[0]


def test_sampling_defaults_are_logged_with_their_source(tmp_path):
    assert "built-in (temperature=1" in sampling_line()  # stories260K's generation_config.json sets none
    (tmp_path / "generation_config.json").write_text('{"temperature": 0.3, "top_k": 7}')
    line = sampling_line("--generation-config", str(tmp_path))
    assert "temperature=0.3 top_k=7" in line and str(tmp_path / "generation_config.json") in line, line
    assert "--generation-config vllm" in sampling_line("--generation-config", "vllm")


def test_generation_config_folder_sets_unset_fields(tmp_path):
    """A request that leaves temperature unset takes the folder's 0 (greedy), whatever the seed."""
    (tmp_path / "generation_config.json").write_text('{"temperature": 0}')

    def text(*flags):
        out = subprocess.run([str(PAGODA_BIN), "generate", str(MODEL), "--device", "cpu", "--prompt",
                              "Once upon a time", "--max-tokens", "24", *flags], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    greedy = text("--temperature", "0")
    assert text("--generation-config", str(tmp_path), "--seed", "1") == greedy
    assert text("--generation-config", str(tmp_path), "--seed", "2") == greedy
    assert text("--seed", "1") != greedy  # the model's own defaults: temperature 1
