"""StableHLO in: JAX-exported modules imported into drx, run, and differentiated.

A small MLP's loss as JAX prints it (`jax.jit(loss).lower(params, x, y).as_text()` with
jax_enable_x64) is imported with drx.from_stablehlo: its value is checked against NumPy and its
gradient (drx.grad through the imported module, which inlines into the trace) against central
differences. Then, where ../shared/stablehlo-testdata holds JAX's self-checking test modules, one
of them runs and matches the expected values stored in it, and one of its private functions is
imported on its own and differentiated. Finally a drx program goes out and back in.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/stablehlo_import.py
"""
import os
import re
import sys

import numpy as np

import drx

# loss(params, x, y) = mean((tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2), params a dict, so JAX
# flattens it by sorted key: b1, b2, w1, w2, then x and y.
JAX_MLP_LOSS = """\
module @jit_loss attributes {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf64> {mhlo.layout_mode = "default"}, %arg1: tensor<f64> {mhlo.layout_mode = "default"}, %arg2: tensor<3x4xf64> {mhlo.layout_mode = "default"}, %arg3: tensor<4xf64> {mhlo.layout_mode = "default"}, %arg4: tensor<8x3xf64> {mhlo.layout_mode = "default"}, %arg5: tensor<8xf64> {mhlo.layout_mode = "default"}) -> (tensor<f64> {jax.result_info = "", mhlo.layout_mode = "default"}) {
    %0 = stablehlo.dot_general %arg4, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x3xf64>, tensor<3x4xf64>) -> tensor<8x4xf64>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<4xf64>) -> tensor<1x4xf64>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x4xf64>) -> tensor<8x4xf64>
    %3 = stablehlo.add %0, %2 : tensor<8x4xf64>
    %4 = stablehlo.tanh %3 : tensor<8x4xf64>
    %5 = stablehlo.dot_general %4, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x4xf64>, tensor<4xf64>) -> tensor<8xf64>
    %6 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f64>) -> tensor<8xf64>
    %7 = stablehlo.add %5, %6 : tensor<8xf64>
    %8 = stablehlo.subtract %7, %arg5 : tensor<8xf64>
    %9 = stablehlo.multiply %8, %8 : tensor<8xf64>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f64>
    %10 = stablehlo.reduce(%9 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<8xf64>, tensor<f64>) -> tensor<f64>
    %cst_0 = stablehlo.constant dense<8.000000e+00> : tensor<f64>
    %11 = stablehlo.divide %10, %cst_0 : tensor<f64>
    return %11 : tensor<f64>
  }
}
"""

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.path.join(ROOT, "..", "shared", "stablehlo-testdata", "modules")


def check(ok, what):
    if not ok:
        sys.exit(f"stablehlo_import: FAILED: {what}")


def numpy_loss(p, x, y):
    return np.mean((np.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"] - y) ** 2)


def central_differences(f, p, eps=1e-6):
    """d f / d p for every element of every leaf of the dict p."""
    grads = {}
    for k, v in p.items():
        g = np.zeros_like(v)
        for i in np.ndindex(v.shape):
            up, down = {**p, k: v.copy()}, {**p, k: v.copy()}
            up[k][i] += eps
            down[k][i] -= eps
            g[i] = (f(up) - f(down)) / (2 * eps)
        grads[k] = g
    return grads


def mlp_module():
    loss = drx.from_stablehlo(JAX_MLP_LOSS)
    print(f"imported JAX's MLP loss: {loss}")
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=(3, 4)), "b1": rng.normal(size=4),
              "w2": rng.normal(size=4), "b2": np.array(0.3)}
    x, y = rng.normal(size=(8, 3)), rng.normal(size=8)
    value = float(loss(params, x, y))
    want = numpy_loss(params, x, y)
    print(f"  loss {value:.12f} (NumPy {want:.12f})")
    check(abs(value - want) <= 1e-12 * abs(want), "the imported loss differs from NumPy's")

    # The gradient with respect to the params dict: drx.grad traces through the module.
    grads = drx.jit(drx.grad(loss))(params, x, y)
    fd = central_differences(lambda p: numpy_loss(p, x, y), params)
    worst = max(float(np.max(np.abs(grads[k] - fd[k]))) for k in params)
    print(f"  gradient vs central differences: largest difference {worst:.2e}")
    check(worst <= 1e-7, "the gradient through the imported module is off")

    # A few steps of gradient descent on the imported loss, traced and compiled as one.
    @drx.jit
    def step(p):
        v, g = drx.value_and_grad(loss)(p, x, y)
        return drx.tree_util.tree_map(lambda a, b: a - 0.2 * b, p, g), v

    p, first = params, None
    for _ in range(50):
        p, v = step(p)
        first = float(v) if first is None else first
    last = float(loss(p, x, y))
    print(f"  50 steps of gradient descent: loss {first:.6f} -> {last:.6f}")
    check(last < 0.5 * first, "gradient descent on the imported loss did not descend")


def decode_hex_constant(body, name):
    """The hex dense constant that function `name` of a JAX test module returns."""
    fn = body[body.index(f"func.func private @{name}()"):]
    m = re.search(r'dense<"0x([0-9A-F]+)"> : tensor<([0-9x]+)xf64>', fn)
    shape = tuple(int(d) for d in m.group(2).split("x"))
    return np.frombuffer(bytes.fromhex(m.group(1)), "<f8").reshape(shape)


def jax_test_module():
    path = os.path.join(TESTDATA, "integer_pow_float64_20_30.mlir")
    if not os.path.exists(path):
        print(f"NOTICE: no JAX test modules at {os.path.normpath(TESTDATA)} (../shared is "
              "absent): skipped that part")
        return
    with open(path) as f:
        text = f.read()
    # @main computes x**4 on its stored inputs; its check compares with the stored expected.
    got = drx.from_stablehlo(text)()
    expected = decode_hex_constant(text, "expected")
    check(np.allclose(got, expected, rtol=2.0 ** -44, atol=0), "x**4 differs from JAX's")
    print(f"JAX's {os.path.basename(path)}: {got.shape} results match the expected values")
    # Its private @integer_pow(x) on its own, differentiated: d sum(x**4) / dx = 4 x**3.
    pow4 = drx.from_stablehlo(text, entry="integer_pow")
    x = decode_hex_constant(text, "inputs")
    g = drx.grad(lambda v: pow4(v).sum())(x)
    check(np.allclose(g, 4 * x ** 3, rtol=1e-14, atol=0), "the gradient of @integer_pow")
    eps = 1e-6
    fd = (np.sum(pow4(x + eps)) - np.sum(pow4(x - eps))) / (2 * eps) / x.size
    print(f"  @integer_pow differentiated: mean d/dx {float(np.mean(g)):.6f} "
          f"(4 x^3: {float(np.mean(4 * x ** 3)):.6f}, central differences {fd:.6f})")


def round_trip():
    """A drx program out to StableHLO and back: the same bits."""
    rng = np.random.default_rng(1)
    params = {"w1": rng.normal(size=(3, 4)), "b1": rng.normal(size=4),
              "w2": rng.normal(size=4), "b2": np.array(0.3)}
    x, y = rng.normal(size=(8, 3)), rng.normal(size=8)

    def loss(p, x, y):
        return ((drx.numpy.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"] - y) ** 2).mean()

    text = drx.to_stablehlo(loss, params, x, y)
    back = drx.from_stablehlo(text)
    same = np.asarray(back(params, x, y)).tobytes() == \
        np.asarray(drx.jit(loss)(params, x, y)).tobytes()
    print(f"drx -> StableHLO ({len(text.splitlines())} lines) -> drx: bitwise equal: {same}")
    check(same, "the round trip changed the result")


def main():
    drx.set_blas_thread_control(True)
    mlp_module()
    jax_test_module()
    round_trip()
    print("stablehlo_import: all checks passed")


if __name__ == "__main__":
    main()
