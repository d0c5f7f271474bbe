"""pytest setup: `import drx` needs the built package (PYTHONPATH=build/python, as ctest sets)."""
import os
import sys

import pytest

_here = os.path.dirname(os.path.abspath(__file__))
_build = os.path.join(_here, "..", "..", "build", "python")
if os.path.isdir(_build) and _build not in sys.path:
    sys.path.append(_build)


def pytest_configure(config):
    try:
        import drx  # noqa: F401
    except ImportError as e:
        # The build's own run (ctest sets DRX_PYTHON_BUILT) must not skip a broken extension.
        if os.environ.get("DRX_PYTHON_BUILT"):
            raise pytest.UsageError(f"drx's extension was built but does not import: {e}")
        # Only the pure-Python tree_util tests can run without the extension.
        print(f"NOTICE: drx's extension is not built ({e}); its tests are skipped")


@pytest.fixture(autouse=True, scope="session")
def _blas_on_one_thread():
    try:
        import drx
    except ImportError:
        yield
        return
    drx.set_blas_thread_control(True)
    yield
    drx.set_blas_thread_control(False)
