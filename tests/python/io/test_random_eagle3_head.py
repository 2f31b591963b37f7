"""tools/make_random_eagle_head.py --eagle3 writes the published EAGLE-3 layout
(src/engine/eagle_head.h): the tensor names and shapes load_eagle3_head
checks, d2t as I64 mapping every draft token into the target's vocabulary,
t2d as BOOL marking exactly those targets."""
import json
import pathlib
import struct
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[3]
TARGET = ROOT.parent / "shared" / "models" / "stories260K"


def read_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        np_dtype = {"F32": np.float32, "I64": np.int64, "BOOL": np.bool_}[e["dtype"]]
        out[name] = (e["dtype"], np.frombuffer(raw[8 + n + begin:8 + n + end], np_dtype)
                     .reshape(e["shape"]))
    return out


def test_eagle3_head_layout(tmp_path):
    target = TARGET
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_random_eagle_head.py"),
                    "--target", str(target), "--out", str(tmp_path), "--eagle3",
                    "--draft-vocab", "100"], check=True)
    target_config = json.loads((target / "config.json").read_text())
    config = json.loads((tmp_path / "config.json").read_text())
    h, v = target_config["hidden_size"], target_config["vocab_size"]
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["draft_vocab_size"] == 100 and config["num_hidden_layers"] == 1
    t = read_safetensors(tmp_path / "model.safetensors")
    assert t["fc.weight"][1].shape == (h, 3 * h)
    assert t["midlayer.self_attn.q_proj.weight"][1].shape[1] == 2 * h
    assert t["midlayer.hidden_norm.weight"][1].shape == (h,)
    assert t["lm_head.weight"][1].shape == (100, h)
    kind, d2t = t["d2t"]
    assert kind == "I64" and d2t.shape == (100,)
    mapped = np.arange(100) + d2t
    assert mapped.min() >= 0 and mapped.max() < v and len(set(mapped.tolist())) == 100
    kind, t2d = t["t2d"]
    assert kind == "BOOL" and t2d.shape == (v,)
    assert sorted(np.flatnonzero(t2d).tolist()) == sorted(mapped.tolist())
