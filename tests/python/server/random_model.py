"""Tiny random-weight Llamas with real tokenizers, for tests.

Random weights are the worst case for structured output: the model has no
idea of JSON, so under a constraint it wanders wherever the grammar allows.
Two vocabularies (TOKENIZERS):
- "llama2": stories260K's 512-token SentencePiece vocabulary, mostly single
  characters and byte-fallback tokens (<0x7B> is `{`), plus merges that cross
  JSON elements such as `▁"`. Cheap: the test's bulk runs on it.
- "smollm2": SmolLM2's 49,152-token BPE vocabulary, with multi-character JSON
  punctuation tokens (`{"`, `":`, `",`, `"}`, `},`, ...) whose bytes cross
  grammar elements. Its 49,152-row output layer makes each step ~100x dearer
  on a CPU, so fewer generations run on it.

Weights follow Hugging Face's initialisation (normal(0, 0.02), RMSNorm 1),
drawn with numpy from a fixed seed; float32, tied embeddings.
"""
import json
import pathlib
import shutil

import numpy as np
from safetensors.numpy import save_file

HIDDEN = 32
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 8
INTERMEDIATE = 64

# name -> (tokenizer folder under ../shared/models, vocabulary size, BOS id, EOS ids)
TOKENIZERS = {
    "llama2": ("stories260K", 512, 1, [2]),  # </s>
    "smollm2": ("tokenizers/smollm2", 49152, 1, [2, 0]),  # <|im_end|>, <|endoftext|>
}


def write_random_model(out, tokenizer, shared_models, seed=0):
    """Writes config.json, generation_config.json, model.safetensors and the
    tokenizer (TOKENIZERS[tokenizer], copied from under `shared_models`) into
    `out`; returns `out`."""
    folder, vocab, bos, eos = TOKENIZERS[tokenizer]
    tokenizer_dir = pathlib.Path(shared_models) / folder
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": vocab,
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None,
        "hidden_act": "silu", "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True,
        "bos_token_id": bos, "eos_token_id": eos[0], "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": bos, "eos_token_id": eos}))
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return rng.normal(0.0, 0.02, size=shape).astype(np.float32)

    tensors = {"model.embed_tokens.weight": normal(vocab, HIDDEN), "model.norm.weight": np.ones(HIDDEN, np.float32)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        tensors.update({
            p + "input_layernorm.weight": np.ones(HIDDEN, np.float32),
            p + "post_attention_layernorm.weight": np.ones(HIDDEN, np.float32),
            p + "self_attn.q_proj.weight": normal(HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.k_proj.weight": normal(KV_HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.v_proj.weight": normal(KV_HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.o_proj.weight": normal(HIDDEN, HEADS * HEAD_DIM),
            p + "mlp.gate_proj.weight": normal(INTERMEDIATE, HIDDEN),
            p + "mlp.up_proj.weight": normal(INTERMEDIATE, HIDDEN),
            p + "mlp.down_proj.weight": normal(HIDDEN, INTERMEDIATE),
        })
    save_file(tensors, str(out / "model.safetensors"))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tokenizer_dir / name).exists():
            shutil.copyfile(tokenizer_dir / name, out / name)
    return out
