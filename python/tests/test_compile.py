"""kiln.compile with MLX's semantics: the examples of MLX's compile docs, captured state,
non-array arguments in the cache key, streams, errors, threads, lifetime."""
import gc
import math
import threading
import weakref
from functools import partial

import numpy as np
import pytest

import kiln as mx


def test_gelu_compiles_once_and_matches_eager():
    def gelu(x):
        """the docstring"""
        return x * (1 + mx.erf(x / math.sqrt(2))) / 2

    cg = mx.compile(gelu)
    x = mx.random.uniform(shape=(32, 1000))
    np.testing.assert_allclose(np.array(cg(x)), np.array(gelu(x)), rtol=1e-5, atol=1e-6)
    cg(x + 1)
    assert cg.cache_size == 1
    cg(mx.zeros((3,)))
    assert cg.cache_size == 2  # a new shape traces again
    assert cg.__name__ == "gelu" and cg.__doc__ == "the docstring" and cg.__wrapped__ is gelu


def test_shapeless_abs_of_sum_serves_0d_then_1d():
    def fun(x, y):
        return mx.abs(x + y)

    cf = mx.compile(fun, shapeless=True)
    assert cf(mx.array(1.0), mx.array(-2.0)).item() == 1.0
    assert cf(mx.array([1.0, -1.0]), mx.array([-2.0, 2.0])).tolist() == [1.0, 1.0]
    assert cf.cache_size == 1


def test_shapeless_embedding_serves_token_batches_of_any_shape():
    # An embedding over [batch, seq] token ids whose batch and length change between calls:
    # one trace serves them all (take keeps the ids' shape in the graph).
    from kiln import nn

    emb = nn.Embedding(50, 8)
    cf = mx.compile(lambda ids: mx.sum(emb(ids) * 2.0, axis=-1), shapeless=True)
    rng = np.random.default_rng(7)
    weight = np.array(emb.weight)
    for shape in [(2, 3), (4, 7), (1, 1), (3, 16)]:
        ids = rng.integers(0, 50, size=shape)
        got = np.array(cf(mx.array(ids)))
        assert got.shape == shape
        np.testing.assert_allclose(got, (weight[ids] * 2.0).sum(-1), rtol=1e-5, atol=1e-6)
    assert cf.cache_size == 1


def test_captured_state_advances_between_calls():
    state = [mx.array(1.0)]

    @partial(mx.compile, inputs=state, outputs=state)
    def fun(x):
        state[0] = state[0] * x
        return state[0] + 1

    assert fun(mx.array(2.0)).item() == 3.0
    assert state[0].item() == 2.0
    assert fun(mx.array(3.0)).item() == 7.0
    assert state[0].item() == 6.0
    assert fun.cache_size == 1


def test_dict_state_as_a_model_and_optimizer_would_have_it():
    model = {"w": mx.ones((3,)), "b": {"bias": mx.zeros((3,))}}

    @partial(mx.compile, inputs=model, outputs=model)
    def step(x):
        model["w"] = model["w"] - 0.5 * x
        model["b"]["bias"] = model["b"]["bias"] + x
        return mx.sum(model["w"])

    for _ in range(3):
        step(mx.ones((3,)))
    assert model["w"].tolist() == [-0.5] * 3 and model["b"]["bias"].tolist() == [3.0] * 3


def test_closure_constants_and_non_array_arguments_key_the_cache():
    y = mx.array([1.0, 2.0])

    @mx.compile
    def f(x, scale, mode="add"):
        return x * scale + y if mode == "add" else x * scale - y

    x = mx.array([1.0, 1.0])
    assert f(x, 2).tolist() == [3.0, 4.0]
    assert f(x, 3).tolist() == [4.0, 5.0]  # a new int: a new trace
    assert f(x, 3, mode="sub").tolist() == [2.0, 1.0]
    assert f.cache_size == 3
    with pytest.raises(ValueError, match="constants"):
        f(x, {1, 2})  # neither an array, a container of them nor a constant


def test_pytrees_in_and_out():
    @mx.compile
    def f(d):
        return {"sum": d["a"] + d["b"][0], "pair": (d["a"], d["b"][1] * 2)}

    out = f({"a": mx.array(1.0), "b": [mx.array(2.0), mx.array(3.0)]})
    assert out["sum"].item() == 3.0 and out["pair"][1].item() == 6.0


def test_disable_compile_runs_python_every_call():
    calls = []

    @mx.compile
    def f(x):
        calls.append(1)
        return x + 1

    f(mx.array(1.0))
    f(mx.array(1.0))
    assert len(calls) == 1
    mx.disable_compile()
    try:
        f(mx.array(1.0))
        f(mx.array(1.0))
    finally:
        mx.enable_compile()
    assert len(calls) == 3


def test_a_compiled_function_follows_the_callers_stream_with_one_trace(device):
    @mx.compile
    def f(x):
        return mx.exp(x) * 2

    x = mx.array([0.0, 1.0])
    on_cpu = f(x)
    with mx.stream(mx.new_stream(device)):
        there = f(x)
    assert there.device == device
    assert f.cache_size == 1
    np.testing.assert_allclose(np.array(there), np.array(on_cpu), rtol=1e-6)


def test_a_python_exception_in_the_trace_propagates_and_does_not_poison_the_cache():
    fail = [True]

    @mx.compile
    def f(x):
        if fail[0]:
            raise RuntimeError("boom")
        return x + 1

    with pytest.raises(RuntimeError, match="boom"):
        f(mx.array(1.0))
    fail[0] = False
    assert f(mx.array(1.0)).item() == 2.0
    assert f.cache_size == 1


def test_compiled_functions_from_many_threads():
    @mx.compile
    def f(x):
        return mx.sum(x * x)

    errors, results = [], []

    def work(k):
        try:
            for i in range(20):
                results.append((k, i, f(mx.full((64,), float(k))).item()))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(v == 64.0 * k * k for k, _, v in results) and len(results) == 80


def test_a_compiled_function_is_collected_with_its_cache_even_in_a_cycle():
    def make():
        def f(x):
            return f.scale * x  # f -> compiled -> f: a cycle through the C++ object

        cf = mx.compile(f)
        f.scale = 2.0
        f.compiled = cf
        cf(mx.array(1.0))
        return weakref.ref(cf)

    ref = make()
    gc.collect()
    assert ref() is None


def test_nested_captured_containers_keep_their_identity():
    counter = {"v": mx.array(0.0)}
    state = [counter, mx.random.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step():
        counter["v"] = counter["v"] + 1.0
        return mx.random.uniform(shape=(2,))

    draws = [step().tolist() for _ in range(3)]
    assert counter["v"].item() == 3.0 and state[0] is counter and state[1] is mx.random.state
    assert draws[0] != draws[1]
    mx.eval(mx.random.uniform(shape=(2,)))  # the global state holds a real key again
