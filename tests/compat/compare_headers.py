#!/usr/bin/env python3
"""compat_nvidia_header: checks that braid's nccl.h is interchangeable with NVIDIA's.

NVIDIA's header here is 2.28.9's (the CUDA toolkit's); braid's declares NCCL 2.31's host API, whose differences from
2.28.9 the fixture (--additions, tests/fixtures/compat/nccl_2_31_additions.txt) lists.

1. Runs dump_abi built against NVIDIA's header and dump_abi built (one or more ways) against braid's, and requires
   identical outputs, but for the 2.28.9 lines NCCL 2.29-2.31 changed (the fixture's "-"/"+" pairs): every constant,
   enum value, macro value and type, struct size, field offset and type, initializer value, and the full type of
   every API function.
2. Requires braid's dump of what NCCL 2.29-2.31 added (the part after "---- NCCL 2.29-2.31") to be the fixture's
   ("=" lines).
3. Extracts the functions each header declares and requires braid's to be NVIDIA's plus the fixture's ("f" lines).
4. Requires the dumps to cover every function NVIDIA declares, so a function added to NVIDIA's header cannot slip
   past step 1 unnoticed.

Usage: compare_headers.py --nvidia-header H --braid-header H --nvidia-dump EXE --braid-dump EXE [--braid-dump EXE]
                          --additions FIXTURE
"""

import argparse
import difflib
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nccl_header_functions import declared_functions  # noqa: E402


def run_dump(exe):
    proc = subprocess.run([exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {exe} exited with {proc.returncode}\n{proc.stderr}")
    return proc.stdout, proc.stderr.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nvidia-header", required=True)
    parser.add_argument("--braid-header", required=True)
    parser.add_argument("--nvidia-dump", required=True)
    parser.add_argument("--braid-dump", required=True, action="append")
    parser.add_argument("--additions", required=True)
    args = parser.parse_args()
    failures = []
    changed, added, added_functions = {}, [], set()
    with open(args.additions) as f:
        lines = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]
    for i, line in enumerate(lines):
        kind, text = line[:1], line[2:]
        if kind == "-":
            changed[text] = lines[i + 1][2:]
        elif kind == "=":
            added.append(text)
        elif kind == "f":
            added_functions.add(text)

    nvidia_out, nvidia_id = run_dump(args.nvidia_dump)
    print(f"{args.nvidia_dump}: {nvidia_id}")
    if "header=braid" in nvidia_id:
        failures.append(f"{args.nvidia_dump} was compiled against braid's nccl.h, not NVIDIA's")

    for exe in args.braid_dump:
        braid_out, braid_id = run_dump(exe)
        print(f"{exe}: {braid_id}")
        if "header=braid" not in braid_id:
            failures.append(f"{exe} was not compiled against braid's nccl.h ({braid_id})")
            continue
        braid_lines = braid_out.splitlines()
        marker = "---- NCCL 2.29-2.31"
        braid_added = []
        if marker in braid_lines:
            at = braid_lines.index(marker)
            braid_lines, braid_added = braid_lines[:at], braid_lines[at + 1:]
        expected = [changed.get(line, line) for line in nvidia_out.splitlines()]
        if braid_lines != expected:
            diff = difflib.unified_diff(expected, braid_lines, "nvidia/nccl.h with NCCL 2.29-2.31's changes",
                                        f"braid/nccl.h ({os.path.basename(exe)})", lineterm="", n=1)
            failures.append(f"ABI dump differs ({os.path.basename(exe)} vs NVIDIA):\n" + "\n".join(diff))
        else:
            print(f"  identical ABI dump ({len(braid_lines)} lines, {len(changed)} of them as NCCL 2.29-2.31 changed)")
        if braid_added != added:
            diff = difflib.unified_diff(added, braid_added, "NCCL 2.29-2.31's additions (fixture)",
                                        f"braid/nccl.h ({os.path.basename(exe)})", lineterm="", n=1)
            failures.append(f"NCCL 2.29-2.31 additions differ ({os.path.basename(exe)}):\n" + "\n".join(diff))
        else:
            print(f"  NCCL 2.29-2.31 additions as the fixture has them ({len(added)} lines)")

    nvidia_functions = declared_functions(args.nvidia_header)
    braid_functions = declared_functions(args.braid_header)
    if len(nvidia_functions) < 10:
        failures.append(f"found only {len(nvidia_functions)} functions in {args.nvidia_header}; is the parser broken?")
    missing = sorted((nvidia_functions | added_functions) - braid_functions)
    extra = sorted(braid_functions - nvidia_functions - added_functions)
    if missing:
        failures.append("functions NVIDIA's nccl.h (or NCCL 2.29-2.31) declares but braid's does not:\n  " +
                        "\n  ".join(missing))
    if extra:
        failures.append("functions braid's nccl.h declares that neither NVIDIA's 2.28.9 nor NCCL 2.29-2.31 does:\n  " +
                        "\n  ".join(extra))
    print(f"functions: NVIDIA {len(nvidia_functions)}, braid {len(braid_functions)}")

    dumped = {line.split()[1] for line in nvidia_out.splitlines() if line.startswith("function ") and "==" not in line}
    undumped = sorted(nvidia_functions - dumped)
    if undumped:
        failures.append("functions NVIDIA declares that dump_abi.cc does not check (add them to "
                        "BRAID_NCCL_FUNCTIONS):\n  " + "\n  ".join(undumped))

    if failures:
        print("\nFAIL:\n" + "\n\n".join(failures))
        return 1
    print("PASS: braid's nccl.h matches NVIDIA's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
