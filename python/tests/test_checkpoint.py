"""kiln.utils.save_checkpoint / load_checkpoint: a run stopped after step 5 and restarted from its
step-4 checkpoint (in a fresh model and optimizer, with another global key) gives the losses of
the run that was never stopped, bit for bit; at one rank in this process and at two ranks under
mpiexec (one file per rank). The training run is checkpoint_train.py."""
import json
import os
import re
import shutil
import subprocess
import sys
from functools import partial

import pytest

import kiln as mx
import kiln.nn as nn
import kiln.optimizers as optim
from kiln.utils import checkpoint_file, load_checkpoint, save_checkpoint, tree_flatten

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checkpoint_train as ct  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_resumed_run_has_the_same_losses_bit_for_bit(tmp_path, optimizer, mode):
    ckpt = str(tmp_path / "ckpt")
    reference = ct.run(ckpt, "reference", optimizer, mode)
    interrupted = ct.run(ckpt, "interrupted", optimizer, mode)
    assert sorted(os.listdir(tmp_path)) == ["ckpt.safetensors"]  # one file, the last kept
    resumed = ct.run(ckpt, "resumed", optimizer, mode)
    assert list(interrupted) == [1, 2, 3, 4, 5] and list(resumed) == [5, 6, 7, 8, 9, 10]
    assert {**interrupted, **resumed} == reference
    # Dropout is on and the masks matter: without the saved key step 5 differs.
    assert len(set(reference.values())) == len(reference)


def test_without_the_random_key_the_losses_differ(tmp_path):
    # What the test above shows depends on the key: restored weights alone are not enough.
    ckpt = str(tmp_path / "ckpt")
    reference = ct.run(ckpt, "reference")
    ct.run(ckpt, "interrupted")
    path = checkpoint_file(ckpt)
    arrays, meta = mx.load(path, return_metadata=True)
    arrays["random.key"] = mx.random.key(12345)
    mx.save_safetensors(path, arrays, meta)
    resumed = ct.run(ckpt, "resumed")
    assert resumed[5] != reference[5]


def test_file_layout_and_metadata(tmp_path):
    mx.random.seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = optim.Adam(1e-3)
    opt.init(model.trainable_parameters())
    mx.random.uniform()  # advance the global key
    path = save_checkpoint(str(tmp_path / "c.safetensors"), model, opt, 7,
                           metadata={"note": "hi"})
    assert path == str(tmp_path / "c.safetensors")
    arrays, meta = mx.load(path, return_metadata=True)
    assert meta == {"note": "hi", "kiln.checkpoint": "1", "step": "7", "rank": "0", "size": "1",
                    "optimizer": "Adam"}
    names = sorted(arrays)
    assert "random.key" in names and "optimizer.step" in names
    assert "optimizer.learning_rate" in names
    params = [n for n, _ in tree_flatten(model.parameters())]
    assert [n for n in names if n.startswith("model.")] == sorted("model." + n for n in params)
    assert "optimizer.layers.0.weight.m" in names and "optimizer.layers.2.bias.v" in names
    assert arrays["random.key"].dtype == mx.uint64
    assert arrays["random.key"].item() == mx.random.state[0].item()
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]


def test_load_checks_what_it_is_given(tmp_path):
    model, opt = nn.Linear(3, 2), optim.SGD(0.1)
    path = save_checkpoint(tmp_path / "c", model, opt, 1)
    assert path.endswith("c.safetensors")
    with pytest.raises(mx.Error, match="state of a SGD; given a Adam"):
        load_checkpoint(tmp_path / "c", nn.Linear(3, 2), optim.Adam(0.1))
    with pytest.raises(mx.Error, match="shape"):
        load_checkpoint(tmp_path / "c", nn.Linear(3, 5), optim.SGD(0.1))
    with pytest.raises(mx.Error, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing", model, opt)
    mx.save_safetensors(str(tmp_path / "w.safetensors"), {"a": mx.zeros((2,))})
    with pytest.raises(mx.Error, match="not a Kiln checkpoint"):
        load_checkpoint(tmp_path / "w", model)
    with pytest.raises(mx.Error, match="step must be an int"):
        save_checkpoint(tmp_path / "c", model, opt, -1)
    # The model alone: the optimizer's state is left out and ignored.
    save_checkpoint(tmp_path / "m", model, step=3)
    assert load_checkpoint(tmp_path / "m", nn.Linear(3, 2)) == 3


def test_load_writes_into_a_captured_state_in_place(tmp_path):
    # A step compiled before the load sees the loaded values: model, optimizer state dict and
    # kiln.random.state are updated in place, not replaced.
    mx.random.seed(1)
    model, opt = nn.Linear(2, 1), optim.SGD(0.5, momentum=0.9)
    opt.init(model.trainable_parameters())
    x, y = mx.ones((4, 2)), mx.zeros((4, 1))
    loss_fn = lambda m: nn.losses.mse_loss(m(x), y)  # noqa: E731

    def make_step(model, opt):
        state = [model.state, opt.state]

        @partial(mx.compile, inputs=state, outputs=state)
        def step():
            loss, grads = nn.value_and_grad(model, loss_fn)(model)
            opt.update(model, grads)
            return loss
        return step

    step = make_step(model, opt)
    step()
    save_checkpoint(tmp_path / "c", model, opt, 1)
    want = [step().item() for _ in range(3)]
    mx.random.seed(9)
    model2, opt2 = nn.Linear(2, 1), optim.SGD(0.5, momentum=0.9)
    opt2.init(model2.trainable_parameters())
    step2 = make_step(model2, opt2)
    state_dict = opt2.state
    assert load_checkpoint(tmp_path / "c", model2, opt2) == 1
    assert opt2.state is state_dict
    got = [step2().item() for _ in range(3)]
    assert got == want


MPIEXEC = ["mpiexec", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader,tcp",
           "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", "-n", "2"]
needs_mpi = pytest.mark.skipif(not mx.distributed.is_available() or not shutil.which("mpiexec"),
                               reason="this Kiln was built without MPI, or mpiexec is missing")


def _two_ranks(directory, phase, optimizer, mode):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(MPIEXEC + [sys.executable, os.path.join(HERE, "checkpoint_train.py"),
                                    str(directory), phase, optimizer, mode],
                         env=env, capture_output=True, text=True, timeout=150)
    assert out.returncode == 0, out.stdout + out.stderr
    losses = []
    for rank in (0, 1):
        with open(os.path.join(directory, f"{phase}.rank{rank}.json")) as f:
            losses.append({int(k): v for k, v in json.load(f).items()})
    return losses


@needs_mpi
def test_two_ranks_resume_bit_for_bit(tmp_path):
    # Data parallel over two processes, a compiled step with all_sum; the interrupted job ends
    # after step 5 and a new job resumes from the files of step 4, one per rank.
    reference = _two_ranks(tmp_path, "reference", "adam", "compiled")
    interrupted = _two_ranks(tmp_path, "interrupted", "adam", "compiled")
    files = sorted(f for f in os.listdir(tmp_path) if f.endswith(".safetensors"))
    assert files == ["ckpt.rank0.safetensors", "ckpt.rank1.safetensors"]
    for rank in (0, 1):
        meta = mx.load(str(tmp_path / files[rank]), return_metadata=True)[1]
        assert (meta["rank"], meta["size"], meta["step"]) == (str(rank), "2", "4")
    # Each rank draws its own dropout masks: the two files hold different keys.
    keys = [mx.load(str(tmp_path / f))["random.key"].item() for f in files]
    assert keys[0] != keys[1]
    resumed = _two_ranks(tmp_path, "resumed", "adam", "compiled")
    for rank in (0, 1):
        assert sorted(interrupted[rank]) == [1, 2, 3, 4, 5]
        assert sorted(resumed[rank]) == [5, 6, 7, 8, 9, 10]
        assert {**interrupted[rank], **resumed[rank]} == reference[rank], rank
    assert reference[0] == reference[1]  # the all-summed loss, the same on both ranks
    assert re.fullmatch(r"[0-9a-f]{8}", reference[0][10])
