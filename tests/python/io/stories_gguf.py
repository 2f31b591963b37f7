"""stories260K (../shared/models/stories260K) written as an F32 GGUF, the way llama.cpp's
convert_hf_to_gguf.py writes a llama model: q/k rows permuted to llama.cpp's interleaved order,
the SentencePiece vocabulary of tokenizer.model, tied embeddings (no output.weight). Tests use it
as a small GGUF whose greedy output is known from the safetensors model."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF rotate_half row order -> llama.cpp's interleaved pairs (convert_hf_to_gguf's permute)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _vocab(tokenizer_model: Path):
    import gguf
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(tokenizer_model))
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(gguf.TokenType.UNKNOWN)
        elif sp.is_control(i):
            types.append(gguf.TokenType.CONTROL)
        elif sp.is_unused(i):
            types.append(gguf.TokenType.UNUSED)
        elif sp.is_byte(i):
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)
    return tokens, scores, types


def write_stories_gguf(stories: Path, out: Path, name: str = "stories260K") -> None:
    import gguf
    from safetensors.numpy import load_file

    cfg = json.loads((stories / "config.json").read_text())
    t = load_file(str(stories / "model.safetensors"))
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(name)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_theta"])
    tokens, scores, types = _vocab(stories / "tokenizer.model")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_tensor("token_embd.weight", t["model.embed_tokens.weight"])
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w.add_tensor(f"blk.{i}.attn_norm.weight", t[p + "input_layernorm.weight"])
        w.add_tensor(f"blk.{i}.attn_q.weight", _permute(t[p + "self_attn.q_proj.weight"], n_head))
        w.add_tensor(f"blk.{i}.attn_k.weight", _permute(t[p + "self_attn.k_proj.weight"], n_kv))
        w.add_tensor(f"blk.{i}.attn_v.weight", t[p + "self_attn.v_proj.weight"])
        w.add_tensor(f"blk.{i}.attn_output.weight", t[p + "self_attn.o_proj.weight"])
        w.add_tensor(f"blk.{i}.ffn_norm.weight", t[p + "post_attention_layernorm.weight"])
        w.add_tensor(f"blk.{i}.ffn_gate.weight", t[p + "mlp.gate_proj.weight"])
        w.add_tensor(f"blk.{i}.ffn_up.weight", t[p + "mlp.up_proj.weight"])
        w.add_tensor(f"blk.{i}.ffn_down.weight", t[p + "mlp.down_proj.weight"])
    w.add_tensor("output_norm.weight", t["model.norm.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
