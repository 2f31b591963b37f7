"""The language snippets of tests/data/jinja/language_cases.py rendered by
`pagoda chat-template --batch` against live jinja2, and the committed
language_cases.json (replayed by the C++ unit tests) kept current."""
import copy
import json
import sys

import pytest

import hf_jinja
import jinja_harness as h

# language_cases.py has a '\q' escape on purpose; jinja2 warns about it.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

sys.path.insert(0, str(h.DATA))
import gen_language_cases  # noqa: E402
import language_cases  # noqa: E402


def test_language_cases_match_jinja2():
    cases = list(language_cases.all_cases())
    results = h.run_batch([{"template": t, "variables": v} for _, t, v in cases])
    mismatches = []
    for (name, template, variables), result in zip(cases, results):
        kind, expected = hf_jinja.render(template, copy.deepcopy(variables))
        if kind == "ok" and result.get("output") != expected:
            mismatches.append(f"{name}: {template!r}\n  jinja2: {expected!r}\n  pagoda: {result!r}")
        if kind == "error" and "error" not in result:
            mismatches.append(f"{name}: {template!r}\n  jinja2 raised {expected}\n  pagoda: {result!r}")
    assert not mismatches, "\n".join(mismatches)


def test_committed_expectations_are_current():
    committed = json.loads((h.DATA / "language_cases.json").read_text(encoding="utf-8"))
    fresh = json.loads(json.dumps(gen_language_cases.expected_cases()))

    def outcome(case):  # error texts may differ between jinja2 versions; outcomes may not
        return (case["name"], case["template"], case.get("output"), "error" in case)

    assert committed["variables"] == fresh["variables"]
    assert [outcome(c) for c in committed["cases"]] == [outcome(c) for c in fresh["cases"]], \
        "run tests/data/jinja/gen_language_cases.py and commit the result"
