"""BOS/EOS handling, end-of-generation ids and chat templates as
tokenizer_config.json / generation_config.json / GGUF metadata configure them."""
import json
import shutil

import pytest

import tok_harness as h


def info_and(folder, *requests):
    replies = h.pagoda_batch(folder, [{"op": "info"}, *requests])
    return replies[0], replies[1:]


def need(folder):
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"optional input {folder}/tokenizer.json is absent")


def test_llama3_bos_from_post_processor_and_prompt():
    folder = h.TOKENIZERS / "llama3_1"
    need(folder)
    info, (plain, prompt, no_bos_prompt) = info_and(
        folder,
        {"op": "encode", "text": "<|begin_of_text|>Hi"},
        {"op": "encode_prompt", "text": "<|begin_of_text|>Hi"},
        {"op": "encode_prompt", "text": "Hi"})
    assert info["add_bos"] and info["bos_id"] == 128000 and info["bos_token"] == "<|begin_of_text|>"
    assert plain["ids"][:2] == [128000, 128000]  # encode() keeps both, like transformers
    assert prompt["ids"] == [128000, 13347]       # encode_prompt() does not double the BOS
    assert no_bos_prompt["ids"] == [128000, 13347]
    assert {128001, 128009}.issubset(info["eos_ids"])
    assert "default" in info["chat_templates"]


def test_qwen3_no_bos_and_end_of_turn_ids():
    folder = h.TOKENIZERS / "qwen3"
    need(folder)
    info, (enc,) = info_and(folder, {"op": "encode", "text": "Hi"})
    assert not info["add_bos"] and info["bos_id"] is None
    assert enc["ids"] == [13048]
    assert info["eos_id"] == 151645  # <|im_end|>
    assert {151643, 151645}.issubset(info["eos_ids"])


def test_deepseek_v3_add_bos_token_from_config():
    folder = h.TOKENIZERS / "deepseek_v3"
    need(folder)
    info, (enc,) = info_and(folder, {"op": "encode", "text": "Hi"})
    assert info["add_bos"] and info["bos_id"] == 0  # legacy {"__type": "AddedToken"} dicts
    assert info["eos_token"] == "<\uff5cend\u2581of\u2581sentence\uff5c>"
    assert enc["ids"][0] == 0


def test_config_overrides_and_template_list(tmp_path):
    src = h.STORIES
    need(src)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / name, tmp_path / name)
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    cfg.update({"add_bos_token": False, "add_eos_token": True,
                "chat_template": [{"name": "default", "template": "A"}, {"name": "tool_use", "template": "B"}]})
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 5]}))
    info, (enc,) = info_and(tmp_path, {"op": "encode", "text": "Hi"})
    assert not info["add_bos"] and info["add_eos"]
    assert enc["ids"][0] != 1 and enc["ids"][-1] == 2
    assert info["chat_templates"] == ["default", "tool_use"]
    assert info["eos_ids"][:2] == [2, 5]
