#!/usr/bin/env python3
"""Runs the conformance table (runs.txt) through the C driver and through one or more language
drivers, and compares their outputs run by run, byte for byte (README.md in this folder).

  compare.py --runs runs.txt --c 'build/tests/conformance_c' --driver python 'python3 conformance.py' ...

Each driver is a shell command; the runs file is appended as its last argument (and run names
after it when --only is given). Exits 1 naming every run whose outputs differ, or that a driver
did not print; 2 when a driver fails to run.

Launched runs (a `backend` key, README.md) run under shardopt-run: give the drivers' commands
with the launcher in front. --host-twin CMD (the C driver without the launcher) also runs each of
them as it would be without `backend` and `memory`, in-process ranks in host memory, and requires
the C driver's launched output to equal that bit for bit."""
import os
import tempfile
import argparse
import re
import shlex
import struct
import subprocess
import sys


def blocks(text):
    """{run name: [lines]} from a driver's output (a launcher's "[rank] " prefix is dropped, so a
    driver may run as separate processes under shardopt-run with rank 0 printing)."""
    out, name = {}, None
    for line in text.splitlines():
        line = re.sub(r"^\[\d+\] ", "", line)
        if line.startswith("run "):
            name = line[4:].strip()
            out[name] = []
        elif name is not None and line.strip():
            out[name].append(line.rstrip())
    return out


def decode(token):
    """A 16-hex-digit double as a readable number, else the token."""
    if len(token) == 16:
        try:
            return repr(struct.unpack(">d", bytes.fromhex(token))[0])
        except ValueError:
            pass
    return token


def first_difference(a, b):
    for i in range(max(len(a), len(b))):
        la = a[i] if i < len(a) else "<missing>"
        lb = b[i] if i < len(b) else "<missing>"
        if la != lb:
            ta, tb = la.split(), lb.split()
            for k in range(max(len(ta), len(tb))):
                x = ta[k] if k < len(ta) else "<none>"
                y = tb[k] if k < len(tb) else "<none>"
                if x != y:
                    where = f"'{ta[0] if ta else '?'}' item {k}"
                    return f"{where}: {decode(x)} vs {decode(y)}"
    return None


def run_driver(name, command, runs, only):
    args = shlex.split(command) + [runs] + only
    p = subprocess.run(args, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        sys.stderr.write(f"{name} driver failed (exit {p.returncode}):\n{p.stderr[-4000:]}\n")
    return blocks(p.stdout), p.returncode


def table(path, only):
    """The runs of the table file at path (only those named in `only`, when given): one token list each, the name
    first."""
    with open(path) as f:
        return [tok for tok in (line.split() for line in f)
                if tok and not tok[0].startswith("#") and (not only or tok[0] in only)]


def same_as_host_twin(a, reference):
    """Each launched run of the table against the same run with neither backend nor memory (C driver, in-process
    ranks, host memory): True when all are equal bit for bit."""
    twins, on_device = [], set()
    for tok in table(a.runs, a.only):
        if "memory=cuda" in tok[1:]:
            on_device.add(tok[0])
        if any(t.startswith(("backend=", "memory=")) for t in tok[1:]):
            twins.append(" ".join(t for t in tok if not t.startswith(("backend=", "memory="))))
    if not twins:
        return True
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(twins) + "\n")
    try:
        host, rc = run_driver("C (host twin)", a.host_twin, f.name, [])
    finally:
        os.unlink(f.name)
    ok, same = rc == 0, 0
    for twin in twins:
        name = twin.split()[0]
        if name not in reference:
            continue
        if name in on_device and "memory cuda" not in reference[name]:
            print(f"FAIL {name}: the C driver's launched run was not in CUDA memory")
            ok = False
        launched = [line for line in reference[name] if line != "memory cuda"]
        diff = first_difference(host.get(name, []), launched)
        if diff:
            print(f"FAIL {name}: in-process host memory and the launched run differ at {diff}")
            ok = False
        else:
            same += 1
    print(f"host twins: {same} of {len(twins)} launched runs equal to in-process host memory bit for bit")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--c", required=True, help="the C driver's command")
    ap.add_argument("--driver", nargs=2, action="append", default=[], metavar=("LANGUAGE", "COMMAND"))
    ap.add_argument("--only", nargs="*", default=[], help="run names (default: every run)")
    ap.add_argument("--host-twin", metavar="COMMAND",
                    help="the C driver in-process: launched runs must equal their host-memory, in-process twins")
    ap.add_argument("--skip-without-device", action="store_true",
                    help="exit 77 (skipped) when the C driver reports no usable GPU (exit 77)")
    a = ap.parse_args()
    names = [tok[0] for tok in table(a.runs, a.only)]
    reference, rc = run_driver("C", a.c, a.runs, a.only)
    if rc == 77 and a.skip_without_device:
        print("SKIP: the C driver's launched runs found no usable GPU (exit 77)")
        return 77
    failed = rc != 0
    for name in names:
        if name not in reference:
            print(f"FAIL {name}: the C driver printed nothing for it")
            failed = True
    if a.host_twin:
        failed |= not same_as_host_twin(a, reference)
    for language, command in a.driver:
        got, rc = run_driver(language, command, a.runs, a.only)
        failed |= rc != 0
        same = 0
        for name in names:
            if name not in reference:
                continue
            if name not in got:
                print(f"FAIL {name}: {language} printed nothing for it")
                failed = True
                continue
            diff = first_difference(reference[name], got[name])
            if diff:
                print(f"FAIL {name}: C and {language} differ at {diff}")
                failed = True
            else:
                same += 1
        print(f"{language}: {same} of {len(names)} runs equal to C's bit for bit")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
