"""grad, value_and_grad, vjp, jvp and vmap over pytrees, composed with compile."""
import numpy as np

import kiln as mx


def loss(params, x):
    return mx.sum((x @ params["w"] + params["b"]) ** 2)


def test_grad_of_a_pytree_matches_the_formula():
    rng = np.random.default_rng(0)
    w, b, x = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal((4, 3))
    params = {"w": mx.array(w.astype(np.float32)), "b": mx.array(b.astype(np.float32))}
    g = mx.grad(loss)(params, mx.array(x.astype(np.float32)))
    r = 2 * (x @ w + b)
    np.testing.assert_allclose(np.array(g["w"]), x.T @ r, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(g["b"]), r.sum(0), rtol=1e-4, atol=1e-4)


def test_value_and_grad_with_aux_and_argnums():
    def f(x, y):
        return mx.sum(x * y), x + y

    (v, aux), (gx, gy) = mx.value_and_grad(f, argnums=(0, 1))(mx.array([1.0, 2.0]),
                                                              mx.array([3.0, 4.0]))
    assert v.item() == 11.0 and aux.tolist() == [4.0, 6.0]
    assert gx.tolist() == [3.0, 4.0] and gy.tolist() == [1.0, 2.0]


def test_vjp_and_jvp():
    outs, vjps = mx.vjp(lambda x: x * x, [mx.array([1.0, 3.0])], [mx.array([1.0, 1.0])])
    assert outs[0].tolist() == [1.0, 9.0] and vjps[0].tolist() == [2.0, 6.0]
    outs, jvps = mx.jvp(lambda x: mx.sin(x), [mx.array([0.0])], [mx.array([2.0])])
    assert jvps[0].tolist() == [2.0]


def test_vmap_axes():
    x = mx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert mx.vmap(lambda v: mx.sum(v))(x).tolist() == [3.0, 12.0]
    assert mx.vmap(lambda v: mx.sum(v), in_axes=1)(x).tolist() == [3.0, 5.0, 7.0]
    y = mx.vmap(lambda a, b: a * b, in_axes=(0, None))(x, mx.array([1.0, 2.0, 3.0]))
    assert y.tolist() == [[0.0, 2.0, 6.0], [3.0, 8.0, 15.0]]


def test_compile_and_grad_compose_in_either_order():
    f = lambda x: mx.sum(mx.exp(x) * x)
    x = mx.array([0.5, -1.0])
    want = np.array(mx.grad(f)(x))
    np.testing.assert_allclose(np.array(mx.compile(mx.grad(f))(x)), want, rtol=1e-6)
    np.testing.assert_allclose(np.array(mx.grad(mx.compile(f))(x)), want, rtol=1e-6)
