#!/usr/bin/env python3
"""Runs Kiln's ctest suite the way `make test` and `make test-long` do, then prints the end of
each failed test's output again (ctest's is far above the end of a long log, and CI keeps only
the end), the ten slowest tests (so a developer sees where the minutes go) and the wall time.

  tools/run-tests.py BUILD [--long] [--jobs N] [-- extra ctest arguments]

`make test` runs every test but those labelled `long`, with a random sample of each sweep
(tests labelled `sweep`: new seeds each run; a failure prints how to replay it). `--long`
(make test-long; CI runs both) runs what that samples or leaves out: the `sweep` tests in full
(KILN_TEST_LONG=1) and the `long` tests (the quick bench).
The exit status is ctest's.
"""
import argparse
import os
import re
import subprocess
import sys
import time

# "  12/311 Test  #40: FusionRandom.CompiledOnCpuMatchesReference ....   Passed   12.34 sec"
RESULT = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.+\**\s*(.+?)\s+([\d.]+) sec\s*$")
# A test's output ends at the next "Start" line or ctest's closing "97% tests passed, ...".
OUTPUT_END = re.compile(r"^(\s*Start\s+\d+: |\d+% tests passed)")
FAILED_TAIL_LINES = 40


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--long", action="store_true", help="every sweep in full, and the long tests")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=int, default=1800)
    # argparse gives an empty `nargs="*"` positional nothing after "--", so split there.
    ours, extra = argv[1:], []
    if "--" in ours:
        cut = ours.index("--")
        ours, extra = ours[:cut], ours[cut + 1:]
    args = ap.parse_args(ours)

    env = dict(os.environ)
    cmd = ["ctest", "--output-on-failure", "-j", str(args.jobs), "--timeout", str(args.timeout)]
    if args.long:
        env["KILN_TEST_LONG"] = "1"
        cmd += ["-L", "^(sweep|long)$"]
    else:
        env.pop("KILN_TEST_LONG", None)
        cmd += ["-LE", "long"]
    cmd += extra

    start = time.monotonic()
    times = []
    failures = []  # (name, status, lines of its output)
    capturing = None
    proc = subprocess.Popen(cmd, cwd=args.build, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    for line in proc.stdout:
        sys.stdout.write(line)
        m = RESULT.match(line)
        if m:
            times.append((float(m.group(3)), m.group(1), m.group(2)))
            capturing = None
            if m.group(2) not in ("Passed", "Skipped"):
                capturing = (m.group(1), m.group(2), [])
                failures.append(capturing)
        elif OUTPUT_END.match(line):
            capturing = None
        elif capturing is not None:
            capturing[2].append(line)
    rc = proc.wait()
    wall = time.monotonic() - start

    for name, status, lines in failures:
        print("\n=== %s (%s): the last %d lines of its output" % (name, status, FAILED_TAIL_LINES))
        sys.stdout.write("".join(lines[-FAILED_TAIL_LINES:]))

    times.sort(reverse=True)
    if times:
        print("\nThe ten slowest tests:")
        for secs, name, status in times[:10]:
            print("  %8.1f s  %-60s %s" % (secs, name, status))
    mode = "make test-long (every sweep in full)" if args.long else "make test (sampled sweeps)"
    print("%s: %d tests, %.0f s of wall time with -j %d" % (mode, len(times), wall, args.jobs))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
