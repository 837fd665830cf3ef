"""Checks what `kiln bench` wrote: the JSON follows schema kiln-bench/1 (README "kiln bench"),
every case ran on every device in each of its modes without an error, and the HTML report is
self-contained with its three charts and the device table. Used by tests/quiet_check.py (the
demo suite in make test, the quick suite in make test-long) and `make bench-report`.
  python3 tools/bench/check_report.py results.json report.html
"""
import json
import sys

FIELDS = ("case", "shape", "device", "mode", "reps", "median_ms", "min_ms", "max_ms", "gbps",
          "gflops", "bound", "bound_value", "fraction_of_bound")


def fail(msg):
    print(f"check_report: {msg}")
    sys.exit(1)


def check_json(r):
    if r.get("schema") != "kiln-bench/1":
        fail(f"schema is {r.get('schema')!r}, expected 'kiln-bench/1'")
    for key in ("suite", "date", "machine", "devices", "results", "peers", "peers_missing"):
        if key not in r:
            fail(f"missing top-level key {key!r}")
    m = r["machine"]
    if not (m["copy_gbps"] > 0 and m["peak_gflops_f32"] > 0 and m["threads"] > 0):
        fail(f"bounds not measured: {m}")
    seen = set()
    for rec in r["results"]:
        for k in FIELDS:
            if k not in rec:
                fail(f"record {rec.get('case')} lacks {k!r}")
        if "error" in rec:
            fail(f"{rec['case']} on {rec['device']} ({rec['mode']}) raised: {rec['error']}")
        if not (0 < rec["min_ms"] <= rec["median_ms"] <= rec["max_ms"]) or rec["reps"] < 1:
            fail(f"implausible timing in {rec}")
        if rec["bound"] != "none" and not rec["fraction_of_bound"] > 0:
            fail(f"{rec['case']} has bound {rec['bound']} but no fraction")
        seen.add((rec["case"], rec["device"], rec["mode"]))
    cases = {c for c, _, _ in seen}
    for c in cases:
        for d in r["devices"]:
            if not any((c, d, mode) in seen for mode in ("eager", "compiled")):
                fail(f"case {c!r} did not run on {d}")
    # Each suite's case count (tools/bench/suite.cpp): a shorter list means cases went missing.
    want = {"demo": 4}.get(r["suite"], 12)
    if len(cases) < want:
        fail(f"only {len(cases)} cases of suite {r['suite']!r} ran (it has {want})")
    return cases


def check_html(html):
    if html.count("<svg") != 3:
        fail(f"expected 3 charts, found {html.count('<svg')}")
    if "<table>" not in html or "Device comparison" not in html:
        fail("the device comparison table is missing")
    outside = html.replace("http://www.w3.org/2000/svg", "")
    for bad in ("<script src", "<link ", "<img ", "http://", "https://"):
        if bad in outside:
            fail(f"the report is not self-contained ({bad!r})")


def main(json_path, html_path):
    with open(json_path) as f:
        r = json.load(f)
    cases = check_json(r)
    with open(html_path, encoding="utf-8") as f:
        check_html(f.read())
    print(f"check_report: {len(r['results'])} results, {len(cases)} cases on "
          f"{', '.join(r['devices'])}; the report has its charts and table")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail("usage: check_report.py results.json report.html")
    main(sys.argv[1], sys.argv[2])
