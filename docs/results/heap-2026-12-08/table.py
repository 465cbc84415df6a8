# Min-max over the rounds of a sweep, out of place: time (us) up to 16 KB, busbw (GB/s) from 64 KB; and the
# heap-over-Open MPI ratio per round at the large sizes. Usage: python3 table.py DIR
import glob, os, sys
d = sys.argv[1]
def load(f):
    r = {}
    for l in open(f):
        p = l.split()
        if len(p) >= 13 and p[0].isdigit():
            r[int(p[0])] = (float(p[5]), float(p[7]), float(p[9]), float(p[11]))
    return r
kinds = ["heap", "mem", "mpi", "gloo"]
sizes = [16, 4096, 16384, 1 << 20, 16 << 20, 64 << 20, 256 << 20]
for n in (2, 4):
    runs = {k: [load(f) for f in sorted(glob.glob(f"{d}/{k}-np{n}-r*.txt"))] for k in kinds}
    print(f"## {n} processes, out of place")
    print("| size | " + " | ".join(f"{k} ({len(runs[k])})" for k in kinds) + " |")
    for s in sizes:
        cells = []
        for k in kinds:
            v = [r[s][0] if s <= 16384 else r[s][1] for r in runs[k] if s in r]
            u = " us" if s <= 16384 else ""
            cells.append(f"{min(v):.2f}-{max(v):.2f}{u}" if len(v) > 1 else (f"{v[0]:.2f}{u}" if v else "-"))
        print(f"| {s} | " + " | ".join(cells) + " |")
    for s in (64 << 20, 256 << 20):
        rr = [h[s][1] / m[s][1] for h, m in zip(runs["heap"], runs["mpi"]) if s in h and s in m]
        ri = [h[s][3] / m[s][3] for h, m in zip(runs["heap"], runs["mpi"]) if s in h and s in m]
        print(f"heap/mpi at {s}: out of place " + ", ".join(f"{x:.2f}" for x in rr) + "; in place " + ", ".join(f"{x:.2f}" for x in ri))
    for s in (64 << 20, 256 << 20):
        v = [r[s][3] for r in runs["heap"] if s in r]
        print(f"heap in place at {s}: {min(v):.2f}-{max(v):.2f}")
