"""summarize.py - turn a bench/allreduce.sh result folder into the BENCHMARKS.md tables.

Run: python3 bench/summarize.py bench/results/<run>

goccl's files are nccl-tests reports (several per file, one per transport/algorithm,
named by the "# goccl transport: ... algorithm: ..." header line); the peers' files are
tab-separated (size time_us algbw busbw wrong). Uses out-of-place numbers.
"""
import glob
import os
import re
import sys


def goccl_reports(path):
    """Yield (label, {size: (time_us, busbw, wrong)}) for each report in a goccl file."""
    label, rows = None, {}
    for line in open(path):
        m = re.match(r"# goccl transport: (\S+) .*algorithm: (\S+)", line)
        if m:
            if label and rows:
                yield label, rows
            label, rows = f"goccl {m.group(1)}/{m.group(2)}", {}
            continue
        f = line.split()
        if label and len(f) >= 13 and f[0].isdigit():
            rows[int(f[0])] = (float(f[5]), float(f[7]), f[8])
    if label and rows:
        yield label, rows


def peer(path):
    rows = {}
    for line in open(path):
        f = line.split("\t")
        if len(f) == 5 and f[0].isdigit():
            rows[int(f[0])] = (float(f[1]), float(f[3]), f[4].strip())
    return rows


def human(b):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def main(d):
    bounds = []
    for np in (2, 4):
        cols = {}
        for r in ("small", "large"):
            f = os.path.join(d, f"goccl_np{np}_{r}.txt")
            if os.path.exists(f):
                for label, rows in goccl_reports(f):
                    cols.setdefault(label, {}).update(rows)
            for name, pat in (("Open MPI vader", "mpi_vader"), ("Open MPI tcp", "mpi_tcp"), ("gloo", "gloo")):
                f = os.path.join(d, f"{pat}_np{np}_{r}.tsv")
                if os.path.exists(f):
                    cols.setdefault(name, {}).update(peer(f))
        if not cols:
            continue
        sizes = sorted({s for c in cols.values() for s in c})
        names = list(cols)
        bad = [(n, s) for n in names for s, v in cols[n].items() if v[2] not in ("0", "N/A")]
        for title, idx, fmt in (("busbw (GB/s)", 1, "{:.2f}"), ("time per call (us)", 0, "{:.1f}")):
            print(f"\n### {np} ranks: {title}\n")
            print("| size | " + " | ".join(names) + " |")
            print("|---:|" + "---:|" * len(names))
            for s in sizes:
                cells = [fmt.format(cols[n][s][idx]) if s in cols[n] else "" for n in names]
                print(f"| {human(s)} | " + " | ".join(cells) + " |")
        if bad:
            print(f"\nWRONG DATA: {bad}")
        else:
            print(f"\nEvery point reported 0 wrong elements.")
        bounds.append((np, cols))
    membw(d, bounds)


def membw(d, bounds):
    """Print goccl's shm busbw at 64 MiB as a fraction of the memory bound.

    The bound is a ring AllReduce whose every step is one copy (single-copy reads, the
    reduction fused into the read): per rank 5(W-1)/W bytes of memory traffic per input
    byte (reduce-scatter reads the peer's and its own data and writes the sum, all-gather
    reads and writes), all W ranks sharing the machine's traffic bandwidth 2C, where C is
    membw's two-thread copy rate. busbw = algbw * 2(W-1)/W then gives 4C/(5W).
    """
    path = os.path.join(d, "membw.txt")
    if not os.path.exists(path):
        return
    m = re.search(r"copy2_gbs\s+([0-9.]+)", open(path).read())
    if not m:
        return
    c = float(m.group(1))
    print(f"\n### Memory bound (bench/membw: two threads copy {c:.2f} GB/s)\n")
    print("| ranks | bound busbw 4C/(5W) | " + " | ".join(f"{n} 64 MiB" for n in ("goccl shm/auto", "goccl shm/ring", "Open MPI vader")) + " |")
    print("|---:|---:|---:|---:|---:|")
    for np, cols in bounds:
        bound = 4 * c / (5 * np)
        cells = []
        for n in ("goccl shm/auto", "goccl shm/ring", "Open MPI vader"):
            v = cols.get(n, {}).get(64 << 20)
            cells.append(f"{v[1]:.2f} ({100 * v[1] / bound:.0f} %)" if v else "")
        print(f"| {np} | {bound:.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else max(glob.glob("bench/results/*"), key=os.path.getmtime))
