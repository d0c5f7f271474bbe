"""Every public C++ op and transformation has a Python name: the test reads the public-op table
(drx/ops/op_table.h, through _drx.public_ops()) and fails for any entry Python lacks, so an op
added to the C++ library later cannot be forgotten here."""
import pytest

drx = pytest.importorskip("drx")
import drx.numpy  # noqa: E402,F401

# C++ names whose Python spelling differs from the rule below (namespace -> module, same name):
# NumPy's or lax's name, or the Tracer method a Python operator calls.
ALIASES = {
    "drx::operator+": "Tracer.__add__",
    "drx::operator-": "Tracer.__sub__",
    "drx::operator*": "Tracer.__mul__",
    "drx::operator/": "Tracer.__truediv__",
    "drx::at": "Tracer.at",
    "drx::neg": "numpy.negative",
    "drx::sub": "numpy.subtract",
    "drx::mul": "numpy.multiply",
    "drx::div": "numpy.divide",
    "drx::pow": "numpy.power",
    "drx::remainder": "numpy.fmod",
    "drx::less": "numpy.less",
    "drx::less_equal": "numpy.less_equal",
    "drx::greater": "numpy.greater",
    "drx::greater_equal": "numpy.greater_equal",
    "drx::equal": "numpy.equal",
    "drx::not_equal": "numpy.not_equal",
    "drx::is_finite": "numpy.isfinite",
    "drx::round": "numpy.rint",
    "drx::round_away": "lax.round",
    "drx::logistic": "lax.logistic",
    "drx::sigmoid": "nn.sigmoid",
    "drx::softplus": "nn.softplus",
    "drx::log_sigmoid": "nn.log_sigmoid",
    "drx::gelu": "nn.gelu",
    "drx::relu": "nn.relu",
    "drx::softmax": "nn.softmax",
    "drx::log_softmax": "nn.log_softmax",
    "drx::logsumexp": "nn.logsumexp",
    "drx::one_hot": "nn.one_hot",
    "drx::erf": "lax.erf",
    "drx::erf_inv": "lax.erf_inv",
    "drx::rsqrt": "lax.rsqrt",
    "drx::atan2": "numpy.arctan2",
    "drx::bitcast_convert": "lax.bitcast_convert_type",
    "drx::astype": "numpy.astype",
    "drx::fill": "numpy.full",
    "drx::iota": "lax.broadcasted_iota",
    "drx::constant": "numpy.asarray",
    "drx::scalar_like": "numpy.full_like",
    "drx::broadcast_in_dim": "lax.broadcast_in_dim",
    "drx::move_axis": "numpy.moveaxis",
    "drx::reverse": "numpy.flip",
    "drx::slice": "lax.slice",
    "drx::dynamic_slice": "lax.dynamic_slice",
    "drx::dynamic_update_slice": "lax.dynamic_update_slice",
    "drx::scatter": "Tracer.at",
    "drx::scatter_add": "Tracer.at",
    "drx::dot_general": "lax.dot_general",
    "drx::top_k": "lax.top_k",
    "drx::stop_gradient": "lax.stop_gradient",
    "drx::shift_left": "lax.shift_left",
    "drx::shift_right_logical": "lax.shift_right_logical",
    "drx::shift_right_arithmetic": "lax.shift_right_arithmetic",
    "drx::cond": "lax.cond",
    "drx::scan": "lax.scan",
    "drx::fori_loop": "lax.fori_loop",
    "drx::while_loop": "lax.while_loop",
    "drx::place": "place",
    "drx::placement_softmax": "placement_softmax",
    "drx::placement_normalize": "placement_normalize",
    "drx::threefry2x32": "random.threefry2x32",
    "drx::conv": "lax.conv",
}

# Searched in this order for a C++ name in the drx namespace without an alias.
TOP_LEVEL_MODULES = ["", "numpy", "lax", "nn"]


def _resolve(path):
    obj = drx
    for part in path.split("."):
        if part == "Tracer":
            obj = drx.Tracer
            continue
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def python_name(cpp_name):
    """The Python name of a C++ public op, or None when Python has none."""
    if cpp_name in ALIASES:
        path = ALIASES[cpp_name]
        return path if _resolve(path) is not None else None
    parts = cpp_name.split("::")[1:]
    if len(parts) == 2:  # drx::nn::dense -> nn.dense
        path = ".".join(parts)
        return path if _resolve(path) is not None else None
    for module in TOP_LEVEL_MODULES:
        path = f"{module}.{parts[0]}" if module else parts[0]
        if _resolve(path) is not None:
            return path
    return None


def test_every_public_cpp_op_has_a_python_name():
    table = drx._drx.public_ops()
    assert len(table) > 150  # the table itself is read (drx/ops/op_table.h)
    missing = sorted(name for name, _, _ in table if python_name(name) is None)
    assert not missing, ("public C++ ops without a Python name (bind them, or add the Python "
                         f"spelling to ALIASES in {__file__}): {missing}")


def test_the_check_can_fail():
    assert python_name("drx::no_such_op") is None
    assert python_name("drx::nn::no_such_layer") is None
    assert python_name("drx::exp") == "numpy.exp"
    assert python_name("drx::operator*") == "Tracer.__mul__"


def test_every_python_function_has_a_docstring():
    import inspect
    undocumented = []
    for module in (drx, drx.numpy, drx.lax, drx.nn, drx.random, drx.optim, drx.privacy):
        for name in getattr(module, "__all__", None) or dir(module):
            obj = getattr(module, name)
            if name.startswith("_") or inspect.ismodule(obj):
                continue
            if getattr(obj, "__module__", "").split(".")[0] not in ("drx", "_drx"):
                continue  # imported from elsewhere (NumPy's dtypes, say)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and not inspect.getdoc(obj):
                undocumented.append(f"{module.__name__}.{name}")
    assert not undocumented, f"public functions without a docstring: {undocumented}"
