//! Gradient-boosted trees on CSV files, trained data-parallel by `starling-ml`.
//!
//! ```text
//! cargo run --release --example gbdt -- --train TRAIN.csv --test TEST.csv --label y \
//!     --objective reg:squarederror --n-estimators 100 --max-depth 6 --learning-rate 0.3 \
//!     --workers 2 --save model.json
//! ```
//!
//! Prints `key=value` lines: the test metric (`rmse=..`, or `logloss=.. accuracy=..`, or
//! `mlogloss=.. accuracy=..`) and `train_seconds=..`. Input columns are every column but the
//! label unless `--features a,b,c` names them. `--train`/`--test` take a file, a directory or a
//! glob. Runs on a local cluster, or on the cluster at `STARLING_HEAD`, or with `--in-process`
//! on the in-process engine (tasks on this process's threads); submitted as a job
//! (`starling job submit --pool P --target-instances 3 target/release/examples/gbdt -- ..`) it
//! trains with one worker per instance unless `--workers` says otherwise. Data under
//! `--min-rows-per-worker` rows per worker (default 50,000) trains on fewer workers;
//! `workers_used=..` says how many.

use std::time::Instant;

use anyhow::{bail, ensure, Context};
use starling_ml::{DataConnector, GbdtEstimator, ImportanceType, Objective, Params, ScalingConfig};

struct Args {
    train: String,
    test: Option<String>,
    db: Option<String>,
    label: String,
    features: Option<Vec<String>>,
    params: Vec<(String, String)>,
    n_estimators: usize,
    workers: Option<usize>,
    cpus_per_worker: usize,
    early_stopping: Option<usize>,
    min_rows_per_worker: u64,
    save: Option<String>,
    verbose: usize,
    in_process: bool,
}

const USAGE: &str =
    "usage: gbdt --train PATH --label COL [--test PATH] [--db URL] [--features a,b,..] \
[--objective NAME] [--num-class N] [--n-estimators N] [--max-depth N] [--learning-rate X] \
[--max-bin N] [--lambda X] [--alpha X] [--gamma X] [--min-child-weight X] [--subsample X] \
[--colsample-bytree X] [--seed N] [--workers N] [--cpus-per-worker N] \
[--early-stopping-rounds N] [--min-rows-per-worker N] [--save model.json] [--verbose N] \
[--in-process]";

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        train: String::new(),
        test: None,
        db: None,
        label: String::new(),
        features: None,
        params: Vec::new(),
        n_estimators: 100,
        workers: None,
        cpus_per_worker: 1,
        early_stopping: None,
        min_rows_per_worker: starling_ml::MIN_ROWS_PER_WORKER,
        save: None,
        verbose: 0,
        in_process: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        if flag == "--in-process" {
            a.in_process = true;
            continue;
        }
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
        let num = |v: &str| -> anyhow::Result<usize> {
            v.parse()
                .with_context(|| format!("{flag}: {v:?} is not a count"))
        };
        match flag.as_str() {
            "--train" => a.train = value,
            "--test" => a.test = Some(value),
            "--db" => a.db = Some(value),
            "--label" => a.label = value,
            "--features" => a.features = Some(value.split(',').map(String::from).collect()),
            "--n-estimators" => a.n_estimators = num(&value)?,
            "--workers" => a.workers = Some(num(&value)?),
            "--cpus-per-worker" => a.cpus_per_worker = num(&value)?,
            "--early-stopping-rounds" => a.early_stopping = Some(num(&value)?),
            "--min-rows-per-worker" => a.min_rows_per_worker = num(&value)? as u64,
            "--save" => a.save = Some(value),
            "--verbose" => a.verbose = num(&value)?,
            other => match other.strip_prefix("--") {
                // Booster parameters: XGBoost's names with dashes.
                Some(name) if !name.is_empty() => {
                    a.params.push((name.replace('-', "_"), value));
                }
                _ => bail!("unexpected argument {other:?}\n{USAGE}"),
            },
        }
    }
    ensure!(!a.train.is_empty(), "--train is required\n{USAGE}");
    ensure!(!a.label.is_empty(), "--label is required\n{USAGE}");
    Ok(a)
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    // The in-process engine (tasks on threads of this process) or a cluster.
    let _rt = if args.in_process {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let rt = starling::Runtime::in_process(threads)?;
        let guard = rt.enter();
        Some((rt, guard))
    } else {
        None
    };
    let _cluster = if args.in_process {
        None
    } else {
        Some(starling_examples::connect()?)
    };
    let pairs: Vec<(&str, &str)> = args
        .params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let params = Params::from_pairs(&pairs)?;
    // Files, or with `--db` queries on that PostgreSQL server.
    let source = |what: &str| match &args.db {
        Some(url) => DataConnector::postgres(url, what),
        None => DataConnector::csv(what),
    };
    let train = source(&args.train)?;
    let features: Vec<String> = match &args.features {
        Some(f) => f.clone(),
        None => train
            .columns()?
            .into_iter()
            .filter(|c| *c != args.label)
            .collect(),
    };
    let cols: Vec<&str> = features.iter().map(String::as_str).collect();
    // One worker per job instance inside a job; otherwise one per node, at least 2.
    let workers = args.workers.unwrap_or_else(|| {
        std::env::var("STARLING_NUM_INSTANCES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| starling::nodes().map_or(1, |n| n.len()).max(2))
    });
    println!(
        "training {} rounds on {} ({} features) with {workers} workers on {} node(s)",
        args.n_estimators,
        args.train,
        cols.len(),
        starling::nodes().map_or(0, |n| n.len())
    );
    let mut est = GbdtEstimator::new(args.n_estimators)
        .params(params.clone())
        .scaling_config(ScalingConfig {
            num_workers: workers,
            num_cpu_per_worker: args.cpus_per_worker,
        })
        .min_rows_per_worker(args.min_rows_per_worker)
        .verbose_eval(args.verbose);
    let test = args.test.as_deref().map(source).transpose()?;
    if let (Some(rounds), Some(t)) = (args.early_stopping, &test) {
        est = est.eval_set(t.clone()).early_stopping_rounds(rounds);
    }
    let began = Instant::now();
    let report = est.fit_report(&train, &cols, &args.label)?;
    let seconds = began.elapsed().as_secs_f64();
    let model = report.model;
    println!("train_seconds={seconds:.3}");
    println!("workers_used={}", report.workers);
    if let Some(note) = &report.workers_note {
        println!("workers_note={note}");
    }
    println!("trees={}", model.trees.len());
    if let Some(b) = model.best_iteration {
        println!("best_iteration={b}");
    }
    let top: Vec<String> = {
        let mut imp = model.feature_importance(ImportanceType::Gain);
        imp.sort_by(|a, b| b.1.total_cmp(&a.1));
        imp.iter()
            .take(5)
            .map(|(n, g)| format!("{n}:{g:.3}"))
            .collect()
    };
    println!("importance_gain={}", top.join(","));
    if let Some(path) = &args.save {
        model.save_json(path)?;
        println!("saved={path}");
    }
    if let Some(test) = &test {
        let pred = model.predict(test, &cols, workers)?;
        let labels = test
            .load_shard(0, 1, &[], Some(&args.label))?
            .labels
            .context("test labels")?;
        ensure!(
            pred.len() == labels.len() * params.objective.groups(),
            "{} predictions for {} rows",
            pred.len(),
            labels.len()
        );
        report_metric(params.objective, &pred, &labels);
    }
    Ok(())
}

fn report_metric(objective: Objective, pred: &[f32], labels: &[f32]) {
    let n = labels.len() as f64;
    match objective {
        Objective::SquaredError => {
            let se: f64 = pred
                .iter()
                .zip(labels)
                .map(|(p, y)| f64::from(p - y).powi(2))
                .sum();
            println!("rmse={:.6}", (se / n).sqrt());
        }
        Objective::BinaryLogistic => {
            let (mut ll, mut right) = (0.0, 0usize);
            for (p, y) in pred.iter().zip(labels) {
                let p = f64::from(*p).clamp(1e-15, 1.0 - 1e-15);
                let y = f64::from(*y);
                ll -= y * p.ln() + (1.0 - y) * (1.0 - p).ln();
                right += usize::from((p > 0.5) == (y > 0.5));
            }
            println!("logloss={:.6} accuracy={:.6}", ll / n, right as f64 / n);
        }
        Objective::MultiSoftprob { num_class } => {
            let k = num_class as usize;
            let (mut ll, mut right) = (0.0, 0usize);
            for (p, y) in pred.chunks(k).zip(labels) {
                let py = f64::from(p[*y as usize]).clamp(1e-15, 1.0);
                ll -= py.ln();
                let best = (0..k).max_by(|a, b| p[*a].total_cmp(&p[*b])).unwrap_or(0);
                right += usize::from(best == *y as usize);
            }
            println!("mlogloss={:.6} accuracy={:.6}", ll / n, right as f64 / n);
        }
    }
}
