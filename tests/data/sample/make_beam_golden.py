"""Reference beam-search results from Hugging Face transformers for
tests/unit/sample/beam_search_test.cpp.

A toy "model": a LogitsProcessor replaces the log-probabilities of every beam
by a fixed pseudo-random log-softmax of its generated prefix (the real tiny
Llama underneath is ignored). Each case records the rows the processor
served (prefix -> log-probabilities, float32) and the hypotheses
transformers returned (generated tokens, sequence score). The C++ test
replays the same rows through pagoda::BeamSearch.

Run with a Python that has torch and transformers (not needed in CI):
    python tests/data/sample/make_beam_golden.py > tests/data/sample/beam_search_hf.json
"""
import hashlib
import json
import sys

import numpy as np
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessor, LogitsProcessorList

VOCAB = 16
PROMPT = [3, 7, 1]


def toy_logprobs(prefix, eos_ids, eos_boost):
    digest = hashlib.sha256(json.dumps(prefix).encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    logits = rng.normal(0.0, 2.0, VOCAB)
    for e in eos_ids:
        logits[e] += eos_boost
    m = logits.max()
    lp = logits - m - np.log(np.exp(logits - m).sum())
    return lp.astype(np.float32)


class ToyModel(LogitsProcessor):
    def __init__(self, eos_ids, eos_boost):
        self.eos_ids, self.eos_boost, self.table = eos_ids, eos_boost, {}

    def __call__(self, input_ids, scores):
        rows = []
        for seq in input_ids.tolist():
            prefix = seq[len(PROMPT):]
            lp = toy_logprobs(prefix, self.eos_ids, self.eos_boost)
            self.table[tuple(prefix)] = lp
            rows.append(torch.from_numpy(lp))
        return torch.stack(rows).to(scores.dtype)


def run_case(model, width, num_return, length_penalty, early_stopping, max_new, eos_ids, eos_boost):
    toy = ToyModel(eos_ids, eos_boost)
    out = model.generate(
        input_ids=torch.tensor([PROMPT]), attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long),
        num_beams=width, num_return_sequences=num_return, do_sample=False, max_new_tokens=max_new,
        length_penalty=length_penalty, early_stopping=early_stopping, eos_token_id=eos_ids,
        pad_token_id=eos_ids[0], logits_processor=LogitsProcessorList([toy]), output_scores=True,
        return_dict_in_generate=True)
    hyps = []
    for seq, score in zip(out.sequences.tolist(), out.sequences_scores.tolist()):
        gen = seq[len(PROMPT):]
        end = next((i + 1 for i, t in enumerate(gen) if t in eos_ids), len(gen))
        hyps.append({"tokens": gen[:end], "score": score})
    return {
        "beam_width": width, "num_return": num_return, "length_penalty": length_penalty,
        "early_stopping": "never" if early_stopping == "never" else bool(early_stopping),
        "max_new_tokens": max_new, "eos_token_ids": eos_ids,
        "rows": [{"prefix": list(k), "logprobs": [float(x) for x in v]} for k, v in sorted(toy.table.items())],
        "expected": hyps,
    }


def main():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.pad_token_id = 2
    cases = []
    settings = [
        # width, n, length_penalty, early_stopping, max_new, eos ids, eos boost
        (2, 1, 1.0, False, 6, [2], 1.0),
        (2, 2, 1.0, False, 6, [2], 1.5),
        (3, 2, 1.0, True, 6, [2], 1.5),
        (3, 3, 1.0, "never", 6, [2], 1.5),
        (4, 2, 0.0, False, 7, [2], 1.0),
        (4, 4, 2.0, False, 7, [2], 2.0),
        (4, 3, 2.0, "never", 7, [2], 2.0),
        (4, 1, -0.5, "never", 6, [2], 1.0),
        (2, 1, 1.0, True, 5, [2, 5], 1.0),
        (3, 3, 1.0, False, 6, [2, 5], 0.5),
        (3, 2, 0.5, "never", 6, [2, 5], 0.5),
        (4, 4, 1.0, True, 8, [2], 3.0),
        (2, 2, 1.0, False, 3, [2], -1.0),
        (4, 2, 1.0, False, 8, [2], 0.0),
        # Pairs whose results differ only by early_stopping.
        (2, 2, 2.0, False, 8, [2], 3.0),
        (2, 2, 2.0, "never", 8, [2], 3.0),
        (3, 3, 1.5, False, 8, [2], 2.0),
        (3, 3, 1.5, True, 8, [2], 2.0),
        (3, 2, 1.0, False, 10, [2], 2.0),
        (3, 2, 1.0, "never", 10, [2], 2.0),
    ]
    for s in settings:
        cases.append(run_case(model, *s))
    json.dump({"generator": f"transformers {transformers.__version__}, torch {torch.__version__}",
               "prompt": PROMPT, "vocab_size": VOCAB, "cases": cases}, sys.stdout, indent=None)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
