"""Trains with XGBoost, for starling-ml's compatibility test (tests/xgboost_compat.rs).

Usage: python xgb_train.py TRAIN.csv PARAMS.json ROUNDS ROWS.csv OUT.csv

TRAIN.csv has a header and the label in its last column; PARAMS.json is XGBoost's params
dictionary (tree_method=hist is added). Trains ROUNDS rounds and writes the predictions for
ROWS.csv (no header) to OUT.csv, one line per row, as xgb_predict.py does.
"""

import json
import sys

import numpy as np
import xgboost as xgb


def main(argv):
    if len(argv) != 6:
        sys.exit(__doc__)
    train_path, params_path, rounds, rows_path, out_path = argv[1:]
    data = np.loadtxt(train_path, delimiter=",", skiprows=1, ndmin=2, dtype=np.float32)
    params = dict(json.load(open(params_path)), tree_method="hist", nthread=1)
    booster = xgb.train(params, xgb.DMatrix(data[:, :-1], label=data[:, -1], missing=np.nan), int(rounds))
    rows = np.loadtxt(rows_path, delimiter=",", ndmin=2, dtype=np.float64).astype(np.float32)
    pred = booster.predict(xgb.DMatrix(rows, missing=np.nan)).reshape(len(rows), -1)
    np.savetxt(out_path, pred, fmt="%.9g", delimiter=",")
    print("xgboost %s" % xgb.__version__)


if __name__ == "__main__":
    main(sys.argv)
