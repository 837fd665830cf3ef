#!/usr/bin/env python3
"""Runs Kiln's ctest suite the way `make test` and `make test-long` do, then prints the ten
slowest tests (so a developer sees where the minutes go) and the wall time.

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


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--long", action="store_true", help="every sweep in full, and the long tests")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("extra", nargs="*", help="more ctest arguments (after --)")
    args = ap.parse_args(argv[1:])

    env = dict(os.environ)
    cmd = ["ctest", "--output-on-failure", "-j", str(args.jobs), "--timeout", str(args.timeout)]
    if args.long:
        env["KILN_TEST_LONG"] = "1"
        cmd += ["-L", "^(sweep|long)$"]
    else:
        env.pop("KILN_TEST_LONG", None)
        cmd += ["-LE", "long"]
    cmd += args.extra

    start = time.monotonic()
    times = []
    proc = subprocess.Popen(cmd, cwd=args.build, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    for line in proc.stdout:
        sys.stdout.write(line)
        m = RESULT.match(line)
        if m:
            times.append((float(m.group(3)), m.group(1), m.group(2)))
    rc = proc.wait()
    wall = time.monotonic() - start

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
