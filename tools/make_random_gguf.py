#!/usr/bin/env python3
"""A llama GGUF whose linear weights are random blocks of GGUF quantization formats
(random quant bytes, finite f16 scales of magnitude 2^-9..2^-5) or random BF16 values (magnitude
2^-9..2^-5; --mix BF16 draws one tensor per projection and repeats it in every layer, so that the
8B shape is written in seconds), for tests and benchmarks of
block weights kept on the device: the tiny shape of tests/python/io/test_gguf_blocks.py, or the
Llama-3.1-8B layer shapes (--preset llama3-8b) for decode benchmarks. The vocabulary is
stories260K's (512 tokens), so the embedding and lm_head are small next to the layers.

Usage: python tools/make_random_gguf.py OUT.gguf [--preset tiny|llama3-8b] [--mix Q4_K_M-like|Q8_0|...]
           [--tokenizer-model ../shared/models/stories260K/tokenizer.model] [--seed N]
Needs numpy, gguf and sentencepiece.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import gguf
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python" / "io"))
from stories_gguf import _permute, _vocab  # noqa: E402

Q = gguf.GGMLQuantizationType
FORMATS = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
# Byte offsets of each format's f16 scale fields within a block.
SCALES = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q2_K": [80, 82],
          "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}
LINEAR = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "output"]
# GGUF tensor stem -> type: one format everywhere, or llama.cpp's Q4_K_M choice (q/k/o/gate/up
# Q4_K, v/down/output Q6_K, embeddings Q8_0).
MIXES = {fmt: {stem: fmt for stem in LINEAR} for fmt in FORMATS + ["BF16"]}
MIXES["BF16"]["token_embd"] = "BF16"
MIXES["Q4_K_M-like"] = {"attn_q": "Q4_K", "attn_k": "Q4_K", "attn_v": "Q6_K", "attn_output": "Q4_K",
                        "ffn_gate": "Q4_K", "ffn_up": "Q4_K", "ffn_down": "Q6_K", "output": "Q6_K",
                        "token_embd": "Q8_0"}
# hidden, layers, heads, kv heads, head dim, intermediate, rope base.
PRESETS = {"tiny": (256, 2, 4, 2, 64, 512, 10000.0),
           "llama3-8b": (4096, 32, 32, 8, 128, 14336, 500000.0)}


def random_blocks(rng: np.random.Generator, fmt: str, rows: int, cols: int) -> np.ndarray:
    """[rows, bytes per row] uint8: random quant bytes, scales of magnitude 2^-9..2^-5."""
    block, size = gguf.GGML_QUANT_SIZES[Q[fmt]]
    nblocks = rows * cols // block
    data = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
    for off in SCALES[fmt]:
        scale = (np.exp2(rng.uniform(-9, -5, nblocks)) * rng.choice([-1.0, 1.0], nblocks)).astype(np.float16)
        data[:, off:off + 2] = scale.view(np.uint8).reshape(nblocks, 2)
    return data.reshape(rows, cols // block * size)


def write_model(out: pathlib.Path, formats: dict[str, str], seed: int, tokenizer_model: pathlib.Path,
                preset: str = "tiny") -> None:
    """formats: GGUF tensor stem (attn_q, ..., output, token_embd) -> type name or F32;
    output "TIED" writes no output.weight (the head is tied to token_embd)."""
    hidden, layers, heads, kv_heads, head_dim, inter, rope_base = PRESETS[preset]
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(f"random blocks ({preset})")
    w.add_context_length(256 if preset == "tiny" else 8192)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(inter)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(rope_base)
    tokens, scores, types = _vocab(tokenizer_model)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    vocab = len(tokens)
    bf16_by_stem: dict[str, np.ndarray] = {}

    def add(name: str, stem: str, rows: int, cols: int, permute_heads: int = 0) -> None:
        fmt = formats.get(stem, "F32")
        if fmt == "F32":
            x = rng.normal(0, 0.05, (rows, cols)).astype(np.float32)
            w.add_tensor(name, _permute(x, permute_heads) if permute_heads else x)
        elif fmt == "BF16":  # sign, exponent 118..122 (2^-9..2^-5), random mantissa
            if stem not in bf16_by_stem:
                bits = (rng.integers(0, 2, (rows, cols), dtype=np.uint16) << 15) \
                    | (rng.integers(118, 123, (rows, cols), dtype=np.uint16) << 7) \
                    | rng.integers(0, 128, (rows, cols), dtype=np.uint16)
                bf16_by_stem[stem] = bits.view(np.uint8).reshape(rows, cols * 2)
            w.add_tensor(name, bf16_by_stem[stem], raw_dtype=Q.BF16)
        else:  # random blocks: the llama q/k permutation moves whole rows, so it needs no care
            w.add_tensor(name, random_blocks(rng, fmt, rows, cols), raw_dtype=Q[fmt])

    add("token_embd.weight", "token_embd", vocab, hidden)
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, np.float32))
        add(f"blk.{i}.attn_q.weight", "attn_q", heads * head_dim, hidden, heads)
        add(f"blk.{i}.attn_k.weight", "attn_k", kv_heads * head_dim, hidden, kv_heads)
        add(f"blk.{i}.attn_v.weight", "attn_v", kv_heads * head_dim, hidden)
        add(f"blk.{i}.attn_output.weight", "attn_output", hidden, heads * head_dim)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, np.float32))
        add(f"blk.{i}.ffn_gate.weight", "ffn_gate", inter, hidden)
        add(f"blk.{i}.ffn_up.weight", "ffn_up", inter, hidden)
        add(f"blk.{i}.ffn_down.weight", "ffn_down", hidden, inter)
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    if formats.get("output") != "TIED":
        add("output.weight", "output", vocab, hidden)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--mix", choices=sorted(MIXES), default="Q4_K_M-like")
    ap.add_argument("--tokenizer-model", type=pathlib.Path,
                    default=pathlib.Path(__file__).resolve().parents[2] / "shared" / "models" / "stories260K"
                    / "tokenizer.model")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    write_model(a.out, MIXES[a.mix], a.seed, a.tokenizer_model, a.preset)
    print(f"{a.out}: {a.preset} {a.mix}, {a.out.stat().st_size / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
