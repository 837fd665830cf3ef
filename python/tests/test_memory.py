"""Memory counters with mlx.core's names (the cpu backend's buffer pool)."""
import kiln as mx


def test_active_and_peak_follow_an_array():
    base = mx.get_active_memory()
    mx.reset_peak_memory()
    a = mx.ones((1024, 1024))
    mx.eval(a)
    held = mx.get_active_memory()
    assert held >= base + a.nbytes
    assert mx.get_peak_memory() >= held
    del a
    assert mx.get_active_memory() <= held - 4 * 1024 * 1024
    assert mx.get_peak_memory() >= held  # the peak stays until reset
    mx.reset_peak_memory()
    assert mx.get_peak_memory() == mx.get_active_memory()
    assert mx.get_cache_memory() >= 0
