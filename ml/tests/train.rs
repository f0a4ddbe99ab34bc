//! Training on the in-process runtime: models learn, 1, 2 and 4 workers grow bit-identical
//! trees on the same bins, distributed prediction matches row-by-row prediction, early
//! stopping keeps the best round, and bad input is a typed error.

use starling::Runtime;
use starling_ml::{
    Cuts, DataConnector, GbdtEstimator, MlError, Model, Objective, Params, ScalingConfig, Table,
};

fn runtime() -> (Runtime, starling::EnterGuard) {
    let rt = Runtime::in_process(4).expect("runtime starts");
    let g = rt.enter();
    (rt, g)
}

/// A deterministic generator (splitmix64), so the data is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
    }
}

const COLS: [&str; 4] = ["x0", "x1", "x2", "x3"];

/// `rows` rows of 4 features in [0, 1) (about 3% missing in x3) and a label from `f`.
fn table(rows: usize, seed: u64, f: impl Fn(&[f32]) -> f32) -> Table {
    let mut rng = Rng(seed);
    let mut cols: Vec<Vec<f32>> = (0..5).map(|_| Vec::with_capacity(rows)).collect();
    for _ in 0..rows {
        let mut x: Vec<f32> = (0..4).map(|_| rng.next()).collect();
        let y = f(&x) + 0.05 * (rng.next() - 0.5);
        if rng.next() < 0.03 {
            x[3] = f32::NAN;
        }
        for (c, v) in x.iter().enumerate() {
            cols[c].push(*v);
        }
        cols[4].push(y);
    }
    Table {
        columns: ["x0", "x1", "x2", "x3", "y"].map(String::from).to_vec(),
        data: cols,
    }
}

fn regression(rows: usize, seed: u64) -> Table {
    table(rows, seed, |x| {
        (6.0 * x[0]).sin() + 2.0 * x[1] - x[2] * x[2] + if x[3] > 0.5 { 0.5 } else { 0.0 }
    })
}

fn rmse(model: &Model, t: &Table) -> f64 {
    let rows = row_major(t);
    let p = model.predict_rows(&rows).unwrap();
    let y = &t.data[4];
    (p.iter()
        .zip(y)
        .map(|(a, b)| f64::from(a - b).powi(2))
        .sum::<f64>()
        / y.len() as f64)
        .sqrt()
}

fn row_major(t: &Table) -> Vec<f32> {
    let n = t.data[0].len();
    (0..n)
        .flat_map(|i| (0..4).map(move |c| t.data[c][i]))
        .collect()
}

/// `workers` workers, each with a shard however small the data (one worker grows runs of
/// rounds in one task; several run each level as tasks).
fn estimator(rounds: usize, workers: usize, params: &[(&str, &str)]) -> GbdtEstimator {
    GbdtEstimator::new(rounds)
        .params(Params::from_pairs(params).unwrap())
        .scaling_config(ScalingConfig {
            num_workers: workers,
            num_cpu_per_worker: 1,
        })
        .min_rows_per_worker(0)
}

#[test]
fn regression_learns_and_eval_loss_falls() {
    let (_rt, _g) = runtime();
    let train = regression(4000, 1);
    let test = regression(1000, 2);
    let report = estimator(40, 2, &[("max_depth", "4"), ("eta", "0.3")])
        .eval_set(DataConnector::table(test.clone()))
        .fit_report(&DataConnector::table(train.clone()), &COLS, "y")
        .unwrap();
    let m = &report.model;
    assert_eq!(m.trees.len(), 40);
    assert!(m.trees.iter().all(|t| t.depth() <= 4));
    let h = &report.eval_history;
    assert_eq!(h.len(), 40);
    assert!(h[39] < h[0] / 4.0, "eval rmse {} -> {}", h[0], h[39]);
    // The eval history (computed by tasks on bins) agrees with predicting the raw rows.
    let direct = rmse(m, &test);
    assert!((direct - h[39]).abs() < 1e-4, "{direct} vs {}", h[39]);
    assert!(direct < 0.1, "test rmse {direct}");
    assert_eq!(report.metric, "rmse");
    let imp = m.feature_importance(starling_ml::ImportanceType::Weight);
    assert_eq!(imp.len(), 4, "every feature is used: {imp:?}");
}

#[test]
fn one_two_and_four_workers_grow_the_same_trees_on_the_same_bins() {
    same_trees_with_any_workers(&[
        ("max_depth", "5"),
        ("subsample", "0.8"),
        ("colsample_bytree", "0.75"),
        ("gamma", "0.01"),
        ("lambda", "2"),
    ]);
}

#[test]
fn loss_guided_trees_are_the_same_with_any_workers() {
    same_trees_with_any_workers(&[
        ("grow_policy", "lossguide"),
        ("max_depth", "0"),
        ("max_leaves", "24"),
        ("subsample", "0.8"),
        ("colsample_bytree", "0.75"),
        ("gamma", "0.01"),
    ]);
}

fn same_trees_with_any_workers(params: &[(&str, &str)]) {
    let (_rt, _g) = runtime();
    let data = DataConnector::table(regression(3001, 3));
    let params = params.to_vec();
    let first = estimator(15, 1, &params)
        .fit_report(&data, &COLS, "y")
        .unwrap();
    let cuts: Cuts = first.cuts.clone();
    for workers in [1, 2, 4] {
        let m = estimator(15, workers, &params)
            .cuts(cuts.clone())
            .fit(&data, &COLS, "y")
            .unwrap();
        assert_eq!(m.trees.len(), first.model.trees.len());
        for (i, (a, b)) in m.trees.iter().zip(&first.model.trees).enumerate() {
            assert_eq!(a, b, "tree {i} differs with {workers} workers");
        }
        assert_eq!(m, first.model, "{workers} workers");
    }
    // With the default minimum shard size, this data is worth one worker: four asked for
    // train on one shard, and grow the same trees.
    let collapsed = estimator(15, 4, &params)
        .min_rows_per_worker(starling_ml::MIN_ROWS_PER_WORKER)
        .cuts(cuts.clone())
        .fit(&data, &COLS, "y")
        .unwrap();
    assert_eq!(collapsed, first.model, "4 workers asked, 1 used");
    // 3001 rows at 1000 per worker: three shards, and the report says why.
    let three = estimator(15, 4, &params)
        .min_rows_per_worker(1000)
        .cuts(cuts)
        .fit_report(&data, &COLS, "y")
        .unwrap();
    assert_eq!(three.model, first.model, "4 workers asked, 3 used");
    assert_eq!(three.workers, 3);
    let note = three
        .workers_note
        .expect("fewer workers than asked are explained");
    assert!(
        note.contains("3 worker(s), not the 4") && note.contains("min_rows_per_worker (1000)"),
        "{note}"
    );
    assert!(first.workers_note.is_none(), "one worker asked, one used");
}

#[test]
fn logistic_and_softprob_classify() {
    let (_rt, _g) = runtime();
    let binary = table(3000, 4, |x| if x[0] + x[1] > 1.0 { 1.0 } else { 0.0 });
    let mut binary = binary;
    // Labels are exactly 0/1: the generator's noise is not wanted here.
    binary.data[4] = binary.data[0]
        .iter()
        .zip(&binary.data[1])
        .map(|(a, b)| if a + b > 1.0 { 1.0 } else { 0.0 })
        .collect();
    let m = estimator(30, 2, &[("objective", "binary:logistic")])
        .fit(&DataConnector::table(binary.clone()), &COLS, "y")
        .unwrap();
    let p = m.predict_rows(&row_major(&binary)).unwrap();
    let right = p
        .iter()
        .zip(&binary.data[4])
        .filter(|(p, y)| (**p > 0.5) == (**y > 0.5))
        .count();
    assert!(
        right as f64 / p.len() as f64 > 0.97,
        "accuracy {right}/{}",
        p.len()
    );

    let mut multi = binary;
    multi.data[4] = multi.data[0]
        .iter()
        .map(|x| (x * 3.0).floor().min(2.0))
        .collect();
    let m = estimator(
        20,
        3,
        &[("objective", "multi:softprob"), ("num_class", "3")],
    )
    .fit(&DataConnector::table(multi.clone()), &COLS, "y")
    .unwrap();
    assert_eq!(m.objective, Objective::MultiSoftprob { num_class: 3 });
    assert_eq!(m.trees.len(), 60);
    assert_eq!(m.tree_info[..3], [0, 1, 2]);
    let p = m.predict_rows(&row_major(&multi)).unwrap();
    let right = p
        .chunks(3)
        .zip(&multi.data[4])
        .filter(|(p, y)| {
            let best = (0..3).max_by(|a, b| p[*a].total_cmp(&p[*b])).unwrap_or(0);
            best as f32 == **y
        })
        .count();
    assert!(
        right as f64 / multi.data[4].len() as f64 > 0.97,
        "accuracy {right}"
    );
    assert!(p
        .chunks(3)
        .all(|r| (r.iter().sum::<f32>() - 1.0).abs() < 1e-5));
}

#[test]
fn distributed_prediction_matches_and_early_stopping_keeps_the_best_round() {
    let (_rt, _g) = runtime();
    let train = regression(2000, 5);
    let data = DataConnector::table(train.clone());
    let m = estimator(10, 2, &[]).fit(&data, &COLS, "y").unwrap();
    let by_tasks = m.predict(&data, &COLS, 3).unwrap();
    assert_eq!(by_tasks, m.predict_rows(&row_major(&train)).unwrap());

    // Pure noise to predict: the eval loss stops improving almost at once.
    let noise = table(2000, 6, |_| 0.0);
    let other = table(500, 7, |_| 0.0);
    let report = estimator(200, 2, &[("eta", "0.5")])
        .eval_set(DataConnector::table(other))
        .early_stopping_rounds(5)
        .fit_report(&DataConnector::table(noise), &COLS, "y")
        .unwrap();
    let best = report.model.best_iteration.expect("stopped early");
    let h = &report.eval_history;
    assert!(h.len() < 200, "ran {} rounds", h.len());
    assert_eq!(h.len(), best + 6, "stops 5 rounds after the best");
    let min = h.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(h[best], min);
    assert_eq!(report.model.trees.len(), h.len());
}

#[test]
fn bad_input_is_a_typed_error() {
    let (_rt, _g) = runtime();
    let data = DataConnector::table(regression(100, 8));
    match estimator(2, 1, &[]).fit(&data, &["x0", "nope"], "y") {
        Err(MlError::Engine(e)) => {
            let msg = e.to_string();
            assert!(msg.contains("nope") && msg.contains("not found"), "{msg}");
        }
        other => panic!("expected a task error naming the column, got {other:?}"),
    }
    match estimator(2, 1, &[("objective", "binary:logistic")]).fit(&data, &COLS, "y") {
        Err(e) => assert!(
            e.to_string().contains("binary:logistic needs in [0, 1]"),
            "{e}"
        ),
        Ok(_) => panic!("labels outside [0, 1] were accepted"),
    }
    match estimator(2, 1, &[]).fit(&data, &["x0", "y"], "y") {
        Err(MlError::Param(m)) => assert!(m.contains("also an input column"), "{m}"),
        other => panic!("{other:?}"),
    }
    match estimator(0, 1, &[]).fit(&data, &COLS, "y") {
        Err(MlError::Param(m)) => assert!(m.contains("n_estimators"), "{m}"),
        other => panic!("{other:?}"),
    }
}
