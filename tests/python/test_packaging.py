"""The package as installed: its typing marker and the extension's stubs."""
import os
import shutil

import pytest

drx = pytest.importorskip("drx")


def test_the_package_is_marked_typed():
    assert os.path.exists(os.path.join(os.path.dirname(drx.__file__), "py.typed"))


def test_the_extension_has_type_stubs_naming_its_classes_and_functions():
    if shutil.which("stubgen") is None:
        pytest.skip("NOTICE: stubgen (Debian's mypy) is not installed: no stubs to check")
    stub = os.path.join(os.path.dirname(drx._drx.__file__), "_drx.pyi")
    assert os.path.exists(stub), stub
    text = open(stub).read()
    for name in ("class Value", "class Array", "class JitCache", "def asarray", "def grad",
                 "def map_fn", "def softmax"):
        assert name in text, name


def test_docstrings_come_from_the_public_op_table():
    table = {name: (sig, doc) for name, sig, doc in drx._drx.public_ops()}
    assert "drx::tanh" in table and "drx::nn::layer_norm" in table
    for name in ("tanh", "exp", "add", "sum", "maximum"):
        sig, doc = table["drx::" + name]
        assert doc in getattr(drx._drx, name).__doc__, name


def test_mypy_reads_the_stubs(tmp_path):
    import subprocess
    import sys

    if shutil.which("mypy") is None:
        pytest.skip("NOTICE: mypy is not installed")
    good = tmp_path / "good.py"
    good.write_text("import numpy as np\nfrom drx import _drx\n"
                    "a: _drx.Array = _drx.asarray(np.ones(3))\nn: int = a.ndim\n")
    bad = tmp_path / "bad.py"
    bad.write_text("from drx import _drx\nn: str = _drx.asarray(3).ndim\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = lambda f: subprocess.run(["mypy", "--no-incremental", "--cache-dir", os.devnull, str(f)],
                                   capture_output=True, text=True, env=env)
    ok = run(good)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    wrong = run(bad)
    assert wrong.returncode != 0 and "Incompatible types" in wrong.stdout, wrong.stdout
