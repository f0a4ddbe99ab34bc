"""Datasets for starling-ml's accuracy and speed against XGBoost and LightGBM
(benches/gbdt_vs_xgboost.sh, ml/tests/xgboost_compat.rs): a family of many shapes, and the
classic four (friedman1, classification, breast_cancer, diabetes).

    gbdt_family.py gen DIR [SCALE [NAME ..]]
                                        writes DIR/<name>/{train,test}.csv (fixed seeds;
                                        SCALE multiplies the generated row counts, default 1;
                                        all datasets of the family unless NAMEs are given)
    gbdt_family.py list                 the family: name objective num_class, one a line
    gbdt_family.py list-all             the family and the classic four
    gbdt_family.py xgboost DIR NAME ROUNDS DEPTH ETA NTHREAD [key=value ..]
    gbdt_family.py lightgbm DIR NAME ROUNDS DEPTH ETA NTHREAD [key=value ..]
                                        train on DIR/NAME/train.csv, read the CSV files
                                        included in the time, and print one JSON line:
                                        metric, value, seconds

Every dataset is generated from its own seed, so the family is the same on every machine.
Shapes: many and few features, heavy-tailed columns, discrete columns with few and many
distinct values, duplicated rows, missing values, a skewed binary label, several classes.
Values are written with 9 significant digits (exact for float32).
"""

import json
import os
import sys
import time

import numpy as np

# name: (objective, num_class, rows at scale 1, builder)
FAMILY = {}


def dataset(name, objective, rows, num_class=0):
    def register(fn):
        FAMILY[name] = (objective, num_class, rows, fn)
        return fn

    return register


@dataset("wide_gauss", "reg:squarederror", 60_000)
def wide_gauss(rng, n):
    x = rng.normal(size=(n, 40))
    w = rng.normal(size=40) * (rng.random(40) < 0.4)
    y = x @ w + np.sin(2 * x[:, 0]) * 3 + x[:, 1] * x[:, 2] + rng.normal(scale=1.0, size=n)
    return x, y


@dataset("few_features", "reg:squarederror", 60_000)
def few_features(rng, n):
    x = rng.uniform(-3, 3, size=(n, 3))
    y = np.sin(x[:, 0]) * 4 + np.abs(x[:, 1]) * x[:, 2] + rng.normal(scale=0.5, size=n)
    return x, y


@dataset("heavy_tails", "reg:squarederror", 60_000)
def heavy_tails(rng, n):
    x = np.column_stack(
        [
            rng.standard_cauchy(n),
            rng.lognormal(0, 2, n),
            rng.pareto(1.5, n),
            rng.standard_t(2, n),
            rng.normal(size=n),
            rng.exponential(5, n),
        ]
    )
    y = (
        np.tanh(x[:, 0]) * 3
        + np.log1p(x[:, 1])
        + np.minimum(x[:, 2], 10)
        + np.clip(x[:, 3], -5, 5)
        + x[:, 4] ** 2
        + rng.normal(scale=1.0, size=n)
    )
    return x, y


@dataset("discrete", "reg:squarederror", 60_000)
def discrete(rng, n):
    cols = [rng.integers(0, k, n).astype(float) for k in (2, 5, 20, 300, 3000, 100_000)]
    cols.append(np.round(rng.normal(size=n), 1))  # ~70 distinct values, bell-shaped
    cols.append(rng.poisson(3, n).astype(float))
    x = np.column_stack(cols)
    y = (
        x[:, 0] * 2
        + (x[:, 1] == 3) * 3
        + np.sin(x[:, 2])
        + np.log1p(x[:, 3])
        + (x[:, 4] % 7) / 3
        + x[:, 6] * 2
        + np.sqrt(x[:, 7])
        + rng.normal(scale=0.7, size=n)
    )
    return x, y


@dataset("duplicates", "reg:squarederror", 60_000)
def duplicates(rng, n):
    base = rng.normal(size=(n // 4, 8))
    x = base[rng.integers(0, len(base), n)]
    y = x[:, 0] * 2 - x[:, 1] ** 2 + np.maximum(x[:, 2], 0) * 3 + rng.normal(scale=1.0, size=n)
    return x, y


@dataset("missing", "reg:squarederror", 60_000)
def missing(rng, n):
    x = rng.normal(size=(n, 12))
    y = x[:, 0] * 3 + x[:, 1] * x[:, 2] + np.abs(x[:, 3]) * 2 + rng.normal(scale=1.0, size=n)
    for j, p in enumerate((0.5, 0.3, 0.1, 0.05, 0.8, 0.2)):
        x[rng.random(n) < p, j] = np.nan
    # A column missing exactly where the label is high.
    x[y > 3, 6] = np.nan
    return x, y


@dataset("skewed_binary", "binary:logistic", 60_000)
def skewed_binary(rng, n):
    x = rng.normal(size=(n, 20))
    score = x[:, 0] * 1.5 + x[:, 1] * x[:, 2] + np.sin(x[:, 3] * 2) - 4.2
    y = (rng.random(n) < 1 / (1 + np.exp(-score))).astype(float)
    return x, y


@dataset("balanced_binary", "binary:logistic", 60_000)
def balanced_binary(rng, n):
    x = rng.normal(size=(n, 25))
    x[:, 5:10] = np.round(x[:, 5:10] * 2)  # a few discrete columns
    score = x[:, 0] - x[:, 1] ** 2 + 0.5 + x[:, 5] * x[:, 2] * 0.5 + np.cos(x[:, 3] * 3)
    y = (rng.random(n) < 1 / (1 + np.exp(-score))).astype(float)
    return x, y


@dataset("five_classes", "multi:softprob", 60_000, num_class=5)
def five_classes(rng, n):
    x = rng.normal(size=(n, 16))
    centers = rng.normal(scale=1.2, size=(5, 16))
    logits = -((x[:, None, :] - centers[None]) ** 2).sum(axis=2) / 8
    logits += rng.gumbel(size=logits.shape)
    y = logits.argmax(axis=1).astype(float)
    return x, y


@dataset("friedman1", "reg:squarederror", 800_000)
def friedman1(rng, n):
    from sklearn import datasets

    return datasets.make_friedman1(n_samples=n, n_features=10, noise=1.0, random_state=0)


@dataset("classification", "binary:logistic", 400_000)
def classification(rng, n):
    from sklearn import datasets

    return datasets.make_classification(
        n_samples=n, n_features=20, n_informative=10, random_state=0
    )


@dataset("breast_cancer", "binary:logistic", 455)
def breast_cancer(rng, n):
    from sklearn import datasets

    return datasets.load_breast_cancer(return_X_y=True)


@dataset("diabetes", "reg:squarederror", 353)
def diabetes(rng, n):
    from sklearn import datasets

    return datasets.load_diabetes(return_X_y=True)


# The classic four are not part of the family the accuracy test runs.
CLASSIC = ("friedman1", "classification", "breast_cancer", "diabetes")


def seed_of(name):
    return sum((i + 1) * ord(c) for i, c in enumerate(name))


def write_csv(path, x, y):
    header = ",".join([f"f{i}" for i in range(x.shape[1])] + ["y"])
    data = np.column_stack([x, y]).astype(np.float32)
    tmp = path + ".tmp"
    np.savetxt(tmp, data, delimiter=",", header=header, comments="", fmt="%.9g")
    os.replace(tmp, path)


def gen(root, scale, names):
    for name in names:
        _, _, rows, fn = FAMILY[name]
        d = os.path.join(root, name)
        if os.path.exists(os.path.join(d, "test.csv")):
            continue
        os.makedirs(d, exist_ok=True)
        rng = np.random.default_rng(seed_of(name))
        n = int(rows * scale)
        x, y = fn(rng, n + n // 4)
        x, y = np.asarray(x, dtype=np.float32), np.asarray(y, dtype=np.float32)
        cut = len(y) * 4 // 5
        write_csv(os.path.join(d, "train.csv"), x[:cut], y[:cut])
        write_csv(os.path.join(d, "test.csv"), x[cut:], y[cut:])
        print(f"{name}: {cut} train, {len(y) - cut} test rows, {x.shape[1]} features", file=sys.stderr)


def load(path):
    """Features and labels of a CSV file (pandas' C parser when there is pandas)."""
    try:
        import pandas as pd
    except ImportError:
        data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32, ndmin=2)
    else:
        data = pd.read_csv(path, dtype=np.float32).to_numpy()
    return data[:, :-1], data[:, -1]


def metric(objective, pred, y):
    if objective == "reg:squarederror":
        return "rmse", float(np.sqrt(np.mean((pred - y) ** 2))), None
    if objective == "binary:logistic":
        p = np.clip(pred, 1e-15, 1 - 1e-15)
        ll = float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
        return "logloss", ll, float(np.mean((pred > 0.5) == (y > 0.5)))
    p = np.clip(pred[np.arange(len(y)), y.astype(int)], 1e-15, 1)
    return "mlogloss", float(-np.mean(np.log(p))), float(np.mean(pred.argmax(axis=1) == y))


def extra_params(pairs):
    out = {}
    for kv in pairs:
        k, v = kv.split("=", 1)
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


def run_xgboost(root, name, rounds, depth, eta, nthread, extra):
    import xgboost as xgb

    objective, num_class, _, _ = FAMILY[name]
    params = {
        "objective": objective,
        "tree_method": "hist",
        "max_depth": depth,
        "eta": eta,
        "max_bin": 256,
        "nthread": nthread,
        "seed": 0,
        **({"num_class": num_class} if num_class else {}),
        **extra,
    }
    began = time.perf_counter()
    xtr, ytr = load(os.path.join(root, name, "train.csv"))
    booster = xgb.train(params, xgb.DMatrix(xtr, label=ytr, nthread=nthread), rounds)
    seconds = time.perf_counter() - began
    xte, yte = load(os.path.join(root, name, "test.csv"))
    pred = booster.predict(xgb.DMatrix(xte, nthread=nthread))
    return "xgboost", xgb.__version__, objective, pred, yte, seconds


def run_lightgbm(root, name, rounds, depth, eta, nthread, extra):
    import lightgbm as lgb

    objective, num_class, _, _ = FAMILY[name]
    params = {
        "objective": {
            "reg:squarederror": "regression",
            "binary:logistic": "binary",
            "multi:softprob": "multiclass",
        }[objective],
        "learning_rate": eta,
        "max_depth": depth,
        "num_leaves": 2**depth,
        "min_data_in_leaf": 1,
        "min_sum_hessian_in_leaf": 1,
        "lambda_l2": 1,
        "max_bin": 255,
        "num_threads": nthread,
        "seed": 0,
        "deterministic": True,
        "verbose": -1,
        **({"num_class": num_class} if num_class else {}),
        **extra,
    }
    began = time.perf_counter()
    xtr, ytr = load(os.path.join(root, name, "train.csv"))
    booster = lgb.train(params, lgb.Dataset(xtr, label=ytr), rounds)
    seconds = time.perf_counter() - began
    xte, yte = load(os.path.join(root, name, "test.csv"))
    pred = booster.predict(xte)
    return "lightgbm", lgb.__version__, objective, pred, yte, seconds


def main(argv):
    if len(argv) >= 3 and argv[1] == "gen":
        names = argv[4:] or [n for n in FAMILY if n not in CLASSIC]
        gen(argv[2], float(argv[3]) if len(argv) > 3 else 1.0, names)
    elif len(argv) == 2 and argv[1] in ("list", "list-all"):
        for name, (objective, num_class, _, _) in FAMILY.items():
            if argv[1] == "list-all" or name not in CLASSIC:
                print(name, objective, num_class)
    elif len(argv) >= 8 and argv[1] in ("xgboost", "lightgbm"):
        root, name = argv[2], argv[3]
        rounds, depth, eta, nthread = int(argv[4]), int(argv[5]), float(argv[6]), int(argv[7])
        run = run_xgboost if argv[1] == "xgboost" else run_lightgbm
        engine, version, objective, pred, y, seconds = run(
            root, name, rounds, depth, eta, nthread, extra_params(argv[8:])
        )
        m, value, accuracy = metric(objective, pred, y)
        print(
            json.dumps(
                {
                    "engine": engine,
                    "version": version,
                    "dataset": name,
                    "metric": m,
                    "value": value,
                    "accuracy": accuracy,
                    "train_seconds": seconds,
                    "nthread": nthread,
                }
            )
        )
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
