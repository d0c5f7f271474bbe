#!/usr/bin/env python3
"""Derives the coefficients of erf's StableHLO lowering (drx/ops/elementwise.cpp).

Each fit is a minimax approximation of relative error, found by the Remez
exchange algorithm in 60-digit arithmetic (mpmath, `pip install mpmath`):

  q(t)  ~ erf(sqrt t) / sqrt t - 1 on t in [0, X^2], a polynomial, so that
          erf(x) = x + x q(x^2) near zero (weighted by the relative error of erf);
  R(x)  ~ exp(x^2) erfc(x) on [lo, hi], a rational function P / Q (Q(0) = 1),
          so that erf(x) = 1 - exp(-x^2) R(x) away from zero.

    f32: q of degree 6 on x <= 1; R of degree (3, 3) on [1, 4]
    f64: q of degree 13 on x <= 1.25; R of degree (8, 8) on [0.45, 6]

Run `python3 scripts/fit_erf.py` (a few minutes); it prints each fit's
largest relative error and its coefficients, highest power first, as the
C++ arrays hold them (f32 ones are then rounded to float).
"""
import mpmath as mp

mp.mp.dps = 60


def evalpoly(c, t):
    s = mp.mpf(0)
    for ci in reversed(c):  # c[0] is the constant term
        s = s * t + ci
    return s


def remez(f, w, a, b, m, n, iters=60, grid=4000):
    """P (degree m) / Q (degree n, Q(0) = 1) minimizing max |w (f - P/Q)| on [a, b]."""
    a, b = mp.mpf(a), mp.mpf(b)
    count = m + n + 2
    pts = [(a + b) / 2 - (b - a) / 2 * mp.cos(mp.pi * i / (count - 1)) for i in range(count)]
    q_prev, e = None, mp.mpf(0)
    for _ in range(iters):
        fv = [f(t) for t in pts]
        wv = [w(t) for t in pts]
        # P(t_i) - f_i Q(t_i) = (-1)^i E Q(t_i) / w_i, linearised in E by the last Q.
        for _ in range(30):
            A = mp.matrix(count, count)
            rhs = mp.matrix(count, 1)
            for i, t in enumerate(pts):
                qp = evalpoly(q_prev, t) if q_prev else mp.mpf(1)
                for j in range(m + 1):
                    A[i, j] = t**j
                for j in range(1, n + 1):
                    A[i, m + j] = -fv[i] * t**j
                A[i, m + n + 1] = -((-1) ** i) * qp / wv[i]
                rhs[i] = fv[i]
            sol = mp.lu_solve(A, rhs)
            P = [sol[j] for j in range(m + 1)]
            Q = [mp.mpf(1)] + [sol[m + j] for j in range(1, n + 1)]
            e_new = sol[m + n + 1]
            done = abs(e_new - e) < abs(e_new) * mp.mpf(10) ** -20
            e, q_prev = e_new, Q
            if done:
                break

        def err(t):
            return w(t) * (f(t) - evalpoly(P, t) / evalpoly(Q, t))

        xs = [a + (b - a) * (1 - mp.cos(mp.pi * k / grid)) / 2 for k in range(grid + 1)]
        es = [err(x) for x in xs]
        segments, cur = [], [0]
        for k in range(1, len(xs)):
            if (es[k] >= 0) == (es[cur[0]] >= 0):
                cur.append(k)
            else:
                segments.append(cur)
                cur = [k]
        segments.append(cur)
        extrema = []
        for seg in segments:  # the largest |error| of each sign run, refined
            k = max(seg, key=lambda k: abs(es[k]))
            lo, hi = xs[max(k - 1, 0)], xs[min(k + 1, len(xs) - 1)]
            for _ in range(60):
                m1, m2 = lo + (hi - lo) * 0.382, lo + (hi - lo) * 0.618
                if abs(err(m1)) > abs(err(m2)):
                    hi = m2
                else:
                    lo = m1
            xk = (lo + hi) / 2
            extrema.append(xk if abs(err(xk)) >= abs(es[k]) else xs[k])
        max_err = max(abs(err(x)) for x in extrema)
        if len(extrema) < count:
            raise RuntimeError("too few alternation points")
        if len(extrema) > count:
            best = max(
                (extrema[s : s + count] for s in range(len(extrema) - count + 1)),
                key=lambda sel: min(abs(err(x)) for x in sel),
            )
            extrema = best
        pts = extrema
        if abs(max_err - abs(e)) < abs(e) * mp.mpf("1e-6"):
            break
    return P, Q, max_err


def erf_over_x(t):
    return mp.erf(mp.sqrt(t)) / mp.sqrt(t) if t > 0 else 2 / mp.sqrt(mp.pi)


def erfcx(x):
    return mp.erfc(x) * mp.exp(x * x)


def show(name, coefficients):
    print(f"  {name} = {{" + ", ".join(mp.nstr(c, 21) for c in reversed(coefficients)) + "}")


def main():
    for label, x_max, degree in (("f32", 1, 6), ("f64", mp.mpf("1.25"), 13)):
        P, _, e = remez(lambda t: erf_over_x(t) - 1, lambda t: 1 / erf_over_x(t), 0,
                        mp.mpf(x_max) ** 2, degree, 0)
        print(f"{label} q, degree {degree} on x <= {x_max}: relative error {mp.nstr(e, 5)}")
        show("q", P)
    for label, lo, hi, m in (("f32", 1, 4, 3), ("f64", mp.mpf("0.45"), 6, 8)):
        P, Q, e = remez(erfcx, lambda x: 1 / erfcx(x), lo, hi, m, m)
        print(f"{label} R, degree ({m}, {m}) on [{lo}, {hi}]: relative error {mp.nstr(e, 5)}")
        show("P", P)
        show("Q", Q)


if __name__ == "__main__":
    main()
