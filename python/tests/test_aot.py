"""Ahead of time from Python (JAX's stages): f.lower(*args) -> Lowered (as_text, cost_analysis,
compile) -> Executable (call, memory_analysis, save) and Executable.load with remapping. The
placements of a direct call survive every path in both wrapper orders, as tests/test_aot.cpp
checks in C++; misuse raises kiln.Error naming what was wrong."""
from functools import partial

import numpy as np
import pytest

import kiln as mx
from conftest import DEVICES


def x_input():
    x = mx.random.normal((4, 8), key=mx.random.key(3))
    mx.eval(x)
    return x


def run_profiled(call):
    """The result as NumPy and the device of every non-copy task, as a sorted list."""
    with mx.profile() as p:
        out = call()
        mx.eval(out)
    if isinstance(out, list):
        out = out[0]
    ran = sorted((e["name"], str(e["device"])) for e in p.events if not e["name"].startswith("copy"))
    return np.array(out), ran


def pinned_part(pin):
    def f(x):
        with mx.compute_on(pin):
            h = mx.exp(x) * 2.0
        return mx.sum(h, axis=-1, keepdims=True) + x
    return f


def test_lower_text_costs_compile_memory_and_call():
    f = mx.compile(pinned_part(mx.device("reference")))
    x = x_input()
    lowered = f.lower(x)
    assert f.cache_size == 1  # lowering traced; a direct call reuses the trace
    text = lowered.as_text()
    assert text.startswith("kiln lowered 1") and "float32(4, 8)" in text
    assert "@ reference:0 (placement)" in text
    cost = lowered.cost_analysis()
    assert set(cost.devices) == {"caller", "reference:0"}
    assert cost.total.flops == sum(d.flops for d in cost.devices.values()) > 0
    assert cost.devices["reference:0"].kernels >= 1 and "flops" in str(cost)
    exe = lowered.compile()
    mem = exe.memory_analysis()
    assert mem.peak_bytes >= 4 * 8 * 4 and "peak" in str(mem)
    assert all(d.output_bytes >= 0 for d in mem.devices.values())
    assert exe.as_text() == text
    np.testing.assert_array_equal(np.array(exe(x)), np.array(f(x)))
    assert f.cache_size == 1


def test_trees_keywords_and_constants_are_kept():
    @mx.compile
    def f(inputs, scale=2.0, *, mode="add"):
        a, b = inputs["a"], inputs["b"]
        out = a * scale + b if mode == "add" else a * b
        return {"out": out, "pair": (a, None)}

    a, b = mx.ones((3,)), mx.arange(3, dtype=mx.float32)
    exe = f.lower({"a": a, "b": b}, 3.0, mode="add").compile()
    r = exe({"a": a, "b": b}, 3.0, mode="add")
    assert r["out"].tolist() == [3.0, 4.0, 5.0] and r["pair"][1] is None
    with pytest.raises(mx.Error, match="not those it was lowered for"):
        exe({"a": a, "b": b}, 4.0, mode="add")  # a different constant was traced in
    with pytest.raises(mx.Error, match="not those it was lowered for"):
        exe([a, b], 3.0, mode="add")
    with pytest.raises(mx.Error):  # another shape: the C++ executable names it
        exe({"a": mx.ones((4,)), "b": mx.ones((4,))}, 3.0, mode="add")


@pytest.mark.parametrize("pin", DEVICES)
def test_both_wrapper_orders_keep_placements_direct_aot_and_loaded(pin, tmp_path):
    x = x_input()
    d = mx.device(pin)

    def g(x):
        return mx.tanh(x) + 1.0

    for caller in DEVICES:
        with mx.stream(mx.new_stream(mx.device(caller))):
            # compile(compute_on(d, g)): the placement is recorded on every traced op.
            inner = mx.compile(mx.compute_on(d)(g))
            a1 = run_profiled(lambda: inner(x))
            e1 = inner.lower(x).compile()
            a2 = run_profiled(lambda: e1(x))
            # compute_on(d, compile(g)) and compute_on(d, executable): the caller's lanes follow d.
            plain = mx.compile(g)
            b1 = run_profiled(lambda: mx.compute_on(d)(plain)(x))
            e2 = plain.lower(x).compile()
            b2 = run_profiled(lambda: mx.compute_on(d)(e2)(x))
            # ... and both saved and loaded back.
            e1.save(tmp_path / "e1.kiln")
            e2.save(tmp_path / "e2.kiln")
            l1 = mx.Executable.load(tmp_path / "e1.kiln")
            l2 = mx.Executable.load(tmp_path / "e2.kiln")
            a3 = run_profiled(lambda: l1(x))
            b3 = run_profiled(lambda: mx.compute_on(d)(l2)(x))
            for got in (a2, b1, b2, a3, b3):
                np.testing.assert_array_equal(got[0], a1[0])
                assert got[1] == a1[1], (pin, caller)
            assert a1[1] and all(dev == str(d) for _, dev in a1[1])


@pytest.mark.parametrize("pin", DEVICES)
def test_a_pinned_part_keeps_its_device_from_every_caller(pin):
    x = x_input()
    for caller in DEVICES:
        f = mx.compile(pinned_part(mx.device(pin)))
        with mx.stream(mx.new_stream(mx.device(caller))):
            direct = run_profiled(lambda: f(x))
            exe = f.lower(x).compile()
            aot = run_profiled(lambda: exe(x))
        np.testing.assert_array_equal(direct[0], aot[0])
        assert direct[1] == aot[1]
        assert any(dev == str(mx.device(pin)) for _, dev in aot[1])
        if pin != caller:
            assert any(dev == str(mx.device(caller)) for _, dev in aot[1])


@pytest.mark.parametrize("pin", DEVICES)
def test_nested_compiled_functions_and_shapeless_keep_placements(pin):
    x = x_input()
    inner = mx.compile(pinned_part(mx.device(pin)))
    outer = mx.compile(lambda t: inner(t * 3.0) - 1.0)
    direct = run_profiled(lambda: outer(x))
    aot = run_profiled(lambda: outer.lower(x).compile()(x))
    np.testing.assert_array_equal(direct[0], aot[0])
    assert direct[1] == aot[1] and any(dev == str(mx.device(pin)) for _, dev in aot[1])

    shapeless = mx.compile(pinned_part(mx.device(pin)), shapeless=True)
    exe = shapeless.lower(x).compile()
    y = mx.random.normal((3, 5), key=mx.random.key(4))  # another shape, same rank
    mx.eval(y)
    d2, a2 = run_profiled(lambda: shapeless(y)), run_profiled(lambda: exe(y))
    np.testing.assert_array_equal(d2[0], a2[0])
    assert d2[1] == a2[1] and any(dev == str(mx.device(pin)) for _, dev in a2[1])
    assert shapeless.cache_size == 1
    with pytest.raises(mx.Error):  # another rank
        exe(mx.ones((2, 3, 4)))


def test_save_load_in_this_process_with_remap(tmp_path):
    x = x_input()
    exe = mx.compile(pinned_part(mx.device("reference"))).lower(x).compile()
    path = tmp_path / "f.kiln"
    exe.save(str(path))
    assert path.read_text().startswith("kiln artifact 1")
    loaded = mx.Executable.load(path)
    assert loaded.as_text() == exe.as_text()
    out = loaded(x)
    assert isinstance(out, list) and len(out) == 1  # a loaded executable returns a list
    np.testing.assert_array_equal(np.array(out[0]), np.array(exe(x)))
    target = "cpu:0" if "cpu" in DEVICES else "reference:0"
    for remap in ({"reference:0": target}, {mx.device("reference"): mx.device(target)}):
        moved = mx.Executable.load(path, remap=remap)
        got = run_profiled(lambda: moved(x))
        assert any(dev == target for _, dev in got[1])
        np.testing.assert_allclose(got[0], np.array(exe(x)), rtol=1e-5, atol=1e-6)


def test_bad_remaps_and_files_raise_naming_the_problem(tmp_path):
    x = x_input()
    exe = mx.compile(pinned_part(mx.device("reference"))).lower(x).compile()
    path = tmp_path / "f.kiln"
    exe.save(path)
    with pytest.raises(mx.Error, match=r"cannot remap opencl:7: .*places work on reference:0"):
        mx.Executable.load(path, remap={"opencl:7": "cpu:0"})
    with pytest.raises(mx.Error, match="cannot remap reference:0 to nosuch:0"):
        mx.Executable.load(path, remap={"reference:0": "nosuch:0"})
    with pytest.raises(TypeError, match="device names"):
        mx.Executable.load(path, remap={"reference:0": 3})
    with pytest.raises(TypeError, match="give a dict"):
        mx.Executable.load(path, remap=[("reference:0", "cpu:0")])
    with pytest.raises(mx.Error, match="keyword"):
        mx.Executable.load(path)(x=x)
    with pytest.raises(ValueError, match="expected an array"):
        mx.Executable.load(path)("not an array")
    path.write_text(path.read_text().replace("float32", "float64", 1))
    with pytest.raises(mx.Error, match="checksum"):
        mx.Executable.load(path)
    with pytest.raises(mx.Error):
        mx.Executable.load(tmp_path / "missing.kiln")


def test_captured_state_runs_through_the_executable_and_cannot_be_saved(tmp_path):
    state = [mx.array(1.0)]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x):
        state[0] = state[0] * x
        return state[0] + 1

    exe = step.lower(mx.array(2.0)).compile()
    assert state[0].item() == 1.0  # lowering runs nothing
    assert exe(mx.array(2.0)).item() == 3.0 and state[0].item() == 2.0
    assert step(mx.array(3.0)).item() == 7.0 and state[0].item() == 6.0
    assert exe(mx.array(0.5)).item() == 4.0 and state[0].item() == 3.0
    with pytest.raises(mx.Error, match="state"):
        exe.save(tmp_path / "s.kiln")


def test_a_python_exception_while_lowering_propagates_and_leaves_nothing():
    def bad(x):
        raise KeyError("inside the trace")

    f = mx.compile(bad)
    with pytest.raises(KeyError, match="inside the trace"):
        f.lower(mx.ones((2,)))
    assert f.cache_size == 0
