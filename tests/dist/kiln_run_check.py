#!/usr/bin/env python3
"""`mpiexec -n N kiln run` of an artifact with a collective, against NumPy.

  kiln_run_check.py MPIEXEC_AND_FLAGS... -- TEST_DISTRIBUTED KILN DIR N

test_distributed (DistributedArtifact.Save, on N ranks) writes DIR/all_sum.kiln, the lowered
all_sum(2 x) + 1 over the world group, and each rank's input DIR/x.<rank>.npy; then N ranks of
`kiln run DIR/all_sum.kiln -i DIR/x.{rank}.npy -o DIR/y.{rank}.npy` run it, and every rank's
output must equal 2 * sum of the inputs + 1, computed here with NumPy.
"""
import os
import shutil
import subprocess
import sys

import numpy as np


def main(argv):
    cut = argv.index("--")
    mpiexec = argv[1:cut]
    test_bin, kiln, out, n = argv[cut + 1:cut + 5]
    n = int(n)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    env = dict(os.environ, KILN_TEST_ARTIFACT_DIR=out)
    subprocess.run(mpiexec + ["-n", str(n), test_bin, "--gtest_filter=DistributedArtifact.*"],
                   env=env, check=True, timeout=120)
    subprocess.run(mpiexec + ["-n", str(n), kiln, "run", out + "/all_sum.kiln", "-i",
                              out + "/x.{rank}.npy", "-o", out + "/y.{rank}.npy"],
                   check=True, timeout=120)
    xs = [np.load("%s/x.%d.npy" % (out, r)) for r in range(n)]
    want = 2 * np.sum(xs, axis=0, dtype=np.float32) + 1
    for r in range(n):
        y = np.load("%s/y.%d.npy" % (out, r))
        if y.shape != want.shape or not np.allclose(y, want, rtol=1e-6):
            print("rank %d: kiln run gave %s, expected %s" % (r, y, want))
            return 1
    print("kiln run on %d ranks: every output equals 2 * sum(x) + 1" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
