"""The regex corpus that regex_to_gbnf_test.cpp runs (tests/data/grammar/regex_corpus.json)
must agree with Python's re.fullmatch: every "match" string matches its regex, no "no_match"
string does. tools/make_regex_corpus.py wrote it; this keeps the committed file honest."""
import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def load_tool():
    spec = importlib.util.spec_from_file_location("make_regex_corpus",
                                                  REPO / "tools" / "make_regex_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_corpus_agrees_with_python_re():
    tool = load_tool()
    committed = json.loads(tool.OUT.read_text(encoding="utf-8"))
    tool.check(committed)


def test_committed_corpus_is_what_the_tool_writes():
    tool = load_tool()
    committed = json.loads(tool.OUT.read_text(encoding="utf-8"))
    assert committed == [{"regex": r, "match": m, "no_match": n} for r, m, n in tool.CORPUS]


def test_check_catches_a_wrong_verdict():
    tool = load_tool()
    try:
        tool.check([{"regex": "^a+$", "match": ["b"], "no_match": ["c"]}] * 60)
    except AssertionError:
        return
    raise AssertionError("check() accepted 'b' as a match of ^a+$")
