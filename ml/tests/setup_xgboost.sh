#!/usr/bin/env bash
# Makes a Python virtual environment with xgboost (CPU build), numpy and scikit-learn, for
# starling-ml's XGBoost compatibility test (tests/xgboost_compat.rs) and benchmarks.
#
# The environment goes to ${STARLING_XGBOOST_VENV:-$HOME/.cache/starling-ml/xgb-venv} and is
# reused when it already works. On success prints the environment's python (the value for
# STARLING_XGBOOST_PYTHON) and exits 0; otherwise says why on stderr and exits 1.
#
#   if py=$(ml/tests/setup_xgboost.sh); then export STARLING_XGBOOST_PYTHON="$py"; fi
set -u

venv="${STARLING_XGBOOST_VENV:-$HOME/.cache/starling-ml/xgb-venv}"
python="$venv/bin/python"

fail() {
    echo "setup_xgboost: $*" >&2
    exit 1
}

works() {
    "$python" -c 'import xgboost, numpy, sklearn' >/dev/null 2>&1
}

if works; then
    echo "$python"
    exit 0
fi

command -v python3 >/dev/null 2>&1 || fail "python3 not found on PATH"
if [ ! -x "$python" ]; then
    mkdir -p "$(dirname "$venv")" || fail "cannot create $(dirname "$venv")"
    python3 -m venv "$venv" >&2 ||
        fail "python3 -m venv $venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
fi

# pip's progress goes to stderr so that stdout carries only the python path.
pip=("$python" -m pip install --quiet --disable-pip-version-check --timeout 60)
# The version the exactness tests (tests/xgboost_compat.rs) were checked against.
if ! "${pip[@]}" "xgboost-cpu==3.2.*" numpy scikit-learn >&2; then
    echo "setup_xgboost: xgboost-cpu did not install; trying xgboost" >&2
    "${pip[@]}" "xgboost==3.2.*" numpy scikit-learn >&2 ||
        fail "pip could not install xgboost, numpy and scikit-learn into $venv (no network?)"
fi

works || fail "$python still cannot import xgboost, numpy and scikit-learn"
echo "$python"
