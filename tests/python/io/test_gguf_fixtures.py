"""The committed io fixtures (tests/data/io) are exactly what
tools/gguf_fixtures.py writes with gguf-py / safetensors, and gguf-py reads
them back as the C++ tests expect."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "io"
GENERATED = ["quants.gguf", "quants.json", "metadata.gguf", "metadata.json", "llama_tiny.gguf", "llama_tiny.json",
             "llama_tiny.bin", "qwen3_tiny.gguf", "qwen3_tiny.json", "qwen3_tiny.bin", "reference.safetensors"]


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("io_fixtures")
    subprocess.run([sys.executable, str(ROOT / "tools" / "gguf_fixtures.py"), str(out), "--no-external"], check=True,
                   capture_output=True)
    return out


@pytest.mark.parametrize("name", GENERATED)
def test_fixture_is_reproducible(regenerated: Path, name: str) -> None:
    assert (regenerated / name).read_bytes() == (DATA / name).read_bytes(), f"{name}: rerun tools/gguf_fixtures.py"


def test_fixtures_stay_small() -> None:
    total = sum(p.stat().st_size for p in DATA.iterdir() if p.is_file())
    assert total < 300_000


def test_llama_tiny_qk_rows_are_permuted_in_the_file() -> None:
    """Reading the file with gguf-py: the stored q rows are the HF rows in llama.cpp's interleaved order."""
    index = json.loads((DATA / "llama_tiny.json").read_text())
    values = np.fromfile(DATA / "llama_tiny.bin", dtype="<f4")
    reader = gguf.GGUFReader(str(DATA / "llama_tiny.gguf"))
    for hf_name, n_head in [("model.layers.0.self_attn.q_proj.weight", 4), ("model.layers.0.self_attn.k_proj.weight", 2)]:
        entry = index[hf_name]
        rows, cols = entry["shape"]
        hf = values[entry["offset"]:entry["offset"] + rows * cols].reshape(rows, cols)
        tensor = next(t for t in reader.tensors if t.name == entry["gguf_name"])
        stored = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(rows, cols)
        head_dim = rows // n_head
        for h in range(n_head):
            for j in range(head_dim // 2):
                np.testing.assert_array_equal(stored[h * head_dim + 2 * j], hf[h * head_dim + j])
                np.testing.assert_array_equal(stored[h * head_dim + 2 * j + 1], hf[h * head_dim + head_dim // 2 + j])
        assert not np.array_equal(stored, hf)
