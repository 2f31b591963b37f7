"""The NumPy reference of the mixture-of-experts families (tools/moe_reference.py)
that the tiny MoE golden files come from (golden_tests runs pagoda against them):
its routing semantics, its sparse block against a per-token loop, and that the
checked-in golden files are what it computes on the checked-in models."""
import json
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools"))
import moe_reference  # noqa: E402

MODELS = ["tiny_mixtral", "tiny_qwen2_moe_shared", "tiny_qwen3_moe"]


def test_route_orders_by_probability_with_ties_to_the_lower_id():
    ids, w = moe_reference.route(np.array([[0.5, 2.0, 0.5, 2.0, 2.0]]), 4, False)
    assert ids.tolist() == [[1, 3, 4, 0]]
    p = np.exp([0.5, 2.0, 0.5, 2.0, 2.0])
    assert np.allclose(w, p[[1, 3, 4, 0]] / p.sum())


def test_route_renormalises_and_takes_every_expert_when_k_is_e():
    ids, w = moe_reference.route(np.array([[0.1, -1.0, 3.0]]), 3, True)
    assert ids.tolist() == [[2, 0, 1]]
    assert np.isclose(w.sum(), 1.0)
    ids, w2 = moe_reference.route(np.array([[0.1, -1.0, 3.0]]), 2, True)
    assert np.isclose(w2.sum(), 1.0) and w2[0, 0] > w[0, 0]


@pytest.mark.parametrize("name", MODELS)
def test_sparse_block_equals_a_per_token_loop(name):
    config, w = moe_reference.load_model(ROOT / "tests" / "data" / "models" / name)
    fam = moe_reference.Family(config)
    layer = next(i for i in range(config["num_hidden_layers"]) if fam.is_sparse(i))
    p = f"model.layers.{layer}."
    x = np.random.default_rng(0).standard_normal((5, config["hidden_size"]))
    got = moe_reference.moe_mlp(x, w, p, fam)
    m = p + ("block_sparse_moe." if fam.mixtral else "mlp.")
    names = ("w1", "w3", "w2") if fam.mixtral else ("gate_proj", "up_proj", "down_proj")
    for t in range(5):
        logits = x[t] @ w[m + "gate.weight"].T
        prob = np.exp(logits - logits.max())
        prob /= prob.sum()
        top = sorted(range(fam.num_experts), key=lambda e: (-prob[e], e))[:fam.top_k]
        scale = sum(prob[e] for e in top) if fam.norm_topk else 1.0
        want = np.zeros(config["hidden_size"])
        for e in top:
            g, u, d = (w[f"{m}experts.{e}.{n}.weight"] for n in names)
            a = x[t] @ g.T
            want += prob[e] / scale * (d @ (a / (1 + np.exp(-a)) * (x[t] @ u.T)))
        if fam.qwen2:
            s = m + "shared_expert."
            a = x[t] @ w[s + "gate_proj.weight"].T
            shared = w[s + "down_proj.weight"] @ (a / (1 + np.exp(-a)) * (x[t] @ w[s + "up_proj.weight"].T))
            want += shared / (1 + np.exp(-(x[t] @ w[m + "shared_expert_gate.weight"][0])))
        assert np.allclose(got[t], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_golden_files_are_the_reference_on_the_checked_in_models(name):
    # 1e-9: the files may also be rewritten from transformers' float64 forward
    # (tools/hf_moe_golden.py --write), which agrees with the reference to ~1e-12.
    config, w = moe_reference.load_model(ROOT / "tests" / "data" / "models" / name)
    for suffix in ("", "_gguf"):
        doc = json.loads((ROOT / "tests" / "data" / "golden" / f"{name}{suffix}.json").read_text())
        assert doc["tolerance"] == {"logprob": 1e-4, "margin": 1e-4}
        case = doc["cases"][1]
        steps = 4
        again = moe_reference.golden_case(config, w, case["prompt_ids"], steps)
        assert again["greedy_ids"] == case["greedy_ids"][:steps]
        for a, b in zip(again["top_logprobs"], case["top_logprobs"][:steps]):
            assert [i for i, _ in a] == [i for i, _ in b]
            assert np.allclose([v for _, v in a], [v for _, v in b], rtol=0, atol=1e-9)
