"""Golden files from a float64 NumPy forward (tools/make_tiny_gemma.py, tools/make_tiny_phi3.py):
greedy cases with the top-20 log-probabilities of every step, written in golden_tests' format
(tests/data/golden/NAME.json; tolerances 1e-4)."""
import json
import pathlib

import numpy as np

GOLDEN = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "golden"
TOP_K = 20


def top_logprobs(lp, k=TOP_K):
    """The k largest entries of lp as [[id, logprob], ...] (ties: the lower id first)."""
    order = np.lexsort((np.arange(lp.shape[0]), -lp))[:k]
    return [[int(i), float(lp[i])] for i in order]


def greedy_case(reference, config, weights, prompt, steps):
    """`steps` greedy tokens after `prompt` from `reference` (a module with forward(config,
    weights, ids) -> [T, V] logits and log_softmax), recomputing the whole sequence per step."""
    ids, greedy, tops = list(prompt), [], []
    for _ in range(steps):
        lp = reference.log_softmax(reference.forward(config, weights, ids)[-1])
        token = int(np.argmax(lp))
        greedy.append(token)
        tops.append(top_logprobs(lp))
        ids.append(token)
    return {"prompt_ids": list(prompt), "greedy_ids": greedy, "top_logprobs": tops}


def write_golden(name, model_path, cases, note, reference_path):
    """tests/data/golden/NAME.json for the repo model at `model_path`; `reference_path` names
    the NumPy forward the cases came from."""
    doc = {"name": name, "model": {"kind": "repo", "path": model_path},
           "reference": f"{reference_path}, numpy float64, full recompute per step",
           "note": note, "quantized": False, "tolerance": {"logprob": 1e-4, "margin": 1e-4},
           "cases": cases}
    (GOLDEN / f"{name}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
