"""Reference beam-search results of Hugging Face transformers on the real
stories260K model, for tests/unit/engine/engine_groups_test.cpp.

Each case runs model.generate(num_beams=..., num_return_sequences=...) in
float64 on a prompt (token ids) and records the returned hypotheses (the
generated tokens, best first) and their sequence scores. The C++ test runs
the same requests through the engine (f32 CPU backend) and compares the
tokens and their order.

Run with a Python that has torch and transformers (not needed in CI):
    python tests/data/engine/make_beam_reference.py ../shared/models/stories260K \
        > tests/data/engine/stories260K_beams.json
"""
import json
import sys

import torch
import transformers
from tokenizers import Tokenizer
from transformers import LlamaForCausalLM

CASES = [
    # prompt text, beam width, n, length_penalty, early_stopping, max_new_tokens
    ("Once upon a time", 4, 2, 1.0, False, 24),
    ("Lily and Ben went to the park. They saw", 3, 3, 0.5, True, 16),
    ("The little dog was sad because", 2, 1, 1.0, "never", 20),
    ("One day, a big bird", 5, 4, 2.0, False, 12),
]


def main():
    model_dir = sys.argv[1]
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float64, attn_implementation="eager")
    model.eval()
    cases = []
    for text, width, n, lp, es, max_new in CASES:
        ids = tok.encode(text).ids
        with torch.no_grad():
            out = model.generate(
                input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                num_beams=width, num_return_sequences=n, do_sample=False, max_new_tokens=max_new,
                length_penalty=lp, early_stopping=es, eos_token_id=2, pad_token_id=0,
                output_scores=True, return_dict_in_generate=True)
        hyps = []
        for seq, score in zip(out.sequences.tolist(), out.sequences_scores.tolist()):
            gen = seq[len(ids):]
            while gen and gen[-1] == 0:  # padding after an early EOS
                gen.pop()
            hyps.append({"tokens": gen, "score": score})
        cases.append({"prompt": text, "prompt_ids": ids, "beam_width": width, "n": n,
                      "length_penalty": lp, "early_stopping": es, "max_new_tokens": max_new,
                      "hypotheses": hyps})
    json.dump({"model": "stories260K", "reference": f"transformers {transformers.__version__}, "
               f"torch {torch.__version__}, float64, eager attention", "cases": cases}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
