"""GPU tests: CuPy arrays through lpmpi on a real GPU.  Skipped, with the reason, where lpmpi
was built without CUDA, CuPy is missing or no GPU is visible."""
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU, CuPy and an lpmpi built with nvcc")


def gpu_skip_reason():
    """None when the GPU tests can run here, else why not."""
    try:
        from lpmpi import _core
    except Exception as e:  # noqa: BLE001
        return f"lpmpi does not import: {e}"
    if not _core.CUDA_BUILD:
        return "lpmpi was built without CUDA (no nvcc at build time)"
    try:
        import cupy
    except Exception as e:  # noqa: BLE001
        return f"CuPy is not importable ({type(e).__name__}: {e})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        return f"no GPU visible ({type(e).__name__}: {e})"
    if n < 1:
        return "no GPU visible (CUDA reports 0 devices)"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    checked = False
    for item in items:
        if item.get_closest_marker("gpu") is None:
            continue
        if not checked:
            reason, checked = gpu_skip_reason(), True
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
