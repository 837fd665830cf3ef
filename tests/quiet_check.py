#!/usr/bin/env python3
"""Runs `kiln devices`, `kiln demo`, a short `kiln bench` and tests/quiet_ops.cpp (kernels a
compiler warns about, on every device), each with cold kernel caches in fresh folders, and fails
on any line Kiln did not write: a driver or compiler (PoCL's clang, lavapipe, the Vulkan loader,
glslang) must print nothing on a run where nothing failed; KILN_LOG=debug is where their logs go.

Kiln's lines are recognised by shape. On stdout they are those tools/kiln.cpp prints (device
table, demo sections, bench rows naming a listed device); on stderr only `kiln bench`'s progress
(not a terminal: one "[i/n] case on device, mode" line per case). Every other line is reported.
quiet_ops writes nothing at all. When kiln.cpp learns a new kind of line, add its shape here.

The bench's JSON and HTML report must also pass tools/bench/check_report.py (schema, every case
on every device, charts, table), so one run of the suite checks both.

usage: quiet_check.py KILN_EXECUTABLE QUIET_OPS_EXECUTABLE [SUITE]
SUITE is the bench suite to run (default demo; make test-long runs it with quick).
"""
import os
import re
import subprocess
import sys
import tempfile

CHECK_REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "bench",
                            "check_report.py")
DEVICE_ROW = re.compile(r"^(\S+:\d+) +(available|missing) +\S")


def run(program, args, root):
    """One command in a fresh environment: new, empty caches and no KILN_LOG."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KILN_", "POCL_", "MESA_"))}
    for var in ("KILN_CACHE_DIR", "XDG_CACHE_HOME", "POCL_CACHE_DIR"):
        env[var] = tempfile.mkdtemp(prefix=var.lower() + "-", dir=root)
    p = subprocess.run([program] + args, cwd=root, env=env, capture_output=True, text=True,
                       errors="replace", timeout=1500)
    return p.returncode, p.stdout.splitlines(), p.stderr.splitlines()


def device_shapes(devices):
    alt = "|".join(re.escape(d) for d in devices)
    return [
        DEVICE_ROW,
        re.compile(r"^default: (%s)$" % alt),
    ], alt


def demo_shapes(devices):
    shapes, alt = device_shapes(devices)
    return shapes + [
        re.compile(r"^$"),
        re.compile(r"^== \S.*$"),  # section headers
        re.compile(r"^mean -?[\d.]+(e[-+]\d+)?, row with the largest value \d+, max \|error\| "),
        re.compile(r"^tasks \(.*\):$"),
        re.compile(r"^first call [\d.]+ ms \(.*\), then [\d.]+ ms per call vs [\d.]+ ms eager"),
        re.compile(r"^  \S.* on stream \d+ on (%s) +x\d+ +[\d.]+ us$" % alt),  # task rows
        re.compile(r"^  caller on stream \d+ on (%s) +-> ran .*$" % alt),
        re.compile(r"^traces of the user function: \d+$"),
        re.compile(r"^Chrome trace of every task written to \S+$"),
    ]


def bench_shapes(devices):
    _, alt = device_shapes(devices)
    number = r"-?[\d.]+"
    return [
        re.compile(r"^.*, \d+ threads; copy %s GB/s, float32 FMA peak %s GFLOP/s" % (number, number)),
        re.compile(r"^case +device +mode +median +min +bound$"),
        re.compile(r"^.{34} (%s) +\S+ +(%s ms +%s ms +\S+|error: .*)$" % (alt, number, number)),
        re.compile(r"^peer .*"),
        re.compile(r"^peer not found: .*"),
        re.compile(r"^wrote \S+$"),
    ]


BENCH_STDERR = [
    re.compile(r"^measuring the bounds \(copy bandwidth, FMA peak\)\.\.\.$"),
    re.compile(r"^\[\d+/\d+\] \S.* on \S+:\d+, \S+$"),
]


def foreign(lines, shapes):
    return [l for l in lines if not any(s.match(l) for s in shapes)]


def main():
    kiln = os.path.abspath(sys.argv[1])
    quiet_ops = os.path.abspath(sys.argv[2])
    suite = sys.argv[3] if len(sys.argv) > 3 else "demo"
    failures = []
    with tempfile.TemporaryDirectory(prefix="kiln-quiet-") as root:
        rc, out, err = run(kiln, ["devices"], root)
        devices = [m.group(1) for m in map(DEVICE_ROW.match, out) if m]
        checks = [("kiln devices", rc, out, err, device_shapes(devices)[0], [])]
        if not devices:
            failures.append("kiln devices listed no device")
        rc, out, err = run(kiln, ["demo"], root)
        checks.append(("kiln demo", rc, out, err, demo_shapes(devices), []))
        # The demo suite (every device, eager and compiled) keeps this within make test's budget;
        # make test-long runs the quick suite.
        rc, out, err = run(kiln, ["bench", "--suite", suite, "--seconds", "0.02", "--json",
                                  "quiet.json", "--html", "quiet.html"], root)
        checks.append(("kiln bench --suite %s --seconds 0.02" % suite, rc, out, err,
                       bench_shapes(devices), BENCH_STDERR))
        if rc == 0:
            report = subprocess.run([sys.executable, CHECK_REPORT, "quiet.json", "quiet.html"],
                                    cwd=root, capture_output=True, text=True)
            if report.returncode != 0:
                failures.append("the bench report: " + report.stdout + report.stderr)
        rc, out, err = run(quiet_ops, [], root)
        checks.append(("quiet_ops", rc, out, err, [], []))
        for name, rc, out, err, out_shapes, err_shapes in checks:
            if rc != 0:
                failures.append("%s exited with %d; its stderr:\n  %s" % (name, rc, "\n  ".join(err)))
                continue
            for stream, lines, shapes in (("stdout", out, out_shapes), ("stderr", err, err_shapes)):
                bad = foreign(lines, shapes)
                if bad:
                    failures.append("%s: %d line(s) on %s that Kiln did not write:\n  %s" %
                                    (name, len(bad), stream, "\n  ".join(bad[:40])))
            print("%s: %d stdout and %d stderr lines, all Kiln's" % (name, len(out), len(err))
                  if not any(f.startswith(name + ":") for f in failures) else name + ": FAILED")
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
