#!/usr/bin/env bash
# Runs the workload suite against a head and two node agents started as separate processes
# ("starling-cluster"), then stops them. Usage: benches/cluster.sh [workloads args, e.g. --only ab]
# The agents' worker processes talk to the head over TCP, as on other hosts; with
# STARLING_BENCH_LINK=1 they use the head's session link (`starling worker --link`) instead.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p starling-cli -p starling-benches
bin=target/release
dir=$(mktemp -d -t starling-bench-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

"$bin/starling" head --port 0 --data-dir "$dir/head" >"$dir/head.out" 2>"$dir/head.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$dir/head.out" ] && break; sleep 0.1; done
addr=$(head -n1 "$dir/head.out")
[ -n "$addr" ] || { echo "head did not start; see $dir/head.log" >&2; exit 1; }
# Every process below presents the cluster token the head wrote.
export STARLING_TOKEN
STARLING_TOKEN=$(cat "$dir/head/token")
link=()
if [ "${STARLING_BENCH_LINK:-0}" = 1 ]; then link=(--link "$dir/head/link.sock"); fi
for n in 1 2; do
  "$bin/starling" worker --head "$addr" --num-cpus 1 --log-dir "$dir/logs-$n" \
    --cache-dir "$dir/cache-$n" "${link[@]}" 2>"$dir/agent-$n.log" &
  pids+=($!)
done
for _ in $(seq 100); do
  alive=$("$bin/starling" status --head "$addr" 2>/dev/null | sed -n 's/^nodes: \([0-9]*\) alive.*/\1/p')
  [ "${alive:-0}" -ge 2 ] && break
  sleep 0.1
done
"$bin/workloads" --engine cluster --head "$addr" "$@"
