"""Peak memory of a GBDT fit per process, for 1, 2 and 4 workers on a local cluster.

    python3 benches/gbdt_scaleout.py GBDT TRAIN.csv TEST.csv [WORKERS ..] [-- GBDT ARGS ..]

Runs `GBDT --train TRAIN --test TEST --label y --workers W --min-rows-per-worker 1` (the
gbdt example, release build) for each W (default 1 2 4) and polls /proc every 50 ms for the
driver and every process it started (the worker processes of its local cluster), keeping
each one's peak resident set (VmHWM). Prints one JSON line per W: the driver's peak, the
largest and the sum of the worker processes' peaks, the test metric and the fit's seconds.
"""

import json
import os
import subprocess
import sys
import time


def children_of(root):
    """Every descendant of `root` now alive."""
    parent = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parent[int(pid)] = int(fields[1])
        except OSError:
            continue
    out, frontier = set(), {root}
    while frontier:
        nxt = {p for p, pp in parent.items() if pp in frontier and p not in out}
        out |= nxt
        frontier = nxt
    return out


def hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run(gbdt, train, test, workers, extra):
    cmd = [gbdt, "--train", train, "--test", test, "--label", "y", "--workers", str(workers),
           "--min-rows-per-worker", "1", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peaks = {}
    while proc.poll() is None:
        for pid in {proc.pid} | children_of(proc.pid):
            kib = hwm_kib(pid)
            if kib is not None:
                peaks[pid] = max(peaks.get(pid, 0), kib)
        time.sleep(0.05)
    out = proc.stdout.read()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} exited with {proc.returncode}:\n{out}")
    kv = dict(part.split("=", 1) for line in out.splitlines() for part in line.split() if "=" in part)
    driver = peaks.pop(proc.pid, 0)
    workers_peaks = sorted(peaks.values(), reverse=True)
    metric = next(m for m in ("rmse", "logloss", "mlogloss") if m in kv)
    return {
        "workers": workers,
        "workers_used": int(kv.get("workers_used", workers)),
        "driver_peak_mib": round(driver / 1024, 1),
        "worker_processes": len(workers_peaks),
        "largest_worker_peak_mib": round(workers_peaks[0] / 1024, 1) if workers_peaks else 0,
        "worker_peaks_mib": [round(k / 1024, 1) for k in workers_peaks],
        metric: float(kv[metric]),
        "train_seconds": float(kv["train_seconds"]),
    }


def main(argv):
    if len(argv) < 4:
        raise SystemExit(__doc__)
    gbdt, train, test = argv[1:4]
    rest = argv[4:]
    extra = []
    if "--" in rest:
        i = rest.index("--")
        rest, extra = rest[:i], rest[i + 1:]
    for w in [int(x) for x in rest] or [1, 2, 4]:
        print(json.dumps(run(gbdt, train, test, w, extra)), flush=True)


if __name__ == "__main__":
    main(sys.argv)
