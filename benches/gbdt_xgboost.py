"""Data and the XGBoost side of benches/gbdt_vs_xgboost.sh.

    gbdt_xgboost.py gen DIR            writes DIR/<dataset>/{train,test}.csv (fixed seeds)
    gbdt_xgboost.py train DIR NAME ..  trains XGBoost (tree_method=hist) on one dataset and
                                       prints one JSON line: metric, value, seconds

Datasets: friedman1 (make_friedman1, 1,000,000 x 10, regression), classification
(make_classification, 500,000 x 20, binary), breast_cancer (binary) and diabetes (regression),
which scikit-learn ships. Each is split 80/20 with a fixed seed.
"""

import json
import os
import sys
import time

import numpy as np

DATASETS = {
    # name: (objective, extra params)
    "friedman1": ("reg:squarederror", {}),
    "classification": ("binary:logistic", {}),
    "breast_cancer": ("binary:logistic", {}),
    "diabetes": ("reg:squarederror", {}),
}


def make(name):
    from sklearn import datasets

    if name == "friedman1":
        x, y = datasets.make_friedman1(n_samples=1_000_000, n_features=10, noise=1.0, random_state=0)
    elif name == "classification":
        x, y = datasets.make_classification(
            n_samples=500_000, n_features=20, n_informative=10, random_state=0
        )
    elif name == "breast_cancer":
        x, y = datasets.load_breast_cancer(return_X_y=True)
    elif name == "diabetes":
        x, y = datasets.load_diabetes(return_X_y=True)
    else:
        raise SystemExit(f"unknown dataset {name}")
    return x.astype(np.float32), y.astype(np.float32)


def write_csv(path, x, y):
    header = ",".join([f"f{i}" for i in range(x.shape[1])] + ["y"])
    data = np.column_stack([x, y])
    tmp = path + ".tmp"
    np.savetxt(tmp, data, delimiter=",", header=header, comments="", fmt="%.9g")
    os.replace(tmp, path)


def gen(root):
    for name in DATASETS:
        d = os.path.join(root, name)
        if os.path.exists(os.path.join(d, "test.csv")):
            continue
        os.makedirs(d, exist_ok=True)
        x, y = make(name)
        rng = np.random.default_rng(42)
        order = rng.permutation(len(y))
        cut = int(len(y) * 0.8)
        tr, te = order[:cut], order[cut:]
        write_csv(os.path.join(d, "train.csv"), x[tr], y[tr])
        write_csv(os.path.join(d, "test.csv"), x[te], y[te])
        print(f"{name}: {len(tr)} train, {len(te)} test rows, {x.shape[1]} features", file=sys.stderr)


def load(path):
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)
    return data[:, :-1], data[:, -1]


def train(root, name, n_estimators, max_depth, eta, nthread):
    import xgboost as xgb

    objective, extra = DATASETS[name]
    xtr, ytr = load(os.path.join(root, name, "train.csv"))
    xte, yte = load(os.path.join(root, name, "test.csv"))
    params = {
        "objective": objective,
        "tree_method": "hist",
        "max_depth": max_depth,
        "eta": eta,
        "max_bin": 256,
        "nthread": nthread,
        "seed": 0,
        **extra,
    }
    began = time.perf_counter()
    dtrain = xgb.DMatrix(xtr, label=ytr, nthread=nthread)
    booster = xgb.train(params, dtrain, num_boost_round=n_estimators)
    seconds = time.perf_counter() - began
    pred = booster.predict(xgb.DMatrix(xte, nthread=nthread))
    if objective == "reg:squarederror":
        metric, value = "rmse", float(np.sqrt(np.mean((pred - yte) ** 2)))
    else:
        p = np.clip(pred, 1e-15, 1 - 1e-15)
        metric = "logloss"
        value = float(-np.mean(yte * np.log(p) + (1 - yte) * np.log(1 - p)))
    print(
        json.dumps(
            {
                "engine": "xgboost",
                "version": xgb.__version__,
                "dataset": name,
                "metric": metric,
                "value": value,
                "accuracy": float(np.mean((pred > 0.5) == (yte > 0.5))) if metric == "logloss" else None,
                "train_seconds": seconds,
                "nthread": nthread,
            }
        )
    )


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif len(sys.argv) == 8 and sys.argv[1] == "train":
        _, _, root, name, n, depth, eta, nthread = sys.argv
        train(root, name, int(n), int(depth), float(eta), int(nthread))
    else:
        raise SystemExit(__doc__)
