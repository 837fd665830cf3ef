import pytest

import kiln


def available(name):
    return any(i["device"].type == name and i["available"] for i in kiln.devices())


DEVICES = [d for d in ("cpu", "opencl", "vulkan", "reference") if available(d)]


@pytest.fixture(params=DEVICES)
def device(request):
    return kiln.device(request.param)
