"""`python -m kiln` is the kiln command (the same C++ code inside the extension): devices prints
what `kiln devices` prints, bench writes the same JSON schema and HTML report, errors and --help
behave as the command's."""
import json
import os
import subprocess
import sys

import pytest


def run_module(*args):
    return subprocess.run([sys.executable, "-m", "kiln", *args], capture_output=True, text=True,
                          timeout=300)


def test_devices_matches_the_command():
    r = run_module("devices")
    assert r.returncode == 0, r.stderr
    assert "reference:0" in r.stdout and "default:" in r.stdout
    command = os.environ.get("KILN_COMMAND")
    if command:  # the build tree's `kiln`
        c = subprocess.run([command, "devices"], capture_output=True, text=True, timeout=60)
        assert c.stdout == r.stdout


def test_bench_writes_the_commands_json_and_html(tmp_path):
    js, html = tmp_path / "r.json", tmp_path / "r.html"
    r = run_module("bench", "--suite", "demo", "--devices", "reference", "--seconds", "0.01",
                   "--json", str(js), "--html", str(html))
    assert r.returncode == 0, r.stderr
    report = json.loads(js.read_text())
    assert report["schema"] == "kiln-bench/1" and report["suite"] == "demo"
    assert report["results"] and {x["device"] for x in report["results"]} == {"reference:0"}
    assert all(x.get("median_ms", 0) > 0 or x.get("error") for x in report["results"])
    assert html.read_text().lstrip().lower().startswith("<!doctype html")
    assert "wrote " + str(js) in r.stdout


def test_bad_arguments_and_help_behave_as_the_command():
    r = run_module("bench", "--suite", "nosuch")
    assert r.returncode != 0 and "nosuch" in r.stderr
    r = run_module("bench", "--devices", "nosuch:3")
    assert r.returncode == 1 and r.stderr.startswith("kiln: ") and "nosuch" in r.stderr
    r = run_module("--help")
    assert r.returncode == 0 and "bench" in r.stdout and "devices" in r.stdout
    r = run_module()
    assert r.returncode != 0


def test_peers_run_from_the_package_with_this_interpreter(tmp_path):
    # The package's copy of peers.py, run by this interpreter (which has NumPy for the tests).
    js = tmp_path / "p.json"
    r = run_module("bench", "--suite", "demo", "--devices", "reference", "--seconds", "0.01",
                   "--peers", "--json", str(js))
    assert r.returncode == 0, r.stderr
    report = json.loads(js.read_text())
    numpy = [p for p in report["peers"] if p["peer"] == "numpy"]
    assert numpy and all(p["median_ms"] > 0 and not p.get("error") for p in numpy), report["peers"]
