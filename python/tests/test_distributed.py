"""kiln.distributed in one process (a one-rank group), and on 2 ranks under mpiexec when the
build has MPI: the Python twin of examples/train_data_parallel.cpp's collectives."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import kiln as mx


def test_one_rank_group():
    g = mx.distributed.init()
    assert (g.rank(), g.size()) == (0, 1)
    x = mx.array([1.0, 2.0, 3.0])
    for f in (mx.distributed.all_sum, mx.distributed.all_max, mx.distributed.all_min,
              mx.distributed.all_gather, mx.distributed.sum_scatter):
        assert np.array_equal(np.asarray(f(x, group=g)), [1.0, 2.0, 3.0])
    assert g.split(1).size() == 1
    with pytest.raises(mx.Error, match="one rank"):
        mx.distributed.send(x, 1)
    with pytest.raises(ValueError, match="mpi"):
        mx.distributed.init(backend="nccl")
    with pytest.raises(mx.Error, match="world group of 1 rank"):
        mx.Device("cpu", rank=1)
    assert mx.Device("cpu", rank=0).rank == 0 and "rank=0" in repr(mx.Device("cpu", rank=0))
    for kwargs, what in (({"rank": -5}, "rank is -5"), ({"index": -3}, "index is -3")):
        with pytest.raises(mx.Error, match=what):
            mx.Device("cpu", **kwargs)
    grads = {"w": x, "b": [mx.array(0.5)]}
    import kiln.nn as nn
    assert nn.average_gradients(grads) is grads


SCRIPT = r"""
import sys

import numpy as np
import kiln as mx
g = mx.distributed.init()
r, n = g.rank(), g.size()
x = mx.arange(6, dtype=mx.float32) + r
total = mx.distributed.all_sum(x)
f = mx.compile(lambda a: mx.distributed.all_gather(a * 2, group=g))
sent = mx.distributed.send(x, (r + 1) % n)
got = mx.distributed.recv_like(x, (r - 1) % n)
mx.eval(sent, got)
want = sum(np.arange(6, dtype=np.float32) + k for k in range(n))
assert np.array_equal(np.asarray(total), want), total
assert np.array_equal(np.asarray(f(x)), np.concatenate([2 * (np.arange(6) + k) for k in range(n)]))
assert np.array_equal(np.asarray(got), np.arange(6, dtype=np.float32) + (r - 1) % n)
# Placement on ranks: stage one on rank 0 (from rank 0's x), stage two on rank 1, read by
# every rank.
dev = mx.default_device()
@mx.compile
def staged(a):
    with mx.compute_on(mx.Device(dev.type, dev.index, rank=0)):
        h = mx.exp(a) * 2
    with mx.compute_on(f"rank1/{dev}"):
        y = h + 1
    return y, y * 3
y, z = staged(x)
x0 = mx.arange(6, dtype=mx.float32)
assert np.array_equal(np.asarray(z), np.asarray((mx.exp(x0) * 2 + 1) * 3)), z
if r == 1:
    assert np.array_equal(np.asarray(y), np.asarray(mx.exp(x0) * 2 + 1))
else:
    try:
        np.asarray(y)
        raise AssertionError("a value on rank 1 read on rank 0")
    except mx.Error as e:
        assert "computed on rank 1" in str(e), e
sys.stdout.write(f"rank {r} ok\n")  # one write: the ranks share mpiexec's stdout
sys.stdout.flush()
"""


MPIEXEC = ["mpiexec", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader,tcp",
           "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", "-n", "2"]
needs_mpi = pytest.mark.skipif(not mx.distributed.is_available() or not shutil.which("mpiexec"),
                               reason="this Kiln was built without MPI, or mpiexec is missing")


def run_two_ranks(args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(MPIEXEC + [sys.executable] + args, env=env, capture_output=True,
                         text=True, timeout=150)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@needs_mpi
def test_two_ranks_under_mpiexec():
    # Each rank's line, wherever the other's lands (mpiexec forwards both ranks' output).
    out = run_two_ranks(["-c", SCRIPT])
    assert sorted(re.findall(r"rank (\d) ok", out)) == ["0", "1"], out


@needs_mpi
def test_data_parallel_example_on_two_ranks():
    example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                           "python", "train_data_parallel.py")
    assert "bitwise identical on every rank: yes" in run_two_ranks([example])
