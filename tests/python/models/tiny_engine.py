"""`pagoda generate` on the tiny HF folders of tests/data/models for the NumPy-reference tests
(test_gemma_numpy.py, test_phi3_numpy.py): the folder gets stories260K's 512-token tokenizer
copied in (the prompts are token ids), and every prompt runs greedily on the CPU with the top-20
logprobs of each step, in blocks of 4 and prefill chunks of 7.

Env: PAGODA_BIN (default: build/pagoda), PAGODA_SHARED_DIR (default: ../shared)."""
import json
import os
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = pathlib.Path(os.environ.get("PAGODA_SHARED_DIR", ROOT.parent / "shared"))
PAGODA_BIN = pathlib.Path(os.environ.get("PAGODA_BIN", ROOT / "build" / "pagoda"))
TOKENIZER = SHARED / "models" / "stories260K"


def with_tokenizer(model: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of the model folder with stories260K's tokenizer."""
    out = tmp_path / "model"
    out.mkdir()
    for f in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(TOKENIZER / f, out / f)
    for f in model.iterdir():
        shutil.copy(f, out / f.name)
    return out


def run_engine(model, prompts_ids, tmp_path, steps, *flags):
    """The generate results (one dict per prompt) of `steps` greedy tokens per prompt."""
    items = [{"prompt": p, "max_tokens": steps, "temperature": 0, "logprobs": 20, "ignore_eos": True}
             for p in prompts_ids]
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text("".join(json.dumps(it) + "\n" for it in items))
    r = subprocess.run([str(PAGODA_BIN), "generate", str(model), "--device", "cpu", "--input", str(inp),
                        "--output", str(out), "--block-size", "4", "--max-num-batched-tokens", "7",
                        "--max-num-seqs", "2", "--threads", "1", *flags],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(line) for line in out.read_text().splitlines()]
