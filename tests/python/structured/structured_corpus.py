"""The structured-output corpora of tests/data/structured and their checks.

- schemas/*.json: JSON Schemas (Draft 2020-12, within the subset docs/api.md
  lists as supported); `validator(schema)` checks an instance against one,
  formats included (`FORMAT_CHECKER`).
- regex.json: {"patterns": [{"name", "pattern", "match", "no_match"}]}; the
  whole output must match (`re.fullmatch`).
- gbnf/NAME.gbnf with gbnf/expectations.json: per grammar a Python-side check
  of its language (`gbnf_accepts`).

Used by tests/python/structured (the corpora's own validity) and by
tests/python/server/test_structured_output.py (generations checked with them).
"""
import datetime
import ipaddress
import json
import pathlib
import re
import uuid

import jsonschema

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "structured"
SCHEMAS = DATA / "schemas"
GBNF = DATA / "gbnf"


def schemas():
    """{name: schema} for every schemas/*.json, sorted by name."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(SCHEMAS.glob("*.json"))}


def regexes():
    """The regex corpus: a list of {"name", "pattern", "match", "no_match"}."""
    return json.loads((DATA / "regex.json").read_text())["patterns"]


def grammars():
    """{name: (gbnf text, expectation)} for every gbnf/*.gbnf."""
    expect = json.loads((GBNF / "expectations.json").read_text())
    return {p.stem: (p.read_text(), expect[p.stem]) for p in sorted(GBNF.glob("*.gbnf"))}


# --- formats -----------------------------------------------------------------
# jsonschema checks date, email, ipv4 and uuid itself; date-time and uri need
# optional packages there, so they are checked here, strictly: RFC 3339
# date-time (a real calendar date, hours 00-23, seconds up to 60 for a leap
# second, Z or a +hh:mm offset) and an RFC 3986 URI (a scheme, then only
# URI characters, every % starting an escape of two hex digits).
FORMAT_CHECKER = jsonschema.FormatChecker()

_DATE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))",
                        re.ASCII)
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*", re.ASCII)


@FORMAT_CHECKER.checks("date-time", raises=ValueError)
def _is_date_time(value):
    if not isinstance(value, str):
        return True
    m = _DATE_TIME.fullmatch(value)
    if not m:
        raise ValueError(f"not an RFC 3339 date-time: {value!r}")
    datetime.date(int(m[1]), int(m[2]), int(m[3]))  # raises ValueError for 2023-02-30
    hour, minute, second = int(m[4]), int(m[5]), int(m[6])
    if hour > 23 or minute > 59 or second > 60:
        raise ValueError(f"time out of range: {value!r}")
    if m[9] is not None and (int(m[9]) > 23 or int(m[10]) > 59):
        raise ValueError(f"offset out of range: {value!r}")
    return True


@FORMAT_CHECKER.checks("uri", raises=ValueError)
def _is_uri(value):
    if isinstance(value, str) and not _URI.fullmatch(value):
        raise ValueError(f"not an RFC 3986 URI: {value!r}")
    return True


@FORMAT_CHECKER.checks("date", raises=ValueError)
def _is_date(value):
    if isinstance(value, str):
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value, re.ASCII):
            raise ValueError(f"not a full-date: {value!r}")
        datetime.date.fromisoformat(value)
    return True


@FORMAT_CHECKER.checks("uuid", raises=ValueError)
def _is_uuid(value):
    if isinstance(value, str):
        if not re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", value):
            raise ValueError(f"not a hyphenated UUID: {value!r}")
        uuid.UUID(value)
    return True


@FORMAT_CHECKER.checks("ipv4", raises=ValueError)
def _is_ipv4(value):
    if isinstance(value, str):
        ipaddress.IPv4Address(value)  # dotted decimal, no leading zeros
    return True


@FORMAT_CHECKER.checks("email", raises=ValueError)
def _is_email(value):
    # A local part and a domain, both non-empty and without spaces (what every
    # practical email grammar guarantees; RFC 5321 in full is not required).
    if isinstance(value, str) and not re.fullmatch(r"[^@\s]+@[^@\s]+", value):
        raise ValueError(f"not an email address: {value!r}")
    return True


def validator(schema):
    """A Draft 2020-12 validator for `schema` that also checks formats."""
    return jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER)


def validation_errors(schema, instance):
    """The messages of every way `instance` breaks `schema` ([] when valid)."""
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(schema).iter_errors(instance)]


# --- GBNF expectations -------------------------------------------------------
_NUMBER = r"(0|[1-9][0-9]{0,5})"
_FLAT = re.compile(rf"{_NUMBER}([-+*/]{_NUMBER})*")
_INNERMOST = re.compile(rf"\(({_NUMBER}([-+*/]{_NUMBER})*)\)")


def _is_arithmetic(text):
    # arithmetic.gbnf: reduce innermost "(flat expression)" to a number until
    # no parenthesis is left; the rest must be a flat expression.
    while "(" in text or ")" in text:
        reduced = _INNERMOST.sub("1", text)
        if reduced == text:
            return False
        text = reduced
    return _FLAT.fullmatch(text) is not None


def _is_json(text):
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def gbnf_accepts(expectation, text):
    """Whether `text` is in the language of the grammar that `expectation` (its
    gbnf/expectations.json entry) describes."""
    check = expectation["check"]
    if check == "regex":
        return re.fullmatch(expectation["regex"], text) is not None
    if check == "json":
        return _is_json(text)
    if check == "arithmetic":
        return _is_arithmetic(text)
    raise ValueError(f"unknown check {check!r}")
