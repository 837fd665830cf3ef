#!/usr/bin/env python3
"""Compares two JUnit XML reports of MLX's python/tests, file by file: MLX's own run (pytest with
--junitxml on the unchanged files) and Kiln's (tools/mlx-yardstick.sh with YARDSTICK_JUNIT set),
and prints the markdown table docs/porting-from-mlx.md keeps: per file, the tests MLX passes on
this machine and how many of those Kiln passes.

  tools/mlx-yardstick-table.py MLX.xml KILN.xml [--failures]

A test counts as passed when pytest reports it passed: a unittest test with a failing subTest is
a failure. Tests MLX skips or fails here are not counted. --failures lists, per file, the tests
MLX passes that Kiln does not, with the first line of each failure's message.
"""
import argparse
import collections
import xml.etree.ElementTree as ET


def results(path):
    # {(file, test name): (outcome, first line of the message)}
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        cls = case.get("classname", "")
        file = cls.split(".")[0] + ".py"
        name = cls.split(".", 1)[-1] + "::" + case.get("name", "")
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = tag
                message = (node.get("message") or "").strip().split("\n")[0][:160]
                break
        out[(file, name)] = (outcome, message)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mlx")
    ap.add_argument("kiln")
    ap.add_argument("--failures", action="store_true")
    args = ap.parse_args()
    mlx, kiln = results(args.mlx), results(args.kiln)
    passed_mlx = collections.Counter()
    passed_both = collections.Counter()
    missing = collections.defaultdict(list)
    for key, (outcome, _) in mlx.items():
        if outcome != "passed":
            continue
        passed_mlx[key[0]] += 1
        k_outcome, k_message = kiln.get(key, ("not run", "the file did not run"))
        if k_outcome == "passed":
            passed_both[key[0]] += 1
        else:
            missing[key[0]].append((key[1], k_outcome, k_message))
    total_mlx, total_both = sum(passed_mlx.values()), sum(passed_both.values())
    print("| file | MLX passes | of those, Kiln passes |")
    print("|---|---|---|")
    print(f"| **whole suite ({len(passed_mlx)} files)** | {total_mlx} | **{total_both} "
          f"({100 * total_both / max(total_mlx, 1):.0f}%)** |")
    for file in sorted(passed_mlx):
        print(f"| {file} | {passed_mlx[file]} | {passed_both[file]} |")
    if args.failures:
        for file in sorted(missing):
            print(f"\n{file}:")
            for name, outcome, message in missing[file]:
                print(f"  {name}: {outcome}: {message}")


if __name__ == "__main__":
    main()
