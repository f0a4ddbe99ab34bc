//! Compatibility with XGBoost itself: models written by `Model::save_json` are loaded by
//! Python's `xgboost.Booster(model_file=..)`, which must predict what `Model::predict_rows`
//! predicts (within 1e-5), and the model XGBoost saves again must read back unchanged.
//!
//! The models are built by hand (trees of several depths, missing values sent both ways,
//! thresholds that rows hit exactly, for `reg:squarederror`, `binary:logistic` (with a best
//! iteration) and `multi:softprob`) and trained by `GbdtEstimator` on the in-process runtime
//! (the same three objectives, on rows with missing values).
//!
//! Needs a Python that can import xgboost: the one named by `STARLING_XGBOOST_PYTHON`
//! (`tests/setup_xgboost.sh` makes one), else `python3` if it can. Without one the test
//! writes why it is skipped to stderr (past the test harness's capture) and returns, unless
//! `STARLING_REQUIRE_XGBOOST=1` (CI sets it), which makes it fail; a `STARLING_XGBOOST_PYTHON`
//! that cannot import xgboost fails the test.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use starling_ml::{
    DataConnector, GbdtEstimator, Model, Objective, Params, ScalingConfig, Table, Tree,
};

/// The longest any Python run may take.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Writes to the process's stderr directly, so the message shows even when the test passes.
fn note(message: &str) {
    let _ = writeln!(std::io::stderr(), "xgboost_compat: {message}");
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "starling-ml-xgboost-compat-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create scratch directory");
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a finished command printed.
struct Ran {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs `program args` with a time limit; stdout and stderr go through files in `scratch`.
fn run(scratch: &Scratch, program: &str, args: &[&str]) -> Result<Ran, String> {
    let (out_path, err_path) = (scratch.path("stdout.txt"), scratch.path("stderr.txt"));
    let open = |p: &Path| File::create(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(open(&out_path)?)
        .stderr(open(&err_path)?)
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{program} {args:?} ran over {TIMEOUT:?}; killed"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for {program}: {e}")),
        }
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    Ok(Ran {
        success: status.success(),
        stdout: read(&out_path),
        stderr: read(&err_path),
    })
}

/// The xgboost version `python` imports, or why it cannot.
fn xgboost_version(scratch: &Scratch, python: &str) -> Result<String, String> {
    let ran = run(
        scratch,
        python,
        &["-c", "import numpy, xgboost; print(xgboost.__version__)"],
    )?;
    if ran.success {
        Ok(ran.stdout.trim().to_string())
    } else {
        let last = ran.stderr.lines().last().unwrap_or("").to_string();
        Err(format!("{python} cannot import xgboost and numpy ({last})"))
    }
}

/// The Python to compare with, or `None` (after saying why) when there is none.
fn find_python(scratch: &Scratch) -> Option<(String, String)> {
    if let Some(p) = std::env::var_os("STARLING_XGBOOST_PYTHON") {
        let p = p.to_string_lossy().into_owned();
        match xgboost_version(scratch, &p) {
            Ok(v) => return Some((p, v)),
            Err(e) => panic!("STARLING_XGBOOST_PYTHON is set, but {e}"),
        }
    }
    match xgboost_version(scratch, "python3") {
        Ok(v) => Some(("python3".to_string(), v)),
        // Where a Python with xgboost was meant to be provided (CI), its absence is a failure.
        Err(e) if std::env::var_os("STARLING_REQUIRE_XGBOOST").is_some_and(|v| v == "1") => {
            panic!(
                "STARLING_REQUIRE_XGBOOST=1, but there is no Python with xgboost: \
                 STARLING_XGBOOST_PYTHON is unset and python3 {e}"
            )
        }
        Err(e) => {
            note(&format!(
                "skipped: no Python with xgboost (set STARLING_XGBOOST_PYTHON); tried \
                 STARLING_XGBOOST_PYTHON (unset), python3 ({e})"
            ));
            None
        }
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in [-1, 1), with every digit of an f32 in use.
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A value on the grid of quarters in [-2, 2]: rows land on such thresholds exactly.
    fn quarter(&mut self) -> f32 {
        self.below(17) as f32 * 0.25 - 2.0
    }
}

/// Turns leaf `i` of `t` into a split with two new leaves.
fn split(t: &mut Tree, i: usize, feature: u32, threshold: f32, default_left: bool, rng: &mut Rng) {
    for _ in 0..2 {
        let value = rng.unit() * 0.5;
        t.left.push(-1);
        t.right.push(-1);
        t.parent.push(i as i32);
        t.split_index.push(0);
        t.split_condition.push(value);
        t.default_left.push(false);
        t.base_weight.push(value);
        t.loss_change.push(0.0);
        t.sum_hessian.push(1.0 + rng.below(50) as f32);
    }
    let n = t.len();
    t.left[i] = n as i32 - 2;
    t.right[i] = n as i32 - 1;
    t.split_index[i] = feature;
    t.split_condition[i] = threshold;
    t.default_left[i] = default_left;
    t.loss_change[i] = 1.0 + rng.unit().abs() * 10.0;
    t.sum_hessian[i] = t.sum_hessian[n - 2] + t.sum_hessian[n - 1];
}

/// A tree of the given depth over `num_feature` features; `full` splits every node down to
/// `depth`, otherwise only one child of each split is split again (a chain).
fn tree(depth: usize, full: bool, num_feature: u32, rng: &mut Rng) -> Tree {
    let mut t = Tree::leaf(rng.unit(), 100.0);
    let mut frontier = vec![0usize];
    for _ in 0..depth {
        let mut next = Vec::new();
        for i in frontier {
            let feature = rng.below(u64::from(num_feature)) as u32;
            let threshold = if rng.below(2) == 0 {
                rng.quarter()
            } else {
                rng.unit() * 2.0
            };
            split(&mut t, i, feature, threshold, rng.below(2) == 0, rng);
            let (l, r) = (t.left[i] as usize, t.right[i] as usize);
            if full {
                next.extend([l, r]);
            } else {
                next.push(if rng.below(2) == 0 { l } else { r });
            }
        }
        frontier = next;
    }
    t
}

fn models() -> Vec<(&'static str, Model)> {
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let f = 4;
    let squared = Model {
        objective: Objective::SquaredError,
        base_score: 0.75,
        num_feature: f as usize,
        feature_names: vec![],
        trees: vec![
            Tree::leaf(0.5, 100.0),
            tree(1, true, f, &mut rng),
            tree(3, true, f, &mut rng),
            tree(5, false, f, &mut rng),
        ],
        tree_info: vec![0; 4],
        best_iteration: None,
    };
    let logistic = Model {
        objective: Objective::BinaryLogistic,
        base_score: 0.2,
        num_feature: f as usize,
        feature_names: ["age", "income", "score", "tenure"]
            .map(String::from)
            .to_vec(),
        trees: vec![
            tree(2, true, f, &mut rng),
            tree(4, false, f, &mut rng),
            tree(3, true, f, &mut rng),
            tree(2, true, f, &mut rng),
        ],
        tree_info: vec![0; 4],
        // The last tree is past the best round: neither side may use it.
        best_iteration: Some(2),
    };
    let classes = 4u32;
    let rounds = 3usize;
    let softprob = Model {
        objective: Objective::MultiSoftprob { num_class: classes },
        base_score: 0.5,
        num_feature: f as usize,
        feature_names: ["a", "b", "c", "d"].map(String::from).to_vec(),
        trees: (0..rounds * classes as usize)
            .map(|i| tree(1 + i % 4, i % 3 != 0, f, &mut rng))
            .collect(),
        tree_info: (0..rounds as u32 * classes).map(|i| i % classes).collect(),
        best_iteration: None,
    };
    vec![
        ("squarederror", squared),
        ("logistic", logistic),
        ("softprob", softprob),
    ]
}

/// Models trained by `GbdtEstimator` (2 workers, in-process) on 600 rows with missing values.
fn trained_models() -> Vec<(&'static str, Model)> {
    let rt = starling::Runtime::in_process(2).expect("runtime starts");
    let _g = rt.enter();
    let x = rows(600);
    let mut cols: Vec<Vec<f32>> = (0..4)
        .map(|c| x.chunks(4).map(|r| r[c]).collect())
        .collect();
    let value =
        |r: &[f32]| r[0].max(0.0) * 2.0 - r[1].min(1.0) + if r[2].is_nan() { 1.0 } else { 0.0 };
    let fit = |label: Vec<f32>, pairs: &[(&str, &str)]| {
        let mut data = cols.clone();
        data.push(label);
        let table = Table {
            columns: ["a", "b", "c", "d", "y"].map(String::from).to_vec(),
            data,
        };
        GbdtEstimator::new(8)
            .params(Params::from_pairs(pairs).expect("params"))
            .scaling_config(ScalingConfig {
                num_workers: 2,
                num_cpu_per_worker: 1,
            })
            .fit(&DataConnector::table(table), &["a", "b", "c", "d"], "y")
            .expect("fit")
    };
    let v: Vec<f32> = x.chunks(4).map(value).collect();
    let squared = fit(v.clone(), &[("max_depth", "4")]);
    let logistic = fit(
        v.iter().map(|y| f32::from(*y > 1.0)).collect(),
        &[
            ("objective", "binary:logistic"),
            ("max_depth", "3"),
            ("gamma", "0.1"),
        ],
    );
    let softprob = fit(
        v.iter()
            .map(|y| (y.max(0.0) * 1.5).floor().min(2.0))
            .collect(),
        &[
            ("objective", "multi:softprob"),
            ("num_class", "3"),
            ("max_depth", "3"),
        ],
    );
    cols.clear();
    assert!(squared.trees.iter().any(|t| t.len() > 7), "trees grew");
    vec![
        ("trained-squarederror", squared),
        ("trained-logistic", logistic),
        ("trained-softprob", softprob),
    ]
}

/// Rows of 4 features: quarters (which hit thresholds exactly), arbitrary values, ~20%
/// missing, and one row with every value missing.
fn rows(n: usize) -> Vec<f32> {
    let mut rng = Rng(0xDA7A_0000_0000_0042);
    let mut out = Vec::with_capacity(n * 4);
    for _ in 0..n - 1 {
        for _ in 0..4 {
            out.push(match rng.below(10) {
                0 | 1 => f32::NAN,
                2..=5 => rng.quarter(),
                _ => rng.unit() * 2.5,
            });
        }
    }
    out.extend([f32::NAN; 4]);
    out
}

fn write_rows(path: &Path, rows: &[f32]) {
    let mut text = String::new();
    for row in rows.chunks(4) {
        let cells: Vec<String> = row
            .iter()
            .map(|v| {
                if v.is_nan() {
                    "nan".into()
                } else {
                    format!("{v}")
                }
            })
            .collect();
        text.push_str(&cells.join(","));
        text.push('\n');
    }
    std::fs::write(path, text).expect("write rows");
}

fn read_predictions(path: &Path) -> Vec<Vec<f64>> {
    let text = std::fs::read_to_string(path).expect("read XGBoost's predictions");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split(',')
                .map(|x| x.trim().parse::<f64>().expect("a number"))
                .collect()
        })
        .collect()
}

#[test]
fn xgboost_loads_our_models_and_predicts_the_same() {
    let scratch = Scratch::new();
    let Some((python, version)) = find_python(&scratch) else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/xgb_predict.py");
    let rows = rows(60);
    let rows_path = scratch.path("rows.csv");
    write_rows(&rows_path, &rows);

    for (name, model) in models().into_iter().chain(trained_models()) {
        let model_path = scratch.path(&format!("{name}.json"));
        model.save_json(&model_path).expect("save");
        let out_path = scratch.path(&format!("{name}.pred.csv"));
        let resaved_path = scratch.path(&format!("{name}.resaved.json"));
        let args: Vec<String> = [&script, &model_path, &rows_path, &out_path, &resaved_path]
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = run(&scratch, &python, &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            ran.success,
            "{name}: XGBoost could not load or predict with our model:\n{}{}",
            ran.stdout, ran.stderr
        );

        let ours = model.predict_rows(&rows).expect("predict");
        let theirs = read_predictions(&out_path);
        let groups = model.objective.groups();
        assert_eq!(
            theirs.len(),
            rows.len() / 4,
            "{name}: rows predicted by XGBoost"
        );
        let mut worst = 0f64;
        for (i, (t, o)) in theirs.iter().zip(ours.chunks(groups)).enumerate() {
            assert_eq!(t.len(), groups, "{name} row {i}: outputs");
            for (a, b) in t.iter().zip(o) {
                let d = (a - f64::from(*b)).abs();
                worst = worst.max(d);
                assert!(
                    d <= 1e-5,
                    "{name} row {i} {:?}: XGBoost {t:?}, ours {o:?}",
                    &rows[i * 4..i * 4 + 4]
                );
            }
        }

        // What XGBoost saves again reads back as the same model.
        let again = Model::load_json(&resaved_path).expect("read the model XGBoost saved");
        assert_eq!(
            again, model,
            "{name}: the model XGBoost saved again differs"
        );
        note(&format!(
            "{name}: {} rows agree with xgboost {version} ({python}), largest difference {worst:e}",
            theirs.len()
        ));
    }
}

/// Trains the same data with the same parameters in XGBoost and in `GbdtEstimator` and
/// compares the predictions: with the same bins (both choose them the same way) and the same
/// split search, the trees are the same, so predictions agree to float rounding.
#[test]
fn training_on_the_same_data_gives_xgboost_s_predictions() {
    let scratch = Scratch::new();
    let Some((python, version)) = find_python(&scratch) else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/xgb_train.py");
    // 500 rows of 4 features: quarters (ties), arbitrary values; no missing values.
    let mut rng = Rng(0xC0FF_EE00_0000_0007);
    let n = 500;
    let x: Vec<f32> = (0..n * 4)
        .map(|_| {
            if rng.below(3) == 0 {
                rng.quarter()
            } else {
                rng.unit() * 2.5
            }
        })
        .collect();
    let value =
        |r: &[f32]| 2.0 * r[0] - r[1] * r[1] + if r[2] > 1.0 { 1.5 } else { 0.0 } + 0.3 * r[3];
    let v: Vec<f32> = x.chunks(4).map(value).collect();
    // (objective, labels, parameters)
    type Case<'a> = (&'a str, Vec<f32>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case<'_>> = vec![
        ("reg:squarederror", v.clone(), vec![("max_depth", "4")]),
        (
            "binary:logistic",
            v.iter().map(|y| f32::from(*y > 1.0)).collect(),
            vec![("max_depth", "3"), ("eta", "0.5"), ("lambda", "2")],
        ),
        (
            "multi:softprob",
            v.iter()
                .map(|y| (y.max(0.0) * 0.8).floor().min(2.0))
                .collect(),
            vec![
                ("num_class", "3"),
                ("max_depth", "3"),
                ("base_score", "0.5"),
            ],
        ),
        // `gamma` and `max_leaves` act as the tree grows, as in XGBoost's `hist`.
        (
            "reg:squarederror",
            v.clone(),
            vec![("max_depth", "5"), ("gamma", "0.4"), ("max_leaves", "9")],
        ),
        // Loss-guided growth: unbounded depth, a leaf budget.
        (
            "reg:squarederror",
            v.clone(),
            vec![
                ("grow_policy", "lossguide"),
                ("max_depth", "0"),
                ("max_leaves", "13"),
            ],
        ),
        (
            "binary:logistic",
            v.iter().map(|y| f32::from(*y > 1.0)).collect(),
            vec![
                ("grow_policy", "lossguide"),
                ("max_leaves", "10"),
                ("max_depth", "4"),
                ("gamma", "0.3"),
            ],
        ),
        (
            "multi:softprob",
            v.iter()
                .map(|y| (y.max(0.0) * 0.8).floor().min(2.0))
                .collect(),
            vec![
                ("num_class", "3"),
                ("grow_policy", "lossguide"),
                ("max_leaves", "6"),
                ("base_score", "0.5"),
            ],
        ),
        // No leaf budget: depth-limited, every valid split taken, best first.
        (
            "reg:squarederror",
            v.clone(),
            vec![("grow_policy", "lossguide"), ("max_depth", "3")],
        ),
    ];
    let rows_path = scratch.path("rows.csv");
    write_rows(&rows_path, &x);
    let rt = starling::Runtime::in_process(2).expect("runtime starts");
    let _g = rt.enter();
    for (objective, labels, params) in cases {
        let train_path = scratch.path("train.csv");
        let mut text = String::from("a,b,c,d,y\n");
        for (r, y) in x.chunks(4).zip(&labels) {
            text.push_str(&format!("{},{},{},{},{y}\n", r[0], r[1], r[2], r[3]));
        }
        std::fs::write(&train_path, text).expect("write training data");
        let mut pairs = vec![("objective", objective)];
        pairs.extend(params.iter().copied());
        let json = format!(
            "{{{}}}",
            pairs
                .iter()
                .map(|(k, v)| match v.parse::<f64>() {
                    Ok(_) => format!("\"{k}\": {v}"),
                    Err(_) => format!("\"{k}\": \"{v}\""),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        let params_path = scratch.path("params.json");
        std::fs::write(&params_path, json).expect("write params");
        let out_path = scratch.path("xgb.pred.csv");
        let args: Vec<String> = [&script, &train_path, &params_path]
            .iter()
            .map(|p| p.display().to_string())
            .chain(["10".to_string()])
            .chain(
                [&rows_path, &out_path]
                    .iter()
                    .map(|p| p.display().to_string()),
            )
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = run(&scratch, &python, &args).unwrap_or_else(|e| panic!("{objective}: {e}"));
        assert!(
            ran.success,
            "{objective}: XGBoost failed:\n{}{}",
            ran.stdout, ran.stderr
        );
        let theirs = read_predictions(&out_path);

        // One shard (rounds grown inside one task) and two (a task per shard and step).
        for min_rows in [n as u64, 100] {
            let model = GbdtEstimator::new(10)
                .params(Params::from_pairs(&pairs).expect("params"))
                .scaling_config(ScalingConfig {
                    num_workers: 2,
                    num_cpu_per_worker: 1,
                })
                .min_rows_per_worker(min_rows)
                .fit(
                    &DataConnector::csv(train_path.to_str().expect("utf-8")).expect("connector"),
                    &["a", "b", "c", "d"],
                    "y",
                )
                .expect("fit");
            let ours = model.predict_rows(&x).expect("predict");
            let groups = model.objective.groups();
            let mut worst = 0f64;
            for (i, (t, o)) in theirs.iter().zip(ours.chunks(groups)).enumerate() {
                for (a, b) in t.iter().zip(o) {
                    let d = (a - f64::from(*b)).abs();
                    worst = worst.max(d);
                    assert!(
                        d <= 1e-4,
                        "{objective} {params:?}, {} shard(s), row {i}: XGBoost {t:?}, ours {o:?}",
                        (n as u64 / min_rows).min(2)
                    );
                }
            }
            note(&format!(
                "{objective} {params:?}, {} shard(s): trained like xgboost {version}: {n} \
                 predictions agree, largest difference {worst:e}",
                (n as u64 / min_rows).min(2)
            ));
        }
    }
}

/// A family of datasets of many shapes (`benches/gbdt_family.py`: many and few features,
/// heavy tails, discrete columns, duplicated rows, missing values, a skewed binary label, five
/// classes), 15,000 training rows each (enough for XGBoost's quantile sketch to approximate),
/// trained on two shards: Starling's test metric is XGBoost's, or better, within 0.5 %.
///
/// `five_classes` runs with `base_score = 0.5` on both sides: XGBoost 3.x starts
/// `multi:softprob` from per-class intercepts, which Starling does not estimate yet.
#[test]
fn a_family_of_datasets_gets_xgboost_s_test_metric() {
    let scratch = Scratch::new();
    let Some((python, version)) = find_python(&scratch) else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/gbdt_family.py");
    let script = script.to_str().expect("utf-8 path");
    let dir = scratch.path("family");
    let dir = dir.to_str().expect("utf-8 path");
    let ran = run(&scratch, &python, &[script, "gen", dir, "0.25"]).expect("gen runs");
    assert!(ran.success, "gen: {}{}", ran.stdout, ran.stderr);
    let listed = run(&scratch, &python, &[script, "list"]).expect("list runs");
    assert!(listed.success, "list: {}", listed.stderr);
    let rt = starling::Runtime::in_process(2).expect("runtime starts");
    let _g = rt.enter();
    let mut checked = 0;
    for line in listed.stdout.lines() {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(objective), Some(num_class)) =
            (parts.next(), parts.next(), parts.next())
        else {
            panic!("bad list line {line:?}");
        };
        let mut extra: Vec<(&str, &str)> = Vec::new();
        if num_class != "0" {
            extra.push(("base_score", "0.5"));
        }
        let xgb_args: Vec<String> = [script, "xgboost", dir, name, "30", "6", "0.3", "1"]
            .iter()
            .map(|s| s.to_string())
            .chain(extra.iter().map(|(k, v)| format!("{k}={v}")))
            .collect();
        let xgb_args: Vec<&str> = xgb_args.iter().map(String::as_str).collect();
        let ran = run(&scratch, &python, &xgb_args).expect("xgboost runs");
        assert!(
            ran.success,
            "{name}: XGBoost failed:\n{}{}",
            ran.stdout, ran.stderr
        );
        let theirs: f64 = ran
            .stdout
            .split("\"value\": ")
            .nth(1)
            .and_then(|s| s.split([',', '}']).next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name}: no value in {}", ran.stdout));

        let train = DataConnector::csv(&format!("{dir}/{name}/train.csv")).expect("train");
        let test = DataConnector::csv(&format!("{dir}/{name}/test.csv")).expect("test");
        let cols: Vec<String> = train
            .columns()
            .expect("columns")
            .into_iter()
            .filter(|c| c != "y")
            .collect();
        let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
        let mut pairs = vec![("objective", objective), ("max_depth", "6")];
        if num_class != "0" {
            pairs.push(("num_class", num_class));
        }
        pairs.extend(extra.iter().copied());
        let model = GbdtEstimator::new(30)
            .params(Params::from_pairs(&pairs).expect("params"))
            .scaling_config(ScalingConfig {
                num_workers: 2,
                num_cpu_per_worker: 1,
            })
            .min_rows_per_worker(1000)
            .fit_report(&train, &cols, "y")
            .expect("fit");
        assert_eq!(model.workers, 2, "{name}: trained on two shards");
        let model = model.model;
        let pred = model.predict(&test, &cols, 2).expect("predict");
        let labels = test
            .load_shard(0, 1, &[], Some("y"))
            .expect("labels")
            .labels
            .expect("labels");
        let ours = metric(objective, &pred, &labels);
        let diff = (ours - theirs) / theirs;
        note(&format!(
            "{name} ({objective}): xgboost {version} {theirs:.6}, starling {ours:.6} ({:+.3} %)",
            diff * 100.0
        ));
        assert!(
            diff <= 0.005,
            "{name}: Starling's test metric {ours} is {:.3} % worse than XGBoost's {theirs}",
            diff * 100.0
        );
        checked += 1;
    }
    assert_eq!(checked, 9, "the family has nine datasets");
}

/// RMSE, logloss or mlogloss of `pred` against `labels`, as `gbdt_family.py` computes them.
fn metric(objective: &str, pred: &[f32], labels: &[f32]) -> f64 {
    let n = labels.len() as f64;
    match objective {
        "reg:squarederror" => (pred
            .iter()
            .zip(labels)
            .map(|(p, y)| f64::from(p - y).powi(2))
            .sum::<f64>()
            / n)
            .sqrt(),
        "binary:logistic" => {
            -pred
                .iter()
                .zip(labels)
                .map(|(p, y)| {
                    let p = f64::from(*p).clamp(1e-15, 1.0 - 1e-15);
                    let y = f64::from(*y);
                    y * p.ln() + (1.0 - y) * (1.0 - p).ln()
                })
                .sum::<f64>()
                / n
        }
        _ => {
            let k = pred.len() / labels.len();
            -pred
                .chunks(k)
                .zip(labels)
                .map(|(p, y)| f64::from(p[*y as usize]).clamp(1e-15, 1.0).ln())
                .sum::<f64>()
                / n
        }
    }
}
