#!/usr/bin/env python3
"""auto.py - summarise bench/auto.sh: is auto within 10 % of the best fixed algorithm?

    python3 bench/auto.py OUTDIR/auto.tsv [MORE/auto.tsv ...]   # rounds of several runs pooled

Per rank count and size: the median out-of-place time of every algorithm over the
rounds, the best fixed one, auto's median against it ("auto/best"), and what auto ran
with the median of that algorithm's own row against the best ("pick/best": the choice
itself, free of the noise between auto's row and the row of the algorithm it runs).
"""
import collections
import statistics
import sys

FIXED = ["ring", "tree", "rd", "naive", "staged"]


def human(b):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"


def main(paths):
    times = collections.defaultdict(list)  # (ranks, bytes, algo) -> [us]
    ran = collections.defaultdict(collections.Counter)  # (ranks, bytes) -> algorithms auto ran
    rounds = set()
    for path in paths:
        with open(path) as f:
            next(f)
            for line in f:
                np_, b, algo, rnd, t, picked = line.rstrip("\n").split("\t")
                key = (int(np_), int(b))
                times[key + (algo,)].append(float(t))
                rounds.add((path, rnd))
                if algo == "auto":
                    ran[key][picked] += 1
    keys = sorted({k[:2] for k in times})
    print(f"Medians of {len(rounds)} rounds, out-of-place us per call (`goccl perf <collective> --algo ...`, the transport auto.sh ran: TRANSPORT, default shm).")
    print("auto/best: auto's median over the best fixed median; pick/best: the median of the algorithm auto ran, over the best.")
    print()
    print("| ranks | size | " + " | ".join(["auto"] + FIXED) + " | best | auto ran | auto/best | pick/best |")
    print("|---|---|" + "---|" * (len(FIXED) + 5))
    summary = collections.defaultdict(lambda: [0, 0, 0, []])  # ranks -> [points, auto ok, pick ok, misses]
    for np_, b in keys:
        med = {a: statistics.median(times[(np_, b, a)]) for a in ["auto"] + FIXED if times.get((np_, b, a))}
        fixed = {a: med[a] for a in FIXED if a in med}
        if "auto" not in med or not fixed:
            continue
        best = min(fixed, key=fixed.get)
        picked = ran[(np_, b)].most_common(1)[0][0] if ran[(np_, b)] else "?"
        ar = med["auto"] / fixed[best]
        pr = fixed.get(picked, float("nan")) / fixed[best]
        s = summary[np_]
        s[0] += 1
        s[1] += ar <= 1.10
        s[2] += pr <= 1.10
        if pr > 1.10:
            s[3].append(f"{human(b)} ({picked} {pr:.2f}x {best})")
        cells = [f"{med[a]:.1f}" if a in med else "-" for a in ["auto"] + FIXED]
        print(f"| {np_} | {human(b)} | " + " | ".join(cells) + f" | {best} | {picked} | {ar:.2f} | {pr:.2f} |")
    print()
    for np_, (n, aok, pok, misses) in sorted(summary.items()):
        print(f"- {np_} ranks: auto's row within 10 % of the best at {aok}/{n} sizes; its choice at {pok}/{n}"
              + (f"; choice off by more at {', '.join(misses)}" if misses else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
