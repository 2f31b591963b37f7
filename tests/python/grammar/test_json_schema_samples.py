"""Random sentences of json_schema_to_gbnf's grammars must be JSON documents that
Python's jsonschema (an independent reference) validates against the schema.

json_schema_sampler (built beside pagoda, see tests/unit/grammar/CMakeLists.txt) walks
each schema's grammar choosing a uniformly random allowed byte at every step: the
grammar-level form of the issue's "random-weight models wander wherever the grammar
allows". jsonschema checks the formats it can without extra packages (email, ipv4,
ipv6, date, uuid); the others are checked below with the standard library."""
import datetime
import ipaddress
import json
import os
import re
import subprocess
import urllib.parse
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[3]
PAGODA_BIN = Path(os.environ.get("PAGODA_BIN", REPO / "build" / "pagoda"))
SAMPLER = PAGODA_BIN.parent / "json_schema_sampler"
SEEDS = REPO / "tests" / "data" / "grammar" / "json_schema_seeds"
NUM_SAMPLES = 150

FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value):
    date, sep, time = value.partition("T")
    return sep == "T" and _date(date) and _time(time)


@FORMATS.checks("date", raises=ValueError)
def _date(value):
    return re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) is not None and \
        datetime.date.fromisoformat(value) is not None


@FORMATS.checks("time", raises=ValueError)
def _time(value):
    m = re.fullmatch(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})", value)
    if not m:
        return False
    if m.group(5) != "Z":
        hours, minutes = m.group(5)[1:].split(":")
        if int(hours) > 23 or int(minutes) > 59:
            return False
    return datetime.time.fromisoformat(value[:8]) is not None


@FORMATS.checks("duration")
def _duration(value):
    # RFC 3339 appendix A, written independently of the converter's grammar.
    if not value.startswith("P") or value in ("P", "PT") or value.endswith("T"):
        return False
    body = value[1:]
    if re.fullmatch(r"\d+W", body):
        return True
    date, _, time = body.partition("T")
    return re.fullmatch(r"(\d+Y)?(\d+M)?(\d+D)?", date) is not None and \
        re.fullmatch(r"(\d+H)?(\d+M)?(\d+S)?", time) is not None and (date or time)


@FORMATS.checks("hostname")
def _hostname(value):
    labels = value.split(".")
    return all(re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?", label) for label in labels)


@FORMATS.checks("uri", raises=ValueError)
def _uri(value):
    parts = urllib.parse.urlsplit(value)
    if parts.hostname and parts.netloc.startswith("["):
        ipaddress.IPv6Address(parts.hostname)
    allowed = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]%]*")
    return re.fullmatch(r"[A-Za-z][A-Za-z0-9+.\-]*", parts.scheme) is not None and \
        allowed.fullmatch(value) is not None and \
        all(re.fullmatch(r"[0-9A-Fa-f]{2}", p[:2]) for p in value.split("%")[1:])


# Schemas beyond the fuzzer seeds: each exercises keywords where a wrong grammar
# would produce invalid values.
SCHEMAS = {
    "bounds": {"type": "object", "properties": {
        "i": {"type": "integer", "minimum": -17, "maximum": 1234},
        "j": {"type": "integer", "exclusiveMinimum": 99},
        "k": {"type": "integer", "maximum": -5},
        "x": {"type": "number", "minimum": 0, "maximum": 1},
        "y": {"type": "number", "exclusiveMinimum": -3, "exclusiveMaximum": 2},
        "z": {"type": "number", "minimum": 10}},
        "required": ["i", "j", "k", "x", "y", "z"]},
    "draft4 exclusive": {"$schema": "http://json-schema.org/draft-04/schema#",
                         "type": "integer", "minimum": 3, "exclusiveMinimum": True,
                         "maximum": 9, "exclusiveMaximum": True},
    "strings": {"type": "array", "prefixItems": [
        {"type": "string", "minLength": 3, "maxLength": 5},
        {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
        {"type": "string", "pattern": "ab|^c"},
        {"type": "string", "pattern": "^[\"\\\\]x?$"}], "minItems": 4},
    "formats": {"type": "object", "properties": {
        f: {"type": "string", "format": f} for f in
        ["date-time", "date", "time", "duration", "uuid", "email", "ipv4", "ipv6", "hostname", "uri"]},
        "required": ["date-time", "date", "time", "duration", "uuid", "email", "ipv4", "ipv6",
                     "hostname", "uri"]},
    "open object": {"type": "object", "properties": {"id": {"type": "integer"}, "i": {"type": "string"}},
                    "additionalProperties": {"type": "boolean"}},
    "enum and const": {"type": "array", "items": {"anyOf": [
        {"enum": ["a", 1, None, [1, {"k": "v"}], {"x": 2.5}]}, {"const": "fixed"}]}, "maxItems": 6},
    "allOf": {"allOf": [
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
        {"properties": {"a": {"maximum": 3}, "b": {"type": "string", "maxLength": 2}}},
        {"anyOf": [{"required": ["b"]}, {"properties": {"c": {"type": "null"}}, "required": ["c"]}]}]},
    "draft7 tuple": {"$schema": "http://json-schema.org/draft-07/schema#",
                     "type": "array", "items": [{"type": "integer"}, {"type": "string"}],
                     "additionalItems": {"type": "boolean"}, "maxItems": 4},
    "nullable union": {"type": "object", "properties": {
        "n": {"type": ["integer", "null"], "minimum": 1},
        "s": {"type": "string", "nullable": True},
        "v": {"oneOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "integer"}}]}},
        "required": ["n", "s", "v"]},
    "map of arrays": {"type": "object", "additionalProperties": {
        "type": "array", "items": {"type": "number", "minimum": -1, "maximum": 1}, "maxItems": 3}},
    "decimal bounds": {"type": "object", "properties": {
        "scale": {"type": "number", "minimum": 0.5, "maximum": 2},
        "ratio": {"type": "number", "exclusiveMinimum": -0.125, "exclusiveMaximum": 0.75},
        "negative": {"type": "number", "minimum": -12.5, "exclusiveMaximum": -12.25},
        "tiny": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e-3},
        "count": {"type": "integer", "minimum": 2.5, "maximum": 7.5}},
        "required": ["scale", "ratio", "negative", "tiny", "count"]},
    "pattern with lengths": {"type": "object", "properties": {
        "username": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$", "minLength": 3, "maxLength": 16},
        "dns_label": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
        "contains": {"type": "string", "pattern": "ab|\\d{2}", "minLength": 4, "maxLength": 9},
        "long": {"type": "string", "pattern": "^[^ab]", "minLength": 5}},
        "required": ["username", "dns_label", "contains", "long"]},
}


def sample(schema_path, seed=1234):
    if not SAMPLER.exists():
        pytest.fail(f"{SAMPLER} does not exist (build the json_schema_sampler target)")
    result = subprocess.run([SAMPLER, schema_path, str(NUM_SAMPLES), str(seed)],
                            capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert result.returncode == 0, result.stderr
    texts = json.loads(result.stdout)
    assert len(texts) >= NUM_SAMPLES // 2, f"only {len(texts)} walks ended within 20000 bytes"
    return texts


def reject_constant(name):
    raise ValueError(f"non-JSON constant {name}")


def check_samples(schema, texts):
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = validator_class(schema, format_checker=FORMATS)
    for text in texts:
        value = json.loads(text, parse_constant=reject_constant)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # no lone surrogates
        errors = list(validator.iter_errors(value))
        assert not errors, f"{text!r}: {errors[0].message}"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_samples_validate(name, tmp_path):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMAS[name]), encoding="utf-8")
    check_samples(SCHEMAS[name], sample(path))


@pytest.mark.parametrize("path", sorted(SEEDS.glob("*.json")), ids=lambda p: p.stem)
def test_seed_samples_validate(path):
    check_samples(json.loads(path.read_text(encoding="utf-8")), sample(path))


def test_check_catches_an_invalid_sample():
    with pytest.raises(AssertionError):
        check_samples({"type": "integer", "maximum": 3}, ["4"])
    with pytest.raises(AssertionError):
        check_samples({"format": "date"}, ['"2023-02-29"'])
