#!/usr/bin/env python3
"""Schema compile time over the test corpus, timed through /v1 (issue 17).

For each tests/data/structured/schemas/*.json, against a running
`pagoda serve` started with --no-enable-prefix-caching: an unconstrained
request, the constrained request (compiles the schema), and the same
constrained request again (served from the compile cache), each a 4-token
prompt with max_tokens 1, timed end to end. compile ≈ first − cached; the
cached request's cost over the unconstrained one shows what a cache hit
costs. Prints a Markdown section (median, p90, max, the slowest schemas).

  python3 bench/structured_compile_time.py http://127.0.0.1:8766 [SCHEMA_DIR]
"""
import json
import pathlib
import statistics
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]


def post(url, body):
    request = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        status = response.status
        response.read()
    return time.perf_counter() - start, status


def main():
    url = sys.argv[1]
    folder = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests" / "data" / "structured" / "schemas"
    rows = []
    for i, path in enumerate(sorted(folder.glob("*.json"))):
        schema = json.loads(path.read_text())
        base = {"prompt": [1000 + i, 2000 + i, 3000 + i, 4000 + i], "max_tokens": 1, "temperature": 0}
        constrained = {**base, "response_format": {"type": "json_schema",
                                                   "json_schema": {"name": "s", "schema": schema}}}
        try:
            plain, _ = post(url, base)
            first, _ = post(url, constrained)
            cached, _ = post(url, constrained)
        except Exception as e:  # a schema the server refuses is reported, not timed
            print(f"- {path.stem}: refused ({e})", file=sys.stderr)
            continue
        rows.append((path.stem, (first - cached) * 1e3, (cached - plain) * 1e3))
    if not rows:
        sys.exit("no schema was accepted")
    compile_ms = sorted(r[1] for r in rows)
    hit_ms = [r[2] for r in rows]
    p90 = compile_ms[min(len(compile_ms) - 1, int(0.9 * len(compile_ms)))]
    print(f"### Schema compile time ({len(rows)} schemas of {folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder})\n")
    print("| median ms | p90 ms | max ms | cache hit over unconstrained, median ms | goal |")
    print("|---|---|---|---|---|")
    print(f"| {statistics.median(compile_ms):.2f} | {p90:.2f} | {compile_ms[-1]:.2f} | "
          f"{statistics.median(hit_ms):.2f} | median ≤ 10 ms |\n")
    print("Slowest: " + ", ".join(f"{name} {ms:.1f} ms" for name, ms, _ in sorted(rows, key=lambda r: -r[1])[:5]) + "\n")


if __name__ == "__main__":
    main()
