"""The structured-output corpora of tests/data/structured are what they claim.

Every schema is a valid Draft 2020-12 schema (the jsonschema package's
meta-schema check) that uses only the keywords of pagoda's supported subset;
every regex and grammar example matches (or not) as listed, by Python `re` and
the grammar's Python-side check; and the format checks that the end-to-end
tests rely on refuse what they must. No server or engine is needed.
"""
import re

import jsonschema
import pytest

import structured_corpus as corpus

# The JSON Schema keywords docs/api.md lists as supported (issue 17's subset),
# plus annotations that change nothing.
SUPPORTED = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
    "$defs", "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum",
}
ANNOTATIONS = {"$schema", "$comment", "title", "description", "default", "examples"}
FORMATS = {"date-time", "date", "uuid", "email", "ipv4", "uri"}

SCHEMAS = corpus.schemas()
REGEXES = corpus.regexes()
GRAMMARS = corpus.grammars()


def _subschemas(schema):
    """The schemas directly inside `schema` (not enum/const/default values)."""
    for key in ("properties", "$defs"):
        yield from schema.get(key, {}).values()
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        yield from schema.get(key, [])
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield schema[key]


def _walk(schema):
    yield schema
    for sub in _subschemas(schema):
        yield from _walk(sub)


def test_corpus_sizes():
    assert len(SCHEMAS) >= 50
    assert len(REGEXES) >= 30
    assert len(GRAMMARS) >= 10


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_is_valid_draft_2020_12(name):
    jsonschema.Draft202012Validator.check_schema(SCHEMAS[name])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_uses_only_supported_keywords(name):
    for sub in _walk(SCHEMAS[name]):
        unknown = set(sub) - SUPPORTED - ANNOTATIONS
        assert not unknown, f"{name}: unsupported keywords {sorted(unknown)} in {sub}"
        if "format" in sub:
            assert sub["format"] in FORMATS, f"{name}: format {sub['format']!r}"
        if "pattern" in sub:
            re.compile(sub["pattern"])
            assert "(?" not in sub["pattern"].replace("(?:", ""), f"{name}: lookaround or flags in a pattern"
        if "$ref" in sub:
            assert sub["$ref"] == "#" or sub["$ref"].startswith("#/$defs/"), f"{name}: $ref {sub['$ref']!r}"


def test_corpus_covers_the_issue_keywords():
    used = set()
    formats = set()
    recursive = []
    for name, schema in SCHEMAS.items():
        for sub in _walk(schema):
            used |= set(sub)
            formats.add(sub.get("format"))
        if name.startswith("recursive_") or name == "pydantic_character_sheet":
            recursive.append(name)
    assert SUPPORTED <= used, sorted(SUPPORTED - used)
    assert FORMATS <= formats, sorted(FORMATS - formats)
    assert len(recursive) >= 5
    assert sum(name.startswith("pydantic_") for name in SCHEMAS) >= 5


@pytest.mark.parametrize("entry", REGEXES, ids=[e["name"] for e in REGEXES])
def test_regex_examples(entry):
    pattern = re.compile(entry["pattern"])
    assert entry["match"]
    for text in entry["match"]:
        assert pattern.fullmatch(text), text
    for text in entry["no_match"]:
        assert not pattern.fullmatch(text), text


def test_regex_names_are_unique():
    names = [e["name"] for e in REGEXES]
    assert len(names) == len(set(names))


def test_every_grammar_has_an_expectation():
    expect = set(corpus.json.loads((corpus.GBNF / "expectations.json").read_text())) - {"_comment"}
    assert expect == set(GRAMMARS)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_grammar_examples(name):
    text, expectation = GRAMMARS[name]
    assert re.search(r"^root\s*::=", text, re.M)
    assert expectation["match"] and expectation["no_match"]
    for sentence in expectation["match"]:
        assert corpus.gbnf_accepts(expectation, sentence), sentence
    for sentence in expectation["no_match"]:
        assert not corpus.gbnf_accepts(expectation, sentence), sentence


@pytest.mark.parametrize("fmt, good, bad", [
    ("date-time", ["2024-02-29T23:59:60Z", "1999-12-31t00:00:00.123+05:30"],
     ["2023-02-29T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01 00:00:00Z", "2024-01-01T00:00:00", "2024-01-01T00:00:00+24:00"]),
    ("date", ["2024-02-29", "0001-01-01"], ["2023-02-29", "2024-04-31", "2024-1-01", "20240101"]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000", "{123e4567-e89b-12d3-a456-426614174000}"]),
    ("ipv4", ["0.0.0.0", "255.255.255.255"], ["256.0.0.1", "01.2.3.4", "1.2.3"]),
    ("email", ["a@b", "jane.doe+x@example.co.uk"], ["ab", "a@", "@b", "a b@c"]),
    ("uri", ["https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:a@b.c", "x:%20"],
     ["example.com", "https://exa mple.com", "1http://x", "http://x/%zz"]),
])
def test_format_checks_are_strict(fmt, good, bad):
    schema = {"type": "string", "format": fmt}
    for value in good:
        assert corpus.validation_errors(schema, value) == [], value
    for value in bad:
        assert corpus.validation_errors(schema, value), value
