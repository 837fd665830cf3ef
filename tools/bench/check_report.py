"""Checks what `kiln bench` wrote: the JSON follows schema kiln-bench/1 (docs/performance.md,
"Measuring"), every case ran on every device in each of its modes without an error, every record
states its bound and no compute-bound case passes the FMA peak, and the HTML report is
self-contained with its three charts and the device table (with each case's bound). Used by
tests/quiet_check.py (the demo suite in make test, the quick suite in make test-long) and
`make bench-report`.
  python3 tools/bench/check_report.py results.json report.html
"""
import json
import sys

FIELDS = ("case", "shape", "device", "mode", "reps", "median_ms", "min_ms", "max_ms", "gbps",
          "gflops", "bound", "bound_value", "fraction_of_bound", "bound_note")

# The FMA peak is the fastest of 40 short trials whose timing includes starting and joining the
# threads (~1-2% of a trial), so it can read slightly low; 5% covers that a few times over (the
# same tolerance as tests/bench_bounds.cpp). Copy bounds have none: a reduction only reads, and
# reading is cheaper than a copy, so it can pass 100% (its bound_note says so).
PEAK_TOLERANCE = 0.05


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
    if not m.get("peak_isa"):
        fail(f"the machine does not say which vectors its FMA peak used: {m}")
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
        if not rec["bound_note"]:
            fail(f"{rec['case']} does not state its bound")
        if rec["bound"] == "fma peak":
            if rec["bound_value"] != m["peak_gflops_f32"]:
                fail(f"{rec['case']} is held to {rec['bound_value']} GFLOP/s, not the measured peak")
            if rec["fraction_of_bound"] > 1 + PEAK_TOLERANCE:
                fail(f"{rec['case']} on {rec['device']} ({rec['mode']}) runs at "
                     f"{rec['fraction_of_bound']:.0%} of the FMA peak: the peak is not a bound")
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
    if "<th>bound used</th>" not in html:
        fail("the device comparison table does not state each case's bound")
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
