"""A GGUF model's quantized linear weights stay in their blocks on the device
(the default) and give the same greedy text as --gguf-dequantize, which
dequantizes them at load: on the CPU both compute bit-identical logits. The
model is a tiny llama (2 layers, hidden 256, 4 heads of 64, 2 kv heads,
intermediate 512, stories260K's vocabulary) whose linear weights are random
blocks of each format (random quant bytes, finite f16 scales), plus a
Q4_K_M-like mix (q/k/o/gate/up Q4_K, v/down/output Q6_K, embeddings Q8_0).
Under -tp 2 the column slices of o_proj (K 256 -> 128) are not whole 256-element
blocks: those tensors are dequantized, and the log says so.

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

gguf = pytest.importorskip("gguf")
pytest.importorskip("sentencepiece")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tools"))
from make_random_gguf import LINEAR, MIXES as MODELS, write_model as _write_model  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
STORIES = SHARED / "models" / "stories260K"
PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
ENGINE = ["--device", "cpu", "--max-model-len", "64", "--num-kv-blocks", "16", "--max-num-seqs", "4",
          "--max-num-batched-tokens", "64"]


def write_model(out: pathlib.Path, formats: dict[str, str], seed: int) -> None:
    _write_model(out, formats, seed, STORIES / "tokenizer.model")


@pytest.fixture(scope="module", params=[name for name in MODELS if name != "BF16"])  # BF16: no blocks
def model(request, tmp_path_factory):
    if not (STORIES / "tokenizer.model").exists():
        pytest.skip(f"{STORIES} not present")
    path = tmp_path_factory.mktemp("gguf_blocks") / f"tiny-{request.param}.gguf"
    write_model(path, MODELS[request.param], seed=len(request.param))
    return request.param, path


def generate(path: pathlib.Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    assert PAGODA_BIN.exists(), f"pagoda binary not found at {PAGODA_BIN} (set PAGODA_BIN)"
    out = subprocess.run([str(PAGODA_BIN), "generate", str(path), *ENGINE, "--prompt", "Once upon a time",
                          "--max-tokens", "12", "--temperature", "0", *flags],
                         capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return out


def formats_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "by format:" in line]
    assert lines, stderr
    return lines[0]


def test_kept_blocks_generate_what_dequantized_weights_do(model):
    name, path = model
    kept = generate(path)
    dequantized = generate(path, "--gguf-dequantize")
    assert kept.stdout.strip(), kept.stderr
    assert kept.stdout == dequantized.stdout
    kept_line, dequantized_line = formats_line(kept.stderr), formats_line(dequantized.stderr)
    for fmt in set(MODELS[name][stem] for stem in LINEAR):
        assert re.search(rf"\b{fmt.lower().replace('_k', '_K')} \d+ tensors", kept_line), kept_line
    assert not re.search(r"\bq\d_", dequantized_line), dequantized_line
    assert "f32" in dequantized_line


@pytest.mark.parametrize("name", ["Q4_0", "Q6_K", "Q4_K_M-like"])
def test_tensor_parallel_slices_blocks(name, tmp_path):
    if not (STORIES / "tokenizer.model").exists():
        pytest.skip(f"{STORIES} not present")
    path = tmp_path / f"tiny-{name}.gguf"
    write_model(path, MODELS[name], seed=7)
    kept = generate(path, "-tp", "2")
    assert kept.stdout == generate(path, "-tp", "2", "--gguf-dequantize").stdout
    # o_proj's slice of K is 128 columns: whole 32-blocks, not whole 256-blocks.
    assert ("not whole" in kept.stderr) == (name != "Q4_0"), kept.stderr


def test_tied_head_keeps_the_embedding_blocks(tmp_path):
    """No output.weight: the head is token_embd. Stored as Q8_0 it is loaded twice, as the
    embedding (dequantized rows for the lookup) and as the head in its blocks, which the
    per-format line counts: 4 fused linears (qkv, o, gate_up, down) x 2 layers + the head = 9
    q8_0 tensors. Under -tp the embedding is vocab-parallel (each rank's dequantized rows, the
    head's block in its blocks) and generates what the replicated table does."""
    if not (STORIES / "tokenizer.model").exists():
        pytest.skip(f"{STORIES} not present")
    path = tmp_path / "tiny-tied-Q8_0.gguf"
    write_model(path, {**{stem: "Q8_0" for stem in LINEAR}, "token_embd": "Q8_0", "output": "TIED"}, seed=5)
    kept = generate(path)
    assert kept.stdout.strip() and kept.stdout == generate(path, "--gguf-dequantize").stdout
    assert re.search(r"\bq8_0 9 tensors", formats_line(kept.stderr)), formats_line(kept.stderr)
    for n in ("2", "4"):
        tp = generate(path, "-tp", n)
        assert kept.stdout == tp.stdout
        assert f"embedding: vocab-parallel over {n} ranks" in tp.stderr, tp.stderr
    replicated = generate(path, "-tp", "2", env={"PAGODA_REPLICATED_EMBEDDING": "1"})
    assert kept.stdout == replicated.stdout
    assert "embedding: replicated (PAGODA_REPLICATED_EMBEDDING)" in replicated.stderr, replicated.stderr


def test_help_describes_the_flag():
    out = subprocess.run([str(PAGODA_BIN), "generate", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "--gguf-dequantize" in out and "Q4_K" in out


def test_online_fp8_refuses_block_weights(tmp_path):
    """--quantization fp8 quantises f32/f16/bf16 weights only: a linear weight stored in
    blocks is refused, naming the tensor and its format."""
    if not (STORIES / "tokenizer.model").exists():
        pytest.skip(f"{STORIES} not present")
    path = tmp_path / "tiny-Q4_0.gguf"
    write_model(path, MODELS["Q4_0"], seed=7)
    out = subprocess.run([str(PAGODA_BIN), "generate", str(path), *ENGINE, "--prompt", "x",
                          "--quantization", "fp8"], capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert re.search(r"tensor \S+ is stored in q4_0 blocks; --quantization fp8 quantises f32, f16 "
                     r"and bf16 weights only", out.stderr), out.stderr
