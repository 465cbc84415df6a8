#!/usr/bin/env python3
"""compat_exports: checks what libnccl.so.2 exports.

1. Every exported function symbol is named nccl* or pnccl*, or braid* for braid's own extensions (declared in
   nccl.h's marked section), so nothing internal leaks and braid can be linked into any program without clashes.
2. Every function braid's nccl.h declares is exported, both as ncclX and as pncclX.
3. The SONAME is libnccl.so.2, so programs linked against NVIDIA's NCCL load braid and vice versa.
4. With --nvidia-lib: every function NVIDIA's libnccl.so.2 exports (the CUDA toolkit's) is exported by braid's,
   so a program linked against NVIDIA's library loads braid's and finds every symbol it bound.

Usage: check_exports.py --lib libnccl.so.2 --header include/nccl.h [--nvidia-lib LIB] [--nm nm] [--readelf readelf]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nccl_header_functions import declared_functions  # noqa: E402

FUNCTION_TYPES = set("TtWwiI")  # text, weak, indirect (GNU ifunc)
EXPECTED_SONAME = "libnccl.so.2"


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited with {proc.returncode}\n{proc.stderr}")
    return proc.stdout


def exported_symbols(nm, lib):
    """Returns {name: type letter} of the defined dynamic symbols of lib."""
    symbols = {}
    for line in run([nm, "-D", "--defined-only", lib]).splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        kind, name = (parts[1], parts[2]) if len(parts) >= 3 else (parts[0], parts[1])
        if kind == "A":  # version definitions, not code
            continue
        symbols[name.split("@")[0]] = kind
    return symbols


def soname(readelf, objdump, lib):
    if readelf:
        match = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", run([readelf, "-d", lib]))
        return match.group(1) if match else None
    if objdump:
        match = re.search(r"^\s*SONAME\s+(\S+)", run([objdump, "-p", lib]), re.MULTILINE)
        return match.group(1) if match else None
    raise SystemExit("FAIL: neither readelf nor objdump found")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    parser.add_argument("--header", required=True)
    parser.add_argument("--nvidia-lib")
    parser.add_argument("--nm", default=shutil.which("nm") or "nm")
    parser.add_argument("--readelf", default=shutil.which("readelf"))
    parser.add_argument("--objdump", default=shutil.which("objdump"))
    args = parser.parse_args()
    failures = []

    symbols = exported_symbols(args.nm, args.lib)
    functions = {name for name, kind in symbols.items() if kind in FUNCTION_TYPES}
    print(f"{args.lib}: {len(symbols)} defined dynamic symbols, {len(functions)} functions")

    foreign = sorted(name for name in functions if not name.startswith(("nccl", "pnccl", "braid")))
    if foreign:
        failures.append(f"{len(foreign)} exported functions are not named nccl*/pnccl*/braid*:\n  " + "\n  ".join(foreign))
    other = sorted(name for name, kind in symbols.items()
                   if kind not in FUNCTION_TYPES and not (name.startswith("nccl") or name.startswith("pnccl")))
    if other:  # data symbols: reported, not fatal (the linker may add a few of its own)
        print("note: exported non-function symbols outside nccl*/pnccl*: " + ", ".join(other))

    declared = declared_functions(args.header)
    public = {name for name in declared if name.startswith("nccl")}
    if len(public) < 10:
        failures.append(f"found only {len(public)} functions in {args.header}; is the parser broken?")
    wanted = set()
    for name in public:
        wanted.add(name)
        wanted.add("p" + name)
    undeclared_twins = sorted(("p" + name) for name in public if ("p" + name) not in declared)
    if undeclared_twins:
        failures.append("nccl.h lacks the profiling twins:\n  " + "\n  ".join(undeclared_twins))
    missing = sorted(wanted - functions)
    if missing:
        failures.append(f"{len(missing)} functions of nccl.h are not exported as functions:\n  " + "\n  ".join(missing))
    print(f"nccl.h declares {len(public)} functions; checked {len(wanted)} nccl*/pnccl* exports")
    with open(args.header) as f:
        extensions = set(re.findall(r"\b(braid[A-Z]\w*)\s*\(", f.read()))
    missing_ext = sorted(extensions - functions)
    if missing_ext:
        failures.append("braid extensions declared in nccl.h but not exported:\n  " + "\n  ".join(missing_ext))
    print(f"braid extensions exported: {', '.join(sorted(extensions & functions)) or 'none'}")

    if args.nvidia_lib:
        theirs = exported_symbols(args.nm, args.nvidia_lib)
        their_functions = {n for n, kind in theirs.items() if kind in FUNCTION_TYPES}
        lacking = sorted(their_functions - functions)
        print(f"{args.nvidia_lib}: {len(their_functions)} functions; braid exports {len(their_functions) - len(lacking)}"
              f" of them")
        if len(their_functions) < 50:
            failures.append(f"found only {len(their_functions)} functions in {args.nvidia_lib}; is nm's output parsed?")
        if lacking:
            failures.append(f"{len(lacking)} functions NVIDIA's library exports are not exported by braid's:\n  " +
                            "\n  ".join(lacking))

    name = soname(args.readelf, args.objdump, args.lib)
    print(f"SONAME: {name}")
    if name != EXPECTED_SONAME:
        failures.append(f"SONAME is {name!r}, expected {EXPECTED_SONAME!r}")

    if failures:
        print("\nFAIL:\n" + "\n\n".join(failures))
        return 1
    print("PASS: exports and SONAME are as NCCL's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
