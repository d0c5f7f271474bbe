#!/usr/bin/env python3
"""Expected values and gradients of torch's conv2d and pooling, for
tests/torch_conv_fixture_test.cpp.

Runs torch.nn.functional.conv2d, max_pool2d and avg_pool2d in float64 on small inputs drawn
from a seeded generator (rounded to 4 decimals, or small integers where ties are wanted) and
writes tests/fixtures/torch_conv_fixture.h (laid out by clang-format, where there is one) with,
per case, the inputs, a cotangent u of the output's shape, the output y and the gradients of
sum(y * u) with respect to the input, the weight and the bias, as constexpr double arrays. The
test then needs no torch. Regenerate with

  /usr/bin/python3 bench/torch_conv_fixture.py

Padding is written as (low, high) pairs per spatial dim, as drx's ConvParams and WindowConfig
take it. torch's own padding= is symmetric; an asymmetric (or negative: cropping) padding is
applied with F.pad before a conv2d or pool with padding=0 (F.pad with -inf before max_pool2d,
so padding never wins a window; with 0 before avg_pool2d, which is count_include_pad=True).

Each pooling case also names flax's padding ("VALID" or "SAME") that gives the same pads for
nn::max_pool / nn::avg_pool (checked here against jax.lax.padtype_to_pads's rule), or "" where
there is none (a dilated window: the test uses reduce_window itself).

max_pool2d's gradient goes to the first maximum of each window in row-major window order
(ties: equal values in a window), the rule of drx's select_and_scatter_add with "GE".
"""
import math
import os
import shutil
import subprocess
import warnings

import torch
import torch.nn.functional as F

DT = torch.float64
# padding="same" with an even kernel pads a copy first: said once per call, and expected.
warnings.filterwarnings("ignore", message="Using padding='same'")


class Rng:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def normal(self, *shape):
        # 4 decimals: a short, readable fixture; not dyadic, so sums still round.
        return torch.round(torch.randn(*shape, generator=self.g, dtype=DT) * 1e4) / 1e4

    def ints(self, lo, hi, *shape):
        return torch.randint(lo, hi, shape, generator=self.g).to(DT)


def same_pads(size, window, stride, dilation=1):
    """jax.lax.padtype_to_pads(..., "SAME") for one dim."""
    out = -(-size // stride)
    dw = (window - 1) * dilation + 1
    total = max((out - 1) * stride + dw - size, 0)
    return (total // 2, total - total // 2)


def torch_pad(pads):
    """(low, high) per spatial dim (H, W) -> F.pad's (left, right, top, bottom)."""
    (t, b), (l, r) = pads
    return (l, r, t, b)


# ---- conv2d -------------------------------------------------------------------------------
# (name, x shape NCHW, weight shape OIHW, bias, stride, pads ((top, bottom), (left, right)),
#  dilation, groups, drx::conv padding string or "")
CONV_CASES = [
    ("plain", (2, 3, 6, 7), (4, 3, 3, 3), True, (1, 1), ((0, 0), (0, 0)), (1, 1), 1, "VALID"),
    ("strided", (2, 3, 7, 8), (4, 3, 3, 2), True, (2, 3), ((0, 0), (0, 0)), (1, 1), 1, ""),
    ("padded_strided", (1, 2, 7, 6), (3, 2, 3, 3), True, (2, 2), ((1, 1), (2, 2)), (1, 1), 1, ""),
    ("same_even_kernel", (2, 2, 5, 6), (3, 2, 4, 2), False, (1, 1), ((1, 2), (0, 1)), (1, 1), 1,
     "SAME"),
    ("asymmetric_pad", (2, 2, 5, 6), (3, 2, 3, 3), True, (1, 2), ((1, 0), (0, 2)), (1, 1), 1, ""),
    ("negative_pad", (1, 2, 6, 6), (2, 2, 2, 3), False, (1, 1), ((-1, 1), (2, -1)), (1, 1), 1,
     ""),
    ("dilated", (2, 2, 8, 9), (3, 2, 3, 2), True, (1, 1), ((2, 2), (1, 1)), (2, 3), 1, ""),
    ("grouped", (2, 4, 5, 5), (6, 2, 3, 3), True, (1, 1), ((1, 1), (1, 1)), (1, 1), 2, "SAME"),
    ("depthwise", (2, 3, 7, 6), (6, 1, 3, 3), True, (2, 2), ((1, 1), (1, 1)), (1, 1), 3, ""),
    ("depthwise_1to1", (1, 4, 5, 6), (4, 1, 2, 3), False, (1, 1), ((0, 0), (0, 0)), (2, 1), 4,
     ""),
    ("pointwise", (2, 5, 4, 3), (3, 5, 1, 1), False, (1, 1), ((0, 0), (0, 0)), (1, 1), 1,
     "VALID"),
    ("every_attribute", (2, 4, 9, 8), (6, 2, 3, 2), True, (2, 1), ((2, 1), (0, 3)), (1, 2), 2,
     ""),
]


def conv_case(rng, case):
    name, xs, ws, has_bias, stride, pads, dilation, groups, pad_name = case
    x = rng.normal(*xs).requires_grad_()
    w = rng.normal(*ws).requires_grad_()
    b = rng.normal(ws[0]).requires_grad_() if has_bias else None
    symmetric = all(lo == hi and lo >= 0 for lo, hi in pads)
    if symmetric:
        y = F.conv2d(x, w, b, stride=stride, padding=(pads[0][0], pads[1][0]),
                     dilation=dilation, groups=groups)
    else:
        y = F.conv2d(F.pad(x, torch_pad(pads)), w, b, stride=stride, padding=0,
                     dilation=dilation, groups=groups)
    if pad_name:  # torch's own string padding agrees (torch has "same" for stride 1 only)
        for k in range(2):
            want = (0, 0) if pad_name == "VALID" else same_pads(xs[2 + k], ws[2 + k], stride[k],
                                                                dilation[k])
            assert want == pads[k], (name, k, want, pads[k])
        if stride == (1, 1):
            y2 = F.conv2d(x, w, b, padding=pad_name.lower(), dilation=dilation, groups=groups)
            assert torch.equal(y, y2), name
    u = rng.normal(*y.shape)
    (y * u).sum().backward()
    return {
        "name": name, "x_shape": xs, "w_shape": ws, "y_shape": tuple(y.shape),
        "stride": stride, "pads": pads, "dilation": dilation, "groups": groups,
        "has_bias": has_bias, "pad_name": pad_name,
        "arrays": [("x", x), ("w", w), ("b", b), ("u", u), ("y", y), ("dx", x.grad),
                   ("dw", w.grad), ("db", b.grad if has_bias else None)],
    }


# ---- pooling ------------------------------------------------------------------------------
# (name, kind, x shape NCHW, values ("normal", or (lo, hi) for integers in [lo, hi): ties),
#  window, stride, pads ((top, bottom), (left, right)), dilation, count_include_pad)
POOL_CASES = [
    ("max_valid", "max", (2, 3, 6, 8), "normal", (2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1), True),
    ("max_padded_strided", "max", (2, 2, 7, 9), "normal", (3, 3), (2, 2), ((1, 1), (1, 1)),
     (1, 1), True),
    ("max_rect_same", "max", (1, 2, 5, 7), "normal", (2, 3), (1, 2), ((0, 1), (1, 1)), (1, 1),
     True),
    ("max_ties_overlapping", "max", (2, 2, 6, 7), (0, 3), (3, 3), (1, 1), ((1, 1), (1, 1)),
     (1, 1), True),
    ("max_ties_strided", "max", (1, 3, 7, 7), (0, 2), (3, 3), (2, 2), ((0, 0), (0, 0)), (1, 1),
     True),
    ("max_ties_negative_padded", "max", (2, 2, 5, 5), (-3, 0), (3, 3), (2, 2), ((1, 1), (1, 1)),
     (1, 1), True),
    ("max_ties_all_equal", "max", (1, 1, 4, 5), (1, 2), (2, 3), (1, 1), ((0, 1), (1, 1)), (1, 1),
     True),
    ("max_dilated", "max", (1, 2, 7, 8), "normal", (2, 3), (1, 2), ((1, 1), (0, 0)), (2, 2),
     True),
    ("max_dilated_ties", "max", (1, 2, 7, 8), (0, 2), (2, 3), (1, 2), ((1, 1), (0, 0)), (2, 2),
     True),
    ("avg_valid", "avg", (2, 2, 6, 8), "normal", (2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1), True),
    ("avg_padded_include", "avg", (2, 2, 7, 9), "normal", (3, 3), (2, 2), ((1, 1), (1, 1)),
     (1, 1), True),
    ("avg_padded_exclude", "avg", (2, 2, 7, 9), "normal", (3, 3), (2, 2), ((1, 1), (1, 1)),
     (1, 1), False),
    ("avg_rect_exclude", "avg", (1, 3, 6, 6), "normal", (3, 2), (1, 2), ((1, 1), (0, 0)), (1, 1),
     False),
    ("avg_rect_same_include", "avg", (1, 2, 5, 7), "normal", (2, 3), (1, 2), ((0, 1), (1, 1)),
     (1, 1), True),
]


def pool_case(rng, case):
    name, kind, xs, values, window, stride, pads, dilation, include = case
    x = (rng.normal(*xs) if values == "normal" else rng.ints(values[0], values[1], *xs))
    x.requires_grad_()
    symmetric = all(lo == hi for lo, hi in pads)
    if kind == "max":
        if symmetric:
            y = F.max_pool2d(x, window, stride, padding=(pads[0][0], pads[1][0]),
                             dilation=dilation)
        else:
            y = F.max_pool2d(F.pad(x, torch_pad(pads), value=-math.inf), window, stride,
                             dilation=dilation)
    else:
        assert dilation == (1, 1)
        if symmetric:
            y = F.avg_pool2d(x, window, stride, padding=(pads[0][0], pads[1][0]),
                             count_include_pad=include)
        else:
            assert include, name  # F.pad's zeros are counted
            y = F.avg_pool2d(F.pad(x, torch_pad(pads)), window, stride)
    flax = ""
    if dilation == (1, 1):
        for candidate in ("VALID", "SAME"):  # VALID where both give no padding
            want = [(0, 0) if candidate == "VALID" else same_pads(xs[2 + k], window[k], stride[k])
                    for k in range(2)]
            if tuple(want) == tuple(pads):
                flax = candidate
                break
        assert flax, name
    u = rng.normal(*y.shape)
    (y * u).sum().backward()
    return {
        "name": name, "kind": kind, "x_shape": xs, "y_shape": tuple(y.shape), "window": window,
        "stride": stride, "pads": pads, "dilation": dilation, "include": include, "flax": flax,
        "arrays": [("x", x), ("u", u), ("y", y), ("dx", x.grad)],
    }


# ---- output -------------------------------------------------------------------------------
def ident(name):
    return "".join(part.capitalize() for part in name.split("_"))


def c_array(name, t):
    values = [repr(float(v)) for v in t.detach().reshape(-1).tolist()]
    lines = [f"inline constexpr double {name}[{len(values)}] = {{"]
    row = "   "
    for v in values:
        if len(row) + len(v) + 2 > 100:
            lines.append(row)
            row = "   "
        row += " " + v + ","
    lines.append(row)
    lines.append("};")
    return lines


def braces(values):
    return "{" + ", ".join(str(v) for v in values) + "}"


def pads_str(pads):
    return "{" + ", ".join(braces(p) for p in pads) + "}"


def main():
    rng = Rng(20240534)
    convs = [conv_case(rng, c) for c in CONV_CASES]
    pools = [pool_case(rng, c) for c in POOL_CASES]
    lines = [
        "// generated by bench/torch_conv_fixture.py, do not edit.",
        f"// torch {torch.__version__}, float64: torch.nn.functional.conv2d, max_pool2d and",
        "// avg_pool2d on fixed inputs, with the gradients of sum(y * u) for a fixed cotangent u.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace drx::testing::torch_conv_fixture {",
        "",
        "// conv2d(x, w, b) in NCHW / OIHW; padding (low, high) for H then W (negative crops).",
        "struct Conv2dCase {",
        "  const char* name;",
        "  int64_t x_shape[4], w_shape[4], y_shape[4];",
        "  int64_t stride[2];",
        "  int64_t padding[2][2];",
        "  int64_t dilation[2];",
        "  int64_t groups;",
        "  const char* padding_name;  // \"VALID\" or \"SAME\" naming the same pads, or \"\"",
        "  const double *x, *w, *b, *u, *y, *dx, *dw, *db;  // b and db null without a bias",
        "};",
        "",
        "// max_pool2d or avg_pool2d of x in NCHW; padding (low, high) for H then W.",
        "struct Pool2dCase {",
        "  const char* name;",
        "  bool max;  // else avg",
        "  int64_t x_shape[4], y_shape[4];",
        "  int64_t window[2], stride[2];",
        "  int64_t padding[2][2];",
        "  int64_t dilation[2];",
        "  bool count_include_pad;",
        "  const char* flax_padding;  // \"VALID\" or \"SAME\" giving the same pads, or \"\"",
        "  const double *x, *u, *y, *dx;",
        "};",
    ]
    for c in convs + pools:
        lines.append("")
        lines.append(f"// {c['name']}")
        for tag, t in c["arrays"]:
            if t is not None:
                lines += c_array(f"k{ident(c['name'])}_{tag}", t)

    def ref(c, tag):
        present = dict(c["arrays"])[tag] is not None
        return f"k{ident(c['name'])}_{tag}" if present else "nullptr"

    def entry(fields):
        out = []
        for i, (key, value) in enumerate(fields):
            lead = "    {" if i == 0 else "     "
            tail = "}," if i == len(fields) - 1 else ","
            out.append(f"{lead}.{key} = {value}{tail}")
        return out

    lines += ["", "inline constexpr Conv2dCase kConv2dCases[] = {"]
    for c in convs:
        lines += entry([("name", f'"{c["name"]}"'), ("x_shape", braces(c["x_shape"])),
                        ("w_shape", braces(c["w_shape"])), ("y_shape", braces(c["y_shape"])),
                        ("stride", braces(c["stride"])), ("padding", pads_str(c["pads"])),
                        ("dilation", braces(c["dilation"])), ("groups", c["groups"]),
                        ("padding_name", f'"{c["pad_name"]}"')] +
                       [(tag, ref(c, tag)) for tag, _ in c["arrays"]])
    lines += ["};", "", "inline constexpr Pool2dCase kPool2dCases[] = {"]
    for c in pools:
        lines += entry([("name", f'"{c["name"]}"'),
                        ("max", "true" if c["kind"] == "max" else "false"),
                        ("x_shape", braces(c["x_shape"])), ("y_shape", braces(c["y_shape"])),
                        ("window", braces(c["window"])), ("stride", braces(c["stride"])),
                        ("padding", pads_str(c["pads"])), ("dilation", braces(c["dilation"])),
                        ("count_include_pad", "true" if c["include"] else "false"),
                        ("flax_padding", f'"{c["flax"]}"')] +
                       [(tag, ref(c, tag)) for tag, _ in c["arrays"]])
    lines += ["};", "", "}  // namespace drx::testing::torch_conv_fixture", ""]
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "tests", "fixtures", "torch_conv_fixture.h")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines))
    # The repository's style (.clang-format) lays out the long arrays.
    if shutil.which("clang-format"):
        subprocess.run(["clang-format", "-i", path], check=True)
    print("wrote", os.path.normpath(path))


if __name__ == "__main__":
    main()
