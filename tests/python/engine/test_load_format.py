"""--load-format: `dummy` runs a model folder that has config.json and the
tokenizer but no weights (tools/make_random_model.py --config-only), on
random weights that are the same every run; `auto` needs the weights; any
other value is refused naming the flag.

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared).
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
MAKE_RANDOM_MODEL = ROOT / "tools" / "make_random_model.py"

# Tiny shapes of each preset's family (llama, qwen2 with biases, qwen3 with q/k norms, gemma3
# with sandwich norms and sliding layers).
TINY = ["--hidden-size", "64", "--num-hidden-layers", "2", "--num-attention-heads", "4",
        "--num-key-value-heads", "2", "--head-dim", "16", "--intermediate-size", "96"]
PRESETS = ["tiny", "qwen2.5-0.5b", "qwen3-0.6b", "gemma3-12b"]
# Small enough for a CPU: no KV pool sized from memory.
ENGINE = ["--device", "cpu", "--max-model-len", "64", "--num-kv-blocks", "16", "--max-num-seqs", "4",
          "--max-num-batched-tokens", "64"]


def run(*args):
    assert PAGODA_BIN.exists(), f"pagoda binary not found at {PAGODA_BIN} (set PAGODA_BIN)"
    return subprocess.run([str(PAGODA_BIN), *map(str, args)], capture_output=True, text=True, timeout=120)


def config_only(out, preset, *flags):
    env = dict(os.environ, PAGODA_SHARED_DIR=str(SHARED))
    subprocess.run([sys.executable, str(MAKE_RANDOM_MODEL), "--preset", preset, "--config-only", "--out", str(out),
                    *flags], check=True, capture_output=True, text=True, env=env, timeout=120)
    return out


@pytest.fixture(scope="module", params=PRESETS)
def folder(request, tmp_path_factory):
    return config_only(tmp_path_factory.mktemp(request.param), request.param, *TINY)


def generate(model, *flags):
    return run("generate", model, *ENGINE, "--prompt", "Once upon a time", "--max-tokens", "6",
               "--temperature", "0", *flags)


def test_config_only_writes_no_weights(folder):
    names = sorted(p.name for p in folder.iterdir())
    assert "config.json" in names and "generation_config.json" in names and "tokenizer.json" in names
    assert not [n for n in names if n.endswith(".safetensors")], names


def test_dummy_generates_the_same_text_every_run(folder):
    first = generate(folder, "--load-format", "dummy")
    assert first.returncode == 0, first.stderr
    assert "--load-format dummy" in first.stderr and "outputs are meaningless" in first.stderr
    assert "6 generated" in first.stderr, first.stderr
    assert first.stdout.strip(), first.stdout
    second = generate(folder, "--load-format", "dummy")
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


def test_auto_needs_the_weights(folder):
    out = generate(folder)
    assert out.returncode != 0
    assert "safetensors" in out.stderr, out.stderr


def test_bench_latency_takes_dummy(tmp_path):
    model = config_only(tmp_path / "tiny", "tiny", *TINY)
    out = run("bench", "latency", model, *ENGINE, "--load-format", "dummy", "--input-len", "8", "--output-len", "2",
              "--num-iters", "1", "--warmup", "0")
    assert out.returncode == 0, out.stderr
    assert "dummy weights" in out.stderr


def test_bench_latency_counts_a_dummy_awq_models_group_blocks(tmp_path):
    # The speed of light of a dummy AWQ model (4-bit, group 32: 20 bytes per 32 weights) counts its
    # layers' matmul weights in blocks, not in the compute dtype (f32 on the CPU): 2 layers of
    # q 64x64, k / v 32x64, o 64x64, gate / up 96x64, down 64x96 = 61440 weights, each 4 - 0.625
    # bytes fewer than the dense dummy model's.
    dense = config_only(tmp_path / "dense", "tiny", *TINY)
    awq = config_only(tmp_path / "awq", "tiny", *TINY)
    config = json.loads((awq / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True,
                                     "version": "GEMM"}
    (awq / "config.json").write_text(json.dumps(config))
    step_bytes = {}
    for name, model in (("dense", dense), ("awq", awq)):
        result = tmp_path / f"{name}.json"
        out = run("bench", "latency", model, *ENGINE, "--load-format", "dummy", "--input-len", "8",
                  "--output-len", "2", "--num-iters", "1", "--warmup", "0", "--ceiling-gbps", "100",
                  "--result-json", result)
        assert out.returncode == 0, out.stderr
        step_bytes[name] = json.loads(result.read_text())["decode_weight_bytes"]
    assert step_bytes["dense"] - step_bytes["awq"] == pytest.approx(61440 * (4 - 0.625))


@pytest.mark.parametrize("command", [["serve"], ["generate"], ["bench", "latency"], ["bench", "throughput"]],
                         ids=" ".join)
def test_every_loading_command_has_the_flag(command):
    text = run(*command, "--help").stdout
    assert "--load-format" in text and "dummy" in text and "meaningless" in text, text


@pytest.mark.parametrize("command", [["serve"], ["generate"]], ids=" ".join)
def test_a_bad_value_is_refused_naming_the_flag(command, tmp_path):
    out = run(*command, tmp_path, "--load-format", "random")
    assert out.returncode != 0
    assert "--load-format" in out.stderr and "random" in out.stderr, out.stderr


def test_llama3_70b_preset(tmp_path):
    model = config_only(tmp_path / "70b", "llama3-70b")
    c = json.loads((model / "config.json").read_text())
    assert c["model_type"] == "llama" and c["architectures"] == ["LlamaForCausalLM"]
    assert (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"],
            c["head_dim"], c["intermediate_size"], c["vocab_size"]) == (8192, 80, 64, 8, 128, 28672, 128256)
    assert c["rope_theta"] == 500000.0 and c["rope_scaling"]["rope_type"] == "llama3"
    assert c["tie_word_embeddings"] is False
    assert not list(model.glob("*.safetensors"))


def test_llama3_1b_preset_is_a_draft_for_the_8b_vocabulary(tmp_path):
    model = config_only(tmp_path / "1b", "llama3-1b")
    c = json.loads((model / "config.json").read_text())
    # Llama-3.2-1B's shape: 1,235,814,400 parameters with the embedding tied.
    assert (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"],
            c["head_dim"], c["intermediate_size"], c["vocab_size"]) == (2048, 16, 32, 8, 64, 8192, 128256)
    assert c["tie_word_embeddings"] is True and c["rope_scaling"]["factor"] == 32.0
    params = (c["vocab_size"] * c["hidden_size"] + c["num_hidden_layers"] * (
        c["hidden_size"] * c["head_dim"] * (2 * c["num_attention_heads"] + 2 * c["num_key_value_heads"])
        + 3 * c["hidden_size"] * c["intermediate_size"] + 2 * c["hidden_size"]) + c["hidden_size"])
    assert params == 1235814400
    # Shrunk to a CPU size, it drafts for a tiny llama3-8b-family target (same vocabulary and
    # tokenizer, which --speculative-config's draft_model checks at start).
    target = config_only(tmp_path / "tiny", "tiny", *TINY)
    draft = config_only(tmp_path / "draft", "llama3-1b", *TINY)
    spec = json.dumps({"method": "draft_model", "model": str(draft), "num_speculative_tokens": 2})
    out = run("bench", "latency", target, *ENGINE, "--load-format", "dummy", "--input-len", "8",
              "--output-len", "6", "--num-iters", "1", "--warmup", "0", "--speculative-config", spec)
    assert out.returncode == 0, out.stderr
    assert "mean accepted length" in out.stdout, out.stdout


def test_gemma3_12b_preset(tmp_path):
    model = config_only(tmp_path / "12b", "gemma3-12b")
    c = json.loads((model / "config.json").read_text())
    assert c["model_type"] == "gemma3_text" and c["architectures"] == ["Gemma3ForCausalLM"]
    assert (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"],
            c["head_dim"], c["intermediate_size"], c["vocab_size"]) == (3840, 48, 16, 8, 256, 15360, 262208)
    # Five sliding-window layers of 1024 to one global layer.
    assert c["layer_types"][:6] == ["sliding_attention"] * 5 + ["full_attention"]
    assert c["layer_types"].count("full_attention") == 8 and c["sliding_window"] == 1024
    assert c["hidden_activation"] == "gelu_pytorch_tanh" and "hidden_act" not in c
    assert c["tie_word_embeddings"] is True and c["query_pre_attn_scalar"] == 256
    # The startup log names the family, and a bench runs on dummy weights of a CPU-sized copy.
    tiny = config_only(tmp_path / "tiny", "gemma3-12b", *TINY)
    out = run("bench", "latency", tiny, *ENGINE, "--load-format", "dummy", "--input-len", "8", "--output-len", "2",
              "--num-iters", "1", "--warmup", "0")
    assert out.returncode == 0, out.stderr
    assert "gemma3" in out.stderr and "dummy weights" in out.stderr, out.stderr
