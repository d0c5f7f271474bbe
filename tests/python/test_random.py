"""drx.random against JAX's own values (keys, fold_in, split, the threefry block's known answers
and JAX's original counter layout, as tests/random_test.cpp holds them) and against a NumPy
threefry2x32 written here from the Random123 specification, bit for bit: eagerly, under jit,
under vmap over a batch of keys and in map_fn bodies with fold_in(client_index()); loose
statistics on 10^5 draws; errors that name the function."""
import math

import numpy as np
import pytest

drx = pytest.importorskip("drx")
rnd = drx.random

U32 = np.uint32


# ---- an independent reference: Threefry-2x32, 20 rounds (Salmon et al. 2011, Random123) ----
def ref_threefry(k0, k1, x0, x1):
    k0, k1, x0, x1 = (np.atleast_1d(np.asarray(a, U32)) for a in (k0, k1, x0, x1))
    ks = [k0, k1, k0 ^ k1 ^ U32(0x1BD11BDA)]
    rotations = [(13, 15, 26, 6), (17, 29, 16, 24)]
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in rotations[i % 2]:
            x0 = x0 + x1
            x1 = (x1 << U32(r)) | (x1 >> U32(32 - r))
            x1 = x1 ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + U32(i + 1)
    return x0, x1


def ref_blocks(key, n):
    """The block at counters (0, i), i < n: the partitionable layout of JAX's draws."""
    key = np.asarray(key, U32)
    i = np.arange(n, dtype=U32)
    return ref_threefry(np.full(n, key[0]), np.full(n, key[1]), np.zeros(n, U32), i)


def ref_bits(key, n):
    b0, b1 = ref_blocks(key, n)
    return b0 ^ b1


def ref_uniform32(key, n, lo=0.0, hi=1.0):
    f = ((ref_bits(key, n) >> U32(9)) | U32(0x3F800000)).view(np.float32) - np.float32(1)
    lo32, hi32 = np.float32(lo), np.float32(hi)
    return np.maximum(lo32, f * np.float32(hi32 - lo32) + lo32)


def ref_uniform64(key, n):
    b0, b1 = ref_blocks(key, n)
    b = (b0.astype(np.uint64) << np.uint64(32)) | b1.astype(np.uint64)
    return ((b >> np.uint64(12)) | np.uint64(0x3FF0000000000000)).view(np.float64) - 1.0


def ref_split(key, n):
    b0, b1 = ref_blocks(key, n)
    return np.stack([b0, b1], axis=1)


def bitwise_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    np.testing.assert_array_equal(np.ascontiguousarray(a).view(np.uint8),
                                  np.ascontiguousarray(b).view(np.uint8))


# Random123's known answers (kat_vectors, threefry2x32_20): counter, key, result.
KATS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6b200159, 0x99ba4efe)),
    ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
    ((0x243f6a88, 0x85a308d3), (0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0)),
]


def test_the_reference_and_threefry2x32_reproduce_random123():
    x0, x1 = (np.array([k[0][j] for k in KATS], U32) for j in (0, 1))
    k0, k1 = (np.array([k[1][j] for k in KATS], U32) for j in (0, 1))
    want0, want1 = (np.array([k[2][j] for k in KATS], U32) for j in (0, 1))
    for y0, y1 in (ref_threefry(k0, k1, x0, x1), rnd.threefry2x32(k0, k1, x0, x1),
                   drx.jit(rnd.threefry2x32)(k0, k1, x0, x1)):
        bitwise_equal(y0, want0)
        bitwise_equal(y1, want1)
    # JAX's tests/random_test.py testThreefry2x32: its threefry_2x32(keypair, count) API.
    for (count, key, want) in KATS:
        got = rnd.threefry_2x32(np.array(key, U32), np.array(count, U32))
        bitwise_equal(got, np.array(want, U32))


# ---- JAX's values ----------------------------------------------------------------------------
# jax tests/random_test.py, test_prng_seeds_and_keys (jax_enable_x64=True).
SEEDS = [
    (0, [0, 0]), (1, [0, 1]), (3, [0, 3]), (-1, [4294967295, 4294967295]),
    (-3, [4294967295, 4294967293]), (2147483647 + 100, [0, 2147483747]),
    (-2147483648 - 100, [4294967295, 2147483548]),
]


@pytest.mark.parametrize("seed,want", SEEDS)
def test_keys_from_seeds_are_jaxs(seed, want):
    k = rnd.key(seed)
    bitwise_equal(k, np.array(want, U32))
    bitwise_equal(rnd.PRNGKey(np.int64(seed)), k)
    bitwise_equal(drx.jit(rnd.key)(np.int64(seed)), k)  # a traced seed


def test_fold_in_and_split_are_jaxs():
    # jax testPRNGValues: fold_in(key(0), 4), eagerly, under jit, with a traced int32.
    want = np.array([2285895361, 433833334], U32)
    k0 = rnd.key(0)
    bitwise_equal(rnd.fold_in(k0, 4), want)
    bitwise_equal(drx.jit(lambda k: rnd.fold_in(k, 4))(k0), want)
    bitwise_equal(drx.jit(rnd.fold_in)(k0, np.int32(4)), want)
    # jax.random.split(jax.random.key(0)) with jax_threefry_partitionable (JAX's default
    # since 0.5), and split(key, n)[i] == fold_in(key, i) (jax's split/fold_in symmetry test).
    split = rnd.split(k0)
    bitwise_equal(split, np.array([[1797259609, 2579123966], [928981903, 3453687069]], U32))
    k = rnd.key(72)
    for s in (rnd.split(k, 5), drx.jit(lambda k: rnd.split(k, 5))(k)):
        assert s.shape == (5, 2) and s.dtype == np.uint32
        bitwise_equal(s, ref_split(k, 5))
        for i in range(5):
            bitwise_equal(s[i], rnd.fold_in(k, i))
    bitwise_equal(rnd.split(k, (2, 3)), ref_split(k, 6).reshape(2, 3, 2))
    assert rnd.split(k, 0).shape == (0, 2)
    a, b = rnd.split2(k)
    bitwise_equal(np.stack([a, b]), rnd.split(k))
    # fold_in takes its data modulo 2^32, as jnp.uint32 does.
    bitwise_equal(rnd.fold_in(k, -1), rnd.fold_in(k, 2**32 - 1))
    bitwise_equal(rnd.fold_in(k, 2**32 + 7), rnd.fold_in(k, 7))


def test_jax_original_layout_values():
    # jax testRngRandomBits (before jax_threefry_partitionable): threefry_2x32 over iota(3) of
    # key(1701); JAX's testPRNGValues-era split(PRNGKey(0)) = threefry_2x32(key, iota(4)).
    got = rnd.threefry_2x32(rnd.key(1701), np.arange(3, dtype=U32))
    bitwise_equal(got, np.array([56197195, 4200222568, 961309823], U32))
    got = drx.jit(rnd.threefry_2x32)(rnd.key(0), np.arange(8, dtype=U32))
    bitwise_equal(got, np.array([2285895361, 1501764800, 1518642379, 4090693311, 433833334,
                                 4221794875, 839183663, 3740430601], U32))
    old_split = rnd.threefry_2x32((0, 0), np.arange(4, dtype=U32)).reshape(2, 2)
    bitwise_equal(old_split, np.array([[4146024105, 967050713], [2718843009, 1272950319]], U32))
    w = rnd.threefry_2x32(rnd.key(1701), np.arange(6, dtype=U32)).astype(np.uint64)
    bits64 = (w[:3] << np.uint64(32)) | w[3:]
    bitwise_equal(bits64, np.array([3982329540505020460, 16822122385914693683,
                                    7882654074788531506], np.uint64))


# ---- draws: JAX's formulas on the reference block -------------------------------------------
def test_bits_and_uniform_are_jaxs_formulas_bit_for_bit():
    k = rnd.key(1701)
    n = 15
    f = drx.jit(lambda k: (rnd.bits(k, (3, 5)), rnd.bits(k, (3, 5), np.uint8),
                           rnd.uniform(k, (3, 5)), rnd.uniform(k, (3, 5), minval=-2.0, maxval=3.0),
                           rnd.uniform(k, (3, 5), np.float64)))
    for got in (f(k), (rnd.bits(k, (3, 5)), rnd.bits(k, (3, 5), np.uint8),
                       rnd.uniform(k, (3, 5)), rnd.uniform(k, (3, 5), minval=-2, maxval=3),
                       rnd.uniform(k, (3, 5), np.float64))):
        bitwise_equal(got[0].ravel(), ref_bits(k, n))
        bitwise_equal(got[1].ravel(), (ref_bits(k, n) & U32(255)).astype(np.uint8))
        bitwise_equal(got[2].ravel(), ref_uniform32(k, n))
        bitwise_equal(got[3].ravel(), ref_uniform32(k, n, -2.0, 3.0))
        bitwise_equal(got[4].ravel(), ref_uniform64(k, n))
    # jax.random.uniform(jax.random.key(0), (3,)) in JAX >= 0.5 (partitionable threefry).
    bitwise_equal(rnd.uniform(rnd.key(0), (3,)),
                  np.array([0.947667, 0.9785799, 0.33229148], np.float32))
    assert rnd.uniform(k).shape == () and rnd.bits(k, 4).shape == (4,)


def test_uniform_with_array_and_traced_bounds_is_jaxs_formula():
    k = rnd.key(5)
    lo, hi = np.array([-1.0, 0.0, 2.0]), np.array(4.0)
    got = rnd.uniform(k, (2, 3), np.float64, lo, hi)
    u = ref_uniform64(k, 6).reshape(2, 3)
    bitwise_equal(got, np.maximum(lo, u * (hi - lo) + lo))
    traced = drx.jit(lambda k, a, b: rnd.uniform(k, (2, 3), np.float64, a, b))(k, 1.5, 2.5)
    bitwise_equal(traced, rnd.uniform(k, (2, 3), np.float64, 1.5, 2.5))


def test_normal_is_sqrt2_erfinv_of_jaxs_uniform():
    k = rnd.key(3)
    n = 64
    z32, z64 = rnd.normal(k, (n,)), rnd.normal(k, (n,), np.float64)
    assert z32.dtype == np.float32 and z64.dtype == np.float64
    bitwise_equal(drx.jit(lambda k: rnd.normal(k, (n,)))(k), z32)
    # u = max(lo, f (1 - lo) + lo), lo the float after -1, f JAX's uniform in [0, 1): z is
    # sqrt(2) erfinv(u), so erf(z / sqrt(2)) = u (backward error, as erfinv has no NumPy form).
    lo32 = np.nextafter(np.float32(-1), np.float32(0))
    u32 = np.maximum(lo32, ref_uniform32(k, n) * (np.float32(1) - lo32) + lo32)
    lo64 = np.nextafter(-1.0, 0.0)
    u64 = np.maximum(lo64, ref_uniform64(k, n) * (1.0 - lo64) + lo64)
    for z, u, tol in ((z32, u32, 3e-7), (z64, u64, 1e-15)):
        back = np.array([math.erf(float(v) / math.sqrt(2)) for v in z])
        np.testing.assert_allclose(back, u.astype(np.float64), rtol=0, atol=tol)


def test_bernoulli_randint_and_permutation_are_jaxs_algorithms():
    k = rnd.key(11)
    # bernoulli: uniform(key, shape, p's dtype) < p.
    bitwise_equal(rnd.bernoulli(k, shape=(50,)), ref_uniform32(k, 50) < np.float32(0.5))
    bitwise_equal(rnd.bernoulli(k, np.float32(0.3), (50,)), ref_uniform32(k, 50) < np.float32(0.3))
    bitwise_equal(rnd.bernoulli(k, 0.3, (50,)), ref_uniform64(k, 50) < 0.3)  # x64: float64
    p = np.linspace(0, 1, 6)
    bitwise_equal(rnd.bernoulli(k, p), ref_uniform64(k, 6) < p)  # shape=None: p's shape
    bitwise_equal(drx.jit(lambda k, p: rnd.bernoulli(k, p, (2, 6)))(k, p),
                  ref_uniform64(k, 12).reshape(2, 6) < p)
    # randint: two 32-bit draws from split(key) combined modulo the span.
    for lo, hi, dtype in ((-3, 7, np.int32), (0, 1000003, np.uint32), (-2**31, 2**31, np.int32),
                          (5, 2**32 + 4, np.int64)):
        k1, k2 = ref_split(k, 2)
        higher, lower = ref_bits(k1, 40), ref_bits(k2, 40)
        span = U32((hi - lo) % 2**32)
        if span == 0:
            offset = higher
        else:
            mult = U32((2**16 % int(span)) ** 2 % 2**32 % int(span))  # the square wraps in u32
            offset = (higher % span * mult + lower % span) % span
        want = (offset.astype(np.int64) + lo).astype(dtype)
        got = rnd.randint(k, (40,), lo, hi, dtype)
        bitwise_equal(got, want)
        assert got.min() >= lo and got.max() < hi
    assert rnd.randint(k, (3,), 5, 5).tolist() == [5, 5, 5]  # maxval <= minval: minval
    # permutation: argsort of random 32-bit keys from split(key)[1], one round for n < 1626.
    _, sub = ref_split(k, 2)
    want = np.argsort(ref_bits(sub, 100), kind="stable").astype(np.int32)
    bitwise_equal(rnd.permutation(k, 100), want)
    x = np.arange(12.0).reshape(3, 4)
    bitwise_equal(rnd.permutation(k, x, axis=1), x[:, np.argsort(ref_bits(sub, 4))])
    bitwise_equal(drx.jit(lambda k, x: rnd.permutation(k, x))(k, x), x[np.argsort(ref_bits(sub, 3))])


# ---- batches of keys and per-client streams -------------------------------------------------
def test_vmap_over_keys_is_a_loop_over_them():
    k = rnd.key(99)
    keys = rnd.split(k, 4)
    draw = lambda key: (rnd.normal(key, (5,), np.float64), rnd.uniform(key, (2,)),
                        rnd.split(key, 3), rnd.fold_in(key, 7), rnd.randint(key, (3,), 0, 100),
                        rnd.permutation(key, 6), rnd.bits(key, (2,)))
    batched = drx.vmap(draw)(keys)
    for i in range(4):
        for got, want in zip(batched, draw(keys[i])):
            bitwise_equal(got[i], want)
    # A batch of keys, split inside the batched function, and the seeds of a batch.
    seeds = np.arange(4, dtype=np.int64)
    bitwise_equal(drx.vmap(rnd.key)(seeds), np.stack([rnd.key(int(s)) for s in seeds]))


def test_fold_in_client_index_in_map_fn_is_a_loop_over_clients():
    n = 5
    x = np.random.default_rng(0).normal(size=(n, 3))

    @drx.program(placements={"clients": n})
    def noisy(key, x):
        def body(k, xi):
            return xi + rnd.normal(rnd.fold_in(k, drx.client_index()), (3,), np.float64)
        ys = drx.map_fn(body, (drx.broadcast(key), x))
        return ys, drx.reduce_sum(ys)

    k = rnd.key(2024)
    ys, total = drx.jit(noisy)(k, x)
    want = np.stack([x[i] + rnd.normal(rnd.fold_in(k, i), (3,), np.float64) for i in range(n)])
    bitwise_equal(ys, want)
    np.testing.assert_allclose(total, want.sum(0), rtol=1e-14)


def test_draws_are_differentiable_in_their_parameters_not_the_key():
    k = rnd.key(1)
    z = rnd.normal(k, (4,), np.float64)
    g = drx.grad(lambda s, key: (s * rnd.normal(key, (4,), np.float64)).sum())(2.0, k)
    assert g == pytest.approx(z.sum(), rel=1e-15)
    # The draw depends on x only through the key: no tangent flows through it.
    f = lambda x, key: rnd.uniform(rnd.fold_in(key, x.astype(np.int32)), (), np.float64) + 0.0 * x
    assert drx.jit(drx.grad(f))(2.5, k) == 0.0


# ---- statistics -----------------------------------------------------------------------------
N = 100_000


def sigma_check(values, mean, var):
    """The sample mean and variance within 6 standard errors (4th moment ~ 3 var^2)."""
    v = np.asarray(values, np.float64)
    assert abs(v.mean() - mean) < 6 * math.sqrt(var / N)
    assert abs(v.var(ddof=1) - var) < 6 * var * math.sqrt(2 / N)


def test_distributions_have_their_moments():
    keys = rnd.split(rnd.key(7), 6)
    for dtype in (np.float32, np.float64):
        u = rnd.uniform(keys[0], (N,), dtype)
        assert u.min() >= 0 and u.max() < 1
        sigma_check(u, 0.5, 1 / 12)
        w = rnd.uniform(keys[1], (N,), dtype, -2.0, 6.0)
        assert w.min() >= -2 and w.max() < 6
        sigma_check(w, 2.0, 64 / 12)
        sigma_check(rnd.normal(keys[2], (N,), dtype), 0.0, 1.0)
    b = rnd.bernoulli(keys[3], 0.3, (N,))
    assert b.dtype == np.bool_
    assert abs(b.mean() - 0.3) < 6 * math.sqrt(0.3 * 0.7 / N)
    r = rnd.randint(keys[4], (N,), -3, 7)
    assert r.dtype == np.int32 and r.min() == -3 and r.max() == 6
    counts = np.bincount(r + 3, minlength=10)
    assert np.all(np.abs(counts - N / 10) < 6 * math.sqrt(N * 0.1 * 0.9))
    bits = rnd.bits(keys[5], (N,))
    for bit in (0, 15, 31):  # each bit is a fair coin
        ones = ((bits >> U32(bit)) & U32(1)).mean()
        assert abs(ones - 0.5) < 6 * math.sqrt(0.25 / N)


def test_permutations_are_permutations():
    k = rnd.key(9)
    p = rnd.permutation(k, 5000)
    assert p.dtype == np.int32
    np.testing.assert_array_equal(np.sort(p), np.arange(5000))
    x = np.arange(24).reshape(4, 3, 2)
    for axis in (0, 1, -1):
        y = rnd.permutation(k, x, axis)
        assert y.shape == x.shape
        np.testing.assert_array_equal(np.sort(y, axis=axis), x)
    assert rnd.permutation(k, 0).shape == (0,)


# ---- errors ---------------------------------------------------------------------------------
def raises(*words):
    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(drx.Error)
            self.info = self.ctx.__enter__()

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            message = str(self.info.value)
            for w in words:
                assert w in message, (w, message)
            return handled
    return Check()


def test_bad_keys_are_errors_naming_the_function():
    k = rnd.key(0)
    with raises("random.uniform", "u32[2]", "u32[3]"):
        rnd.uniform(np.zeros(3, U32), (2,))
    with raises("random.normal", "f32[2]"):
        rnd.normal(np.zeros(2, np.float32), (2,))
    with raises("random.normal", "u32[3,2]", "drx.vmap"):
        rnd.normal(rnd.split(k, 3))
    with raises("random.split", "f32[2]"):
        rnd.split(np.zeros(2, np.float32))
    with raises("random.fold_in", "i64[2]"):
        rnd.fold_in([0, 1], 3)
    with raises("random.randint", "u32[3]"):  # inside a trace too
        drx.jit(lambda k: rnd.randint(k, (2,), 0, 3))(np.zeros(3, U32))
    with raises("random.permutation", "u32[]"):
        drx.jit(lambda k: rnd.permutation(k, 3))(U32(0))


def test_bad_shapes_dtypes_and_parameters_are_errors_naming_the_function():
    k = rnd.key(0)
    with raises("random.bits", "negative"):
        rnd.bits(k, (-1,))
    with raises("random.normal", "shape"):
        rnd.normal(k, (2.5,))
    with raises("random.uniform", "shape"):
        drx.jit(lambda k, n: rnd.uniform(k, (n,)))(k, 3)  # a traced dimension
    with raises("random.uniform", "i32", "randint"):
        rnd.uniform(k, (2,), np.int32)
    with raises("random.normal", "i64"):
        rnd.normal(k, (2,), np.int64)
    with raises("random.normal", "f16", "float32 or float64"):
        rnd.normal(k, (2,), np.float16)
    with raises("random.uniform", "bf16"):
        rnd.uniform(k, (2,), "bf16")
    with raises("random.bernoulli", "f16"):
        rnd.bernoulli(k, np.float16(0.5), (2,))
    with raises("random.normal", "dtype"):
        rnd.normal(k, (2,), "float99")
    with raises("random.bits", "u16", "u32 or u8"):
        rnd.bits(k, (2,), np.uint16)
    with raises("random.uniform", "minval"):
        rnd.uniform(k, (2,), minval=2.0, maxval=1.0)
    with raises("random.bernoulli", "1.5"):
        rnd.bernoulli(k, 1.5, (2,))
    with raises("random.bernoulli", "float32 or float64"):
        rnd.bernoulli(k, 1, (2,))
    with raises("random.bernoulli", "broadcast"):
        rnd.bernoulli(k, np.full(3, 0.5), (2,))
    with raises("random.randint", "2^32"):
        rnd.randint(k, (2,), 0, 2**40)
    with raises("random.randint", "f32"):
        rnd.randint(k, (2,), 0, 3, np.float32)
    with raises("random.randint", "minval"):
        rnd.randint(k, (2,), 0.5, 3)
    with raises("random.fold_in", "data"):
        rnd.fold_in(k, 1.5)
    with raises("random.fold_in", "integer scalar"):
        drx.jit(lambda k, d: rnd.fold_in(k, d))(k, 1.5)
    with raises("random.key", "seed"):
        rnd.key(1.5)
    with raises("random.key", "int64"):
        rnd.key(2**70)
    with raises("random.key", "integer scalar seed"):
        drx.jit(rnd.key)(np.float32(1))
    with raises("random.permutation", "integer"):
        rnd.permutation(k, 10.0)
    with raises("random.permutation", "axis 2"):
        rnd.permutation(k, np.zeros((2, 2)), axis=2)
    with raises("random.split", "negative"):
        rnd.split(k, -1)
    with raises("threefry2x32", "four u32 operands"):
        rnd.threefry2x32(U32(0), U32(0), np.zeros(2, U32), np.zeros(3, U32))


# ---- every C++ random op has a Python name with a docstring ---------------------------------
PYTHON_NAMES = {
    "drx::random::key": rnd.key, "drx::random::split": rnd.split,
    "drx::random::split2": rnd.split2, "drx::random::fold_in": rnd.fold_in,
    "drx::random::bits": rnd.bits, "drx::random::uniform": rnd.uniform,
    "drx::random::normal": rnd.normal, "drx::random::bernoulli": rnd.bernoulli,
    "drx::random::randint": rnd.randint, "drx::random::permutation": rnd.permutation,
    "drx::threefry2x32": rnd.threefry2x32,
}


def test_every_public_random_op_has_a_python_function():
    table = [o[0] for o in drx._drx.public_ops() if "random" in o[0] or "threefry" in o[0]]
    assert sorted(table) == sorted(PYTHON_NAMES)
    for name, fn in PYTHON_NAMES.items():
        assert fn.__doc__ and name in fn.__doc__, name
        assert fn.__name__ in rnd.__all__
