#!/usr/bin/env bash
# Starling's GBDT (starling-ml, 2 workers; on a local cluster and on the in-process engine)
# against XGBoost (tree_method=hist, nthread=2) on the same data, same split, same parameters;
# prints one JSON line per run, then a table.
#
#   benches/gbdt_vs_xgboost.sh                      # all four datasets, 100 rounds, depth 6
#   benches/gbdt_vs_xgboost.sh breast_cancer diabetes
#   ROUNDS=50 DEPTH=4 benches/gbdt_vs_xgboost.sh
#   REPEAT=1 benches/gbdt_vs_xgboost.sh friedman1  # one run of each instead of three
#
# Each dataset runs REPEAT times (default 3), the three engines interleaved within a repeat so
# that a slow spell of the machine hits them alike; the table shows the median time of each
# (and the spread), and the ratio of the medians.
#
# The Python side (xgboost, scikit-learn, numpy) goes into its own venv
# (ml/tests/setup_xgboost.sh); data is generated once under $STARLING_GBDT_DATA
# (default ~/.cache/starling-ml/gbdt-data). Starling's time is its whole `fit` from the CSV
# files (read, sketch, bin, train); XGBoost's is DMatrix construction from arrays already in
# memory plus training, so the comparison leaves XGBoost's file reading out.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-100}
DEPTH=${DEPTH:-6}
ETA=${ETA:-0.3}
WORKERS=${WORKERS:-2}
REPEAT=${REPEAT:-3}
DATA=${STARLING_GBDT_DATA:-$HOME/.cache/starling-ml/gbdt-data}
DATASETS=("$@")
[ ${#DATASETS[@]} -gt 0 ] || DATASETS=(breast_cancer diabetes classification friedman1)

PY=$(ml/tests/setup_xgboost.sh) || { echo "error: could not set up Python with xgboost" >&2; exit 1; }
echo "python: $PY ($("$PY" -c 'import xgboost; print("xgboost", xgboost.__version__)'))" >&2

echo "generating data under $DATA (once)..." >&2
"$PY" benches/gbdt_xgboost.py gen "$DATA"

echo "building the gbdt example (release)..." >&2
cargo build -q --release --example gbdt
GBDT=target/release/examples/gbdt

objective() {
  case "$1" in
    friedman1|diabetes) echo reg:squarederror ;;
    *) echo binary:logistic ;;
  esac
}

RESULTS=$(mktemp)
trap 'rm -f "$RESULTS" "$RESULTS.out"' EXIT
for ds in "${DATASETS[@]}"; do
  obj=$(objective "$ds")
  for rep in $(seq "$REPEAT"); do
  echo "== $ds ($obj): xgboost (run $rep of $REPEAT)" >&2
  "$PY" benches/gbdt_xgboost.py train "$DATA" "$ds" "$ROUNDS" "$DEPTH" "$ETA" 2 | tee -a "$RESULTS"
  for engine in local inproc; do
  flag=""; [ "$engine" = inproc ] && flag="--in-process"
  echo "== $ds ($obj): starling ($engine), $WORKERS workers" >&2
  out=$("$GBDT" --train "$DATA/$ds/train.csv" --test "$DATA/$ds/test.csv" --label y \
        --objective "$obj" --n-estimators "$ROUNDS" --max-depth "$DEPTH" \
        --learning-rate "$ETA" --max-bin 256 --workers "$WORKERS" $flag)
  echo "$out" >&2
  echo "$out" > "$RESULTS.out"
  "$PY" - "$ds" "$WORKERS" "$RESULTS.out" "starling-$engine" <<'EOF' | tee -a "$RESULTS"
import json, sys
ds, workers, engine = sys.argv[1], int(sys.argv[2]), sys.argv[4]
kv = {}
for line in open(sys.argv[3]).read().split("\n"):
    for part in line.split():
        if "=" in part:
            k, v = part.split("=", 1)
            kv[k] = v
metric = "rmse" if "rmse" in kv else "logloss"
print(json.dumps({
    "engine": engine, "dataset": ds, "metric": metric, "value": float(kv[metric]),
    "accuracy": float(kv["accuracy"]) if "accuracy" in kv else None,
    "train_seconds": float(kv["train_seconds"]), "workers": workers,
    "workers_used": int(kv.get("workers_used", workers)),
}))
EOF
  done
  done
done

"$PY" - "$RESULTS" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
runs = {}
for r in rows:
    by.setdefault(r["dataset"], {})[r["engine"]] = r
    runs.setdefault((r["dataset"], r["engine"]), []).append(r["train_seconds"])
for (ds, engine), times in runs.items():
    times.sort()
    by[ds][engine]["train_seconds"] = times[len(times) // 2]
    by[ds][engine]["spread"] = f"{times[0]:.2f}-{times[-1]:.2f}" if len(times) > 1 else ""
n = max(len(t) for t in runs.values())
print()
print(f"Times: median of {n} run(s) each (spread in brackets); ratio of the medians.")
print()
print("| dataset | engine | workers used | metric | xgboost | starling | metric diff | xgboost s | starling s | time ratio |")
print("|---|---|---|---|---|---|---|---|---|---|")
for ds, e in by.items():
    x = e.get("xgboost")
    for engine in ("starling-local", "starling-inproc"):
        s = e.get(engine)
        if not (x and s):
            continue
        diff = (s["value"] - x["value"]) / x["value"] * 100 if x["value"] else 0.0
        acc = ""
        if x.get("accuracy") is not None and s.get("accuracy") is not None:
            acc = f" (acc {x['accuracy']:.4f} / {s['accuracy']:.4f})"
        spread = lambda r: f" [{r['spread']}]" if r.get("spread") else ""
        used = f"{s.get('workers_used', s['workers'])} of {s['workers']}"
        print(f"| {ds} | {engine} | {used} | {x['metric']}{acc} | {x['value']:.5f} | {s['value']:.5f} "
              f"| {diff:+.2f}% | {x['train_seconds']:.2f}{spread(x)} "
              f"| {s['train_seconds']:.2f}{spread(s)} "
              f"| {s['train_seconds'] / x['train_seconds']:.2f}x |")
EOF
