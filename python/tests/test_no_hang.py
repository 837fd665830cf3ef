"""Never a hang, from Python: a sample of the producer x consumer matrix across devices (the C++
suite, tests/test_no_hang.cpp, runs all of it; KILN_TEST_LONG=1 runs all of this one too), and
pending_work() on a call held on purpose. A cell that does not finish in time prints
pending_work() and ends the process, naming the cell, instead of hanging the test run."""
import os
import random
import sys
import threading
import time

import numpy as np
import pytest

import kiln as mx
from conftest import DEVICES

CELL_SECONDS = 120


def within(cell, fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001  (re-raised on the test's thread)
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(CELL_SECONDS)
    if t.is_alive():
        sys.stderr.write(f"NoHang: cell '{cell}' did not finish in {CELL_SECONDS} s\n"
                         + mx.pending_work()["text"])
        sys.stderr.flush()
        os._exit(1)  # the stuck thread cannot be stopped
    if "error" in out:
        raise out["error"]
    return out["value"]


def produce(x):
    return x * 2 + 1


CONSUMERS = {
    "element-wise": lambda h, a: mx.exp(h * 0.1) - h,
    "softmax": lambda h, a: mx.softmax(h, axis=-1),
    "row sum": lambda h, a: mx.sum(h, axis=-1),
    "matmul": lambda h, a: h @ a[1],
    "sort": lambda h, a: mx.sort(h, axis=-1),
    "argsort": lambda h, a: mx.argsort(h, axis=-1),
    "cumsum": lambda h, a: mx.cumsum(h, axis=1),
    "take": lambda h, a: mx.take(h, a[2], axis=1),
    "scatter_add": lambda h, a: mx.scatter_add(h, a[2], a[3], 1),
    "copy to host": lambda h, a: h,
}
PLACEMENTS = ("compute_on", "another stream", "an earlier call")
PATHS = ("eager", "compiled", "job")


def run_cell(producer, placement, consumer, consumer_device, path, inputs):
    pd = mx.device(producer)
    op = CONSUMERS[consumer]

    def body(first, w, idx, upd):
        if placement == "compute_on":
            with mx.compute_on(pd):
                h = produce(first)
        else:
            h = first
        return op(h, (h, w, idx, upd))

    x, w, idx, upd = inputs
    first = x
    if placement == "another stream":
        with mx.stream(mx.new_stream(pd)):
            first = produce(x)  # lazy: computed when the consumer needs it
    elif placement == "an earlier call":
        with mx.stream(mx.new_stream(pd)):
            first = mx.compile(produce)(x)  # in flight while the consumer is submitted
    cs = mx.new_stream(mx.device(consumer_device))
    with mx.stream(cs):
        if path == "eager":
            out = body(first, w, idx, upd)
        elif path == "compiled":
            out = mx.compile(body)(first, w, idx, upd)
        else:
            with mx.Scheduler(workers=1) as s:
                out = s.submit(mx.compile(body), (first, w, idx, upd), stream=cs).outputs()
        return np.array(out)


def cells():
    all_cells = [(p, pl, c, cd, path) for p in DEVICES for pl in PLACEMENTS for c in CONSUMERS
                 for cd in DEVICES for path in PATHS]
    if os.environ.get("KILN_TEST_LONG", "0") not in ("", "0"):
        return all_cells
    seed = int(os.environ.get("KILN_TEST_SEED", random.randrange(1 << 30)))
    print(f"test_no_hang: sample seed {seed} (replay with KILN_TEST_SEED={seed})")
    return random.Random(seed).sample(all_cells, min(24, len(all_cells)))


def test_producer_consumer_matrix():
    x = mx.random.normal((8, 16), key=mx.random.key(3))
    w = mx.random.normal((16, 4), key=mx.random.key(4))
    idx = mx.array(np.array([0, 5, 0], dtype=np.int64))
    upd = mx.random.normal((8, 3), key=mx.random.key(5))
    inputs = (x, w, idx, upd)
    with mx.stream(mx.default_stream(mx.device("reference"))):
        h = produce(x)
        want = {c: np.array(op(h, (h, w, idx, upd))) for c, op in CONSUMERS.items()}
    for cell in cells():
        name = "producer on %s via %s, %s on %s, %s" % cell
        got = within(name, lambda: run_cell(*cell, inputs))
        np.testing.assert_allclose(got, want[cell[2]], rtol=1e-4, atol=1e-4, err_msg=name)


def test_pending_work_shows_a_held_call():
    d = "opencl" if "opencl" in DEVICES else DEVICES[0]
    s = mx.new_stream(mx.device(d))
    x = mx.ones((64,))
    hold = mx._kiln._hold_stream(s)
    result = {}

    def run():
        with mx.stream(s):
            result["sum"] = mx.sum(x + 1).item()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 60
        work = mx.pending_work()
        while not work["threads"] and time.monotonic() < deadline:
            time.sleep(0.01)
            work = mx.pending_work()
        assert work["threads"], work["text"]
        assert "has waited" in work["text"]
        if d == "opencl":
            stream = f"stream {s.index} on opencl:{s.device.index}"
            assert any(t["state"] == "queued on the device" and t["stream"] == stream
                       for t in work["tasks"]), work["text"]
    finally:
        hold.release()  # else the held queue would keep the interpreter's exit waiting
    t.join(CELL_SECONDS)
    assert not t.is_alive(), mx.pending_work()["text"]
    assert result["sum"] == 128


def test_ctrl_c_ends_a_wait_on_a_held_stream():
    """Ctrl-C while an evaluation waits for a device queue that never moves raises
    KeyboardInterrupt at once; other streams and later calls keep working, and the abandoned
    work completes (nothing left in flight) once its queue moves."""
    import signal
    d = "opencl" if "opencl" in DEVICES else DEVICES[0]
    s = mx.new_stream(mx.device(d))
    x = mx.ones((64,))
    mx.eval(x)  # else the held call would compute x too, and every reader of x would wait
    hold = mx._kiln._hold_stream(s)
    # A process started in the background has SIGINT ignored: give it Python's own handler.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            with mx.stream(s):
                mx.sum(x + 1).item()
        assert time.monotonic() - t0 < 30
        with mx.stream(mx.new_stream(mx.device(DEVICES[0]))):
            assert mx.sum(x * 3).item() == 192  # another stream works meanwhile
    finally:
        signal.signal(signal.SIGINT, before)
        hold.release()
    with mx.stream(s):
        assert mx.sum(x + 2).item() == 192  # the held stream, once released
    deadline = time.monotonic() + 30
    while mx.pending_work()["calls"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not mx.pending_work()["calls"], mx.pending_work()["text"]
