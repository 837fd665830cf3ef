#!/usr/bin/env python3
"""`mpiexec -n N kiln run` of an artifact with a collective, against NumPy.

  kiln_run_check.py MPIEXEC_AND_FLAGS... -- TEST_DISTRIBUTED KILN DIR N

test_distributed (DistributedArtifact.Save, on N ranks) writes DIR/all_sum.kiln, the lowered
all_sum(2 x) + 1 over the world group, and each rank's input DIR/x.<rank>.npy; then N ranks of
`kiln run DIR/all_sum.kiln -i DIR/x.{rank}.npy -o DIR/y.{rank}.npy` run it, and every rank's
output must equal 2 * sum of the inputs + 1, computed here with NumPy.

Then placement on ranks: each rank saved its part of a program (h = 2 x + 1 on rank 0, s = h h on
rank 1, t = s + 1 on every rank) as DIR/staged.<rank>.kiln, and `kiln run DIR/staged.{rank}.kiln`
on N ranks writes s on rank 1 only and t on every rank. Last, Slurm's variables without MPI:
`kiln run` with SLURM_PROCID=1 SLURM_NTASKS=2 reads x.1.npy and fills {size} with 2.
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

    subprocess.run(mpiexec + ["-n", str(n), kiln, "run", out + "/staged.{rank}.kiln", "-i",
                              out + "/x.{rank}.npy", "-o", out + "/s.{rank}.npy", "-o",
                              out + "/t.{rank}.npy"], check=True, timeout=120)
    s = (2 * xs[0] + 1) * (2 * xs[0] + 1)
    for r in range(n):
        written = os.path.exists("%s/s.%d.npy" % (out, r))
        if written != (r == 1):
            print("rank %d: s written: %s (it is computed on rank 1 only)" % (r, written))
            return 1
        t = np.load("%s/t.%d.npy" % (out, r))
        if not np.array_equal(t, s + 1):
            print("rank %d: t = %s, expected %s" % (r, t, s + 1))
            return 1
    if not np.array_equal(np.load(out + "/s.1.npy"), s):
        print("rank 1: s differs from (2 x0 + 1)^2")
        return 1
    print("kiln run of a program placed on ranks: s on rank 1, t on every rank")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_COMM", "PMI"))}
    env.update(SLURM_PROCID="1", SLURM_NTASKS="2")
    env.pop("SLURM_ARRAY_TASK_ID", None)
    subprocess.run([kiln, "run", out + "/twice.kiln", "-i", out + "/x.{rank}.npy", "-o",
                    out + "/d.{task}of{size}.npy"], env=env, check=True, timeout=60)
    if not np.array_equal(np.load(out + "/d.1of2.npy"), 2 * xs[1]):
        print("kiln run under SLURM_PROCID=1 did not read x.1.npy")
        return 1
    print("kiln run with SLURM_PROCID=1 SLURM_NTASKS=2: x.1.npy in, d.1of2.npy out")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
