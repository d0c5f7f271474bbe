#!/usr/bin/python3
"""A deterministic fuzz pass over the flags of every `drx` command (issue 29).

    usage: cli_fuzz.py DRX WORKDIR [--max-invocations N] [--jobs J] [--timeout S] [--seed S]
                       [--only CMD,...] [--skip CMD,...] [--exhaustive] [--list] [--verbose]

It learns the commands from `drx --help` and each command's flags from `drx help COMMAND`,
so a new command or flag is fuzzed without editing this file. Around a valid invocation of
each command (small program files, plan and client outputs made here first; the training
commands with `--rounds 1 --max-seconds 2` and a tiny model) it tries each flag with bad
values, with its value missing, twice, in the `--flag=VALUE` form, and unknown flags and
positional garbage, at most --max-invocations runs in all, chosen with a fixed seed.

A failure is a run killed by a signal, one that outlives --timeout, an exit code outside
0-3 (0 done, 1 runtime error, 2 usage error, 3 diverged), "internal error" (what drx says
of an exception that is not a drx::Error) or a sanitizer report on its output; and a valid
invocation of a known command that does not exit 0. Exit code 0 when nothing failed, 1 on
any failure, 77 (ctest's SKIP_RETURN_CODE) when nothing failed but a command was not fuzzed
because the data set of its --data default is not installed.

Standard library only: run with Debian's /usr/bin/python3.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time

EXIT_SKIP = 77
ALLOWED_CODES = {0, 1, 2, 3}
CRASH_WORDS = ("internal error", "AddressSanitizer", "LeakSanitizer", "runtime error:",
               "terminate called", "Segmentation fault", "Assertion `")

# f(x, y) = x * y + 1 on f32[3] (drx program text, as the printer writes it).
PROGRAM = """program @main (%0: f32[3], %1: f32[3]) -> (f32[3]) {
  %2 = mul %0, %1 : f32[3]
  %3 = constant[value=f32[]{1}] : f32[]
  %4 = broadcast_in_dim[dims=[], shape=[3]] %3 : f32[3]
  %5 = add %2, %4 : f32[3]
  return %5
}
"""

# One MapReduce round over 3 clients: sum over clients of w * x_i, for drx split and export.
MAPREDUCE_PROGRAM = """program @main [clients=3] (%0: f32[2], %1: f32[3,2]@clients) -> (f32[2]) {
  %2 = broadcast[placement="clients", size=3] %0 : f32[3,2]@clients
  %3 = map_fn[body=@body, placement="clients"] %2, %1 : f32[3,2]@clients
  %4 = reduce_sum[placement="clients"] %3 : f32[2]
  return %4
}

program @body (%0: f32[2], %1: f32[2]) -> (f32[2]) {
  %2 = mul %0, %1 : f32[2]
  return %2
}
"""


def write_npy_f32(path, values):
    """A little-endian f32 vector in NumPy's .npy format, version 1.0."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("ascii"))
        f.write(struct.pack("<%df" % len(values), *values))


class Drx:
    def __init__(self, exe, timeout):
        self.exe = exe
        self.timeout = timeout

    def run(self, args, cwd, timeout=None):
        """(exit code or None on timeout, stdout, stderr, seconds) of `drx ARGS` in cwd."""
        env = dict(os.environ)
        # Two invocations run at once on CI's two cores: one worker thread each.
        env.setdefault("DRX_NUM_THREADS", "1")
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        start = time.monotonic()
        try:
            p = subprocess.run([self.exe] + args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=timeout or self.timeout)
            code, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            code, out, err = None, e.stdout or b"", e.stderr or b""
        except OSError as e:  # the binary is missing or being relinked
            code, out, err = 127, b"", ("cli_fuzz: cannot start drx: %s" % e).encode()
        text = lambda b: b.decode("utf-8", "replace")
        return code, text(out), text(err), time.monotonic() - start


# ---- discovery: commands and flags from the help text ------------------------------------

class Flag:
    def __init__(self, name, placeholder, description):
        self.name = name
        self.placeholder = placeholder  # None for a flag without a value
        self.description = description

    @property
    def takes_value(self):
        return self.placeholder is not None

    @property
    def names_path(self):
        """A file or folder: `--out DIR`, `-o OUT.mlir`, `--arg X.npy`."""
        p = self.placeholder or ""
        return "DIR" in p or "FILE" in p or "." in p or self.name in ("--out", "-o", "--data")

    def default(self):
        """A value the command accepts: the documented default, else a guess."""
        m = re.search(r"\(default ([^;)]*)", self.description)
        if m:
            value = m.group(1).strip().split()[0].rstrip(",.")
            if value and value != "all" and not value.startswith("DRX_"):
                return value
        if self.placeholder and self.placeholder.islower():  # `--format drx|stablehlo`
            return self.placeholder.split("|")[0]
        kinds = re.findall(r"\b([a-z][a-z0-9]*) \|", self.description)
        if kinds:
            return kinds[0]
        return "1"


class Command:
    def __init__(self, name, usage, flags):
        self.name = name
        self.usage = usage  # the words after `drx NAME` on the usage line
        self.flags = flags  # name -> Flag, in order of appearance

    @property
    def trains(self):
        return "--rounds" in self.flags and "--max-seconds" in self.flags


FLAG_LINE = re.compile(r"^\s{2,}(-{1,2}[A-Za-z][A-Za-z0-9-]*)((?: [^ -][^ ]*)?)(?:\s{2,}(.*)|\s*$)")


def parse_help(name, text):
    """The usage words and the flags of one command's help text."""
    lines = text.splitlines()
    usage = ""
    for line in lines:
        if line.startswith("usage: drx " + name):
            usage = line[len("usage: drx " + name):].strip()
            break
    flags = collections.OrderedDict()
    # The usage line: `[--arg VALUES|X.npy]...`, `--stage S`, `[--client]`, `[-o OUT.mlir]`.
    words = usage.split()
    for i, w in enumerate(words):
        m = re.match(r"^\[?(-{1,2}[A-Za-z][A-Za-z0-9-]*)(\]?)", w)
        if not m or w.startswith("[FLAGS"):
            continue
        closed = m.group(2) == "]" or w.endswith("]") and "=" not in w
        value = None
        if not closed and i + 1 < len(words) and not words[i + 1].startswith(("-", "[")):
            value = words[i + 1].rstrip("].")
        if m.group(1) not in flags:
            flags[m.group(1)] = Flag(m.group(1), value, "")
    # Option lines: `  --flag VALUE   description` (two spaces before the description).
    for i, line in enumerate(lines):
        m = FLAG_LINE.match(line)
        if not m:
            continue
        flag, value, description = m.group(1), m.group(2).strip() or None, m.group(3) or ""
        # A description's continuation lines hold the default at times.
        for more in lines[i + 1:i + 4]:
            if FLAG_LINE.match(more) or not more.startswith("      "):
                break
            description += " " + more.strip()
        # The first option line of a flag defines it (run's --arg has two).
        old = flags.get(flag)
        if old is None or not old.description:
            flags[flag] = Flag(flag, value, description)
    flags.pop("--help", None)
    flags.pop("-h", None)
    return Command(name, usage, flags)


def discover(drx, cwd):
    code, out, err, _ = drx.run(["--help"], cwd)
    if code != 0:
        raise SystemExit("cli_fuzz: `drx --help` exited %s: %s" % (code, err))
    names = []
    in_commands = False
    for line in out.splitlines():
        if line.strip() == "commands:":
            in_commands = True
            continue
        if in_commands:
            m = re.match(r"^  ([a-z][a-z0-9-]*)\s", line)
            if not m:
                break
            if m.group(1) != "help":
                names.append(m.group(1))
    if not names:
        raise SystemExit("cli_fuzz: no commands in `drx --help`:\n" + out)
    commands = []
    for name in names:
        code, text, err, _ = drx.run(["help", name], cwd)
        if code != 0:
            code, text, err, _ = drx.run([name, "--help"], cwd)
        if code != 0:
            raise SystemExit("cli_fuzz: no help for `drx %s`: %s" % (name, err))
        commands.append(parse_help(name, text))
    return commands


# ---- the inputs the commands read ---------------------------------------------------------

class Inputs:
    """Small valid files for the commands, made once in WORKDIR/inputs."""

    def __init__(self, drx, root):
        self.root = os.path.join(root, "inputs")
        os.makedirs(self.root)
        p = lambda *names: os.path.join(self.root, *names)
        self.program, self.mapreduce = p("f.drx"), p("round.drx")
        self.module, self.npy, self.npy2 = p("f.mlir"), p("x.npy"), p("w2.npy")
        self.garbage, self.empty = p("garbage.drx"), p("empty.drx")
        self.drx_as_mlir = p("text_not_mlir.mlir")
        self.parts, self.clients, self.plan = p("parts"), p("clients"), p("parts", "plan.json")
        self.server, self.client_data = p("server"), p("client_data")
        with open(self.program, "w") as f:
            f.write(PROGRAM)
        with open(self.mapreduce, "w") as f:
            f.write(MAPREDUCE_PROGRAM)
        with open(self.drx_as_mlir, "w") as f:
            f.write(PROGRAM)
        with open(self.garbage, "wb") as f:
            f.write(b"\x93\x00program @main (%0: f32[\xff\xfe\n}}}")
        open(self.empty, "w").close()
        write_npy_f32(self.npy, [1.0, 2.0, 3.0])
        write_npy_f32(self.npy2, [0.5, -2.0])
        self._made_by(drx, ["export", self.program, "-o", self.module])
        self._made_by(drx, ["split", self.mapreduce, "--out", self.parts])
        # Each client's work on its row, as a batch system would run it (tests/cli_split_test.cpp).
        with open(self.plan) as f:
            plan = json.load(f)
        # The plan's own inputs as `drx mapreduce run` reads them: the server's, and each
        # client's rows of the placed ones. Every value of this program is an f32[2] (a row).
        client_data = set(plan.get("client_data_inputs", {}))
        for name in plan["inputs"]:
            for client in (range(plan["clients"]) if name in client_data else [None]):
                where = (p("server", name + ".npy") if client is None else
                         p("client_data", str(client), name + ".npy"))
                os.makedirs(os.path.dirname(where), exist_ok=True)
                write_npy_f32(where, [float((client or 0) + 1), 2.0])
        stage = plan["stages"][0]
        work = stage["client_work"]
        for client in range(plan["clients"]):
            args = ["run", os.path.join(self.parts, work["file"])]
            for k, name in enumerate(work["inputs"]):
                value = p("clients_in", str(client), name + ".npy")
                os.makedirs(os.path.dirname(value), exist_ok=True)
                write_npy_f32(value, [float(client + 1), float(k + 2)])
                args += ["--arg", value]
            for name in work["outputs"]:
                out = p("clients", str(client), name + ".npy")
                os.makedirs(os.path.dirname(out), exist_ok=True)
                args += ["--out", out]
            self._made_by(drx, args)

    def _made_by(self, drx, args):
        code, _, err, _ = drx.run(args, self.root)
        if code != 0:
            raise SystemExit("cli_fuzz: making the inputs, `drx %s` exited %s:\n%s" %
                             (" ".join(args), code, err))


OUT = "{OUT}"  # replaced by a fresh folder per invocation
# Relative to each invocation's own fresh working folder, so that no run sees what another
# wrote: a folder that exists there, and a name that does not.
A_FOLDER, MISSING = "a_folder", "no_such_file.drx"


def known_bases(inputs):
    """Valid invocations of the commands known today; others get one built from their usage."""
    tiny_fedavg = ["--clients", "4", "--cohort", "2", "--max-examples", "200", "--hidden", "8",
                   "--eval-every", "1", "--checkpoint-every", "1", "--quiet", "--out", OUT]
    tiny_lm = ["--cohort", "2", "--local-steps", "1", "--batch", "1",
               "--context", "8", "--layers", "1", "--width", "8", "--heads", "1",
               "--eval-windows", "1", "--eval-every", "1", "--quiet", "--out", OUT]
    return {
        "demo": [],
        "run": [inputs.program, "--arg", "1,2,3", "--arg", inputs.npy],
        "check": [inputs.program],
        "import": [inputs.module],
        "export": [inputs.mapreduce, "--mesh", "clients=3"],
        "split": [inputs.mapreduce, "--out", OUT],
        "aggregate": [inputs.plan, "--stage", "0", "--clients", inputs.clients, "--out", OUT],
        "mapreduce": ["run", inputs.plan, "--server", inputs.server, "--clients",
                      inputs.client_data, "--out", OUT],
        "fedavg": tiny_fedavg,
        "lm": tiny_lm,
    }


def placeholder_value(word, flag, inputs):
    """A valid-looking value for a placeholder of a usage line (commands not known here)."""
    w = word.strip("[].")
    if flag in ("--out", "-o") or w in ("OUT", "OUTDIR"):
        return OUT
    if flag == "--clients" or w.startswith("CLIENT"):
        return inputs.clients
    if "PLAN" in w or w.endswith(".json"):
        return inputs.plan
    if w.endswith(".mlir"):
        return inputs.module
    if w.endswith(".npy"):
        return inputs.npy
    if w in ("DIR", "PARTS"):
        return inputs.parts
    if w.startswith("FILE") or w.startswith("PROG"):
        return inputs.mapreduce
    return "0" if flag == "--stage" else "1"


def generic_base(command, inputs):
    """A guessed valid invocation: the usage line's required words, placeholders filled in."""
    args = []
    words = command.usage.split()
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("["):
            depth = w.count("[") - w.count("]")
            while depth > 0 and i + 1 < len(words):
                i += 1
                depth += words[i].count("[") - words[i].count("]")
        elif w.startswith("-"):
            args.append(w)
            if i + 1 < len(words) and not words[i + 1].startswith(("-", "[")):
                i += 1
                args.append(placeholder_value(words[i], w, inputs))
        elif w.isupper() or "." in w or w.startswith("FILE"):
            args.append(placeholder_value(w, None, inputs))
        else:
            args.append(w)  # a subcommand word, as in `drx mapreduce run PLAN`
        i += 1
    return args


# ---- the invocations ----------------------------------------------------------------------

def bad_values(inputs):
    # Besides the plainly wrong, numbers that are fine alone and wrong beside the tiny
    # model and population: 3 and 7 divide nothing, exceed the cohort, the clients...
    return ["", "-1", "0", "1e308", "nan", "inf", "-inf", "abc", "1.5", "-0", "3", "7", "1000",
            "18446744073709551616", "0x10", " 1", "1,2", "x" * 5000,
            A_FOLDER, MISSING, "a=b", "-"]


def value_flags_in(args, command):
    """Positions of the flags in args that take a value."""
    return [i for i, a in enumerate(args) if a in command.flags and command.flags[a].takes_value]


def without_flag(args, flag, command):
    """args less every occurrence of flag (and its value)."""
    out, i = [], 0
    takes = command.flags.get(flag) is not None and command.flags[flag].takes_value
    while i < len(args):
        if args[i] == flag or args[i].startswith(flag + "="):
            i += 2 if takes and args[i] == flag else 1
            continue
        out.append(args[i])
        i += 1
    return out


def with_training_limits(command, args):
    """`--rounds 1 --max-seconds 2` unless args set them (the flag under test)."""
    if not command.trains:
        return args
    extra = []
    for flag, value in (("--rounds", "1"), ("--max-seconds", "2")):
        if not any(a == flag or a.startswith(flag + "=") for a in args):
            extra += [flag, value]
    return extra + args


def positional_of(base):
    """Index of the base's first positional argument (a file), or None."""
    for i, a in enumerate(base):
        if a.startswith("-"):
            return None
        if os.path.isabs(a) and os.path.exists(a):
            return i
    return None


def candidates(command, base, inputs, rng, exhaustive):
    """(tier, kind, label, args) for one command: under the budget tier 0 (the valid
    invocation) is kept whole, then tier 1 (a bad value for every flag, garbage for every
    command), then as many of tier 2 (missing values, repeats, more values) as fit."""
    bad = bad_values(inputs)
    out = [(0, "valid", "valid", base)]
    flags = list(command.flags.values())
    offset = rng.randrange(len(bad))
    for n, f in enumerate(flags):
        rest = without_flag(base, f.name, command)
        if f.takes_value and f.names_path:
            # What found every internal error so far: a path that is empty or too long.
            for v, form in (("", n % 2 == 0), ("x" * 5000, n % 2 == 1)):
                args = rest + ([f.name + "=" + v] if form else [f.name, v])
                out.append((1, "bad value", "%s bad value %r" % (f.name, v[:20]), args))
        elif f.takes_value:
            # Cycled through the list, so that every bad value meets several flags; every
            # third one in the --flag=VALUE form.
            v = bad[(offset + n) % len(bad)]
            args = rest + ([f.name + "=" + v] if n % 3 == 2 else [f.name, v])
            out.append((1, "bad value", "%s bad value %r" % (f.name, v[:20]), args))
        if f.takes_value:
            out.append((2, "value missing", "%s value missing" % f.name, rest + [f.name]))
            twice = [f.name, f.default(), f.name, f.default()]
            out.append((2, "twice", "%s twice" % f.name, rest + twice))
            for v in (bad if exhaustive else rng.sample(bad, 2)):
                form = rng.random() < 0.4
                args = rest + ([f.name + "=" + v] if form else [f.name, v])
                label = "%s %s %r" % (f.name, "=" if form else "value", v[:20])
                out.append((2, "more values", label, args))
        else:
            out.append((1, "bad value", "%s=VALUE on a flag without one" % f.name,
                        base + [f.name + "=abc"]))
            out.append((2, "twice", "%s twice" % f.name, rest + [f.name, f.name]))
            out.append((2, "more values", "%s=" % f.name, base + [f.name + "="]))
    for tier, label, args in (
            (1, "unknown flag", base + ["--no-such-flag"]),
            (1, "positional garbage", base + ["garbage"]),
            (1, "no arguments", []),
            (2, "unknown flag with value", base + ["--no-such-flag=1"]),
            (2, "lone dash", base + ["-"]),
            (2, "double dash", base + ["--"]),
            (2, "help among arguments", base + ["--help"]),
            (2, "single-dash flag", base + ["-x"])):
        out.append((tier, "garbage", label, args))
    at = positional_of(base)
    if at is not None:
        for label, value in (("missing file", MISSING), ("a folder", A_FOLDER),
                             ("garbage file", inputs.garbage), ("empty file", inputs.empty),
                             (".npy array as the file", inputs.npy), ("empty string", ""),
                             ("drx text named .mlir", inputs.drx_as_mlir),
                             ("standard input", "-"), ("overlong path", "y" * 5000)):
            tier = 1 if label in ("missing file", "a folder", "garbage file") else 2
            out.append((tier, "garbage", "FILE: " + label, base[:at] + [value] + base[at + 1:]))
    return out


def plan_invocations(commands, inputs, budget, rng, skipped, exhaustive):
    """The invocations, at most budget: [(command, base guessed?, kind, label, args)]."""
    known = known_bases(inputs)
    per_command = []
    for c in commands:
        if c.name in skipped:
            continue
        base = known.get(c.name)
        guessed = base is None
        if guessed:
            base = generic_base(c, inputs)
        per_command.append((c, guessed, candidates(c, base, inputs, rng, exhaustive)))
    chosen = []
    for tier in range(3):
        pool = [(c, guessed, kind, label, args) for c, guessed, cands in per_command
                for t, kind, label, args in cands if t == tier]
        if tier > 0:
            rng.shuffle(pool)
        chosen += pool[:max(0, budget - len(chosen))]
    return [(c, guessed, kind, label, [c.name] + with_training_limits(c, args))
            for c, guessed, kind, label, args in chosen]


# ---- running them -------------------------------------------------------------------------

def verdict(code, out, err, label, guessed):
    """None when the run is fine, else why it failed."""
    if code is None:
        return "timed out (a hang)"
    if code < 0:
        return "killed by signal %d" % -code
    if code not in ALLOWED_CODES:
        return "exit code %d outside 0-3" % code
    for word in CRASH_WORDS:
        if word in err or word in out:
            return "output says %r" % word
    if label == "valid" and code != 0 and not guessed:
        return "a valid invocation failed (exit %d): the fuzz would not reach past it" % code
    return None


def shell_quote(a):
    """a as a shell word, exactly: a long run of one character as the printf that makes it."""
    if a == "":
        return "''"
    if len(a) > 60 and len(set(a)) == 1 and re.match(r"^[A-Za-z0-9]$", a[0]):
        return "\"$(printf '%s%%.0s' {1..%d})\"" % (a[0], len(a))
    return a if re.match(r"^[A-Za-z0-9_./=,:+@%-]+$", a) else "'" + a.replace("'", "'\\''") + "'"


def main():
    ap = argparse.ArgumentParser(description="Fuzz every drx command's flags.")
    ap.add_argument("drx")
    ap.add_argument("workdir")
    ap.add_argument("--max-invocations", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--only", default="", help="fuzz only these commands (comma-separated)")
    ap.add_argument("--skip", default="", help="leave these commands out (comma-separated)")
    ap.add_argument("--list", action="store_true", help="print the invocations, run none")
    ap.add_argument("--exhaustive", action="store_true",
                    help="every bad value for every flag (exploring; raise --max-invocations)")
    ap.add_argument("--verbose", action="store_true",
                    help="print every invocation with its exit code and last line of stderr")
    opts = ap.parse_args()
    started = time.monotonic()
    drx = Drx(os.path.abspath(opts.drx), opts.timeout)
    work = os.path.abspath(opts.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    commands = discover(drx, work)
    skipped = {}
    for c in commands:
        data = c.flags.get("--data")
        default = data.default() if data else None
        if default and default.startswith("/") and not (os.path.isdir(default) and
                                                         os.listdir(default)):
            skipped[c.name] = default
    for name, path in sorted(skipped.items()):
        print("SKIP: drx %s not fuzzed: its data set %s is not installed (scripts/setup.sh)" %
              (name, path))
    missing_data = sorted(skipped)
    only = set(filter(None, opts.only.split(",")))
    for c in commands:
        if (only and c.name not in only) or c.name in opts.skip.split(","):
            skipped.setdefault(c.name, None)
    inputs = Inputs(drx, work)
    rng = random.Random(opts.seed)
    plan = plan_invocations(commands, inputs, opts.max_invocations, rng, skipped,
                            opts.exhaustive)
    if opts.list:
        for c, _, _, label, args in plan:
            print("%-40s drx %s" % (label[:40], " ".join(shell_quote(a) for a in args)))
        return 0

    def one(n, item):
        c, guessed, kind, label, args = item
        cwd = os.path.join(work, "run-%03d" % n)
        out_dir = os.path.join(cwd, "out")
        os.makedirs(os.path.join(cwd, A_FOLDER))
        args = [out_dir if a == OUT else a for a in args]
        code, out, err, seconds = drx.run(args, cwd)
        why = verdict(code, out, err, label, guessed)
        if not why:  # a failure's folder stays, to run it again there
            shutil.rmtree(cwd, ignore_errors=True)
        return Result(c.name, kind, label, args, code, err, seconds, why, cwd)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        results = list(pool.map(lambda a: one(*a), enumerate(plan)))
    report(commands, results, time.monotonic() - started, opts)
    failures = [r for r in results if r.why]
    if failures:
        print("\n%d of %d invocations failed" % (len(failures), len(results)))
        return 1
    shutil.rmtree(work, ignore_errors=True)
    if missing_data:
        print("no failures; skipped (data not installed): " + ", ".join(missing_data))
        return EXIT_SKIP
    print("no failures")
    return 0


Result = collections.namedtuple("Result", "command kind label args code err seconds why cwd")


def report(commands, results, elapsed, opts):
    """The summary: invocations per command and kind, exit codes, and each failure."""
    quoted = lambda args: " ".join(shell_quote(a) for a in args)
    per_command = collections.Counter(r.command for r in results)
    kinds = ("valid", "bad value", "value missing", "twice", "more values", "garbage")
    print("drx CLI fuzz: %d invocations over %d commands in %.1f s (%d jobs, seed %d)" %
          (len(results), len(per_command), elapsed, opts.jobs, opts.seed))
    print("  %-10s %5s %5s  " % ("command", "flags", "runs") +
          " ".join("%-13s" % k for k in kinds))
    for c in commands:
        if c.name not in per_command:
            continue
        mine = collections.Counter(r.kind for r in results if r.command == c.name)
        print("  %-10s %5d %5d  " % (c.name, len(c.flags), per_command[c.name]) +
              " ".join("%-13d" % mine[k] for k in kinds))
    codes = collections.Counter("timeout" if r.code is None else str(r.code) for r in results)
    print("exit codes: " + ", ".join("%s: %d" % kv for kv in sorted(codes.items())))
    slowest = max(results, key=lambda r: r.seconds)
    print("slowest: %.1f s: drx %s" % (slowest.seconds, quoted(slowest.args)))
    if opts.verbose:
        for r in results:
            last = (r.err.strip().splitlines() or [""])[-1 if r.code == 0 else 0]
            print("[%s] %-36s drx %s\n      %s" % (r.code, r.label[:36], quoted(r.args),
                                                 last[:200]))
    for r in results:
        if not r.why:
            continue
        print("\nFAIL (%s): %s" % (r.label, r.why))
        print("  cd %s && %s %s" % (r.cwd, os.path.abspath(opts.drx), quoted(r.args)))
        print("  exit code %s after %.1f s; stderr ends:" % (r.code, r.seconds))
        for line in r.err.strip().splitlines()[-8:]:
            print("    " + line[:300])


if __name__ == "__main__":
    sys.exit(main())
