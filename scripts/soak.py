#!/usr/bin/env python3
"""Soak braid's failure handling: random kill -9s and SIGSTOPs of one rank of a 4-rank job.

Each trial starts NRANKS processes of build/tests/braid_soak_worker (init, checked all-reduces, destroy), waits
until a random victim reaches a random phase (init, ops or destroy), sleeps a random moment and sends SIGKILL or
SIGSTOP. Then it checks what braid promises (docs/hardening.md):
  - no survivor hangs: every one exits within BRAID_TIMEOUT plus a margin;
  - a survivor that fails names the victim ("rank V") in its error;
  - nothing is left behind in BRAID_SHM_DIR or /dev/shm (braid-<pid>-* of the job's processes).
It prints a line per trial that broke a promise and a summary. Not run in CI (minutes of wall time).

  python3 scripts/soak.py [--kills 100] [--stops 24] [--ranks 4] [--build build] [--seed S]
"""
import argparse
import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def wait_phase(path, want, deadline):
    """Waits until the worker's phase file says `want` (or a later phase); False at the deadline."""
    order = ["init", "ops", "destroy", "done"]
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                got = f.read().strip()
            if got in order and order.index(got) >= order.index(want):
                return True
        except OSError:
            pass
        time.sleep(0.001)
    return False


def leftovers(shm_dir, pids):
    found = [os.path.join(shm_dir, n) for n in os.listdir(shm_dir)]
    for pid in pids:
        found += glob.glob("/dev/shm/braid-%d-*" % pid)
    return found


def run_trial(args, worker, info, trial, mode, rng):
    work = tempfile.mkdtemp(prefix="braid-soak-")
    shm_dir = os.path.join(work, "shm")
    os.mkdir(shm_dir)
    env = dict(os.environ)
    env["BRAID_TIMEOUT"] = str(args.timeout)
    env["BRAID_SHM_DIR"] = shm_dir
    env["BRAID_FLIGHT_RECORDER_FILE"] = os.path.join(work, "fr-%p.json")
    env.pop("NCCL_DEBUG", None)
    victim = rng.randrange(args.ranks)
    phase = rng.choice(["init", "ops", "destroy"] if mode == "kill" else ["init", "ops"])
    procs = []
    for r in range(args.ranks):
        cmd = [worker, work, str(r), str(args.ranks), str(args.iters), str(args.count)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    pids = [p.pid for p in procs]
    problems = []
    start = time.monotonic()
    reached = wait_phase(os.path.join(work, "phase.%d" % victim), phase, start + 60)
    # A moment into the phase: init and destroy are short, operations long.
    time.sleep(rng.uniform(0, {"init": 0.05, "ops": 0.5, "destroy": 0.003}[phase]))
    sig = signal.SIGKILL if mode == "kill" else signal.SIGSTOP
    os.kill(pids[victim], sig)
    hit = time.monotonic()
    if not reached:
        problems.append("victim never reached phase %s within 60 s" % phase)
    deadline = hit + args.timeout + 20
    outputs = {}
    hung = []
    for r, p in enumerate(procs):
        if r == victim:
            continue
        try:
            out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            outputs[r] = (p.returncode, out.strip(), time.monotonic() - hit)
        except subprocess.TimeoutExpired:
            hung.append(r)
    for r in hung:
        procs[r].kill()
        out, _ = procs[r].communicate()
        outputs[r] = (None, out.strip(), None)
        problems.append("HANG: rank %d still running %d s after the %s" % (r, args.timeout + 20, mode))
    procs[victim].kill()
    procs[victim].communicate()
    failed_named = failed_unnamed = finished = 0
    slowest = 0.0
    for r, (rc, out, secs) in sorted(outputs.items()):
        if rc == 0:
            finished += 1
            continue
        if rc is None:
            continue
        slowest = max(slowest, secs)
        if ("rank %d" % victim) in out:
            failed_named += 1
        else:
            failed_unnamed += 1
            problems.append("rank %d failed without naming rank %d: %s" % (r, victim, out[-400:]))
    left = leftovers(shm_dir, pids)
    if left:
        problems.append("left behind: %s" % " ".join(left))
    if problems and args.analyze:
        report = subprocess.run([info, "--analyze", work], capture_output=True, text=True)
        problems.append("braid-info --analyze:\n" + report.stdout)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "trial": trial, "mode": mode, "phase": phase, "victim": victim, "problems": problems, "hung": len(hung),
        "named": failed_named, "unnamed": failed_unnamed, "finished": finished, "slowest": slowest,
        "leftovers": len(left),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--stops", type=int, default=24)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--iters", type=int, default=20000, help="all-reduces per rank (about 1-2 s)")
    ap.add_argument("--count", type=int, default=1 << 14, help="floats per all-reduce")
    ap.add_argument("--timeout", type=int, default=5, help="BRAID_TIMEOUT for the jobs, seconds")
    ap.add_argument("--build", default="build")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--analyze", action="store_true", help="print braid-info --analyze for failed trials")
    args = ap.parse_args()
    worker = os.path.join(args.build, "tests", "braid_soak_worker")
    info = os.path.join(args.build, "tools", "info", "braid-info")
    if not os.access(worker, os.X_OK):
        sys.exit("%s not found: build first (bash scripts/setup.sh)" % worker)
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    modes = ["kill"] * args.kills + ["stop"] * args.stops
    rng.shuffle(modes)
    print("soak: %d kill -9s and %d SIGSTOPs of one of %d ranks, BRAID_TIMEOUT=%d, seed %d" %
          (args.kills, args.stops, args.ranks, args.timeout, seed))
    results = []
    for i, mode in enumerate(modes):
        res = run_trial(args, worker, info, i, mode, rng)
        results.append(res)
        if res["problems"]:
            print("trial %d (%s rank %d in %s):" % (i, mode, res["victim"], res["phase"]))
            for p in res["problems"]:
                print("  " + p)
        sys.stdout.flush()
    for mode in ("kill", "stop"):
        rs = [r for r in results if r["mode"] == mode]
        if not rs:
            continue
        named = sum(r["named"] for r in rs)
        unnamed = sum(r["unnamed"] for r in rs)
        print("%s: %d trials, %d hangs, survivors that failed: %d named the victim, %d did not; survivors that "
              "finished first: %d; slowest failure %.2f s after the signal; trials with leftover files: %d" %
              (mode, len(rs), sum(r["hung"] for r in rs), named, unnamed, sum(r["finished"] for r in rs),
               max(r["slowest"] for r in rs), sum(1 for r in rs if r["leftovers"])))
        for phase in ("init", "ops", "destroy"):
            n = sum(1 for r in rs if r["phase"] == phase)
            if n:
                print("  %s: %d trials" % (phase, n))
    bad = sum(1 for r in results if r["problems"])
    print("soak: %d of %d trials broke a promise" % (bad, len(results)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
