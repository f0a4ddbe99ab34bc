//! The driver side of a fit: [`GbdtEstimator`] and its loop (shards placed on nodes, rounds,
//! early stopping), the reduce of the shards' histograms, and prediction with a model.

use super::*;

/// A gradient-boosted-trees estimator (XGBoost's `hist` method), trained data-parallel on
/// Starling tasks.
///
/// ```no_run
/// use starling_ml::{DataConnector, GbdtEstimator, Params, ScalingConfig};
/// # fn main() -> Result<(), starling_ml::MlError> {
/// let _rt = starling::init()?;
/// let model = GbdtEstimator::new(100)
///     .params(Params::from_pairs(&[("objective", "binary:logistic"), ("max_depth", "4")])?)
///     .scaling_config(ScalingConfig { num_workers: 2, num_cpu_per_worker: 1 })
///     .fit(&DataConnector::csv("train/*.csv")?, &["x1", "x2", "x3"], "y")?;
/// model.save_json("model.json")?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct GbdtEstimator {
    pub(super) n_estimators: usize,
    pub(super) params: Params,
    pub(super) scaling: ScalingConfig,
    pub(super) eval: Option<DataConnector>,
    pub(super) early_stopping_rounds: Option<usize>,
    pub(super) cuts: Option<Cuts>,
    pub(super) verbose_eval: usize,
    pub(super) min_rows_per_worker: u64,
}

/// XGBoost's name for the estimator.
pub type XGBEstimator = GbdtEstimator;

/// What a fit produced, with its history.
#[derive(Clone, Debug)]
pub struct FitReport {
    /// The model.
    pub model: Model,
    /// The eval metric's name (`rmse`, `logloss`, `mlogloss`).
    pub metric: &'static str,
    /// The eval metric after each round (empty without an eval set).
    pub eval_history: Vec<f64>,
    /// The bin edges used (pass them to [`GbdtEstimator::cuts`] to train on the same bins).
    pub cuts: Cuts,
    /// Wall time of the fit, in seconds.
    pub seconds: f64,
    /// Workers (shards) it trained on: those asked for, or fewer for small data
    /// ([`GbdtEstimator::min_rows_per_worker`]).
    pub workers: usize,
    /// Why it trained on fewer workers than `num_workers` asked, when it did (also printed on
    /// stderr when the fit starts).
    pub workers_note: Option<String>,
}

impl GbdtEstimator {
    /// An estimator of `n_estimators` boosting rounds with XGBoost's default parameters.
    pub fn new(n_estimators: usize) -> Self {
        GbdtEstimator {
            n_estimators,
            params: Params::default(),
            scaling: ScalingConfig::default(),
            eval: None,
            early_stopping_rounds: None,
            cuts: None,
            verbose_eval: 0,
            min_rows_per_worker: MIN_ROWS_PER_WORKER,
        }
    }

    /// Sets the booster parameters.
    pub fn params(mut self, params: Params) -> Self {
        self.params = params;
        self
    }

    /// Sets how many worker tasks train and how many CPUs each takes.
    pub fn scaling_config(mut self, scaling: ScalingConfig) -> Self {
        self.scaling = scaling;
        self
    }

    /// Evaluates the model on `data` after every round (same columns as the training data).
    pub fn eval_set(mut self, data: DataConnector) -> Self {
        self.eval = Some(data);
        self
    }

    /// Stops when the eval metric has not improved for `rounds` rounds; the model keeps its
    /// trees and predicts with those up to the best round (`Model::best_iteration`).
    pub fn early_stopping_rounds(mut self, rounds: usize) -> Self {
        self.early_stopping_rounds = Some(rounds);
        self
    }

    /// Trains on these bin edges instead of sketching the data (e.g. a previous fit's).
    pub fn cuts(mut self, cuts: Cuts) -> Self {
        self.cuts = Some(cuts);
        self
    }

    /// Prints the eval metric (or, without an eval set, progress) every `n` rounds to stderr,
    /// above a bar of the rounds when stderr is a terminal (0: silent).
    pub fn verbose_eval(mut self, n: usize) -> Self {
        self.verbose_eval = n;
        self
    }

    /// Gives each worker at least `rows` rows (default [`MIN_ROWS_PER_WORKER`]; 0: every
    /// worker gets a shard however small). Smaller data trains on fewer workers: each level
    /// of a tree costs every shard a task round trip, which outweighs sharing the work of a
    /// small shard. One shard grows whole runs of rounds in one task. The trees are the same
    /// for any number of workers.
    pub fn min_rows_per_worker(mut self, rows: u64) -> Self {
        self.min_rows_per_worker = rows;
        self
    }

    /// Trains on `data`'s `input_cols` to predict `label_col`.
    pub fn fit(
        &self,
        data: &DataConnector,
        input_cols: &[&str],
        label_col: &str,
    ) -> Result<Model, MlError> {
        Ok(self.fit_report(data, input_cols, label_col)?.model)
    }

    /// [`fit`](Self::fit), also returning the eval history, the bins and the time taken.
    pub fn fit_report(
        &self,
        data: &DataConnector,
        input_cols: &[&str],
        label_col: &str,
    ) -> Result<FitReport, MlError> {
        let began = Instant::now();
        self.params.validate()?;
        if self.n_estimators == 0 {
            return Err(MlError::Param("n_estimators must be >= 1".into()));
        }
        if self.scaling.num_workers == 0 || self.scaling.num_cpu_per_worker == 0 {
            return Err(MlError::Param(
                "num_workers and num_cpu_per_worker must be >= 1".into(),
            ));
        }
        if input_cols.is_empty() {
            return Err(MlError::Param("no input columns".into()));
        }
        if input_cols.contains(&label_col) {
            return Err(MlError::Param(format!(
                "the label column {label_col:?} is also an input column"
            )));
        }
        let cols: Vec<String> = input_cols.iter().map(|s| s.to_string()).collect();
        let p = &self.params;
        let objective = p.objective;
        let k = objective.groups();
        let world = self.scaling.num_workers;
        let mut place = Placement::new(self.scaling)?;

        // Read and summarize the shards, each on its node.
        let load = |place: &Placement, world: usize| -> Vec<ObjectRef<RawShard>> {
            (0..world)
                .map(|r| {
                    place.on(r, ml_load::options()).remote(
                        data.clone(),
                        r as u32,
                        world as u32,
                        cols.clone(),
                        label_col.to_string(),
                    )
                })
                .collect()
        };
        let summarize =
            |place: &Placement, raws: &[ObjectRef<RawShard>]| -> Vec<ObjectRef<ShardSummary>> {
                raws.iter()
                    .enumerate()
                    .map(|(r, raw)| place.on(r, ml_summarize::options()).remote(raw, objective))
                    .collect()
            };
        let mut raws = load(&place, world);
        let summaries = starling::get_all(&summarize(&place, &raws))?;
        let rows: u64 = summaries.iter().map(|s| s.rows).sum();
        let cuts = match &self.cuts {
            Some(c) if c.n_features() != cols.len() => {
                return Err(MlError::Shape(format!(
                    "the given bins are for {} features, the data has {}",
                    c.n_features(),
                    cols.len()
                )))
            }
            Some(c) => c.clone(),
            None => {
                // XGBoost's sketch of every feature, fed the rows in order: a chain of one task
                // per shard, each on the shard's node, handing the sketches on.
                let per_feature = |f: fn(&ShardSummary) -> &Vec<u64>| -> Vec<u64> {
                    (0..cols.len())
                        .map(|j| summaries.iter().map(|s| f(s)[j]).sum())
                        .collect()
                };
                let present = per_feature(|s| &s.present);
                let missing = per_feature(|s| &s.missing);
                let mut sketches = place.on(0, ml_sketch_first::options()).remote(
                    &raws[0],
                    present,
                    p.max_bin as u32,
                );
                for (r, raw) in raws.iter().enumerate().skip(1) {
                    sketches = place
                        .on(r, ml_sketch_next::options())
                        .remote(raw, &sketches);
                }
                let has_missing: Vec<bool> = missing.iter().map(|&m| m > 0).collect();
                Cuts::from_sketches(starling::get(&sketches)?, &has_missing, p.max_bin)
            }
        };
        let label_mean = summaries.iter().map(|s| s.label_sum).sum::<f64>() / rows as f64;
        let label_min = summaries
            .iter()
            .map(|s| s.label_min)
            .fold(f32::INFINITY, f32::min);
        let label_max = summaries
            .iter()
            .map(|s| s.label_max)
            .fold(f32::NEG_INFINITY, f32::max);
        let base_score = p.base_score.unwrap_or(match objective {
            Objective::SquaredError => label_mean as f32,
            Objective::BinaryLogistic => (label_mean as f32).clamp(1e-6, 1.0 - 1e-6),
            Objective::MultiSoftprob { .. } => 0.5,
        });
        let base_margin = objective.base_margin(base_score);
        // Gradients are bounded by 1 for the probabilistic objectives; for squared error by the
        // label range around the base score (twice, for overshoot). Larger ones are clipped.
        let grad_bound = match objective {
            Objective::SquaredError => {
                2.0 * (label_max - base_margin)
                    .abs()
                    .max((label_min - base_margin).abs())
                    + 1.0
            }
            _ => 1.0,
        };
        if rows >= 1 << 32 {
            return Err(MlError::Shape(format!(
                "{rows} rows: at most 2^32 rows are supported"
            )));
        }
        let scale = hist::scale_for(f64::from(grad_bound));
        let cuts_ref = starling::put(cuts.clone())?;
        let layout = BinLayout::of(&cuts);
        // Data too small to be worth a worker per shard trains on fewer shards (read again;
        // the bins stay those of the first reading, so the trees are the same).
        let mut shard_rows: Vec<u64> = summaries.iter().map(|s| s.rows).collect();
        let asked = world;
        let world = workers_for(rows, world, self.min_rows_per_worker);
        let workers_note = (world < asked).then(|| {
            format!(
                "training on {world} worker(s), not the {asked} num_workers asks: {rows} rows \
                 give each worker fewer than min_rows_per_worker ({}), and a level costs every \
                 worker a task round trip",
                self.min_rows_per_worker
            )
        });
        if let Some(note) = &workers_note {
            eprintln!("starling-ml: {note}");
        }
        // The CPUs asked for the workers left out go to the shards' tasks (more threads each).
        place.widen(asked, world);
        if world < raws.len() {
            raws = load(&place, world);
            shard_rows = if world == 1 {
                vec![rows]
            } else {
                starling::get_all(&summarize(&place, &raws))?
                    .iter()
                    .map(|s| s.rows)
                    .collect()
            };
        }
        let mut offset = 0u64;
        let shards: Vec<ObjectRef<ShardData>> = raws
            .iter()
            .zip(&shard_rows)
            .enumerate()
            .map(|(r, (raw, n))| {
                let o = offset;
                offset += n;
                place.on(r, ml_bin::options()).remote(raw, &cuts_ref, o)
            })
            .collect();
        drop(raws);

        // The eval set, binned on the same edges.
        let eval = match &self.eval {
            None => None,
            Some(e) => {
                let shards: Vec<ObjectRef<ShardData>> = (0..world)
                    .map(|r| {
                        let raw = place.on(r, ml_load::options()).remote(
                            e.clone(),
                            r as u32,
                            world as u32,
                            cols.clone(),
                            label_col.to_string(),
                        );
                        place.on(r, ml_bin::options()).remote(&raw, &cuts_ref, 0)
                    })
                    .collect();
                let states: Vec<ObjectRef<EvalState>> = shards
                    .iter()
                    .enumerate()
                    .map(|(r, s)| {
                        place
                            .on(r, ml_eval_first::options())
                            .remote(s, base_margin, objective)
                    })
                    .collect();
                Some((shards, states))
            }
        };
        let mut eval = eval;

        let split = SplitParams {
            lambda: p.lambda,
            alpha: p.alpha,
            min_child_weight: p.min_child_weight,
            scale,
        };
        let mut model = Model {
            objective,
            base_score,
            num_feature: cols.len(),
            feature_names: cols.clone(),
            trees: Vec::new(),
            tree_info: Vec::new(),
            best_iteration: None,
        };
        let fit = fit_id();
        // Every tree so far, for tasks that must rebuild a shard's margins.
        let mut forest: Forest = Vec::new();
        let _scratch = ScratchGuard {
            place: &place,
            fit,
            world,
        };
        // The marker says this fit's driver lives (a later fit on this host removes the files
        // of one whose driver died), and that shards on this node may leave their histograms
        // in scratch for this process to read.
        let shares_scratch = scratch::mark_driver(fit).is_ok() && world <= 2;
        let mut end: Option<RoundEnd> = None;
        let mut history = Vec::new();
        let mut best: Option<(usize, f64)> = None;
        let spec = TreeSpec {
            cuts: &cuts,
            split: &split,
            p,
            k,
            threads: place.threads,
        };
        let ctx_of = |round: usize| RoundCtx {
            objective,
            base_margin,
            round: round as u32,
            scale,
            grad_bound,
            subsample: p.subsample,
            seed: p.seed,
            fit,
            capacity_depth: p.capacity_depth(),
        };
        // With one shard, a task grows a run of rounds, sized to take about `RUN_SECONDS`
        // (one round while an eval set decides when to stop).
        let mut per_round: Option<f64> = None;
        let mut round = 0usize;
        // With `verbose_eval` on a terminal, a bar of the rounds too (its lines above it).
        let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let bar = (self.verbose_eval > 0 && on_terminal).then(|| {
            starling::progress::Progress::new(
                "boosting",
                self.n_estimators as u64,
                starling::progress::Unit::Count,
            )
        });
        let say = |line: String| match &bar {
            Some(b) => b.line(&line),
            None => eprintln!("{line}"),
        };
        'rounds: while round < self.n_estimators {
            let forest_ref = starling::put(pack_forest(&forest))?;
            let batch: Vec<Grown> = if shards.len() == 1 {
                let left = self.n_estimators - round;
                let count = match (per_round, &eval) {
                    (_, Some(_)) | (None, _) => 1,
                    (Some(t), None) => ((RUN_SECONDS / t.max(1e-6)) as usize).clamp(1, left),
                };
                let started = Instant::now();
                let plan = RoundsPlan {
                    first: ctx_of(round),
                    count: count as u32,
                    end: end.take(),
                    params: p.clone(),
                    split,
                    threads: place.threads,
                };
                let grown = place.on(0, ml_rounds::options()).remote(
                    &shards[0],
                    &forest_ref,
                    &cuts_ref,
                    plan,
                );
                let grown = starling::get(&grown)?;
                per_round = Some(started.elapsed().as_secs_f64() / count as f64);
                grown
            } else {
                let ctx = ctx_of(round);
                let allowed = allowed_features(p, cols.len(), ctx.round, k);
                let run_level =
                    level_by_tasks(&place, &shards, &forest_ref, &layout, shares_scratch);
                vec![grow_round(&spec, &ctx, end.take(), &allowed, run_level)?]
            };
            for grown in batch {
                for (c, t) in grown.trees.iter().enumerate() {
                    model.trees.push(to_tree(t, &cuts, &split));
                    model.tree_info.push(c as u32);
                }
                end = Some(grown.end(fit, round as u32));
                let last: Vec<Vec<BinNode>> = grown.trees.into_iter().map(|t| t.nodes).collect();
                forest.push(last.clone());
                let done = round;
                round += 1;
                if let Some(b) = &bar {
                    b.set(round as u64);
                }
                if let Some((eshards, states)) = &mut eval {
                    *states = eshards
                        .iter()
                        .zip(states.iter())
                        .enumerate()
                        .map(|(r, (s, st))| {
                            place.on(r, ml_eval_next::options()).remote(
                                s,
                                st,
                                last.clone(),
                                objective,
                            )
                        })
                        .collect();
                    let losses: Vec<ObjectRef<(f64, u64)>> = states
                        .iter()
                        .enumerate()
                        .map(|(r, st)| place.on(r, ml_eval_loss::options()).remote(st))
                        .collect();
                    let losses = starling::get_all(&losses)?;
                    let (sum, n) = losses
                        .iter()
                        .fold((0.0, 0u64), |(a, b), (s, n)| (a + s, b + n));
                    let metric = match objective {
                        Objective::SquaredError => (sum / n as f64).sqrt(),
                        _ => sum / n as f64,
                    };
                    history.push(metric);
                    if let Some(b) = &bar {
                        b.note(&format!("eval-{}:{metric:.6}", metric_name(objective)));
                    }
                    if self.verbose_eval > 0 && done.is_multiple_of(self.verbose_eval) {
                        say(format!(
                            "[{done}]\teval-{}:{metric:.6}",
                            metric_name(objective)
                        ));
                    }
                    if best.is_none_or(|(_, b)| metric < b) {
                        best = Some((done, metric));
                    }
                    if let (Some(stop), Some((b, _))) = (self.early_stopping_rounds, best) {
                        if done - b >= stop {
                            model.best_iteration = Some(b);
                            break 'rounds;
                        }
                    }
                } else if self.verbose_eval > 0 && done.is_multiple_of(self.verbose_eval) {
                    say(format!(
                        "[{done}] {} trees, {:.1}s",
                        model.trees.len(),
                        began.elapsed().as_secs_f64()
                    ));
                }
            }
        }
        Ok(FitReport {
            model,
            metric: metric_name(objective),
            eval_history: history,
            cuts,
            seconds: began.elapsed().as_secs_f64(),
            workers: world,
            workers_note,
        })
    }
}

/// About how long one task growing several rounds of a one-shard fit should take: long
/// enough that the task hop is noise, short enough that progress shows and a retried task
/// redoes little.
pub(super) const RUN_SECONDS: f64 = 0.05;

/// Default of [`GbdtEstimator::min_rows_per_worker`].
pub const MIN_ROWS_PER_WORKER: u64 = 50_000;

/// How many of `workers` shards `rows` rows are worth: each at least `min_rows` (0: all).
pub(super) fn workers_for(rows: u64, workers: usize, min_rows: u64) -> usize {
    if min_rows == 0 {
        return workers;
    }
    usize::try_from(rows / min_rows)
        .unwrap_or(usize::MAX)
        .clamp(1, workers.max(1))
}

/// Removes the shards' scratch files when the fit ends, however it ends (best effort).
pub(super) struct ScratchGuard<'a> {
    pub(super) place: &'a Placement,
    pub(super) fit: u64,
    pub(super) world: usize,
}

impl Drop for ScratchGuard<'_> {
    fn drop(&mut self) {
        let done: Vec<ObjectRef<()>> = (0..self.world)
            .map(|r| {
                self.place
                    .on(r, ml_forget::options())
                    .remote(self.fit, r as u32)
            })
            .collect();
        let _ = starling::get_all_timeout(&done, std::time::Duration::from_secs(10));
        scratch::unmark_driver(self.fit);
    }
}

/// A number no other fit in this cluster is likely to share (it names the shards' scratch).
pub(super) fn fit_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

pub(super) fn metric_name(objective: Objective) -> &'static str {
    match objective {
        Objective::SquaredError => "rmse",
        Objective::BinaryLogistic => "logloss",
        Objective::MultiSoftprob { .. } => "mlogloss",
    }
}

/// Per class, the features a round's trees may split on.
pub(super) fn allowed_features(p: &Params, n: usize, round: u32, k: usize) -> Vec<Vec<bool>> {
    (0..k)
        .map(|c| feature_sample(p, n, round as usize, c))
        .collect()
}

/// Which features tree `class` of `round` may split on (`colsample_bytree`; all when 1).
pub(super) fn feature_sample(p: &Params, n: usize, round: usize, class: usize) -> Vec<bool> {
    if p.colsample_bytree >= 1.0 {
        return Vec::new();
    }
    let keep = ((n as f64 * p.colsample_bytree).round() as usize).clamp(1, n);
    let salt = p.seed ^ ((class as u64) << 40);
    let mut order: Vec<(f64, usize)> = (0..n)
        .map(|f| (draw(salt, round as u32, f as u64 + (1 << 50)), f))
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut allowed = vec![false; n];
    for (_, f) in order.into_iter().take(keep) {
        allowed[f] = true;
    }
    allowed
}

/// Where each shard's tasks run: shard `r` on node `r mod nodes` (soft), with the CPUs of one
/// worker.
pub(super) struct Placement {
    pub(super) nodes: Vec<starling::NodeId>,
    /// Each node's CPUs, in `nodes`' order.
    pub(super) node_cpus: Vec<f64>,
    pub(super) cpus: f64,
    pub(super) threads: u32,
}

impl Placement {
    pub(super) fn new(scaling: ScalingConfig) -> Result<Self, MlError> {
        let mut nodes: Vec<_> = starling::nodes()?
            .into_iter()
            .filter(|n| n.alive)
            .map(|n| (n.id, n.resources.get("CPU")))
            .collect();
        nodes.sort_by_key(|n| n.0);
        let (nodes, node_cpus) = nodes.into_iter().unzip();
        Ok(Placement {
            nodes,
            node_cpus,
            cpus: scaling.num_cpu_per_worker as f64,
            threads: scaling.num_cpu_per_worker as u32,
        })
    }

    /// A fit asked for `asked` workers and uses `used` shards: each shard's tasks get the CPUs
    /// (and threads) of the workers left out too, as far as the smallest node a shard runs on
    /// holds them. The work is the same whatever the threads (sums of integers), so the trees
    /// are too.
    pub(super) fn widen(&mut self, asked: usize, used: usize) {
        if used == 0 || used >= asked {
            return;
        }
        let share = self.threads as usize * asked / used;
        let fits = (0..used)
            .filter_map(|r| self.node_cpus.get(r % self.node_cpus.len().max(1)))
            .fold(f64::INFINITY, |a, &b| a.min(b));
        let threads = (share as f64).min(fits).floor() as u32;
        if threads > self.threads {
            self.threads = threads;
            self.cpus = f64::from(threads);
        }
    }

    /// `options`, pinned to shard `r`'s node.
    pub(super) fn on<O: Pinned>(&self, r: usize, options: O) -> O {
        let o = options.cpus(self.cpus);
        match self.nodes.get(r % self.nodes.len().max(1)) {
            Some(n) if self.nodes.len() > 1 => o.pin(*n),
            _ => o,
        }
    }
}

/// The option builders of this module's tasks.
pub(super) trait Pinned: Sized {
    fn cpus(self, n: f64) -> Self;
    fn pin(self, node: starling::NodeId) -> Self;
}

macro_rules! pinned {
    ($($o:ident),*) => {$(
        impl Pinned for $o {
            fn cpus(self, n: f64) -> Self {
                self.num_cpus(n)
            }
            fn pin(self, node: starling::NodeId) -> Self {
                self.node_affinity(node, true)
            }
        }
    )*};
}

pinned!(
    __starling_options_ml_load,
    __starling_options_ml_summarize,
    __starling_options_ml_sketch_first,
    __starling_options_ml_sketch_next,
    __starling_options_ml_bin,
    __starling_options_ml_level,
    __starling_options_ml_rounds,
    __starling_options_ml_forget,
    __starling_options_ml_sum_hists,
    __starling_options_ml_eval_first,
    __starling_options_ml_eval_next,
    __starling_options_ml_eval_loss,
    __starling_options_ml_predict
);

/// Sums the shards' histograms by a tree of tasks, each pair summed on the first one's node,
/// down to two, which the driver fetches together and adds: the driver reads two histograms
/// per level however many workers there are, and the last sum costs no task hop.
pub(super) fn reduce(
    place: &Placement,
    outs: Vec<ObjectRef<HistMsg>>,
    plan: &LevelPlan,
    spent: &mut Vec<HistMsg>,
) -> Result<Option<Hist>, MlError> {
    let mut hists: Vec<(usize, ObjectRef<HistMsg>)> = outs.into_iter().enumerate().collect();
    while hists.len() > 2 {
        let mut next = Vec::with_capacity(hists.len().div_ceil(2));
        let mut it = hists.into_iter();
        while let Some((r, a)) = it.next() {
            match it.next() {
                Some((_, b)) => next.push((r, place.on(r, ml_sum_hists::options()).remote(a, b))),
                None => next.push((r, a)),
            }
        }
        hists = next;
    }
    let ranks: Vec<usize> = hists.iter().map(|(r, _)| *r).collect();
    let last: Vec<ObjectRef<HistMsg>> = hists.into_iter().map(|(_, h)| h).collect();
    let parts = starling::get_all(&last)?;
    // Histograms left in scratch are read from this process's mapping of the file, which it
    // keeps between levels.
    let mut files = Vec::new();
    for (part, &rank) in parts.iter().zip(&ranks) {
        let Some(len) = part.in_scratch else {
            files.push(None);
            continue;
        };
        match left_in_scratch(plan, rank as u32, part.bins as usize, len as usize) {
            Some(f) => files.push(Some((f, 8 * len as usize))),
            None => return Ok(None),
        }
    }
    let bytes: Vec<(u64, &[u8])> = parts
        .iter()
        .zip(&files)
        .map(|(p, f)| match f {
            Some((f, n)) => (p.bins, &f.payload()[..*n]),
            None => (p.bins, &p.data[..]),
        })
        .collect();
    // The tree of sum tasks leaves one or two.
    let total = match bytes.as_slice() {
        [(bins, one)] => Ok(Hist {
            bins: *bins as usize,
            data: i64s(one),
        }),
        [(ba, a), (bb, b)] => sum_le(*ba, a, *bb, b),
        _ => Err(MlError::Param("no shards".into())),
    };
    drop(bytes);
    drop(files);
    spent.extend(parts);
    total.map(Some)
}

impl Model {
    /// Predicts every row of `data` (`input_cols` in the model's feature order) with
    /// `num_workers` tasks, each reading its own shard; rows come back in the data's order.
    pub fn predict(
        &self,
        data: &DataConnector,
        input_cols: &[&str],
        num_workers: usize,
    ) -> Result<Vec<f32>, MlError> {
        if input_cols.len() != self.num_feature {
            return Err(MlError::Shape(format!(
                "the model takes {} features, {} columns were given",
                self.num_feature,
                input_cols.len()
            )));
        }
        let world = num_workers.max(1);
        let place = Placement::new(ScalingConfig {
            num_workers: world,
            num_cpu_per_worker: 1,
        })?;
        let cols: Vec<String> = input_cols.iter().map(|s| s.to_string()).collect();
        let model = starling::put(self.clone())?;
        let parts: Vec<ObjectRef<Vec<f32>>> = (0..world)
            .map(|r| {
                place.on(r, ml_predict::options()).remote(
                    data.clone(),
                    r as u32,
                    world as u32,
                    cols.clone(),
                    &model,
                )
            })
            .collect();
        Ok(starling::get_all(&parts)?.concat())
    }
}
