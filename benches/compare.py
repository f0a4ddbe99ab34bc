"""Sets the engines of one benches/compare.sh run side by side.

Reads JSON lines (files or stdin) of every engine and run, takes the median per (bench,
engine), and prints either those medians as JSON lines (--json) or a markdown table: one row
per workload, a column per engine, the Starling/Ray ratio (how many times better, whichever
way "better" points for the unit), and the issue's targets with met / missed.
"""
import json
import statistics
import sys
from collections import OrderedDict

ENGINES = ["starling-inproc", "starling-local", "starling-cluster", "ray", "dask"]
# Units where a larger value is better; for the rest (ms, us, MiB) smaller is better.
HIGHER = ("tasks/s", "GB/s", "%", "objects/s", "ops/s", "calls/s", "actors/s")
# (bench, kind, value): "ratio" = at least this many times better than Ray (local cluster),
# "at_least" / "at_most" = an absolute bound for the local cluster. The performance issues'
# targets; where a later round raised one, the later one.
TARGETS = OrderedDict([
    ("noop_tasks_async", ("ratio", 150)),
    ("noop_task_sync_latency_median", ("ratio", 30)),
    ("noop_task_sync_latency_p99", ("ratio", 20)),
    ("chain", ("ratio", 50)),
    ("tree_reduce", ("ratio", 30)),
    ("fanout_compute_efficiency", ("at_least", 98.5)),
    ("startup_to_first_result", ("ratio", 20)),
    ("memory_idle_rss_total", ("ratio", 20)),
    ("put_large_bytes", ("ratio", 1.5)),
    ("put_get_large_bytes", ("ratio", 4)),
    ("pass_large_arg_bytes", ("ratio", 10)),
    ("scatter_gather", ("ratio", 10)),
    ("shuffle", ("ratio", 15)),
    ("many_queued", ("at_least", 150_000)),
    ("many_queued_peak_rss", ("at_most", 400)),
    ("actor_calls_sync", ("ratio", 100)),
    ("actor_calls_async", ("ratio", 100)),
    ("actor_calls_n_n", ("ratio", 100)),
    ("actor_creation", ("ratio", 20)),
])


def higher_is_better(unit):
    return unit.startswith(HIGHER)


def ratio(unit, ours, theirs):
    if not ours or not theirs:
        return None
    return ours / theirs if higher_is_better(unit) else theirs / ours


def fmt(x):
    if x is None:
        return "—"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def main():
    as_json = "--json" in sys.argv
    files = [a for a in sys.argv[1:] if not a.startswith("--")]
    lines = []
    for f in files or ["-"]:
        fh = sys.stdin if f == "-" else open(f)
        for line in fh:
            line = line.strip()
            if line.startswith("{"):
                lines.append(json.loads(line))
    groups = OrderedDict()
    for r in lines:
        groups.setdefault((r["bench"], r["engine"]), []).append(r)
    med = OrderedDict()
    for (bench, engine), rs in groups.items():
        vs = [r["value"] for r in rs]
        med[(bench, engine)] = {"bench": bench, "engine": engine, "unit": rs[0]["unit"],
                                "value": round(statistics.median(vs), 3), "min": min(vs),
                                "max": max(vs), "n": len(vs)}
    if as_json:
        for m in med.values():
            print(json.dumps(m))
        return

    engines = [e for e in ENGINES if any(k[1] == e for k in med)]
    benches = list(OrderedDict.fromkeys(k[0] for k in med))
    head = ["workload", "unit"] + engines + ["local vs Ray", "target", ""]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for b in benches:
        unit = next(med[(b, e)]["unit"] for e in engines if (b, e) in med)
        cells = [fmt(med[(b, e)]["value"]) if (b, e) in med else "—" for e in engines]
        local = med.get((b, "starling-local"), {}).get("value")
        ray = med.get((b, "ray"), {}).get("value")
        r = ratio(unit, local, ray)
        target, verdict = "", ""
        if b in TARGETS:
            kind, want = TARGETS[b]
            if kind == "ratio":
                target = f">= {want}x Ray"
                verdict = "—" if r is None else ("met" if r >= want else "missed")
            elif kind == "at_least":
                target = f">= {fmt(want)}"
                verdict = "—" if local is None else ("met" if local >= want else "missed")
            else:
                target = f"<= {fmt(want)}"
                verdict = "—" if local is None else ("met" if local <= want else "missed")
        cells += [f"{r:,.1f}x" if r is not None else "—", target, verdict]
        print(f"| {b} | {unit} | " + " | ".join(cells) + " |")


main()
