"""mlx.core names written in Python over Kiln's ops (einsum, random.permutation, the small
array functions, the file formats), each against NumPy."""
import numpy as np
import pytest

import kiln as mx


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("spec,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ik,kj->ji", [(2, 8), (8, 3)]),
    ("i,i", [(4,), (4,)]),
    ("i,j->ij", [(4,), (6,)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ijij->j", [(2, 3, 2, 3)]),
    ("iijj->ij", [(2, 2, 3, 3)]),
    ("ijk->jki", [(2, 3, 4)]),
    ("abcd,fgda->bfca", [(2, 8, 3, 5), (3, 7, 5, 2)]),
    ("ab,bc->c", [(5, 1), (8, 2)]),  # a size-1 axis broadcast against the other operand
    ("itjk,iujk->ijtu", [(2, 3, 4, 5), (2, 3, 4, 5)]),
    ("ijk,lmk,ijf->lf", [(3, 4, 5), (3, 4, 5), (3, 4, 5)]),
    ("ea,fb,abcd,gc,hd->efgh", [(2, 2), (3, 3), (2, 3, 4, 5), (4, 4), (5, 5)]),
    ("aab,fa,df,ecc->bde", [(2, 2, 3), (3, 2), (4, 3), (2, 4, 4)]),
    ("...ij,...jk->...ik", [(1, 3, 4), (2, 4, 5)]),
    ("ab...,b...->a...", [(2, 3, 4), (3, 4)]),
    ("...cd,c...->d...", [(2, 3, 4, 5), (4, 2, 3)]),
])
def test_einsum_matches_numpy(spec, shapes):
    ops = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    want = np.einsum(spec, *ops)
    got = mx.einsum(spec, *[mx.array(o) for o in ops])
    assert got.shape == want.shape
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)


def test_einsum_integers_are_exact_and_errors_are_value_errors():
    a = np.arange(16, dtype=np.int32).reshape(4, 4)
    assert np.array_equal(mx.einsum("ii->i", mx.array(a)), np.einsum("ii->i", a))
    assert mx.einsum("ij->", mx.array(a)).item() == a.sum()
    x = mx.ones((2, 3, 4))
    with pytest.raises(ValueError, match="Only one ellipsis"):
        mx.einsum("a...b...c,a...b...c->abc", x, x)
    with pytest.raises(ValueError, match="Number of operands"):
        mx.einsum("ij,jk", x)
    with pytest.raises(ValueError, match="Cannot broadcast"):
        mx.einsum("ij,jk", mx.ones((2, 3)), mx.ones((4, 2)))


def test_einsum_path_is_numpys_greedy_path_and_einsum_differentiates():
    dims = dict(zip("abcdefghijklmopqABC", [2, 3, 4, 5, 4, 3, 2, 6, 5, 4, 3, 2, 5, 7, 4, 3, 2, 3, 4]))
    for case in ["eb,cb,fb->cef", "dd,fb,be,cdb->cef", "bca,cdb,dbf,afc->", "dcc,fce,ea,dbf->ab"]:
        ops = [np.ones([dims[c] for c in s]) for s in case.split("->")[0].split(",")]
        assert np.einsum_path(case, *ops)[0][1:] == mx.einsum_path(case, *[mx.array(o) for o in ops])[0]
    path = mx.einsum_path("ij,jk,kl", mx.zeros((5, 8)), mx.zeros((8, 10)), mx.zeros((10, 7)))
    assert path[0] == [(1, 2), (0, 1)] and "Optimized FLOP count" in path[1]
    a, b = rand(3, 4), rand(4, 5, seed=1)
    g = mx.grad(lambda x: mx.sum(mx.einsum("ij,jk->ik", x, mx.array(b)) ** 2))(mx.array(a))
    np.testing.assert_allclose(np.array(g), 2 * (a @ b) @ b.T, rtol=1e-4, atol=1e-4)


def test_random_permutation_laplace_gumbel():
    mx.random.seed(3)
    p = mx.random.permutation(16384)
    assert sorted(p.tolist()) == list(range(16384)) and p.tolist() != list(range(16384))
    x = mx.arange(16).reshape(4, 4)
    for axis in (0, 1):
        shuffled = mx.random.permutation(x, axis=axis)
        assert np.array_equal(np.sort(np.array(shuffled), axis=axis), np.array(x))
    key = mx.random.key(7)
    assert mx.random.permutation(8, key=key).tolist() == mx.random.permutation(8, key=key).tolist()
    assert mx.random.permutation(mx.array([[1]])).shape == (1, 1)
    g = mx.random.gumbel((200, 200))
    assert g.dtype == mx.float32 and abs(mx.mean(g).item() - 0.5772) < 0.05
    lap = mx.random.laplace((100000,), loc=1.0, scale=2.0)
    assert abs(mx.mean(lap).item() - 1.0) < 0.05
    assert abs(mx.mean(mx.abs(lap - 1.0)).item() - 2.0) < 0.05  # E|X - loc| = scale
    for dt in (mx.float16, mx.bfloat16):
        h = mx.random.laplace((10000,), dtype=dt)
        assert h.dtype == dt and mx.all(mx.abs(h) < float("inf")).item()
    a = mx.random.laplace((3, 2), loc=1.0, scale=2.0, key=key)
    b = 2.0 * mx.random.laplace((3, 2), key=key) + 1.0
    assert mx.allclose(a, b).item()


def test_shape_functions_match_numpy():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    x = mx.array(a)
    for reps in (2, [2, 1], [2, 2], [3, 1, 1, 2]):
        assert np.array_equal(mx.tile(x, reps), np.tile(a, reps))
    for r, axis in ((2, None), (0, 0), (3, 1), (2, -1)):
        assert np.array_equal(mx.repeat(x, r, axis=axis), np.repeat(a, r, axis=axis))
    for shift, axis in ((1, None), ((2, 2, 2), None), (-1, 0), ((1, 2), (1, 2)), ((33, 33), (1, 1)),
                        (5, (0, 2))):
        assert np.array_equal(mx.roll(x, shift, axis), np.roll(a, shift, axis)), (shift, axis)
    for axis in (None, 0, -1, (0, 2)):
        assert np.array_equal(mx.flip(x, axis=axis), np.flip(a, axis=axis))
    with pytest.raises(ValueError):
        mx.flip(x, axis=3)
    for offset, a1, a2 in ((0, 0, 1), (1, 1, 2), (-1, 2, 0), (2, -1, 0), (7, 1, 2)):
        assert np.array_equal(mx.diagonal(x, offset, a1, a2), np.diagonal(a, offset, a1, a2))
        assert np.array_equal(mx.trace(x, offset, a1, a2), np.trace(a, offset, a1, a2))
    m = a[0]
    for k in (-2, -1, 0, 1, 3, 10):
        assert np.array_equal(mx.diag(mx.array(m), k), np.diag(m, k))
        assert np.array_equal(mx.diag(mx.array([2, 6, 1]), k=k), np.diag([2, 6, 1], k=k))
        assert np.array_equal(mx.tri(4, 5, k), np.tri(4, 5, k).astype(np.float32))
    assert mx.trace(x[0], dtype=mx.float16).dtype == mx.float16
    assert np.array_equal(mx.diff(x, axis=1), np.diff(a, axis=1))
    assert np.array_equal(mx.diff(x, n=2), np.diff(a, n=2))
    parts = mx.unstack(x, axis=1)
    assert len(parts) == 3 and np.array_equal(parts[2], a[:, 2])
    assert mx.atleast_1d(mx.array(1)).shape == (1,) and mx.atleast_3d(mx.ones(3)).shape == (1, 3, 1)
    assert [t.shape for t in mx.atleast_2d(mx.array(1), mx.ones(3))] == [(1, 1), (1, 3)]
    assert mx.broadcast_shapes((5, 1, 4), (1, 3, 4)) == (5, 3, 4)
    assert mx.broadcast_shapes((5, 0), (0, 5, 0)) == (0, 5, 0)
    with pytest.raises(ValueError):
        mx.broadcast_shapes((3, 4), (4, 3))
    for xs, ys in (([1, 2, 3], [4, 5]), ([1.5], [2.0, 3.0, 4.0])):
        for indexing in ("xy", "ij"):
            for sparse in (False, True):
                got = mx.meshgrid(mx.array(xs), mx.array(ys), sparse=sparse, indexing=indexing)
                want = np.meshgrid(np.array(xs), np.array(ys), sparse=sparse, indexing=indexing)
                assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_products_and_sequences_match_numpy():
    a, b = rand(3, 4, 5), rand(4, 3, 2, seed=1)
    np.testing.assert_allclose(mx.tensordot(mx.array(a), mx.array(b), axes=([1, 0], [0, 1])),
                               np.tensordot(a, b, axes=([1, 0], [0, 1])), rtol=1e-5, atol=1e-5)
    c = rand(4, 5, 6, seed=2)
    np.testing.assert_allclose(mx.tensordot(mx.array(a), mx.array(c)), np.tensordot(a, c),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mx.inner(mx.array(a), mx.array(a[0, 0])), np.inner(a, a[0, 0]),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mx.outer(mx.array(a[0, 0]), mx.array(b[0, 0])),
                               np.outer(a[0, 0], b[0, 0]), rtol=1e-6)
    i, j = np.array([[1, 2], [3, 4]]), np.array([[0, 5], [6, 7]])
    assert np.array_equal(mx.kron(mx.array(i), mx.array(j)), np.kron(i, j))
    assert np.array_equal(mx.kron(mx.array([1, 2]), mx.array(j)), np.kron([1, 2], j))
    with pytest.raises(ValueError):
        mx.kron(mx.array([]), mx.array([1, 2]))
    assert mx.vecdot(mx.array([[1, 2, 3], [4, 5, 6]]), mx.array([[7, 8, 9], [10, 11, 12]])).tolist() == [50, 167]
    np.testing.assert_allclose(mx.linspace(-2.7, -0.7, 7), np.linspace(-2.7, -0.7, 7), rtol=1e-6)
    assert mx.linspace(0, 10, 5, dtype=mx.int64).tolist() == [0, 2, 5, 7, 10]
    d = mx.linspace(0.3, 1.7, 9).tolist()
    assert d[0] == np.float32(0.3) and d[-1] == np.float32(1.7)
    np.testing.assert_allclose(mx.linspace(0, 1, 4, endpoint=False), np.linspace(0, 1, 4, endpoint=False))
    for name in ("hanning", "hamming", "blackman", "bartlett"):
        for m in (0, 1, 10):
            got = getattr(mx, name)(m)
            assert got.dtype == mx.float32
            np.testing.assert_allclose(got, getattr(np, name)(m), atol=1e-6)


def test_elementwise_functions_match_numpy():
    x = np.linspace(-0.95, 0.95, 41).astype(np.float32)
    big = np.linspace(-30, 30, 61).astype(np.float32)
    for name, vals in (("tan", x), ("sinh", x), ("cosh", x), ("arcsinh", big), ("arctanh", x),
                       ("arctan", big), ("arcsin", x), ("arccos", x), ("trunc", big * 0.37)):
        np.testing.assert_allclose(getattr(mx, name)(mx.array(vals)), getattr(np, name)(vals),
                                   rtol=2e-6, atol=2e-6, err_msg=name)
    np.testing.assert_allclose(mx.arccosh(mx.array(big[big >= 1])), np.arccosh(big[big >= 1]),
                               rtol=2e-6)
    assert mx.arctan(0.5).item() == pytest.approx(np.arctan(0.5), rel=1e-6)
    ys, xs = np.meshgrid(np.array([-2, -0.0, 0.0, 1.5], np.float32), np.array([-3, 0, 2], np.float32))
    np.testing.assert_allclose(mx.arctan2(mx.array(ys), mx.array(xs)), np.arctan2(ys, xs),
                               rtol=2e-6, atol=2e-6)
    g = mx.grad(lambda v: mx.sum(mx.arctan(v)))(mx.array(big))
    np.testing.assert_allclose(g, 1 / (1 + big.astype(np.float64) ** 2), rtol=1e-5, atol=1e-7)
    special = np.array([np.inf, 6.9, np.nan, -np.inf], np.float32)
    for kw in ({}, {"nan": 1.0, "posinf": 1000, "neginf": -1000}):
        np.testing.assert_allclose(mx.nan_to_num(mx.array(special), **kw), np.nan_to_num(special, **kw))
    bf = mx.nan_to_num(mx.array(special).astype(mx.bfloat16))
    assert bf.astype(mx.float32).tolist()[0] == mx.finfo(mx.bfloat16).max
    assert mx.isposinf(mx.array(special)).tolist() == [True, False, False, False]
    assert mx.isneginf(mx.array(special)).tolist() == [False, False, False, True]
    assert mx.isposinf(mx.array([1, 2])).tolist() == [False, False]
    assert mx.logical_xor(mx.array([True, True, False]), mx.array([True, False, False])).tolist() == [False, True, False]
    c = mx.array([[0, 1, 0], [2, 3, 0]])
    assert mx.count_nonzero(c, axis=0).tolist() == [1, 2, 0] and mx.count_nonzero(c).dtype == mx.int32
    assert mx.zeros_like(c, mx.float16).dtype == mx.float16 and mx.empty_like(c).dtype == mx.int32
    assert mx.iinfo(mx.int32).max == 2**31 - 1 and mx.iinfo(mx.uint8).max == 255
    assert mx.finfo(mx.float16).max == 65504 and mx.finfo(mx.float32).eps == np.finfo(np.float32).eps
    assert mx.pi == np.pi and mx.e == np.e and mx.inf == np.inf and mx.newaxis is None


def test_safetensors_npz_npy_files_match_numpy(tmp_path):
    import io
    import json
    import struct
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 3
    arrays = {"f32": mx.array(a), "t": mx.array(a).T, "i64": mx.arange(5).astype(mx.int64),
              "b": mx.array([True, False]), "f16": mx.array(a).astype(mx.float16),
              "bf16": mx.array(a).astype(mx.bfloat16), "empty": mx.zeros((0, 3))}
    path = str(tmp_path / "w.safetensors")
    mx.save_safetensors(path, arrays, {"format": "mlx"})
    # The format itself: a little-endian u64 header length, JSON, then C-order bytes.
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"] == {"format": "mlx"} and header["t"]["shape"] == [4, 3]
    lo, hi = header["t"]["data_offsets"]
    assert np.array_equal(np.frombuffer(raw[8 + n + lo:8 + n + hi], np.float32).reshape(4, 3), a.T)
    lo, hi = header["bf16"]["data_offsets"]
    bf = np.frombuffer(raw[8 + n + lo:8 + n + hi], np.uint16).astype(np.uint32) << 16
    np.testing.assert_allclose(bf.view(np.float32).reshape(3, 4), a, rtol=1e-2)
    loaded, meta = mx.load(path, return_metadata=True)
    assert meta == {"format": "mlx"} and set(loaded) == set(arrays)
    for k, v in arrays.items():
        assert loaded[k].dtype == v.dtype and loaded[k].shape == v.shape
        assert mx.array_equal(loaded[k], v).item(), k
    with pytest.raises(ValueError):
        mx.save_safetensors(path, {"a": mx.ones(2)}, {"testing": 0})
    with open(path, "wb") as f:  # open files too
        mx.save_safetensors(f, {"x": mx.ones((2, 2))})
    with open(path, "rb") as f:
        assert mx.load(f)["x"].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    # .npz: NumPy reads what Kiln writes and the other way round, compressed or not.
    for save, np_save in ((mx.savez, np.savez), (mx.savez_compressed, np.savez_compressed)):
        save(str(tmp_path / "k"), mx.array(a), x=mx.arange(3))
        z = np.load(str(tmp_path / "k.npz"))
        assert np.array_equal(z["arr_0"], a) and z["x"].tolist() == [0, 1, 2]
        np_save(str(tmp_path / "n.npz"), y=a.T)
        assert np.array_equal(mx.load(str(tmp_path / "n.npz"))["y"], a.T)
    buf = io.BytesIO()
    mx.save(buf, mx.array(a).T)
    buf.seek(0)
    assert np.array_equal(np.load(buf), a.T)
    buf.seek(0)
    assert np.array_equal(mx.load(buf), a.T)


def test_gguf_round_trip(tmp_path):
    path = str(tmp_path / "m.gguf")
    w = mx.arange(6).reshape(2, 3).astype(mx.float16)
    meta = {"name": "x", "tags": ["a", "bc"], "n": mx.array([1, 2, 3]), "f": mx.array(1.5)}
    mx.save_gguf(path, {"w": w, "t": mx.arange(4).reshape(2, 2).T}, meta)
    arrays, got = mx.load(path, return_metadata=True)
    assert mx.array_equal(arrays["w"], w).item() and arrays["w"].dtype == mx.float16
    assert arrays["t"].tolist() == [[0, 2], [1, 3]]
    assert got["name"] == "x" and got["tags"] == ["a", "bc"]
    assert got["n"].tolist() == [1, 2, 3] and got["f"].item() == 1.5
    with pytest.raises(ValueError):
        mx.save_gguf(path, {"w": w}, {"h": mx.array(1, mx.float16)})


def test_indexing_with_none_and_broadcast_index_arrays():
    a = np.arange(120).reshape(2, 3, 4, 5)
    x = mx.array(a)
    i, j = np.array([[0], [2], [1]]), np.array([[1, 3]])
    for index in ((slice(None), None), (None, Ellipsis, None, 1), (slice(None), i, j),
                  (Ellipsis, i, j + 1), (slice(0, 1), i, slice(1, 3), np.array([[1, 3, 0]])),
                  (slice(None), -i - 1, j)):
        got = x[tuple(mx.array(t) if isinstance(t, np.ndarray) else t for t in index)]
        assert got.shape == a[index].shape and np.array_equal(got, a[index]), index
    assert (x == "causal") is False and (x != "causal") is True


def test_all_any_of_empty_arrays():
    e = mx.zeros((0, 3))
    assert mx.all(e).item() is True and mx.any(e).item() is False
    assert mx.all(e, axis=0).tolist() == [True] * 3 and mx.any(e, axis=0).tolist() == [False] * 3
    assert mx.array_equal(e, mx.zeros((0, 3))).item()


def test_erfinv_median_put_along_axis_match_numpy():
    x = np.linspace(-0.999, 0.999, 101).astype(np.float32)
    y = np.array(mx.erfinv(mx.array(x)))
    from math import erf
    np.testing.assert_allclose([erf(v) for v in y.astype(np.float64)], x, rtol=2e-6, atol=2e-7)
    edges = mx.erfinv(mx.array([-5.0, -1.0, 1.0, 5.0])).tolist()
    assert np.isnan(edges[0]) and edges[1] == -np.inf and edges[2] == np.inf and np.isnan(edges[3])
    rng = np.random.default_rng(4)
    for shape, axis in (((7,), None), ((4, 6), 1), ((4, 5, 3), 0), ((4, 5, 3), (0, 2))):
        v = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(mx.median(mx.array(v), axis=axis), np.median(v, axis=axis),
                                   rtol=1e-6)
    nanny = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], np.float32)
    assert np.array_equal(mx.median(mx.array(nanny), axis=1), np.median(nanny, axis=1), equal_nan=True)
    assert mx.median(mx.array([3, 1, 2, 4])).item() == 2.5
    for ax in (None, 0, 1, 2):
        a = np.arange(16, dtype=np.int32).reshape(2, 2, 4)
        if ax is None:
            idx, vals = rng.permutation(16), rng.integers(0, 100, 16)
        else:
            shape = list(a.shape)
            shape[ax] = 2
            idx = np.expand_dims(rng.choice(a.shape[ax], 2, replace=False), list(range(1, 3 - ax)))
            idx, vals = np.broadcast_to(idx, shape), rng.integers(0, 100, shape)
        want = a.copy()
        np.put_along_axis(want, idx, vals, axis=ax)
        got = mx.put_along_axis(mx.array(a), mx.array(idx), mx.array(vals.astype(np.int32)), axis=ax)
        assert np.array_equal(got, want), ax
