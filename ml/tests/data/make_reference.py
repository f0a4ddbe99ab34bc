"""Writes the reference models that starling-ml's XGBoost JSON reader is tested against.

Trains three small models with XGBoost (reg:squarederror, binary:logistic with early
stopping, multi:softprob), saves them with ``Booster.save_model("....json")``, and writes a
few input rows (with missing values, and values equal to split thresholds) and XGBoost's
predictions for them. Predictions use the rounds up to ``best_iteration`` when the model has
one, as XGBoost's scikit-learn wrapper does and as ``Model::predict_rows`` does.

Deterministic: fixed numpy seed, one thread, the ``hist`` tree method.

Usage: python make_reference.py   (needs xgboost and numpy; writes next to this file)
"""

import os

import numpy as np
import xgboost as xgb

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = ["age", "income", "score", "tenure"]
PARAMS = {"tree_method": "hist", "max_depth": 3, "eta": 0.3, "nthread": 1, "seed": 0}


def data(rng, n):
    x = rng.normal(size=(n, len(NAMES))).astype(np.float32)
    x[rng.random(x.shape) < 0.15] = np.nan
    return x


def write_rows(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(",".join("nan" if np.isnan(v) else "%.9g" % v for v in row) + "\n")


def predict(booster, rows, names):
    d = xgb.DMatrix(rows, missing=np.nan, feature_names=names)
    best = booster.attr("best_iteration")
    rounds = (0, int(best) + 1) if best is not None else (0, 0)
    return booster.predict(d, iteration_range=rounds).reshape(len(rows), -1)


def main():
    rng = np.random.default_rng(20240611)
    x = data(rng, 400)
    z = np.nan_to_num(x)
    noise = rng.normal(scale=0.3, size=len(x))
    y_reg = 2.0 * z[:, 0] - z[:, 1] + 0.5 * z[:, 2] * z[:, 3] + noise
    y_bin = (z[:, 0] + z[:, 1] - 0.5 * z[:, 3] + noise > 0.2).astype(np.float32)
    y_multi = np.digitize(z[:, 0] - z[:, 2] + noise, [-0.6, 0.6]).astype(np.float32)
    train, valid = slice(0, 300), slice(300, 400)

    models = {}
    # No feature names: the saved model has an empty feature_names list.
    d = xgb.DMatrix(x[train], label=y_reg[train], missing=np.nan)
    models["squarederror"] = (
        xgb.train({**PARAMS, "objective": "reg:squarederror"}, d, 6),
        None,
    )
    dt = xgb.DMatrix(x[train], label=y_bin[train], missing=np.nan, feature_names=NAMES)
    dv = xgb.DMatrix(x[valid], label=y_bin[valid], missing=np.nan, feature_names=NAMES)
    models["logistic"] = (
        xgb.train(
            {**PARAMS, "objective": "binary:logistic", "eval_metric": "logloss"},
            dt,
            30,
            evals=[(dv, "valid")],
            early_stopping_rounds=3,
            verbose_eval=False,
        ),
        NAMES,
    )
    d = xgb.DMatrix(x[train], label=y_multi[train], missing=np.nan, feature_names=NAMES)
    models["softprob"] = (
        xgb.train({**PARAMS, "objective": "multi:softprob", "num_class": 3}, d, 4),
        NAMES,
    )

    rows = data(rng, 10)
    # A row of missing values, and rows whose values equal split thresholds (equal goes right).
    rows = np.vstack([rows, np.full((1, len(NAMES)), np.nan, dtype=np.float32)])
    for booster, _ in models.values():
        tree = booster.get_dump(dump_format="json")[0]
        root = __import__("json").loads(tree)
        if "split" in root:
            row = np.zeros(len(NAMES), dtype=np.float32)
            feature = root["split"]
            index = NAMES.index(feature) if feature in NAMES else int(feature[1:])
            row[index] = np.float32(root["split_condition"])
            rows = np.vstack([rows, row])
    write_rows(os.path.join(HERE, "xgb_ref_rows.csv"), rows)

    for name, (booster, names) in models.items():
        booster.save_model(os.path.join(HERE, "xgb_ref_%s.json" % name))
        pred = predict(booster, rows, names)
        np.savetxt(os.path.join(HERE, "xgb_ref_pred_%s.csv" % name), pred, fmt="%.9g", delimiter=",")

    with open(os.path.join(HERE, "xgb_ref_info.txt"), "w") as f:
        f.write("Written by make_reference.py with xgboost %s, numpy %s.\n" % (xgb.__version__, np.__version__))
        for name, (booster, _) in models.items():
            f.write("%s: %d trees, best_iteration %s\n" % (
                name, len(booster.get_dump()), booster.attr("best_iteration")))


if __name__ == "__main__":
    main()
