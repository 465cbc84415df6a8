#!/bin/bash
# The sweep: 3 rounds of braid heap, braid ncclMemAlloc and Open MPI per process count, then Gloo once (the night's
# script with this folder and Gloo). Run from the repository root.
bash docs/results/heap-2026-12-07-night/sweep/run.sh docs/results/heap-2026-12-08 gloo
