"""kiln.array: construction, NumPy round trips, properties, operators, indexing."""
import numpy as np
import pytest

import kiln as mx

ml_dtypes = pytest.importorskip("ml_dtypes")

NP_DTYPES = {
    mx.bool_: np.bool_, mx.int8: np.int8, mx.int32: np.int32, mx.int64: np.int64,
    mx.uint8: np.uint8, mx.uint32: np.uint32, mx.uint64: np.uint64, mx.float16: np.float16,
    mx.bfloat16: ml_dtypes.bfloat16, mx.float32: np.float32, mx.float64: np.float64,
}


def test_scalars_and_lists_get_mlx_default_dtypes():
    assert mx.array(True).dtype == mx.bool_
    assert mx.array(3).dtype == mx.int32
    assert mx.array(2**40).dtype == mx.int64
    assert mx.array(1.5).dtype == mx.float32
    assert mx.array([[1, 2], [3, 4]]).dtype == mx.int32
    assert mx.array([1, 2.5]).dtype == mx.float32
    assert mx.array([1, 2], mx.float16).dtype == mx.float16
    assert mx.array([[1, 2], [3, 4]]).shape == (2, 2)
    with pytest.raises(ValueError, match="ragged"):
        mx.array([[1, 2], [3]])


@pytest.mark.parametrize("dtype", list(NP_DTYPES), ids=lambda d: d.name)
def test_numpy_round_trip_every_dtype(dtype):
    rng = np.random.default_rng(0)
    src = (rng.standard_normal((3, 5)) * 50).astype(NP_DTYPES[dtype])
    a = mx.array(src)
    assert a.dtype == dtype and a.shape == (3, 5)
    back = np.array(a)
    assert back.dtype == src.dtype
    np.testing.assert_array_equal(back.astype(np.float64), src.astype(np.float64))
    # Non-contiguous input is copied in the right order.
    np.testing.assert_array_equal(np.array(mx.array(src.T)).astype(np.float64),
                                  src.T.astype(np.float64))


def test_asarray_is_a_read_only_view_without_copy():
    a = mx.array(np.arange(1 << 16, dtype=np.float32)) + 1
    v1, v2 = np.asarray(a), np.asarray(a)
    assert v1.__array_interface__["data"][0] == v2.__array_interface__["data"][0]
    assert not v1.flags.writeable
    del a  # the view keeps the buffer alive
    assert v1[10] == 11
    w = np.array(mx.array([1, 2]))
    w[0] = 5  # np.array copies: writable
    assert w[0] == 5


def test_buffer_protocol_is_a_read_only_view():
    a = mx.array([[1, 2], [3, 4]], dtype=mx.int64) * 2
    m = memoryview(a)
    assert m.readonly and m.format == "q" and m.shape == (2, 2) and m.tolist() == [[2, 4], [6, 8]]
    np.testing.assert_array_equal(np.frombuffer(a, dtype=np.int64), [2, 4, 6, 8])
    with pytest.raises(BufferError):
        memoryview(mx.array([1.0], mx.bfloat16))
    assert np.asarray(mx.array([1.5], mx.bfloat16)).dtype == ml_dtypes.bfloat16  # via __array__


def test_dlpack_round_trip():
    a = mx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert a.__dlpack_device__() == (1, 0)
    b = np.from_dlpack(a)
    np.testing.assert_array_equal(b, np.arange(6).reshape(2, 3))
    c = mx.from_dlpack(np.arange(4, dtype=np.int64))
    assert c.dtype == mx.int64 and c.tolist() == [0, 1, 2, 3]


def test_properties_item_tolist_repr():
    a = mx.array([[1, 2, 3], [4, 5, 6]], dtype=mx.int64)
    assert (a.ndim, a.size, a.nbytes, a.itemsize, len(a)) == (2, 6, 48, 8, 2)
    assert a.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert mx.array(2.5).item() == 2.5 and isinstance(mx.array(3).item(), int)
    assert repr(mx.array([1, 2])) == "array([1, 2], dtype=int32)"
    assert repr(mx.array(True)) == "array(true, dtype=bool)"
    assert [r.tolist() for r in a] == [[1, 2, 3], [4, 5, 6]]
    with pytest.raises(ValueError, match="exactly one"):
        a.item()
    with pytest.raises(TypeError):
        len(mx.array(1))


def test_operators_match_numpy():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 5)).astype(np.float32), rng.random((4, 5)).astype(np.float32) + 1
    a, b = mx.array(x), mx.array(y)
    for got, want in [(a + b, x + y), (a - b, x - y), (a * b, x * y), (a / b, x / y),
                      (a ** 2, x ** 2), (2 - a, 2 - x), (-a, -x), (abs(a), np.abs(x)),
                      (a < b, x < y), (a >= 0.5, x >= 0.5), (a == a, x == x), (a != b, x != y),
                      (a @ b.T, x @ y.T)]:
        np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)
    c = a
    c += 1
    assert c is not a or True
    np.testing.assert_allclose(np.array(c), x + 1, rtol=1e-6)
    np.testing.assert_allclose(np.array(a), x)  # a itself unchanged


def test_python_scalars_are_weak():
    h = mx.array([1, 2], mx.float16)
    assert (h * 2.0).dtype == mx.float16
    assert (2 + h).dtype == mx.float16
    assert (mx.array([1, 2], mx.int8) + 3).dtype == mx.int8
    with pytest.raises(ValueError, match="does not fit"):
        mx.array([1], mx.uint8) + 300


@pytest.mark.parametrize("index", [
    1, -1, slice(1, 3), slice(None, None, 2), slice(None, None, -1), slice(3, 0, -2),
    (Ellipsis, 1), (None, 1), (1, None, slice(None)), (slice(None), [0, 2]), ([1, 0],),
    ([0, 2], [1, 3]), (slice(None), [3, 0], 1), (np.array([[0], [2]]), np.array([1, 3])),
])
def test_indexing_matches_numpy(index):
    x = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    got = mx.array(x)[index]
    np.testing.assert_array_equal(np.array(got), x[index])


def test_boolean_mask_and_errors():
    x = np.arange(10, dtype=np.int32)
    a = mx.array(x)
    np.testing.assert_array_equal(np.array(a[a > 5]), x[x > 5])
    with pytest.raises(IndexError, match="too many indices"):
        a[1, 2]
    with pytest.raises(IndexError, match="out of bounds"):
        a[10]


def test_setitem_and_at():
    a = mx.zeros((3, 4))
    a[1] = 5
    a[:, 2:4] = mx.array([7.0, 8.0])
    want = np.zeros((3, 4), np.float32)
    want[1] = 5
    want[:, 2:4] = [7, 8]
    np.testing.assert_array_equal(np.array(a), want)
    b = mx.zeros((4,))
    c = b.at[mx.array([0, 0, 2])].add(1.0)  # repeated indices accumulate
    assert c.tolist() == [2.0, 0.0, 1.0, 0.0] and b.tolist() == [0.0] * 4
    assert b.at[1:3].subtract(2.0).tolist() == [0.0, -2.0, -2.0, 0.0]
    assert mx.ones((3,)).at[1].multiply(4.0).tolist() == [1.0, 4.0, 1.0]


def test_errors_are_value_errors_and_leave_arrays_usable():
    a = mx.array([1.0, 2.0])
    with pytest.raises(ValueError, match="reshape"):
        mx.reshape(a, (3,))
    with pytest.raises(mx.Error):
        mx.reshape(a, (3,))
    with pytest.raises(TypeError):
        mx.array(object())
    assert (a * 2).tolist() == [2.0, 4.0]


def test_integer_and_bitwise_operators_match_numpy():
    rng = np.random.default_rng(3)
    x = rng.integers(-50, 50, (6,)).astype(np.int32)
    y = rng.integers(1, 9, (6,)).astype(np.int32)
    a, b = mx.array(x), mx.array(y)
    for got, want in [(a // b, x // y), (a % b, x % y), (a & b, x & y), (a | b, x | y),
                      (a ^ b, x ^ y), (~a, ~x), (b << 2, y << 2), (a >> 1, x >> 1),
                      (7 // b, 7 // y), (mx.array([7.5, -7.5]) // 2, np.array([3.0, -4.0]))]:
        np.testing.assert_array_equal(np.array(got), want)
    q, r = divmod(a, b)
    np.testing.assert_array_equal(np.array(q), x // y)
    np.testing.assert_array_equal(np.array(r), x % y)
    with pytest.raises(ValueError):
        mx.array([1.5]) & mx.array([1.0])


def test_native_sort_partition_and_scatter_match_numpy():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 1000)).astype(np.float32)
    a = mx.array(x)
    np.testing.assert_array_equal(np.array(mx.sort(a)), np.sort(x))
    np.testing.assert_array_equal(np.array(mx.argsort(a, axis=0)), np.argsort(x, 0, kind="stable"))
    p = np.array(mx.partition(a, 10))
    assert (p[:, :10] <= p[:, 10:11]).all() and (p[:, 11:] >= p[:, 10:11]).all()
    ap = np.array(mx.argpartition(a, 10))
    np.testing.assert_array_equal(np.take_along_axis(x, ap, 1)[:, 10], p[:, 10])
    idx = mx.array([[0, 0, 2]])
    s = mx.scatter_add_along_axis(mx.zeros((1, 4)), idx, mx.ones((1, 3)), 1)
    assert s.tolist() == [[2.0, 0.0, 1.0, 0.0]]
