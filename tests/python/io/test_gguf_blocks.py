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

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
pytest.importorskip("sentencepiece")

from stories_gguf import _permute, _vocab  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
STORIES = SHARED / "models" / "stories260K"
PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
ENGINE = ["--device", "cpu", "--max-model-len", "64", "--num-kv-blocks", "16", "--max-num-seqs", "4",
          "--max-num-batched-tokens", "64"]

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER = 256, 2, 4, 2, 64, 512
Q = gguf.GGMLQuantizationType
FORMATS = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
# Byte offsets of each format's f16 scale fields within a block.
SCALES = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q2_K": [80, 82],
          "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}


def random_blocks(rng: np.random.Generator, fmt: str, rows: int, cols: int) -> np.ndarray:
    """[rows, bytes per row] uint8: random quant bytes, scales of magnitude 2^-9..2^-5."""
    block, size = gguf.GGML_QUANT_SIZES[Q[fmt]]
    nblocks = rows * cols // block
    data = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
    for off in SCALES[fmt]:
        scale = (np.exp2(rng.uniform(-9, -5, nblocks)) * rng.choice([-1.0, 1.0], nblocks)).astype(np.float16)
        data[:, off:off + 2] = scale.view(np.uint8).reshape(nblocks, 2)
    return data.reshape(rows, cols // block * size)


def write_model(out: pathlib.Path, formats: dict[str, str], seed: int) -> None:
    """formats: GGUF tensor stem (attn_q, ..., output, token_embd) -> type name or F32."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name("tiny blocks")
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(INTER)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    tokens, scores, types = _vocab(STORIES / "tokenizer.model")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    vocab = len(tokens)

    def add(name: str, stem: str, rows: int, cols: int, permute_heads: int = 0) -> None:
        fmt = formats.get(stem, "F32")
        if fmt == "F32":
            x = rng.normal(0, 0.05, (rows, cols)).astype(np.float32)
            w.add_tensor(name, _permute(x, permute_heads) if permute_heads else x)
        else:  # random blocks: the llama q/k permutation moves whole rows, so it needs no care
            w.add_tensor(name, random_blocks(rng, fmt, rows, cols), raw_dtype=Q[fmt])

    add("token_embd.weight", "token_embd", vocab, HIDDEN)
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, np.float32))
        add(f"blk.{i}.attn_q.weight", "attn_q", HEADS * HEAD_DIM, HIDDEN, HEADS)
        add(f"blk.{i}.attn_k.weight", "attn_k", KV_HEADS * HEAD_DIM, HIDDEN, KV_HEADS)
        add(f"blk.{i}.attn_v.weight", "attn_v", KV_HEADS * HEAD_DIM, HIDDEN)
        add(f"blk.{i}.attn_output.weight", "attn_output", HIDDEN, HEADS * HEAD_DIM)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, np.float32))
        add(f"blk.{i}.ffn_gate.weight", "ffn_gate", INTER, HIDDEN)
        add(f"blk.{i}.ffn_up.weight", "ffn_up", INTER, HIDDEN)
        add(f"blk.{i}.ffn_down.weight", "ffn_down", HIDDEN, INTER)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    add("output.weight", "output", vocab, HIDDEN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


LINEAR = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "output"]
MODELS = {fmt: {stem: fmt for stem in LINEAR} for fmt in FORMATS}
MODELS["Q4_K_M-like"] = {"attn_q": "Q4_K", "attn_k": "Q4_K", "attn_v": "Q6_K", "attn_output": "Q4_K",
                         "ffn_gate": "Q4_K", "ffn_up": "Q4_K", "ffn_down": "Q6_K", "output": "Q6_K",
                         "token_embd": "Q8_0"}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request, tmp_path_factory):
    if not (STORIES / "tokenizer.model").exists():
        pytest.skip(f"{STORIES} not present")
    path = tmp_path_factory.mktemp("gguf_blocks") / f"tiny-{request.param}.gguf"
    write_model(path, MODELS[request.param], seed=len(request.param))
    return request.param, path


def generate(path: pathlib.Path, *flags: str) -> subprocess.CompletedProcess:
    assert PAGODA_BIN.exists(), f"pagoda binary not found at {PAGODA_BIN} (set PAGODA_BIN)"
    out = subprocess.run([str(PAGODA_BIN), "generate", str(path), *ENGINE, "--prompt", "Once upon a time",
                          "--max-tokens", "12", "--temperature", "0", *flags],
                         capture_output=True, text=True, timeout=300)
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


def test_help_describes_the_flag():
    out = subprocess.run([str(PAGODA_BIN), "generate", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "--gguf-dequantize" in out and "Q4_K" in out
