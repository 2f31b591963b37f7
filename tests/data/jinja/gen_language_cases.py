#!/usr/bin/env python3
"""Renders every snippet of language_cases.py with jinja2 configured as
transformers configures it (tests/python/jinja/hf_jinja.py) and writes the
expected results to language_cases.json, which tests/unit/jinja replays.

Usage: .venv/bin/python tests/data/jinja/gen_language_cases.py
Regenerate after editing language_cases.py; tests/python/jinja checks that the
committed file is current."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "jinja"))

import hf_jinja  # noqa: E402
import language_cases  # noqa: E402


def expected_cases():
    out = []
    for name, template, variables in language_cases.all_cases():
        kind, text = hf_jinja.render(template, json.loads(json.dumps(variables)))
        case = {"name": name, "template": template}
        if kind == "ok":
            case["output"] = text
        else:
            case["error"] = text
        out.append(case)
    return {"variables": language_cases.DATA, "cases": out}


def main():
    path = os.path.join(HERE, "language_cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(expected_cases(), f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
