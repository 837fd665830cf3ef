"""Devices, streams and placement from Python."""
import threading

import pytest

import kiln as mx


def test_devices_and_defaults():
    names = [i["device"].type for i in mx.devices()]
    assert "cpu" in names and "reference" in names
    assert mx.default_device() == mx.cpu
    assert mx.default_stream(mx.cpu) == mx.default_stream("cpu")
    with pytest.raises(ValueError, match="valid|known|available"):
        mx.device("nosuch")


def test_gpu_is_a_clear_error_without_one():
    gpus = [i for i in mx.devices() if mx._is_gpu(i) and i["device"].type in ("opencl", "vulkan")
            and i["available"]]
    if gpus:
        assert mx.gpu == gpus[0]["device"] and mx.is_available(mx.gpu)
    else:
        # As MLX's mx.gpu without a GPU: it exists, is_available says no, and using it raises.
        assert not mx.is_available(mx.gpu) and mx.gpu.type == "gpu" and mx.gpu == mx.gpu
        with pytest.raises(mx.Error, match="no backend named 'gpu'"):
            mx.set_default_device(mx.gpu)
        with pytest.raises(mx.Error, match="no backend named 'gpu'"):
            mx.zeros(3, stream=mx.gpu)


def test_is_available_and_the_backends_kiln_lacks():
    assert mx.is_available(mx.cpu) and mx.is_available("cpu") and mx.is_available("reference")
    assert not mx.is_available("cpu:7") and not mx.is_available("nosuch")
    for d in mx.devices():
        assert mx.is_available(d["device"]) == d["available"]
    assert mx.metal.is_available() is False and mx.cuda.is_available() is False
    pocl = {"device": mx.cpu, "available": True, "reason": "",
            "description": "pthread-skylake (Portable Computing Language, AuthenticAMD)"}
    assert not mx._is_gpu(pocl)


def test_stream_context_and_stream_argument(device):
    s = mx.new_stream(device)
    with mx.stream(s):
        a = mx.ones((3,)) * 2
    assert a.stream == s
    b = mx.add(mx.ones((3,)), 1, stream=s)
    assert b.stream == s and b.tolist() == [2.0] * 3
    mx.synchronize(s)


def test_default_streams_are_per_thread():
    s = mx.new_stream(mx.cpu)
    mx.set_default_stream(s)
    try:
        assert mx.default_stream(mx.cpu) == s and (mx.ones(()) + 1).stream == s
        seen = []
        t = threading.Thread(target=lambda: seen.append(mx.default_stream(mx.cpu)))
        t.start()
        t.join()
        assert seen[0].index == 0
    finally:
        mx.clear_streams()
    assert mx.default_stream(mx.cpu).index == 0


def test_compute_on_as_decorator_and_context_survives_compile(device):
    @mx.compute_on(device)
    def f(x):
        return x * 3

    assert f(mx.ones((2,))).device == device
    cf = mx.compile(f)
    assert cf(mx.ones((2,))).device == device
    with mx.stream(mx.new_stream(mx.cpu)):
        assert cf(mx.ones((2,))).device == device  # the pin holds under a caller's stream
    with mx.compute_on(device):
        assert (mx.ones((2,)) + 1).device == device


def test_compute_on_around_a_compiled_function_holds_on_every_call(device):
    cf = mx.compile(lambda x: mx.exp(x) + 1)
    pinned = mx.compute_on(device)(cf)
    assert pinned(mx.ones((3,))).device == device
    assert cf(mx.ones((3,))).device == mx.default_device()  # the same trace, unpinned caller
    assert pinned(mx.ones((3,))).device == device
    assert cf.cache_size == 1
