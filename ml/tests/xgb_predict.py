"""Predicts with XGBoost, for starling-ml's compatibility test (tests/xgboost_compat.rs).

Usage: python xgb_predict.py MODEL.json ROWS.csv OUT.csv [RESAVED.json]

Loads MODEL.json with ``xgboost.Booster(model_file=...)``, reads ROWS.csv (comma-separated
floats, ``nan`` for a missing value, one row per line), and writes XGBoost's predictions to
OUT.csv: one line per row, one value per output (``num_class`` values for multi:softprob).
When the model has a ``best_iteration`` attribute, only the rounds up to it are used, as
XGBoost's scikit-learn wrapper does. With RESAVED.json, also saves the model again with
``Booster.save_model``. Prints the xgboost version.
"""

import sys

import numpy as np
import xgboost as xgb


def main(argv):
    if len(argv) not in (4, 5):
        sys.exit(__doc__)
    model_path, rows_path, out_path = argv[1:4]
    booster = xgb.Booster(model_file=model_path)
    rows = np.loadtxt(rows_path, delimiter=",", ndmin=2, dtype=np.float64).astype(np.float32)
    data = xgb.DMatrix(rows, missing=np.nan, feature_names=booster.feature_names)
    best = booster.attr("best_iteration")
    rounds = (0, int(best) + 1) if best is not None else (0, 0)
    pred = booster.predict(data, iteration_range=rounds).reshape(len(rows), -1)
    np.savetxt(out_path, pred, fmt="%.9g", delimiter=",")
    if len(argv) == 5:
        booster.save_model(argv[4])
    print("xgboost %s" % xgb.__version__)


if __name__ == "__main__":
    main(sys.argv)
