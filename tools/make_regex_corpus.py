#!/usr/bin/env python3
"""Writes tests/data/grammar/regex_corpus.json: regexes with strings each must
fully match and strings it must not, every verdict checked with Python's
re.fullmatch first. regex_to_gbnf_test.cpp runs the corpus through
regex_to_gbnf -> parse_gbnf -> grammar_matches. Also writes each regex to
tests/data/grammar/regex_fuzz_seeds/NNN.txt for regex_fuzzer.

Python stands in for ECMAScript (JSON Schema `pattern`) with re.ASCII (\\d, \\w
ASCII as in ECMAScript), after spelling the two ECMAScript-only forms the
corpus uses the Python way: (?<name>...) -> (?P<name>...) and \\u{X} ->
\\UXXXXXXXX. Where the two dialects disagree (\\s on non-ASCII spaces, '.' on
\\r) the corpus has no string.

  python tools/make_regex_corpus.py          # validate and write the JSON
  python tools/make_regex_corpus.py --check  # validate the committed JSON
"""
import json
import pathlib
import re
import sys

DATA = pathlib.Path(__file__).resolve().parent.parent / "tests/data/grammar"
OUT = DATA / "regex_corpus.json"
SEEDS = DATA / "regex_fuzz_seeds"  # one regex per file: regex_fuzzer's seeds

# (regex, must match, must not match)
CORPUS = [
    # dates and times
    (r"^\d{4}-\d{2}-\d{2}$", ["2024-01-31", "0000-00-00"],
     ["2024-1-31", "2024-01-311", "24-01-31", "2024/01/31", ""]),
    (r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$", ["2024-12-31", "1999-01-01", "2000-02-29"],
     ["2024-13-01", "2024-00-10", "2024-02-32", "2024-2-02"]),
    (r"^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$", ["23:59", "00:00:00", "12:30:45"],
     ["24:00", "12:60", "12:30:", "1:30", "12:30:60"]),
    (r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$",
     ["2024-01-31T12:00:00Z", "2024-01-31T12:00:00.123+02:00", "2024-01-31T12:00:00-05:30"],
     ["2024-01-31 12:00:00Z", "2024-01-31T12:00:00", "2024-01-31T12:00:00.Z", "2024-01-31T12:00Z"]),
    (r"^(0?[1-9]|1[0-2])/(0?[1-9]|[12][0-9]|3[01])/\d{2}(\d{2})?$",
     ["1/2/24", "12/31/2024", "09/09/1999"], ["13/01/2024", "1/32/24", "1/2/245", "1-2-24"]),
    (r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}$",
     ["Fri, 26 Jul 2024", "Mon, 01 Jan 2024"], ["Fri 26 Jul 2024", "Fri, 26 July 2024", "fri, 26 Jul 2024"]),
    (r"^P(\d+Y)?(\d+M)?(\d+D)?(T(\d+H)?(\d+M)?(\d+S)?)?$", ["P1Y2M3DT4H5M6S", "P", "PT5M", "P10D"],
     ["1Y", "P1D2Y3", "PT5X"]),
    # emails
    (r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$",
     ["john.doe@example.com", "a+b@x.co", "x_y%z@sub.domain.org"],
     ["john@", "@example.com", "a@b.c", "a b@c.com", "john@example"]),
    (r"^[\w.+-]+@[\w-]+(\.[\w-]+)+$", ["first.last+tag@mail.example.co.uk", "a@b.c"],
     ["a@b", "a@@b.c", "a@b..c", "a@.b"]),
    # phone numbers
    (r"^\+?1?[-. ]?\(?\d{3}\)?[-. ]?\d{3}[-. ]?\d{4}$",
     ["(555) 123-4567", "+1 555.123.4567", "5551234567", "1-555-123-4567"],
     ["555-1234", "(555) 123-45678", "phone", "+1 555 123 456"]),
    (r"^\+[1-9]\d{1,14}$", ["+14155552671", "+447911123456", "+12"],
     ["14155552671", "+0123", "+1234567890123456", "+1"]),
    (r"^\(\d{2}\) \d{4,5}-\d{4}$", ["(11) 91234-5678", "(21) 3456-7890"],
     ["(11) 123-4567", "11 91234-5678"]),
    # uuids
    (r"^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
     ["123e4567-e89b-12d3-a456-426614174000", "550e8400-e29b-41d4-a716-446655440000"],
     ["123e4567-e89b-62d3-a456-426614174000", "123e4567-e89b-12d3-c456-426614174000",
      "123E4567-E89B-12D3-A456-426614174000", "123e4567e89b12d3a456426614174000"]),
    (r"^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$",
     ["123E4567-E89B-12D3-A456-426614174000", "00000000-0000-0000-0000-000000000000"],
     ["123e4567-e89b-12d3-a456-42661417400", "g23e4567-e89b-12d3-a456-426614174000"]),
    # network
    (r"^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$",
     ["192.168.0.1", "255.255.255.255", "0.0.0.0", "10.200.30.4"],
     ["256.1.1.1", "1.2.3", "01.2.3.4", "1.2.3.4.", "1.2.3.300"]),
    (r"^([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}$", ["2001:0db8:85a3:0000:0000:8a2e:0370:7334", "1:2:3:4:5:6:7:8"],
     ["2001:db8::1", "1:2:3:4:5:6:7", "12345:2:3:4:5:6:7:8"]),
    (r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$", ["00:1A:2b:3C:4d:5E", "00-1a-2b-3c-4d-5e"],
     ["00:1A:2b:3C:4d", "001A2b3C4d5E", "00:1G:2b:3C:4d:5E"]),
    (r"^https?://[a-z0-9.-]+(:\d+)?(/[\w./%-]*)?$",
     ["http://example.com", "https://a.b.c:8080/path/to/file.html", "https://x.io/"],
     ["ftp://example.com", "http://", "https://Example.com", "http://x.io/a b"]),
    (r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$",
     ["example.com", "a", "my-host.local"], ["-host", "host-", "a..b", "Host"]),
    # identifiers
    (r"^[A-Za-z_][A-Za-z0-9_]*$", ["x", "_private", "camelCase9"], ["9lives", "with-dash", ""]),
    (r"^[a-z][a-z0-9-]{2,31}$", ["my-slug", "abc"], ["ab", "My-slug", "a" * 33, "1abc"]),
    (r"^[a-z]+(?:-[a-z]+)*$", ["kebab-case-name", "word"], ["-lead", "trail-", "double--dash", ""]),
    (r"^[A-Z][A-Z0-9_]*$", ["MAX_SIZE", "A1"], ["max", "_A", ""]),
    (r"^\w+$", ["hello_world42"], ["hello world", "", "naïve"]),
    (r"^@[A-Za-z0-9_]{1,15}$", ["@jack", "@a_b_c"], ["@", "jack", "@" + "a" * 16]),
    (r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*$", ["os.path.join", "x"], ["os..path", ".x", "os.9"]),
    # numbers
    (r"^-?\d+$", ["0", "-42", "12345678901234567890"], ["", "-", "4.2", "+1"]),
    (r"^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$", ["0", "-0.5", "1e10", "3.14E-2", "10"],
     ["01", "1.", ".5", "1e", "--1"]),
    (r"^[+-]?(\d+\.?\d*|\.\d+)$", ["1", "+1.", "-.5", "3.14"], [".", "+", "1.2.3"]),
    (r"^0x[0-9a-fA-F]+$", ["0xff", "0xDEADbeef"], ["0x", "ff", "0xg"]),
    (r"^[01]+$", ["0", "101010"], ["", "102"]),
    (r"^\d{1,3}(,\d{3})*(\.\d{2})?$", ["1", "1,000", "12,345,678.90"], ["1,00", "1234,567", "1.5"]),
    (r"^\$\d+(\.\d{2})?$", ["$5", "$19.99"], ["5", "$19.9", "$"]),
    (r"^(100|[1-9]?\d)%$", ["0%", "42%", "100%"], ["101%", "007%", "%"]),
    (r"^[1-9]\d{0,2}$", ["1", "999", "10"], ["0", "1000", "01"]),
    (r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$",
     ["1.2.3", "10.0.0-beta.1", "0.0.0"], ["1.2", "01.2.3", "1.2.3-"]),
    (r"^\d+(\.\d+){0,2}$", ["1", "1.2", "1.2.3"], ["1.2.3.4", "1.", ""]),
    # unicode
    (r"^[\u00C0-\u017F]+$", ["éàü", "Œ"], ["abc", "é1", ""]),
    (r"^[\u0400-\u04FF]+$", ["привет"], ["hello", "прив et"]),
    (r"^[\u4e00-\u9fff]{2,4}$", ["你好", "中华人民"], ["你", "你好世界啊", "ab"]),
    (r"^[^\x00-\x7F]+$", ["日本語", "ñ", "😀"], ["abc", "日本a"]),
    (r"^\u{1F600}+$", ["😀", "😀😀"], ["😀a", "", "😁"]),
    (r"^[\U0001F300-\U0001FAFF]$", ["🌍", "😀"], ["a", "🌍🌍", "☀"]),
    (r"^caf\u00e9$", ["café"], ["cafe", "cafe\u0301"]),
    (r"^.{3}$", ["日本語", "a\tb", "😀😀😀"], ["ab", "a\nb", "abcd"]),
    (r"^[αβγ]+$", ["αβγ", "γ"], ["abc", "δ"]),
    (r"^Straße$", ["Straße"], ["Strasse", "STRASSE"]),
    (r"^[a-zà-ÿ ]+$", ["déjà vu", "ça"], ["Déjà", "x1"]),
    # alternations
    (r"^(red|green|blue)$", ["red", "green", "blue"], ["Red", "redgreen", "", "yellow"]),
    (r"^(cat|category|cater)$", ["cat", "category", "cater"], ["cate", "categor", "cats"]),
    (r"^(yes|no|maybe)?$", ["", "yes", "maybe"], ["y", "yesno"]),
    (r"^(GET|POST|PUT|DELETE|PATCH) /[a-z/]*$", ["GET /", "DELETE /api/items"], ["get /", "GET", "HEAD /"]),
    (r"^a|b$", ["a", "b"], ["ab", ""]),
    (r"^(?:true|false|null)$", ["true", "false", "null"], ["True", "nul", "truefalse"]),
    (r"^(Mr|Mrs|Ms|Dr)\.? [A-Z][a-z]+$", ["Mr. Smith", "Dr Who", "Mrs Jones"], ["Mr.Smith", "Sir John", "Ms. smith"]),
    (r"^(a|ab)(c|bcd)(d*)$", ["abcd", "acd", "abcdd", "ac"], ["ab", "abd"]),
    # nested groups
    (r"^((a|b)(c|d))+$", ["ac", "bdac", "adbc"], ["ab", "a", ""]),
    (r"^(a(b(c(d)?)?)?)?$", ["", "a", "ab", "abcd"], ["abd", "bcd", "abcde"]),
    (r"^(?:(?:ab)+|(?:cd)*)e$", ["e", "abe", "ababe", "cdcde"], ["abcde", "ae", "ab"]),
    (r"^((x|y)*z)*$", ["", "zz", "xyzz", "xz"], ["x", "zx"]),
    (r"^(?P<key>[a-z]+)=(?P<value>\d+)(&(?P<key2>[a-z]+)=\d+)*$", ["a=1", "page=2&size=10&x=3"],
     ["a=", "=1", "a=1&", "a=1&b"]),
    (r"^(?<year>\d{4})-(?<month>\d{2})$", ["2024-05"], ["2024-5", "202-05"]),
    (r"^(a*)*$", ["", "aaa"], ["b", "ab"]),
    (r"^(a?b?)+c$", ["c", "abc", "bac", "aabbc"], ["ca", "abca"]),
    (r"^(|a)+b$", ["b", "ab", "aaab"], ["a", "ba"]),
    (r"^(a|)*(b*|c)*$", ["", "aa", "abc", "acbcb"], ["d", "abd", "ba"]),
    (r"^(\((\d+)\))+$", ["(1)", "(12)(3)"], ["()", "(1", "1"]),
    (r"^(?:\d+|[a-z]+)(?:\.(?:\d+|[a-z]+))*$", ["1.2.beta", "abc"], ["1..2", ".1", "A"]),
    # bounded repeats
    (r"^a{3}$", ["aaa"], ["aa", "aaaa"]),
    (r"^a{2,4}$", ["aa", "aaa", "aaaa"], ["a", "aaaaa"]),
    (r"^(ab){2,}$", ["abab", "ababab"], ["ab", "aba", ""]),
    (r"^[a-z]{0,5}$", ["", "abcde"], ["abcdef", "ABC"]),
    (r"^(\d{3}-){2}\d{4}$", ["555-123-4567"], ["555-1234567", "55-123-4567"]),
    (r"^(?:[A-Z]{2}\d{2}){1,3}$", ["AB12", "AB12CD34EF56"], ["", "AB1", "AB12CD34EF56GH78"]),
    (r"^x{,2}y$", ["y", "xy", "xxy"], ["xxxy", "x"]),
    (r"^(a{2}){2,3}$", ["aaaa", "aaaaaa"], ["aaaaa", "aa", "aaaaaaaa"]),
    (r"^.{1,10}$", ["a", "0123456789", "日本"], ["", "01234567890"]),
    (r"^(a?){3}$", ["", "a", "aaa"], ["aaaa"]),
    (r"^(\w{2,3}\s?){2,3}$", ["ab cd", "abc de fg", "abcdef"], ["a", "ab cd ef gh"]),
    (r"^(?:[A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$", ["", "TWFu", "TWE=", "TQ=="],
     ["TWF", "TQ=", "T==="]),
    # classes and escapes
    (r"^[^,\n]+(,[^,\n]+)*$", ["a,b,c", "one field"], ["a,,b", "a\nb", ",a"]),
    (r'^"([^"\\]|\\.)*"$', ['"abc"', '"a\\"b"', '""'], ['"abc', '"a"b"', 'abc']),
    (r"^[\w\s.,!?-]+$", ["Hello, world!", "a-b\tc"], ["semi;colon", ""]),
    (r"^\S+$", ["abc", "a-b"], ["a b", "", "a\tb"]),
    (r"^\D+$", ["abc"], ["a1", ""]),
    (r"^\W+$", ["!?", "- -"], ["a!", ""]),
    (r"^[\-\[\]\\^]+$", ["-[]\\^"], ["a", ""]),
    (r"^\.\*\+\?\(\)\{\}\|\$\^/$", [".*+?(){}|$^/"], ["a*+?(){}|$^/", ""]),
    (r"^a.c$", ["abc", "a c", "aéc"], ["a\nc", "ac"]),
    (r"^\t\x41\u0042\n\r\f\v$", ["\tAB\n\r\f\v"], ["\tAB", "\\tAB"]),
    (r"^[a-c-e]+$", ["a-e", "cab"], ["d", ""]),
    (r"^[^aeiou]+$", ["xyz", "日本"], ["hello", ""]),
    (r"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$", ["#fff", "#A0b1C2"], ["#ffff", "fff", "#ggg"]),
    (r"^\d{5}(-\d{4})?$", ["12345", "12345-6789"], ["1234", "12345-678"]),
    (r"^(\d{4}[- ]?){3}\d{4}$", ["4111 1111 1111 1111", "4111-1111-11111111"], ["4111 1111 1111", "4111_1111_1111_1111"]),
    (r"^[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}$", ["SW1A 1AA", "M1 1AE", "B338TH"], ["SW1A 1A", "sw1a 1aa"]),
    (r"^<.+?>$", ["<a>", "<a><b>"], ["<>", "a"]),
    (r"^a+?b*?c??$", ["a", "aabbc", "ac"], ["b", "acc"]),
    (r"^[\d\s]+$", ["1 2 3", "42\n"], ["1a", ""]),
    (r"^$", [""], ["a", " "]),
    (r"^\s*$", ["", "  \t\n"], ["a", " a "]),
    (r"^\{[^{}]*\}$", ["{}", "{a: 1}"], ["{{}}", "{"]),
    (r"^[\x20-\x7E]{1,20}$", ["Hello World ~!", " "], ["", "tab\there", "ü"]),
    (r"^\0x$", ["\x00x"], ["0x", "x"]),
    (r"^[\b]$", ["\b"], ["b", ""]),
    (r"^(?:[01]\d|2[0-3])(?::[0-5]\d){2}(?:\.\d{1,3})?$", ["23:59:59.999", "00:00:00"], ["23:59:59.9999", "24:00:00"]),
    (r"^(?P<a>x)(?:y)(z)$", ["xyz"], ["xz", "xyyz"]),
    (r"^[+]?[(]?[0-9]{3}[)]?[-\s.]?[0-9]{3}[-\s.]?[0-9]{4,6}$", ["(123) 456-7890", "+1234567890"], ["123-45-6789"]),
]

# Code points where ECMAScript's \s (and so regex_to_gbnf's) differs from Python's ASCII one.
NON_ASCII_SPACE = re.compile("[\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]")


def to_python(regex):
    """The ECMAScript-only spellings the corpus uses, in Python's syntax."""
    regex = re.sub(r"\(\?<([A-Za-z_]\w*)>", r"(?P<\1>", regex)
    return re.sub(r"\\u\{([0-9a-fA-F]{1,6})\}", lambda m: "\\U%08X" % int(m.group(1), 16), regex)


def check(entries):
    """Raises AssertionError naming the first entry whose verdict Python disagrees with."""
    assert len(entries) >= 60, len(entries)
    for e in entries:
        compiled = re.compile(to_python(e["regex"]), re.ASCII)
        assert e["match"] and e["no_match"], e["regex"]
        for s in e["match"] + e["no_match"]:
            if "\\s" in e["regex"] or "\\S" in e["regex"]:
                assert not NON_ASCII_SPACE.search(s), (e["regex"], s)
        for s in e["match"]:
            assert compiled.fullmatch(s), ("should match", e["regex"], s)
        for s in e["no_match"]:
            assert not compiled.fullmatch(s), ("should not match", e["regex"], s)


def main():
    if sys.argv[1:] == ["--check"]:
        check(json.loads(OUT.read_text(encoding="utf-8")))
        return
    entries = [{"regex": r, "match": m, "no_match": n} for r, m, n in CORPUS]
    check(entries)
    OUT.write_text(json.dumps(entries, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    SEEDS.mkdir(exist_ok=True)
    for old in SEEDS.glob("*.txt"):
        old.unlink()
    for k, e in enumerate(entries):
        (SEEDS / f"{k:03d}.txt").write_bytes(e["regex"].encode("utf-8"))
    print(f"wrote {len(entries)} regexes to {OUT}")


if __name__ == "__main__":
    main()
