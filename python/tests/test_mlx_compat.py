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
