#!/usr/bin/env bash
# Runs the workload suite on Starling (in-process, local cluster, head + 2 node agents as
# separate processes) and on Ray and Dask (through ../shared/bench/ray, which makes its own
# venv), RUNS times each (default 3), and prints one table: each workload, each engine's
# median, the Starling (local cluster) / Ray ratio and the targets.
#
#   benches/compare.sh                 # everything; the table on stdout, raw lines kept in $OUT
#   benches/compare.sh --only starling # Starling alone: its JSON lines (medians) on stdout
#
# Progress goes to stderr. Raw lines: $OUT/raw.jsonl (OUT defaults to a new temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
only=all
if [ "${1:-}" = "--only" ]; then only=${2:?"--only needs an engine: starling"}; fi
case $only in all|starling) ;; *) echo "--only takes: starling" >&2; exit 2 ;; esac
RUNS=${RUNS:-3}
OUT=${OUT:-$(mktemp -d -t starling-compare-XXXXXX)}
mkdir -p "$OUT"
: > "$OUT/raw.jsonl"
say() { echo "[compare $(date +%H:%M:%S)] $*" >&2; }
say "results in $OUT"

say "building (release)"
cargo build -q --release -p starling-cli -p starling-benches
wl=target/release/workloads
SUITE=abcdefghijkno
for r in $(seq 1 "$RUNS"); do
  say "starling run $r/$RUNS: in-process"
  "$wl" --engine inproc --only "$SUITE" --run "$r" >> "$OUT/raw.jsonl"
  say "starling run $r/$RUNS: local cluster"
  "$wl" --engine local --only "${SUITE}m" --run "$r" >> "$OUT/raw.jsonl"
  say "starling run $r/$RUNS: head + 2 node agents"
  benches/cluster.sh --only "$SUITE" --run "$r" >> "$OUT/raw.jsonl"
done

if [ "$only" = starling ]; then
  python3 benches/compare.py --json "$OUT/raw.jsonl"
  exit 0
fi

anchors="$root/../shared/bench/ray"
[ -x "$anchors/run.sh" ] || { echo "no anchor suite at $anchors" >&2; exit 1; }
VENV=${BENCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/starling-bench/ray-venv}
say "ray and dask: $RUNS runs each (the first run makes the venv in $VENV)"
BENCH_VENV="$VENV" BENCH_OUT="$OUT/anchors" RUNS="$RUNS" "$anchors/run.sh" > "$OUT/anchors.out"
cat "$OUT/anchors/raw.jsonl" >> "$OUT/raw.jsonl"
for r in $(seq 1 "$RUNS"); do
  say "ray run $r/$RUNS: many_queued, scatter_gather, shuffle, actor_calls_n_n, actor_creation"
  RAY_USAGE_STATS_ENABLED=0 timeout 600 "$VENV/bin/python" benches/ray_extra.py --run "$r" \
    2>> "$OUT/ray_extra.err" >> "$OUT/raw.jsonl"
done

say "table"
python3 benches/compare.py "$OUT/raw.jsonl" | tee "$OUT/table.md"
