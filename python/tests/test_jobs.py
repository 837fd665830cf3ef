"""kiln.Scheduler and kiln.Job (scheduler/jobs.h from Python): Python functions, compiled or not,
run on worker threads that take the GIL only to run Python; waits release it (a main thread in
job.wait() never blocks a job that needs the GIL); status, outputs, cancel, deadlines, errors and
Ctrl-C."""
import _thread
import threading
import time
import weakref
from functools import partial

import numpy as np
import pytest

import kiln as mx
from conftest import DEVICES


def gated(event):
    """A job function that blocks (without the GIL) until `event` is set."""
    def f(x):
        assert event.wait(30)
        return x + 1
    return f


def test_compiled_and_plain_functions_run_as_jobs_with_pytrees():
    @mx.compile
    def gelu(x):
        return x * (1 + mx.erf(x / 2**0.5)) / 2

    x = mx.random.normal((64, 32), key=mx.random.key(1))
    with mx.Scheduler(workers=2) as s:
        a = s.submit(gelu, (x,), name="gelu")
        b = s.submit(lambda t, k: {"sum": t["a"] + t["b"] * k, "k": k},
                     [{"a": x, "b": mx.ones((64, 32))}, 3], priority=5)
        assert a.wait(30) and b.wait(30)
        assert a.status == mx.JobStatus.succeeded and a.done and a.error is None
        np.testing.assert_allclose(np.array(a.outputs()), np.array(gelu(x)), rtol=1e-6)
        out = b.outputs()
        assert out["k"] == 3
        np.testing.assert_allclose(np.array(out["sum"]), np.array(x) + 3, rtol=1e-6)
        assert a.name == "gelu" and "succeeded" in repr(a)


def test_a_trace_on_a_worker_while_the_main_thread_waits():
    # The worker needs the GIL to trace; the main thread waits in job.wait(): no deadlock.
    traces = []

    @mx.compile
    def f(x):
        traces.append(threading.get_ident())
        return mx.exp(x) * 2

    with mx.Scheduler(workers=2) as s:
        jobs = [s.submit(f, (mx.ones((n + 1,)),)) for n in range(6)]
        for j in jobs:
            assert j.wait(60), j
        assert all(j.status == mx.JobStatus.succeeded for j in jobs)
        assert threading.get_ident() not in traces and len(traces) == 6
        assert jobs[5].outputs().shape == (6,)


def test_streams_priorities_and_jobs_submitting_jobs():
    order = []
    gate = threading.Event()
    with mx.Scheduler(workers=1) as s:
        blocker = s.submit(gated(gate), (mx.ones(1),))
        while blocker.status == mx.JobStatus.queued:
            time.sleep(0.001)
        low = s.submit(lambda: order.append("low"), (), priority=0)
        high = s.submit(lambda: order.append("high"), (), priority=9,
                        stream=mx.new_stream(mx.device(DEVICES[0])))
        gate.set()
        s.wait_all()
        assert order == ["high", "low"] and low.status == high.status == mx.JobStatus.succeeded
        inner = []
        outer = s.submit(lambda: inner.append(s.submit(lambda x: x * 2, (mx.array(4.0),))))
        outer.wait(30)
        assert inner[0].outputs().item() == 8.0


def test_wait_with_a_timeout_then_cancel_a_queued_and_a_running_job():
    gate = threading.Event()
    s = mx.Scheduler(workers=1)
    running = s.submit(gated(gate), (mx.ones(2),), name="running")
    queued = s.submit(lambda x: x, (mx.ones(2),), name="queued")
    assert running.wait(0.05) is False and queued.wait(timeout=0) is False
    assert queued.status == mx.JobStatus.queued
    assert queued.cancel() is True and queued.status == mx.JobStatus.cancelled
    assert isinstance(queued.error, mx.Error) and "cancelled" in str(queued.error)
    with pytest.raises(mx.Error, match="'queued'.*has no outputs.*cancelled"):
        queued.outputs()
    assert running.cancel() is True  # stops at its next task boundary
    gate.set()
    assert running.wait(30)
    assert running.status in (mx.JobStatus.cancelled, mx.JobStatus.succeeded)
    assert running.cancel() is False  # already ended
    s.close()
    with pytest.raises(mx.Error, match="closed"):
        s.submit(lambda: None)


def test_a_deadline_that_passes_while_queued():
    gate = threading.Event()
    with mx.Scheduler(workers=1) as s:
        first = s.submit(gated(gate), (mx.ones(1),))
        late = s.submit(lambda x: x, (mx.ones(1),), deadline=0.01)
        assert late.wait(30)
        assert late.status == mx.JobStatus.deadline_exceeded and "deadline" in str(late.error)
        gate.set()
        assert first.wait(30) and first.status == mx.JobStatus.succeeded


def test_a_python_exception_becomes_the_jobs_error_and_the_scheduler_goes_on():
    def bad(x):
        raise ValueError("bad input " + str(x.shape))

    with mx.Scheduler(workers=2) as s:
        j = s.submit(bad, (mx.ones((2, 3)),), name="bad")
        assert j.wait(30) and j.status == mx.JobStatus.failed
        assert isinstance(j.error, ValueError) and str(j.error) == "bad input (2, 3)"
        assert j.error.__traceback__ is not None
        with pytest.raises(mx.Error, match="'bad'.*ValueError: bad input") as info:
            j.outputs()
        assert info.value.__cause__ is j.error
        # A kiln error inside the function, and a result that is not a tree of arrays.
        k = s.submit(lambda: mx.ones((2,)) + mx.ones((3,)))
        assert k.wait(30) and k.status == mx.JobStatus.failed and isinstance(k.error, mx.Error)
        r = s.submit(lambda: object())
        assert r.wait(30) and r.status == mx.JobStatus.failed and "result" in str(r.error)
        ok = s.submit(lambda x: x + 1, (mx.ones(2),))
        assert ok.outputs().tolist() == [2.0, 2.0]


def test_captured_state_in_jobs_on_several_streams():
    state = {"n": mx.array(0.0)}

    @partial(mx.compile, inputs=state, outputs=state)
    def add(x):
        state["n"] = state["n"] + x
        return state["n"]

    streams = [mx.new_stream(mx.device(d)) for d in DEVICES]
    with mx.Scheduler(workers=2) as s:
        jobs = [s.submit(add, (mx.array(1.0),), stream=streams[i % len(streams)])
                for i in range(8)]
        s.wait_all()
    assert all(j.status == mx.JobStatus.succeeded for j in jobs)
    assert state["n"].item() == 8.0


def test_ctrl_c_in_wait_cancels_the_job_and_raises():
    gate = threading.Event()
    with mx.Scheduler(workers=1) as s:
        j = s.submit(gated(gate), (mx.ones(2),))
        timer = threading.Timer(0.2, _thread.interrupt_main)
        timer.start()
        start = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            j.wait()
        assert time.perf_counter() - start < 5
        gate.set()
        assert j.wait(30) and j.status in (mx.JobStatus.cancelled, mx.JobStatus.succeeded)
        assert s.submit(lambda x: x * 3, (mx.array(2.0),)).outputs().item() == 6.0


def test_misuse_raises_naming_the_problem():
    with pytest.raises(mx.Error, match="capacity"):
        mx.Scheduler(capacity=0)
    with pytest.raises(mx.Error, match="workers"):
        mx.Scheduler(workers=-1)
    with mx.Scheduler(workers=1, capacity=4) as s:
        assert s.workers == 1 and s.queued == 0
        with pytest.raises(TypeError, match="not callable"):
            s.submit(3, ())
        with pytest.raises(TypeError, match="tuple or list"):
            s.submit(lambda x: x, {"x": mx.ones(1)})
        with pytest.raises(ValueError, match="expected arrays"):
            s.submit(lambda x: x, (object(),))
        with pytest.raises(mx.Error, match="nosuch"):
            s.submit(lambda: None, (), stream="nosuch:0")
        with pytest.raises(mx.Error, match="deadline"):
            s.submit(lambda: None, (), deadline=float("nan"))
        j = s.submit(lambda: None)
        with pytest.raises(mx.Error, match="timeout"):
            j.wait(-1)
        assert j.wait(30) and j.outputs() is None


def test_waiting_for_itself_from_inside_a_job_raises_instead_of_hanging():
    gate, me = threading.Event(), []

    def wait_for_myself():
        gate.wait(30)
        return me[0].outputs()

    with mx.Scheduler(workers=2) as s:
        j = s.submit(wait_for_myself)
        me.append(j)
        gate.set()
        assert j.wait(30) and j.status == mx.JobStatus.failed
        assert isinstance(j.error, mx.Error) and "waits for itself" in str(j.error)
        for call in (s.wait_all, s.close):
            k = s.submit(call)
            assert k.wait(30) and k.status == mx.JobStatus.failed
            assert "inside one of its own jobs" in str(k.error)
        assert s.submit(lambda: mx.array(1.0)).outputs().item() == 1.0


def test_waiting_for_a_job_queued_behind_on_the_same_stream_raises():
    later, gate = [], threading.Event()
    lane = mx.new_stream(mx.cpu)

    def wait_for_later():
        gate.wait(30)
        return later[0].outputs()

    with mx.Scheduler(workers=2) as s:
        first = s.submit(wait_for_later, stream=lane, name="first")
        later.append(s.submit(lambda: mx.array(5.0), stream=lane, name="later"))
        gate.set()
        assert first.wait(30) and first.status == mx.JobStatus.failed
        assert isinstance(first.error, mx.Error)
        assert "cannot end before it" in str(first.error) and "'later'" in str(first.error)
        assert later[0].outputs().item() == 5.0


def test_a_job_waiting_for_another_does_not_hold_the_only_worker():
    inner, gate = [], threading.Event()

    def outer_fn():
        gate.wait(30)
        return inner[0].outputs() + 1

    with mx.Scheduler(workers=1) as s:
        outer = s.submit(outer_fn, stream=mx.new_stream(mx.cpu))
        inner.append(s.submit(lambda: mx.array(2.0), stream=mx.new_stream(mx.cpu)))
        gate.set()
        assert outer.wait(30) and outer.outputs().item() == 3.0


def test_a_scheduler_freed_by_its_own_job_finishes_without_deadlock():
    holder = [mx.Scheduler(workers=1)]
    gone = weakref.ref(holder[0])
    holder[0].submit(holder.clear)  # the last reference goes on the scheduler's own worker
    end = time.perf_counter() + 30
    while gone() is not None and time.perf_counter() < end:
        time.sleep(0.01)
    assert gone() is None
    assert (mx.ones(2) + 1).tolist() == [2.0, 2.0]


def test_a_full_queue_blocks_submit_until_room_and_ctrl_c_interrupts_it():
    gate = threading.Event()
    with mx.Scheduler(workers=1, capacity=1) as s:
        first = s.submit(gated(gate), (mx.ones(1),))
        while first.status == mx.JobStatus.queued:
            time.sleep(0.001)
        queued = s.submit(lambda: 1)  # fills the queue
        timer = threading.Timer(0.2, _thread.interrupt_main)
        timer.start()
        start = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            s.submit(lambda: 2)
        assert time.perf_counter() - start < 5 and s.queued == 1
        threading.Timer(0.1, gate.set).start()
        last = s.submit(lambda: 3)  # waits for room, which the workers make without the GIL
        assert last.outputs() == 3 and queued.outputs() == 1
        assert first.run_ms >= 100 and last.queued_ms >= 0 and first.queued_ms >= 0
        # From one of its own jobs, a full queue raises instead of waiting for itself.
        def submits_two():
            s.submit(lambda: None)  # fits: the queue is empty while this job runs
            s.submit(lambda: None)
        a = s.submit(submits_two)
        assert a.wait(30) and a.status == mx.JobStatus.failed
        assert "would wait for itself" in str(a.error)
