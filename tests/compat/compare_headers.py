#!/usr/bin/env python3
"""compat_nvidia_header: checks that braid's nccl.h is interchangeable with NVIDIA's.

1. Runs dump_abi built against NVIDIA's header and dump_abi built (one or more ways) against braid's, and requires
   identical outputs: every constant, enum value, macro value and type, struct size, field offset and type,
   initializer value, and the full type of every API function.
2. Extracts the functions each header declares and requires the same set (NVIDIA's function list is the checklist).
3. Requires the dumps to cover every function NVIDIA declares, so a function added to NVIDIA's header cannot slip
   past step 1 unnoticed.

Usage: compare_headers.py --nvidia-header H --braid-header H --nvidia-dump EXE --braid-dump EXE [--braid-dump EXE]
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
    args = parser.parse_args()
    failures = []

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
        if braid_out != nvidia_out:
            diff = difflib.unified_diff(nvidia_out.splitlines(), braid_out.splitlines(), "nvidia/nccl.h",
                                        f"braid/nccl.h ({os.path.basename(exe)})", lineterm="", n=1)
            failures.append(f"ABI dump differs ({os.path.basename(exe)} vs NVIDIA):\n" + "\n".join(diff))
        else:
            print(f"  identical ABI dump ({len(braid_out.splitlines())} lines)")

    nvidia_functions = declared_functions(args.nvidia_header)
    braid_functions = declared_functions(args.braid_header)
    if len(nvidia_functions) < 10:
        failures.append(f"found only {len(nvidia_functions)} functions in {args.nvidia_header}; is the parser broken?")
    missing = sorted(nvidia_functions - braid_functions)
    extra = sorted(braid_functions - nvidia_functions)
    if missing:
        failures.append("functions NVIDIA's nccl.h declares but braid's does not:\n  " + "\n  ".join(missing))
    if extra:
        failures.append("functions braid's nccl.h declares that NVIDIA's does not:\n  " + "\n  ".join(extra))
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
