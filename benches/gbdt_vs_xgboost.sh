#!/usr/bin/env bash
# Starling's GBDT (starling-ml, 2 workers; on a local cluster and on the in-process engine)
# against XGBoost (tree_method=hist) and LightGBM, each given 2 threads, on the same CSV files,
# same split, same parameters; prints one JSON line per run, then a table.
#
#   benches/gbdt_vs_xgboost.sh                      # the classic four and the family of nine
#   benches/gbdt_vs_xgboost.sh friedman1 wide_gauss
#   ROUNDS=50 DEPTH=4 benches/gbdt_vs_xgboost.sh
#   REPEAT=1 benches/gbdt_vs_xgboost.sh friedman1  # one run of each instead of three
#
# Each dataset runs REPEAT times (default 3), the engines interleaved within a repeat so that
# a slow spell of the machine hits them alike; the table shows the median time of each (and
# the spread), and the ratios of the medians.
#
# Every engine's time includes reading the CSV files (XGBoost and LightGBM through pandas'
# C parser). LightGBM runs with max_depth DEPTH, num_leaves 2^DEPTH, min_data_in_leaf 1,
# min_sum_hessian_in_leaf 1, lambda_l2 1, max_bin 255 (XGBoost's defaults where LightGBM's
# differ). The Python side (xgboost, lightgbm, pandas, scikit-learn) lives in
# ml/tests/setup_xgboost.sh's venv; data is generated once under $STARLING_GBDT_DATA
# (default ~/.cache/starling-ml/gbdt-data) by benches/gbdt_family.py.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-100}
DEPTH=${DEPTH:-6}
ETA=${ETA:-0.3}
WORKERS=${WORKERS:-2}
REPEAT=${REPEAT:-3}
DATA=${STARLING_GBDT_DATA:-$HOME/.cache/starling-ml/gbdt-data}
FAMILY=benches/gbdt_family.py

PY=$(ml/tests/setup_xgboost.sh) || { echo "error: could not set up Python with xgboost" >&2; exit 1; }
"$PY" -c 'import lightgbm, pandas' 2>/dev/null ||
  "$PY" -m pip install --quiet --disable-pip-version-check "lightgbm==4.*" pandas >&2
echo "python: $PY ($("$PY" -c 'import xgboost, lightgbm; print("xgboost", xgboost.__version__, "lightgbm", lightgbm.__version__)'))" >&2

DATASETS=("$@")
[ ${#DATASETS[@]} -gt 0 ] || mapfile -t DATASETS < <("$PY" "$FAMILY" list-all | cut -d' ' -f1)
echo "generating data under $DATA (once)..." >&2
"$PY" "$FAMILY" gen "$DATA" 1 "${DATASETS[@]}"

echo "building the gbdt example (release)..." >&2
cargo build -q --release --example gbdt
GBDT=target/release/examples/gbdt

RESULTS=$(mktemp)
trap 'rm -f "$RESULTS" "$RESULTS.out"' EXIT
for ds in "${DATASETS[@]}"; do
  read -r _ obj nc < <("$PY" "$FAMILY" list-all | grep "^$ds ")
  classes=(); [ "$nc" != 0 ] && classes=(--num-class "$nc")
  for rep in $(seq "$REPEAT"); do
  for lib in xgboost lightgbm; do
    echo "== $ds ($obj): $lib (run $rep of $REPEAT)" >&2
    "$PY" "$FAMILY" "$lib" "$DATA" "$ds" "$ROUNDS" "$DEPTH" "$ETA" 2 | tee -a "$RESULTS"
  done
  for engine in local inproc; do
  flag=""; [ "$engine" = inproc ] && flag="--in-process"
  echo "== $ds ($obj): starling ($engine), $WORKERS workers" >&2
  out=$("$GBDT" --train "$DATA/$ds/train.csv" --test "$DATA/$ds/test.csv" --label y \
        --objective "$obj" "${classes[@]}" --n-estimators "$ROUNDS" --max-depth "$DEPTH" \
        --learning-rate "$ETA" --max-bin 256 --workers "$WORKERS" $flag)
  echo "$out" >&2
  echo "$out" > "$RESULTS.out"
  "$PY" - "$ds" "$WORKERS" "$RESULTS.out" "starling-$engine" <<'EOF2' | tee -a "$RESULTS"
import json, sys
ds, workers, engine = sys.argv[1], int(sys.argv[2]), sys.argv[4]
kv = {}
for line in open(sys.argv[3]).read().split("\n"):
    for part in line.split():
        if "=" in part:
            k, v = part.split("=", 1)
            kv[k] = v
metric = next(m for m in ("rmse", "logloss", "mlogloss") if m in kv)
print(json.dumps({
    "engine": engine, "dataset": ds, "metric": metric, "value": float(kv[metric]),
    "accuracy": float(kv["accuracy"]) if "accuracy" in kv else None,
    "train_seconds": float(kv["train_seconds"]), "workers": workers,
    "workers_used": int(kv.get("workers_used", workers)),
}))
EOF2
  done
  done
done

"$PY" - "$RESULTS" <<'EOF2'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by, runs = {}, {}
for r in rows:
    by.setdefault(r["dataset"], {})[r["engine"]] = r
    runs.setdefault((r["dataset"], r["engine"]), []).append(r["train_seconds"])
for (ds, engine), times in runs.items():
    times.sort()
    by[ds][engine]["train_seconds"] = times[len(times) // 2]
    by[ds][engine]["spread"] = f"{times[0]:.2f}-{times[-1]:.2f}" if len(times) > 1 else ""
n = max(len(t) for t in runs.values())
print()
print(f"Times include reading the CSV files; median of {n} run(s) each [spread]. Metric")
print("difference against XGBoost's (negative: lower loss). Time ratio: Starling's median over")
print("the faster of XGBoost's and LightGBM's.")
print()
print("| dataset | metric | xgboost | lightgbm | starling local | starling in-process | xgboost s | lightgbm s | starling local s | starling in-process s | vs faster |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for ds, e in by.items():
    x, l = e.get("xgboost"), e.get("lightgbm")
    s_l, s_i = e.get("starling-local"), e.get("starling-inproc")
    if not (x and l and s_l and s_i):
        continue
    diff = lambda r: f"{r['value']:.5f} ({(r['value'] - x['value']) / x['value'] * 100:+.2f}%)"
    t = lambda r: f"{r['train_seconds']:.2f}" + (f" [{r['spread']}]" if r.get("spread") else "")
    fast = min(x["train_seconds"], l["train_seconds"])
    ratio = f"{s_l['train_seconds'] / fast:.2f}x / {s_i['train_seconds'] / fast:.2f}x"
    print(f"| {ds} | {x['metric']} | {x['value']:.5f} | {diff(l)} | {diff(s_l)} | {diff(s_i)} "
          f"| {t(x)} | {t(l)} | {t(s_l)} | {t(s_i)} | {ratio} |")
EOF2
