#!/usr/bin/env python3
"""ab.py - A/B comparison of goccl perf variants by alternating launches.

    python3 bench/ab.py NP TRANSPORT REPS SIZE:ITERS [SIZE:ITERS ...]

Runs `goccl perf all_reduce --np NP --transport TRANSPORT -b SIZE -e SIZE -n ITERS -w 5`
once per variant, per size, REPS times over, variants alternating so that a slow minute of
the shared VM hits every variant alike, and prints per size and variant the median and the
minimum time per call (us; each launch counts the faster of its out-of-place and in-place
halves, or with OOP=1 the out-of-place one, which is what the headline reports). Variants are a JSON object in AB, name -> extra environment; the key BIN in a
variant names the goccl binary (default: bench/bin/goccl, or $GOCCL_BIN). EXTRA adds perf
flags to every launch; COLL names another collective (default all_reduce). Examples (BENCHMARKS.md, "Speed", 8):

    go build -o bench/bin/goccl ./cmd/goccl
    AB='{"default":{},"gomaxprocs1":{"GOMAXPROCS":"1"}}' python3 bench/ab.py 2 shm 5 8:2000 4M:30
    AB='{"old":{"BIN":"/tmp/goccl-old"},"new":{}}' EXTRA="--algo ring" python3 bench/ab.py 2 shm 4 64M:5

An explicit GOMAXPROCS in a variant overrides the launcher's cores/ranks default.
"""
import json
import os
import statistics
import subprocess
import sys


def size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:].upper(), 1)
    return int(s[:-1] if mult > 1 else s) * mult


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    np_, transport, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    points = [p.split(":") for p in sys.argv[4:]]
    variants = json.loads(os.environ.get("AB", '{"default":{}}'))
    default_bin = os.environ.get("GOCCL_BIN", "bench/bin/goccl")
    extra = os.environ.get("EXTRA", "").split()
    coll = os.environ.get("COLL", "all_reduce")
    oop = os.environ.get("OOP") == "1"
    times = {}
    for _ in range(reps):
        for name, env in variants.items():
            e = dict(os.environ)
            e.update(env)
            binary = e.pop("BIN", default_bin)
            for s, iters in points:
                b = str(size(s))
                out = subprocess.run([binary, "perf", coll, "--np", np_, "--transport", transport,
                                      "-b", b, "-e", b, "-n", iters, "-w", "5"] + extra,
                                     capture_output=True, text=True, env=e)
                rows = [l.split() for l in out.stdout.splitlines()]
                rows = [f for f in rows if len(f) > 10 and f[0].isdigit()]
                if out.returncode != 0 or not rows:
                    sys.exit(f"{name} {s}: goccl perf failed (status {out.returncode}):\n{out.stderr}")
                t = float(rows[0][5]) if oop else min(float(rows[0][5]), float(rows[0][9]))
                times.setdefault((s, name), []).append(t)
    half = "out of place" if oop else "the faster half"
    print(f"# {coll} np={np_} transport={transport} reps={reps} extra={' '.join(extra)!r}; us per call ({half}): median / min")
    for s, _ in points:
        cells = [f"{n}: {statistics.median(times[(s, n)]):9.1f} / {min(times[(s, n)]):9.1f}" for n in variants]
        print(f"{s:>6}  " + "   ".join(cells))


if __name__ == "__main__":
    main()
