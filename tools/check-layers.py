#!/usr/bin/env python3
"""Fails when a Kiln source file includes a header from a later layer.

Layers, lowest first: graph, backends, distributed, executor, compile, transforms, nn, scheduler, tools,
python (the bindings). A file may include its own
layer and earlier ones. kiln.h (the public umbrella, at the root) may include every layer, and
only tools may include it. tests/, benchmarks/ and examples/ may include anything.
Every violation is printed as file:line with the rule it breaks; the exit status is 1 if any.

  tools/check-layers.py [ROOT]     check the tree at ROOT (default: this repository)
  tools/check-layers.py --self-test
"""
import os
import re
import subprocess
import sys
import tempfile

LAYERS = [
    "graph", "backends", "distributed", "executor", "compile", "transforms", "nn", "scheduler", "tools", "python"
]
UMBRELLA = "kiln.h"
FREE = {"tests", "benchmarks", "examples"}
SOURCE_EXTS = (".h", ".hpp", ".cpp", ".cc", ".c", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')


def rank(rel):
    """The layer rank of a repo-relative path, 'free', or None when outside every layer."""
    if rel == UMBRELLA:
        return LAYERS.index("tools") - 0.5  # above every library layer, below tools
    top = rel.split("/", 1)[0]
    if top in FREE:
        return "free"
    if top in LAYERS and "/" in rel:
        return LAYERS.index(top)
    return None


def describe(r):
    if r == LAYERS.index("tools") - 0.5:
        return "the umbrella kiln.h"
    return "layer '%s'" % LAYERS[r]


def source_files(root):
    """Tracked files when ROOT is a git work tree (build trees are ignored), else a walk."""
    if os.path.exists(os.path.join(root, ".git")):
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split("\n")
        files = [f for f in out if f]
    else:
        files = []
        for d, subdirs, names in os.walk(root):
            subdirs[:] = [s for s in subdirs if not s.startswith((".", "build"))]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(f for f in files if f.endswith(SOURCE_EXTS))


def resolve(root, rel, target):
    """The repo-relative path an include names (beside the file, then from the root), or None."""
    for base in (os.path.dirname(rel), ""):
        cand = os.path.normpath(os.path.join(base, target))
        if not cand.startswith("..") and os.path.isfile(os.path.join(root, cand)):
            return cand.replace(os.sep, "/")
    return None


def check(root):
    problems = []
    for rel in source_files(root):
        mine = rank(rel)
        if mine == "free":
            continue
        if mine is None:
            problems.append("%s:1: not in a layer folder (%s), tests/, benchmarks/ or examples/: "
                            "move it or add its folder to tools/check-layers.py"
                            % (rel, ", ".join(LAYERS)))
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                dep = resolve(root, rel, m.group(1))
                if dep is None:
                    continue  # a system or third-party header
                theirs = rank(dep)
                if theirs == "free":
                    problems.append("%s:%d: includes %s: library code may not include tests/, "
                                    "benchmarks/ or examples/" % (rel, n, dep))
                elif theirs is not None and theirs > mine:
                    problems.append("%s:%d: %s includes %s from %s, a later layer (order: %s; "
                                    "a file includes only its own layer and earlier ones)"
                                    % (rel, n, describe(mine), dep, describe(theirs),
                                       " -> ".join(LAYERS)))
    return problems


def self_test():
    """Builds small trees with and without violations and checks the verdicts."""
    cases = {
        "clean": ({"graph/a.h": "", "backends/b.h": '#include "graph/a.h"\n',
                   "compile/c.cpp": '#include "backends/b.h"\n#include <vector>\n',
                   "kiln.h": '#include "compile/c.h"\n', "compile/c.h": "",
                   "tools/t.cpp": '#include "kiln.h"\n',
                   "tests/x.cpp": '#include "tools/t.h"\n', "tools/t.h": ""}, []),
        "upward": ({"graph/a.cpp": '#include <map>\n\n#include "executor/s.h"\n',
                    "executor/s.h": ""}, ["graph/a.cpp:3:", "layer 'executor'"]),
        "transforms below nn": ({"transforms/t.cpp": '#include "nn/n.h"\n', "nn/n.h": ""},
                                ["transforms/t.cpp:1:", "layer 'nn'"]),
        "distributed below executor": ({"distributed/e.cpp": '#include "executor/plan.h"\n',
                                        "executor/plan.h": "", "executor/x.cpp":
                                        '#include "distributed/e.h"\n', "distributed/e.h": ""},
                                       ["distributed/e.cpp:1:", "layer 'executor'"]),
        "compile below transforms": ({"compile/c.cpp": '#include "transforms/r.h"\n',
                                      "transforms/r.h": ""},
                                     ["compile/c.cpp:1:", "layer 'transforms'"]),
        "jobs above nn": ({"scheduler/j.cpp": '#include "nn/n.h"\n#include "compile/c.h"\n',
                           "nn/n.h": "", "compile/c.h": ""}, []),
        "relative": ({"backends/cpu/x.cpp": '#include "../../compile/c.h"\n',
                      "compile/c.h": ""}, ["backends/cpu/x.cpp:1:", "layer 'compile'"]),
        "umbrella": ({"compile/c.cpp": '#include "kiln.h"\n', "kiln.h": ""},
                     ["compile/c.cpp:1:", "umbrella kiln.h"]),
        "tests": ({"graph/a.cpp": '#include "tests/test_util.h"\n', "tests/test_util.h": ""},
                  ["graph/a.cpp:1:", "may not include tests/"]),
        "stray": ({"misc/x.cpp": ""}, ["misc/x.cpp:1:", "not in a layer folder"]),
    }
    failed = 0
    for name, (files, expected) in cases.items():
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w") as f:
                    f.write(text)
            problems = check(root)
        ok = (not problems) if not expected else (
            len(problems) == 1 and all(e in problems[0] for e in expected))
        if not ok:
            failed += 1
            print("check-layers self-test '%s' failed: expected %s, got %s"
                  % (name, expected or "no problems", problems))
    if failed:
        return 1
    print("check-layers self-test: %d cases passed" % len(cases))
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print("check-layers: %d include(s) break the layering" % len(problems))
        return 1
    print("check-layers: every include respects %s" % " -> ".join(LAYERS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
