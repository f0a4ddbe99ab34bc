//! Data-parallel training: the driver's loop and the worker tasks it runs.
//!
//! Per fit: one `load` task per shard reads that shard on its node (tasks are pinned to nodes
//! round-robin, soft affinity) and keeps the raw rows as an object there; `summarize` tasks
//! return per-feature quantile summaries and label statistics, from which the driver picks the
//! bin edges; `bin` tasks turn each shard into row-major bin codes, kept in the object store
//! for the whole fit (tasks read them mapped, not copied).
//!
//! Per round: a `margins` task per shard adds the previous round's trees to the shard's margins
//! and computes fixed-point gradients (zeroed for rows `subsample` leaves out). Then, level by
//! level, a `level` task per shard moves its rows down the splits the driver chose and builds
//! the histograms of the nodes the driver asked for (the smaller child of each split; the
//! driver gets the other by subtraction); the shards' histograms are summed by a tree of
//! `sum` tasks and only the total reaches the driver, which finds the best splits. Trees of
//! every class of `multi:softprob` grow together, in the same tasks.
//!
//! Every step is a task over objects, so a lost node's shards and margins are rebuilt from
//! lineage like any other result, and the driver holds only histograms and trees.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use starling::{Bytes, ObjectRef};

use crate::data::{DataConnector, Frame};
use crate::hist::{self, GradSum, Hist, SplitParams};
use crate::params::{Params, ScalingConfig};
use crate::partition::{self, Partition};
use crate::scratch;
use crate::sketch::{Cuts, Summary};
use crate::{MlError, Model, Objective, Tree};

// ---------------------------------------------------------------------------------------------
// Flat arrays as bytes (little-endian), so large per-row arrays travel and are stored as one
// block and are read in place.

/// Little-endian bytes of plain numbers, written in one pass.
macro_rules! le_codec {
    ($to:ident, $into:ident, $from:ident, $t:ty, $n:expr) => {
        #[allow(dead_code)]
        fn $to(v: &[$t]) -> Bytes {
            let mut out = vec![0u8; v.len() * $n];
            $into(v, &mut out);
            Bytes::new(out)
        }

        /// Writes `v` into the front of `out` (which must have room).
        #[allow(dead_code)]
        fn $into(v: &[$t], out: &mut [u8]) {
            // Fixed-size chunks: on a little-endian machine this is a plain copy.
            for (o, x) in out.chunks_exact_mut($n).zip(v) {
                o.copy_from_slice(&x.to_le_bytes());
            }
        }

        #[allow(dead_code)]
        fn $from(b: &[u8]) -> Vec<$t> {
            b.chunks_exact($n)
                .map(|c| {
                    let mut a = [0u8; $n];
                    a.copy_from_slice(c);
                    <$t>::from_le_bytes(a)
                })
                .collect()
        }
    };
}

le_codec!(f32_bytes, f32_bytes_into, f32s, f32, 4);
le_codec!(u32_bytes, u32_bytes_into, u32s, u32, 4);
le_codec!(i64_bytes, i64_bytes_into, i64s, i64, 8);
le_codec!(i32_bytes, i32_bytes_into, i32s, i32, 4);

// ---------------------------------------------------------------------------------------------
// Objects the tasks exchange.

/// A shard as read: columns and labels, stored on the node that read it.
#[derive(Clone, Serialize, Deserialize)]
pub struct RawShard {
    n_rows: u64,
    columns: Vec<Bytes>,
    labels: Bytes,
}

impl RawShard {
    fn from_frame(f: Frame) -> Result<Self, MlError> {
        let labels = f
            .labels
            .ok_or_else(|| MlError::Param("training data needs a label column".into()))?;
        Ok(RawShard {
            n_rows: f.n_rows as u64,
            columns: f.columns.iter().map(|c| f32_bytes(c)).collect(),
            labels: f32_bytes(&labels),
        })
    }

    fn columns(&self) -> Vec<Vec<f32>> {
        self.columns.iter().map(|c| f32s(c)).collect()
    }
}

/// What the driver learns of a shard before binning.
#[derive(Clone, Serialize, Deserialize)]
pub struct ShardSummary {
    features: Vec<Summary>,
    rows: u64,
    label_sum: f64,
    label_min: f32,
    label_max: f32,
}

/// A binned shard, resident in its node's object store for the whole fit.
#[derive(Clone, Serialize, Deserialize)]
pub struct ShardData {
    n_rows: u64,
    n_features: u32,
    /// Global index of the shard's first row (for `subsample`, which must not depend on how
    /// the data is sharded).
    row_offset: u64,
    /// Row-major bin codes.
    bins: Bytes,
    /// The same codes column-major: splitting a node's rows reads one feature's codes, which
    /// as a column (a byte per row) stay in cache where the rows do not.
    columns: Bytes,
    labels: Bytes,
}

/// What a round's tasks need to (re)compute a shard's margins and gradients.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoundCtx {
    objective: Objective,
    base_margin: f32,
    round: u32,
    scale: i32,
    grad_bound: f32,
    subsample: f64,
    seed: u64,
    fit: u64,
    /// Deepest a tree grows (bounds the row groups a shard keeps).
    max_depth: u32,
}

impl RoundCtx {
    /// Most leaves a tree can have.
    fn leaves(&self) -> usize {
        1usize << self.max_depth.min(30)
    }
}

/// Every tree grown so far, round by round (one per class per round), in bin space: what a
/// task needs to rebuild a shard's margins from nothing.
pub type Forest = Vec<Vec<Vec<BinNode>>>;

/// [`Forest`] packed as little-endian words (per round its class count, per tree its node
/// count, per node five words): tasks take it as bytes, shared with the store, and unpack it
/// only when they must rebuild margins.
fn pack_forest(forest: &Forest) -> Bytes {
    let mut w: Vec<u32> = vec![forest.len() as u32];
    for round in forest {
        w.push(round.len() as u32);
        for tree in round {
            w.push(tree.len() as u32);
            for n in tree {
                w.extend([
                    n.feature,
                    u32::from(n.bin) | u32::from(n.default_left) << 8,
                    n.left as u32,
                    n.right as u32,
                    n.value.to_bits(),
                ]);
            }
        }
    }
    u32_bytes(&w)
}

fn unpack_forest(bytes: &[u8]) -> Result<Forest, MlError> {
    let w = u32s(bytes);
    let bad = || MlError::Shape("a packed forest ends early".into());
    let mut at = 0usize;
    let mut next = |n: usize| -> Result<&[u32], MlError> {
        let part = w.get(at..at + n).ok_or_else(bad)?;
        at += n;
        Ok(part)
    };
    let rounds = next(1)?[0] as usize;
    let mut forest = Vec::with_capacity(rounds.min(1 << 20));
    for _ in 0..rounds {
        let classes = next(1)?[0] as usize;
        let mut round = Vec::with_capacity(classes.min(1 << 16));
        for _ in 0..classes {
            let nodes = next(1)?[0] as usize;
            let words = next(5 * nodes)?;
            round.push(
                words
                    .chunks_exact(5)
                    .map(|n| BinNode {
                        feature: n[0],
                        bin: n[1] as u8,
                        default_left: n[1] >> 8 & 1 == 1,
                        left: n[2] as i32,
                        right: n[3] as i32,
                        value: f32::from_bits(n[4]),
                    })
                    .collect(),
            );
        }
        forest.push(round);
    }
    Ok(forest)
}

/// What a level task needs of the cuts: where each feature's bins start in a histogram, and
/// how many bins there are in all.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BinLayout {
    offsets: Vec<u32>,
    total: u32,
}

impl BinLayout {
    fn of(cuts: &Cuts) -> Self {
        let (offsets, total) = cuts.offsets();
        BinLayout {
            offsets: offsets.iter().map(|&o| o as u32).collect(),
            total: total as u32,
        }
    }
}

/// A tree node in bin space, as the workers route rows.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BinNode {
    feature: u32,
    bin: u8,
    default_left: bool,
    left: i32,
    right: i32,
    /// Leaf output (already times eta).
    value: f32,
}

impl BinNode {
    fn leaf(value: f32) -> Self {
        BinNode {
            feature: 0,
            bin: 0,
            default_left: false,
            left: -1,
            right: -1,
            value,
        }
    }

    #[inline]
    fn goes_left(&self, code: u8) -> bool {
        if code == crate::sketch::MISSING {
            self.default_left
        } else {
            code <= self.bin
        }
    }
}

#[inline]
fn leaf_value(tree: &[BinNode], row: &[u8]) -> f32 {
    let mut i = 0usize;
    loop {
        let n = &tree[i];
        if n.left < 0 {
            return n.value;
        }
        i = if n.goes_left(row[n.feature as usize]) {
            n.left
        } else {
            n.right
        } as usize;
    }
}

/// A split the workers apply to their rows.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct SplitRule {
    node: u32,
    feature: u32,
    bin: u8,
    default_left: bool,
    left: u32,
    right: u32,
}

/// One class's work in a level: splits to apply, nodes to build histograms of.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClassPlan {
    splits: Vec<SplitRule>,
    build: Vec<u32>,
}

/// One level's work for every class.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LevelPlan {
    classes: Vec<ClassPlan>,
    threads: u32,
    /// The round (and fit), to rebuild margins if needed.
    ctx: RoundCtx,
    /// Depth of the nodes whose histograms are built.
    depth: u32,
    /// Per class, the splits of the round's earlier levels (to recompute the row groups).
    applied: Vec<Vec<SplitRule>>,
    /// At the root: how the previous round ended, to bring the margins up to this round.
    end: Option<RoundEnd>,
    /// Leave the histograms in the shard's `hist` scratch file when the driver shares it.
    hist_scratch: bool,
}

/// A histogram as it travels (one block of little-endian i64s), or a note that it was left in
/// the shard's `hist` scratch file for a driver on the same node.
#[derive(Clone, Serialize, Deserialize)]
pub struct HistMsg {
    bins: u64,
    data: Bytes,
    /// How many values the shard's `hist` scratch file holds instead (`data` is empty).
    in_scratch: Option<u64>,
}

impl HistMsg {
    fn from_hist(h: &Hist) -> Self {
        HistMsg {
            bins: h.bins as u64,
            data: i64_bytes(&h.data),
            in_scratch: None,
        }
    }

    /// Leaves `h` in shard `rank`'s `hist` scratch file, stamped with the plan's round and
    /// level, and returns a message saying so; `None` where there is no room or no file.
    fn to_scratch(h: &Hist, plan: &LevelPlan, rank: u32) -> Option<Self> {
        let words = hist_scratch_words(plan.ctx.max_depth, plan.classes.len(), h.bins)?;
        if 2 * h.data.len() > words {
            return None;
        }
        let mut file = scratch::Scratch::open(plan.ctx.fit, rank, scratch::HIST, words).ok()?;
        file.set_stamp(None);
        i64_bytes_into(&h.data, file.payload_mut());
        file.set_stamp(Some((plan.ctx.round, plan.depth)));
        Some(HistMsg {
            bins: h.bins as u64,
            data: Bytes::new(Vec::new()),
            in_scratch: Some(h.data.len() as u64),
        })
    }
}

/// Two histograms as little-endian bytes, added in one pass.
fn sum_le(bins_a: u64, a: &[u8], bins_b: u64, b: &[u8]) -> Result<Hist, MlError> {
    if bins_a != bins_b || a.len() != b.len() {
        return Err(MlError::Shape(
            "shards sent histograms of different shapes".into(),
        ));
    }
    let le = |b: &[u8]| i64::from_le_bytes(b.try_into().expect("8 bytes"));
    Ok(Hist {
        bins: bins_a as usize,
        data: a
            .chunks_exact(8)
            .zip(b.chunks_exact(8))
            .map(|(a, b)| le(a) + le(b))
            .collect(),
    })
}

/// Shard `rank`'s `hist` scratch file, if it holds `len` values of `plan`'s level (its round
/// and depth stamped).
fn left_in_scratch(
    plan: &LevelPlan,
    rank: u32,
    bins: usize,
    len: usize,
) -> Option<scratch::Scratch> {
    let words = hist_scratch_words(plan.ctx.max_depth, plan.classes.len(), bins)?;
    let file = scratch::Scratch::open_existing(plan.ctx.fit, rank, scratch::HIST, words).ok()?;
    (file.stamp() == Some((plan.ctx.round, plan.depth)) && 8 * len <= file.payload().len())
        .then_some(file)
}

/// Room (32-bit words) in a shard's `hist` scratch file for the largest level of a fit: the
/// root builds `classes` slots, a level below it at most `classes * 2^(depth - 1)`, and the
/// deepest level run is `max_depth - 1`. `None` above 64 MiB: such levels travel as results.
fn hist_scratch_words(max_depth: u32, classes: usize, bins: usize) -> Option<usize> {
    let widest = 1usize.checked_shl(max_depth.saturating_sub(2))?;
    let words = classes
        .checked_mul(widest)?
        .checked_mul(2 * bins + 3)?
        .checked_mul(2)?;
    (words <= 16 << 20).then_some(words)
}

/// Positions recomputed: every row walked from the root through `applied` (per class).
fn positions_from(shard: &ShardData, applied: &[Vec<SplitRule>], positions: &mut [u32]) {
    let k = applied.len();
    let nf = shard.n_features as usize;
    positions.fill(0);
    for (c, rules) in applied.iter().enumerate() {
        if rules.is_empty() {
            continue;
        }
        let router = Router::new(rules);
        for (i, row) in shard.bins.chunks_exact(nf.max(1)).enumerate() {
            let mut p = 0u32;
            loop {
                let q = router.route(p, row);
                if q == p {
                    break;
                }
                p = q;
            }
            positions[i * k + c] = p;
        }
    }
}

/// An eval shard's margins and its loss at them.
#[derive(Clone, Serialize, Deserialize)]
pub struct EvalState {
    margins: Bytes,
    loss_sum: f64,
    rows: u64,
}

// ---------------------------------------------------------------------------------------------
// Worker tasks.

#[starling::remote]
fn ml_load(
    data: DataConnector,
    rank: u32,
    world: u32,
    cols: Vec<String>,
    label: String,
) -> Result<RawShard, MlError> {
    let frame = data.load_shard(rank as usize, world as usize, &cols, Some(&label))?;
    RawShard::from_frame(frame)
}

#[starling::remote]
fn ml_summarize(raw: RawShard, objective: Objective) -> Result<ShardSummary, MlError> {
    let labels = f32s(&raw.labels);
    check_labels(&labels, objective)?;
    let features = raw
        .columns()
        .iter()
        .map(|c| Summary::of_column(c))
        .collect();
    Ok(ShardSummary {
        features,
        rows: raw.n_rows,
        label_sum: labels.iter().map(|y| f64::from(*y)).sum(),
        label_min: labels.iter().copied().fold(f32::INFINITY, f32::min),
        label_max: labels.iter().copied().fold(f32::NEG_INFINITY, f32::max),
    })
}

fn check_labels(labels: &[f32], objective: Objective) -> Result<(), MlError> {
    for (i, y) in labels.iter().enumerate() {
        let ok = match objective {
            _ if !y.is_finite() => false,
            Objective::SquaredError => true,
            Objective::BinaryLogistic => (0.0..=1.0).contains(y),
            Objective::MultiSoftprob { num_class } => {
                *y >= 0.0 && y.fract() == 0.0 && (*y as u32) < num_class
            }
        };
        if !ok {
            let want = match objective {
                Objective::SquaredError => "a finite number".to_string(),
                Objective::BinaryLogistic => "in [0, 1]".to_string(),
                Objective::MultiSoftprob { num_class } => {
                    format!("a class index in 0..{num_class}")
                }
            };
            return Err(MlError::Param(format!(
                "label of row {i} of this shard is {y}; {} needs {want}",
                objective.name()
            )));
        }
    }
    Ok(())
}

#[starling::remote]
fn ml_bin(raw: RawShard, cuts: Cuts, row_offset: u64) -> ShardData {
    let n = raw.n_rows as usize;
    let nf = raw.columns.len();
    let bins = cuts.bin_columns(&raw.columns(), n);
    let mut columns = vec![0u8; bins.len()];
    for (i, row) in bins.chunks_exact(nf.max(1)).enumerate() {
        for (f, &b) in row.iter().enumerate() {
            columns[f * n + i] = b;
        }
    }
    ShardData {
        n_rows: raw.n_rows,
        n_features: nf as u32,
        row_offset,
        bins: Bytes::new(bins),
        columns: Bytes::new(columns),
        labels: raw.labels.clone(),
    }
}

/// A row's pseudo-random draw in `[0, 1)` for `subsample` (splitmix64 of seed, round, row).
fn draw(seed: u64, round: u32, row: u64) -> f64 {
    let mut z = seed
        .wrapping_add(u64::from(round).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(row.wrapping_mul(0xD1B5_4A32_D192_ED03));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Gradients and hessians of one row's margins (`g`, `h` per class).
fn gradients(objective: Objective, margins: &[f32], label: f32, out: &mut [(f32, f32)]) {
    match objective {
        Objective::SquaredError => out[0] = (margins[0] - label, 1.0),
        Objective::BinaryLogistic => {
            let p = crate::model::sigmoid(margins[0]);
            out[0] = (p - label, (p * (1.0 - p)).max(1e-16));
        }
        Objective::MultiSoftprob { .. } => {
            // Softmax into `out`'s first halves, then the gradients in place.
            let max = margins.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f32;
            for (o, m) in out.iter_mut().zip(margins) {
                o.0 = (m - max).exp();
                sum += o.0;
            }
            for (k, o) in out.iter_mut().enumerate() {
                let pk = o.0 / sum;
                let y = if label as usize == k { 1.0 } else { 0.0 };
                *o = (pk - y, (2.0 * pk * (1.0 - pk)).max(1e-16));
            }
        }
    }
}

/// Fills in the gradients of `margins` (`rows x classes`) as fixed-point `(g, h)` pairs.
fn gradients_into(shard: &ShardData, margins: &[f32], grads: &mut [i32], ctx: &RoundCtx) {
    if ctx.objective.groups() == 1 && ctx.subsample >= 1.0 {
        one_class_gradients(shard, margins, grads, ctx);
    } else {
        row_gradients(shard, margins, grads, ctx);
    }
}

/// A shard's little-endian `f32` label.
fn label(b: &[u8]) -> f32 {
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// [`gradients_into`] for one class and every row: in blocks, the probabilities first (the
/// libm call), then the fixed-point pairs in a pass of plain arithmetic. The same values as
/// [`row_gradients`], about twice as fast.
fn one_class_gradients(shard: &ShardData, margins: &[f32], grads: &mut [i32], ctx: &RoundCtx) {
    let factor = hist::factor(ctx.scale);
    let bound = ctx.grad_bound;
    {
        const BLOCK: usize = 1024;
        let logistic = matches!(ctx.objective, Objective::BinaryLogistic);
        let mut probs = [0f32; BLOCK];
        for ((m, y), out) in margins
            .chunks(BLOCK)
            .zip(shard.labels.chunks(4 * BLOCK))
            .zip(grads.chunks_mut(2 * BLOCK))
        {
            let probs = &mut probs[..m.len()];
            if logistic {
                for (p, m) in probs.iter_mut().zip(m) {
                    *p = crate::model::sigmoid(*m);
                }
            } else {
                probs.copy_from_slice(m);
            }
            for ((p, y), out) in probs
                .iter()
                .zip(y.chunks_exact(4))
                .zip(out.chunks_exact_mut(2))
            {
                let g = p - label(y);
                let h = if logistic {
                    (p * (1.0 - p)).max(1e-16)
                } else {
                    1.0
                };
                out[0] = hist::quantize(g.clamp(-bound, bound), factor);
                out[1] = hist::quantize(h.min(bound), factor);
            }
        }
    }
}

/// [`gradients_into`] row by row, any objective, with `subsample`.
fn row_gradients(shard: &ShardData, margins: &[f32], grads: &mut [i32], ctx: &RoundCtx) {
    let k = ctx.objective.groups();
    let factor = hist::factor(ctx.scale);
    let bound = ctx.grad_bound;
    let mut gh = vec![(0f32, 0f32); k];
    for (i, y) in shard.labels.chunks_exact(4).map(label).enumerate() {
        let out = &mut grads[2 * i * k..2 * (i + 1) * k];
        if ctx.subsample < 1.0
            && draw(ctx.seed, ctx.round, shard.row_offset + i as u64) >= ctx.subsample
        {
            out.fill(0);
            continue;
        }
        gradients(ctx.objective, &margins[i * k..(i + 1) * k], y, &mut gh);
        for (c, (g, h)) in gh.iter().enumerate() {
            out[2 * c] = hist::quantize(g.clamp(-bound, bound), factor);
            out[2 * c + 1] = hist::quantize(h.min(bound), factor);
        }
    }
}

/// A shard's margins from nothing: the base margin plus every tree of `forest`.
fn margins_from(shard: &ShardData, forest: &Forest, ctx: &RoundCtx, margins: &mut [f32]) {
    margins.fill(ctx.base_margin);
    for trees in forest {
        add_trees(shard, margins, trees);
    }
}

/// The shard's margins and gradients for `ctx.round`, in its scratch file (`3 * rows *
/// classes` words: margins, then gradients): continued from the previous round's file when it
/// is there, rebuilt from `forest` otherwise. Without scratch space, in memory.
fn margins_scratch(
    shard: &ShardData,
    forest: &[u8],
    end: Option<&RoundEnd>,
    rank: u32,
    ctx: &RoundCtx,
) -> Result<MarginsFile, MlError> {
    let mut file = open_margins(shard, rank, ctx);
    advance_margins(&mut file, shard, forest, end, rank, ctx)?;
    Ok(file)
}

/// The shard's margins file (memory where there is no scratch space), as it is.
fn open_margins(shard: &ShardData, rank: u32, ctx: &RoundCtx) -> MarginsFile {
    let len = shard.n_rows as usize * ctx.objective.groups();
    match scratch::Scratch::open(ctx.fit, rank, scratch::MARGINS, 3 * len) {
        Ok(f) => MarginsFile::Mapped(f),
        Err(_) => MarginsFile::Memory(vec![0; 3 * len], None),
    }
}

/// Brings `file` to `ctx.round`: adds the round `end` finished when the file holds the round
/// before, rebuilds from `forest` otherwise; then the round's gradients.
fn advance_margins(
    file: &mut MarginsFile,
    shard: &ShardData,
    forest: &[u8],
    end: Option<&RoundEnd>,
    rank: u32,
    ctx: &RoundCtx,
) -> Result<(), MlError> {
    let len = shard.n_rows as usize * ctx.objective.groups();
    if file.stamp() == Some((ctx.round, 0)) {
        return Ok(());
    }
    let previous = ctx.round.checked_sub(1).map(|r| (r, 0));
    let continues = previous.is_some() && file.stamp() == previous && end.is_some();
    file.set_stamp(None);
    let (margins, grads) = file.split(len);
    match end {
        Some(end) if continues => add_round(shard, margins, end, rank, ctx.leaves()),
        _ => margins_from(shard, &unpack_forest(forest)?, ctx, margins),
    }
    gradients_into(shard, margins, grads, ctx);
    file.set_stamp(Some((ctx.round, 0)));
    Ok(())
}

/// A shard's margins and gradients: mapped scratch, or memory where there is none (stamped
/// like the file, for the rounds of one task).
enum MarginsFile {
    Mapped(scratch::Scratch),
    Memory(Vec<u32>, Option<(u32, u32)>),
}

impl MarginsFile {
    fn stamp(&self) -> Option<(u32, u32)> {
        match self {
            MarginsFile::Mapped(f) => f.stamp(),
            MarginsFile::Memory(_, at) => *at,
        }
    }

    fn set_stamp(&mut self, at: Option<(u32, u32)>) {
        match self {
            MarginsFile::Mapped(f) => f.set_stamp(at),
            MarginsFile::Memory(_, stamp) => *stamp = at,
        }
    }

    /// Margins (`len` of them) and gradients (`2 * len`).
    fn split(&mut self, len: usize) -> (&mut [f32], &mut [i32]) {
        match self {
            MarginsFile::Mapped(f) => f.f32s_and_i32s(len),
            MarginsFile::Memory(v, _) => {
                let (a, b) = v.split_at_mut(len);
                // SAFETY: f32 and i32 have the size and alignment of u32, and every bit
                // pattern is a valid value of each.
                unsafe {
                    (
                        std::slice::from_raw_parts_mut(a.as_mut_ptr().cast::<f32>(), a.len()),
                        std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<i32>(), b.len()),
                    )
                }
            }
        }
    }
}

/// Adds one round's trees (one per class) to margins, walking each tree from its root.
fn add_trees(shard: &ShardData, margins: &mut [f32], trees: &[Vec<BinNode>]) {
    let k = trees.len();
    let nf = shard.n_features as usize;
    for (i, row) in shard.bins.chunks_exact(nf.max(1)).enumerate() {
        for (c, t) in trees.iter().enumerate() {
            margins[i * k + c] += leaf_value(t, row);
        }
    }
}

/// How a round ended, for the shards' next margins: per class, the splits chosen after the
/// last level the workers ran, and every node's output (a node pruned away or below a leaf
/// gives its leaf's).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoundEnd {
    classes: Vec<ClassEnd>,
    fit: u64,
    round: u32,
    /// The last level the workers ran.
    depth: u32,
    /// Per class, the splits the workers applied.
    applied: Vec<Vec<SplitRule>>,
}

/// One class's part of a [`RoundEnd`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClassEnd {
    rules: Vec<SplitRule>,
    values: Vec<f32>,
}

/// Split rules as flat per-node arrays, for the hot loop (a node's right child is its left
/// child + 1: children are always made in pairs).
struct Router {
    /// Feature of each node's split, `u32::MAX` for a node not split this level.
    feature: Vec<u32>,
    bin: Vec<u8>,
    default_left: Vec<bool>,
    left: Vec<u32>,
}

impl Router {
    fn new(rules: &[SplitRule]) -> Self {
        let top = rules.iter().map(|s| s.node as usize + 1).max().unwrap_or(0);
        let mut r = Router {
            feature: vec![u32::MAX; top],
            bin: vec![0; top],
            default_left: vec![false; top],
            left: vec![0; top],
        };
        for s in rules {
            debug_assert_eq!(s.right, s.left + 1);
            let n = s.node as usize;
            r.feature[n] = s.feature;
            r.bin[n] = s.bin;
            r.default_left[n] = s.default_left;
            r.left[n] = s.left;
        }
        r
    }

    /// Where a row at node `p` goes.
    #[inline(always)]
    fn route(&self, p: u32, row: &[u8]) -> u32 {
        let n = p as usize;
        match self.feature.get(n) {
            Some(&f) if f != u32::MAX => {
                let code = row[f as usize];
                let right = if code == crate::sketch::MISSING {
                    !self.default_left[n]
                } else {
                    code > self.bin[n]
                };
                self.left[n] + u32::from(right)
            }
            _ => p,
        }
    }
}

/// Groups rows by node after `applied` (per class): every row walked from the root.
fn partition_from(shard: &ShardData, applied: &[Vec<SplitRule>], words: &mut [u32]) {
    let k = applied.len();
    let n = shard.n_rows as usize;
    let mut positions = vec![0u32; n * k];
    positions_from(shard, applied, &mut positions);
    for (c, block) in words.chunks_exact_mut(words.len() / k.max(1)).enumerate() {
        let mut p = Partition::open(block, n);
        p.group_by_position(|i| positions[i * k + c]);
        p.store();
    }
}

/// Adds the round `end` finished to `margins`, from the rows' groups after its last level
/// (kept in scratch, or recomputed from its splits).
fn add_round(shard: &ShardData, margins: &mut [f32], end: &RoundEnd, rank: u32, leaves: usize) {
    let k = end.classes.len();
    let nf = shard.n_features as usize;
    let n = shard.n_rows as usize;
    let per = partition::words(n, leaves);
    let mut file = scratch::Scratch::open(end.fit, rank, scratch::PARTITION, per * k).ok();
    // Each row's node: scattered from the groups (a small array, so the scatter stays in
    // cache), then every row is walked in order, reading the bins and margins sequentially.
    let mut positions = vec![0u32; n * k];
    match &mut file {
        Some(f) if f.stamp() == Some((end.round, end.depth)) => {
            for (c, block) in f.as_mut_slice().chunks_exact_mut(per).enumerate() {
                let p = Partition::open(block, n);
                for g in &p.groups {
                    for &i in p.rows(g) {
                        positions[i as usize * k + c] = g.node;
                    }
                }
            }
        }
        _ => positions_from(shard, &end.applied, &mut positions),
    }
    let routers: Vec<Router> = end
        .classes
        .iter()
        .map(|ce| Router::new(&ce.rules))
        .collect();
    for (i, row) in shard.bins.chunks_exact(nf.max(1)).enumerate() {
        for (c, (ce, router)) in end.classes.iter().zip(&routers).enumerate() {
            let q = router.route(positions[i * k + c], row);
            margins[i * k + c] += ce.values[q as usize];
        }
    }
}

/// Splits the rows of the plan's split nodes and builds the requested histograms from each
/// built node's rows (the building split over `plan.threads` threads). `words` holds one
/// partition block per class.
fn level(
    shard: &ShardData,
    grads: &[i32],
    words: &mut [u32],
    plan: &LevelPlan,
    layout: &BinLayout,
) -> Hist {
    let k = plan.classes.len();
    let n = shard.n_rows as usize;
    let nf = shard.n_features as usize;
    let bins: &[u8] = &shard.bins;
    let per = words.len() / k.max(1);
    // Split, then list the built nodes' rows: (class, slot, start, end).
    let mut work: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut slots = 0usize;
    let mut tmp = Vec::new();
    for ((c, cp), block) in plan
        .classes
        .iter()
        .enumerate()
        .zip(words.chunks_exact_mut(per))
    {
        let mut p = Partition::open(block, n);
        let at = p.index();
        for rule in &cp.splits {
            let Some(&e) = at.get(&rule.node) else {
                continue;
            };
            let (f, bin, default_left) = (rule.feature as usize, rule.bin, rule.default_left);
            let column = &shard.columns[f * n..(f + 1) * n];
            p.split(e, (rule.left, rule.right), &mut tmp, |i| {
                let code = column[i];
                if code == crate::sketch::MISSING {
                    !default_left
                } else {
                    code > bin
                }
            });
        }
        let at = p.index();
        for b in &cp.build {
            if let Some(&e) = at.get(b) {
                let g = p.groups[e];
                work.push((c, slots, c * per + g.start, c * per + g.end));
            }
            slots += 1;
        }
        p.store();
    }
    let words: &[u32] = words;
    let offsets: Vec<usize> = layout.offsets.iter().map(|&o| o as usize).collect();
    let total_bins = layout.total as usize;
    let build = |items: &[(usize, usize, usize, usize)]| {
        let mut h = Hist::zeros(slots, total_bins);
        for &(c, s, a, b) in items {
            for &i in &words[a..b] {
                let i = i as usize;
                let gs = GradSum {
                    g: i64::from(grads[2 * (i * k + c)]),
                    h: i64::from(grads[2 * (i * k + c) + 1]),
                };
                h.add_row(s, &bins[i * nf..(i + 1) * nf], &offsets, gs);
            }
        }
        h
    };
    let threads = (plan.threads as usize).clamp(1, 64);
    if threads <= 1 {
        return build(&work);
    }
    let parts = cut_work(&work, threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = parts
            .iter()
            .map(|items| {
                let build = &build;
                s.spawn(move || build(items))
            })
            .collect();
        let mut total = Hist::zeros(slots, total_bins);
        for p in parts {
            match p.join() {
                Ok(h) => total.add(&h),
                Err(e) => std::panic::resume_unwind(e),
            }
        }
        total
    })
}

/// Cuts row ranges `(class, slot, start, end)` into `threads` lists of about as many rows.
fn cut_work(
    work: &[(usize, usize, usize, usize)],
    threads: usize,
) -> Vec<Vec<(usize, usize, usize, usize)>> {
    let total: usize = work.iter().map(|w| w.3 - w.2).sum();
    let share = total.div_ceil(threads).max(1);
    let mut parts = vec![Vec::new()];
    let mut filled = 0;
    for &(c, s, mut a, b) in work {
        while a < b {
            let take = (share - filled).min(b - a);
            parts
                .last_mut()
                .expect("one part")
                .push((c, s, a, a + take));
            a += take;
            filled += take;
            if filled == share {
                parts.push(Vec::new());
                filled = 0;
            }
        }
    }
    parts
}

#[starling::remote]
fn ml_level(
    shard: ShardData,
    forest: Bytes,
    plan: LevelPlan,
    rank: u32,
    layout: BinLayout,
) -> Result<HistMsg, MlError> {
    let len = shard.n_rows as usize * plan.classes.len();
    // The root level brings them up to this round; the other levels find them in scratch
    // (rebuilt from the forest if this runs elsewhere).
    let mut margins = margins_scratch(&shard, &forest, plan.end.as_ref(), rank, &plan.ctx)?;
    let (_, grads) = margins.split(len);
    let hist = level_on(&shard, grads, &plan, &layout, rank);
    let shared = plan.hist_scratch && scratch::driver_here(plan.ctx.fit);
    Ok(shared
        .then(|| HistMsg::to_scratch(&hist, &plan, rank))
        .flatten()
        .unwrap_or_else(|| HistMsg::from_hist(&hist)))
}

/// Runs `plan`'s level on the shard's row groups: kept in its scratch file between levels, or
/// made again from the plan's earlier splits.
fn level_on(
    shard: &ShardData,
    grads: &[i32],
    plan: &LevelPlan,
    layout: &BinLayout,
    rank: u32,
) -> Hist {
    let k = plan.classes.len();
    let n = shard.n_rows as usize;
    let before = plan.depth.checked_sub(1).map(|d| (plan.ctx.round, d));
    let per = partition::words(n, plan.ctx.leaves());
    // The rows' groups as the previous level left them: from scratch, or made again.
    let prepare = |words: &mut [u32], valid: bool| {
        if before.is_none() {
            for block in words.chunks_exact_mut(per) {
                let mut p = Partition::open(block, n);
                p.reset();
                p.store();
            }
        } else if !valid {
            partition_from(shard, &plan.applied, words);
        }
    };
    match scratch::Scratch::open(plan.ctx.fit, rank, scratch::PARTITION, per * k) {
        Ok(mut file) => {
            let valid = before.is_some() && file.stamp() == before;
            file.set_stamp(None);
            prepare(file.as_mut_slice(), valid);
            let hist = level(shard, grads, file.as_mut_slice(), plan, layout);
            file.set_stamp(Some((plan.ctx.round, plan.depth)));
            hist
        }
        Err(_) => {
            // No scratch space: groups from the splits, kept in memory for this task only.
            let mut words = vec![0u32; per * k];
            prepare(&mut words, false);
            level(shard, grads, &mut words, plan, layout)
        }
    }
}

/// Rounds grown inside one task, next to a fit's only shard: no task hop per level.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoundsPlan {
    /// The first round's context (the others differ in `round` only).
    first: RoundCtx,
    count: u32,
    /// How the round before the first ended.
    end: Option<RoundEnd>,
    params: Params,
    split: SplitParams,
    threads: u32,
}

#[starling::remote]
fn ml_rounds(
    shard: ShardData,
    forest: Bytes,
    cuts: Cuts,
    plan: RoundsPlan,
) -> Result<Vec<Grown>, MlError> {
    let k = plan.first.objective.groups();
    let len = shard.n_rows as usize * k;
    let layout = BinLayout::of(&cuts);
    let spec = TreeSpec {
        cuts: &cuts,
        split: &plan.split,
        p: &plan.params,
        k,
        threads: plan.threads,
    };
    let mut file = open_margins(&shard, 0, &plan.first);
    let mut end = plan.end;
    let mut grown: Vec<Grown> = Vec::with_capacity(plan.count as usize);
    for i in 0..plan.count {
        let ctx = RoundCtx {
            round: plan.first.round + i,
            ..plan.first.clone()
        };
        // The margins continue from this task's last round unless the scratch file changed
        // under it; then they are rebuilt from the forest with this task's trees added.
        let forest = if i > 0 && file.stamp() != Some((ctx.round - 1, 0)) {
            let mut all = unpack_forest(&forest)?;
            all.extend(
                grown
                    .iter()
                    .map(|g| g.trees.iter().map(|t| t.nodes.clone()).collect()),
            );
            pack_forest(&all)
        } else {
            forest.clone()
        };
        advance_margins(&mut file, &shard, &forest, end.as_ref(), 0, &ctx)?;
        let (_, grads) = file.split(len);
        let grads: &[i32] = grads;
        let allowed = allowed_features(&plan.params, cuts.n_features(), ctx.round, k);
        let g = grow_round(&spec, &ctx, None, &allowed, |lp| {
            Ok(level_on(&shard, grads, lp, &layout, 0))
        })?;
        end = Some(g.end(ctx.fit, ctx.round));
        grown.push(g);
    }
    Ok(grown)
}

#[starling::remote]
fn ml_forget(fit: u64, rank: u32) {
    scratch::remove(fit, rank);
}

#[starling::remote]
fn ml_sum_hists(a: HistMsg, b: HistMsg) -> Result<HistMsg, MlError> {
    if a.in_scratch.is_some() || b.in_scratch.is_some() {
        return Err(MlError::Shape(
            "a histogram left in a driver's scratch reached a sum task".into(),
        ));
    }
    Ok(HistMsg::from_hist(&sum_le(
        a.bins, &a.data, b.bins, &b.data,
    )?))
}

/// The loss of one row's margins (summed per row; the metric averages).
fn row_loss(objective: Objective, margins: &[f32], label: f32) -> f64 {
    match objective {
        Objective::SquaredError => {
            let d = f64::from(margins[0] - label);
            d * d
        }
        Objective::BinaryLogistic => {
            let p = f64::from(crate::model::sigmoid(margins[0])).clamp(1e-15, 1.0 - 1e-15);
            let y = f64::from(label);
            -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
        }
        Objective::MultiSoftprob { .. } => {
            let mut p = margins.to_vec();
            crate::model::softmax(&mut p);
            let py = f64::from(p.get(label as usize).copied().unwrap_or(0.0));
            -py.clamp(1e-15, 1.0).ln()
        }
    }
}

fn eval_state(shard: &ShardData, margins: Vec<f32>, objective: Objective) -> EvalState {
    let k = objective.groups();
    let labels = f32s(&shard.labels);
    let loss_sum = labels
        .iter()
        .enumerate()
        .map(|(i, y)| row_loss(objective, &margins[i * k..(i + 1) * k], *y))
        .sum();
    EvalState {
        margins: f32_bytes(&margins),
        loss_sum,
        rows: shard.n_rows,
    }
}

#[starling::remote]
fn ml_eval_first(shard: ShardData, base_margin: f32, objective: Objective) -> EvalState {
    let margins = vec![base_margin; shard.n_rows as usize * objective.groups()];
    eval_state(&shard, margins, objective)
}

#[starling::remote]
fn ml_eval_next(
    shard: ShardData,
    prev: EvalState,
    trees: Vec<Vec<BinNode>>,
    objective: Objective,
) -> EvalState {
    let mut margins = f32s(&prev.margins);
    add_trees(&shard, &mut margins, &trees);
    eval_state(&shard, margins, objective)
}

#[starling::remote]
fn ml_eval_loss(s: EvalState) -> (f64, u64) {
    (s.loss_sum, s.rows)
}

#[starling::remote]
fn ml_predict(
    data: DataConnector,
    rank: u32,
    world: u32,
    cols: Vec<String>,
    model: Model,
) -> Result<Vec<f32>, MlError> {
    let frame = data.load_shard(rank as usize, world as usize, &cols, None)?;
    model.predict_rows(&frame.row_major())
}

// ---------------------------------------------------------------------------------------------
// The driver.

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
    n_estimators: usize,
    params: Params,
    scaling: ScalingConfig,
    eval: Option<DataConnector>,
    early_stopping_rounds: Option<usize>,
    cuts: Option<Cuts>,
    verbose_eval: usize,
    min_rows_per_worker: u64,
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

    /// Prints the eval metric (or, without an eval set, progress) every `n` rounds to stderr
    /// (0: silent).
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
        let place = Placement::new(self.scaling)?;

        // Read and summarize the shards, each on its node.
        let load = |world: usize| -> Vec<ObjectRef<RawShard>> {
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
        let summarize = |raws: &[ObjectRef<RawShard>]| -> Vec<ObjectRef<ShardSummary>> {
            raws.iter()
                .enumerate()
                .map(|(r, raw)| place.on(r, ml_summarize::options()).remote(raw, objective))
                .collect()
        };
        let mut raws = load(world);
        let summaries = starling::get_all(&summarize(&raws))?;
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
                let per_shard: Vec<Vec<Summary>> =
                    summaries.iter().map(|s| s.features.clone()).collect();
                Cuts::from_summaries(&per_shard, p.max_bin)
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
        if world < raws.len() {
            raws = load(world);
            shard_rows = if world == 1 {
                vec![rows]
            } else {
                starling::get_all(&summarize(&raws))?
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
            max_depth: p.max_depth as u32,
        };
        // With one shard, a task grows a run of rounds, sized to take about `RUN_SECONDS`
        // (one round while an eval set decides when to stop).
        let mut per_round: Option<f64> = None;
        let mut round = 0usize;
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
                    if self.verbose_eval > 0 && done.is_multiple_of(self.verbose_eval) {
                        eprintln!("[{done}]\teval-{}:{metric:.6}", metric_name(objective));
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
                    eprintln!(
                        "[{done}] {} trees, {:.1}s",
                        model.trees.len(),
                        began.elapsed().as_secs_f64()
                    );
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
const RUN_SECONDS: f64 = 0.05;

/// Default of [`GbdtEstimator::min_rows_per_worker`].
pub const MIN_ROWS_PER_WORKER: u64 = 50_000;

/// How many of `workers` shards `rows` rows are worth: each at least `min_rows` (0: all).
fn workers_for(rows: u64, workers: usize, min_rows: u64) -> usize {
    if min_rows == 0 {
        return workers;
    }
    usize::try_from(rows / min_rows)
        .unwrap_or(usize::MAX)
        .clamp(1, workers.max(1))
}

/// Removes the shards' scratch files when the fit ends, however it ends (best effort).
struct ScratchGuard<'a> {
    place: &'a Placement,
    fit: u64,
    world: usize,
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
fn fit_id() -> u64 {
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

fn metric_name(objective: Objective) -> &'static str {
    match objective {
        Objective::SquaredError => "rmse",
        Objective::BinaryLogistic => "logloss",
        Objective::MultiSoftprob { .. } => "mlogloss",
    }
}

/// Per class, the features a round's trees may split on.
fn allowed_features(p: &Params, n: usize, round: u32, k: usize) -> Vec<Vec<bool>> {
    (0..k)
        .map(|c| feature_sample(p, n, round as usize, c))
        .collect()
}

/// Which features tree `class` of `round` may split on (`colsample_bytree`; all when 1).
fn feature_sample(p: &Params, n: usize, round: usize, class: usize) -> Vec<bool> {
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
struct Placement {
    nodes: Vec<starling::NodeId>,
    cpus: f64,
    threads: u32,
}

impl Placement {
    fn new(scaling: ScalingConfig) -> Result<Self, MlError> {
        let mut nodes: Vec<_> = starling::nodes()?
            .into_iter()
            .filter(|n| n.alive)
            .map(|n| n.id)
            .collect();
        nodes.sort();
        Ok(Placement {
            nodes,
            cpus: scaling.num_cpu_per_worker as f64,
            threads: scaling.num_cpu_per_worker as u32,
        })
    }

    /// `options`, pinned to shard `r`'s node.
    fn on<O: Pinned>(&self, r: usize, options: O) -> O {
        let o = options.cpus(self.cpus);
        match self.nodes.get(r % self.nodes.len().max(1)) {
            Some(n) if self.nodes.len() > 1 => o.pin(*n),
            _ => o,
        }
    }
}

/// The option builders of this module's tasks.
trait Pinned: Sized {
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
fn reduce(
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

/// A tree as grown: bin-space nodes plus what the model keeps of each.
#[derive(Clone, Serialize, Deserialize)]
pub struct GrownTree {
    nodes: Vec<BinNode>,
    sums: Vec<GradSum>,
    gains: Vec<f64>,
    /// Children as grown (pruning turns a split into a leaf but keeps these).
    kids: Vec<(i32, i32)>,
}

impl GrownTree {
    fn new(root: GradSum, p: &Params, split: &SplitParams) -> Self {
        GrownTree {
            nodes: vec![BinNode::leaf(leaf_output(root, p, split))],
            sums: vec![root],
            gains: vec![0.0],
            kids: vec![(-1, -1)],
        }
    }

    /// The round's end for this tree: the `rules` still to apply that survived pruning, and
    /// each grown node's output (that of the leaf it is, or lies under).
    fn end(&self, rules: Vec<SplitRule>) -> ClassEnd {
        let mut values = vec![0f32; self.nodes.len()];
        let mut stack = vec![(0usize, None::<f32>)];
        while let Some((i, under)) = stack.pop() {
            let n = &self.nodes[i];
            let v = under.or((n.left < 0).then_some(n.value));
            values[i] = v.unwrap_or(0.0);
            let (l, r) = self.kids[i];
            if l >= 0 {
                stack.push((l as usize, v));
                stack.push((r as usize, v));
            }
        }
        let rules = rules
            .into_iter()
            .filter(|r| self.nodes[r.node as usize].left >= 0)
            .collect();
        ClassEnd { rules, values }
    }

    fn push_leaf(&mut self, sum: GradSum, p: &Params, split: &SplitParams) -> u32 {
        self.nodes.push(BinNode::leaf(leaf_output(sum, p, split)));
        self.sums.push(sum);
        self.gains.push(0.0);
        self.kids.push((-1, -1));
        (self.nodes.len() - 1) as u32
    }

    /// XGBoost's pruning by `gamma`: bottom up, a split whose children are leaves and whose
    /// loss reduction is under `gamma` becomes a leaf again.
    fn prune(&mut self, i: usize, gamma: f64, p: &Params, split: &SplitParams) {
        let n = self.nodes[i];
        if n.left < 0 {
            return;
        }
        self.prune(n.left as usize, gamma, p, split);
        self.prune(n.right as usize, gamma, p, split);
        let leafy = |j: i32| self.nodes[j as usize].left < 0;
        if leafy(n.left) && leafy(n.right) && self.gains[i] < gamma {
            self.nodes[i] = BinNode::leaf(leaf_output(self.sums[i], p, split));
            self.gains[i] = 0.0;
        }
    }
}

fn leaf_output(sum: GradSum, p: &Params, split: &SplitParams) -> f32 {
    (split.weight(sum) * f64::from(p.eta)) as f32
}

/// A split whose children's histograms are on their way: (left, right, whether the left one
/// is built, the parent's histogram).
type Pending = (u32, u32, bool, NodeHist);

/// A growing node's histogram: a slot of its level's summed histograms (shared, not copied),
/// or its own (a sibling's, made by subtraction).
enum NodeHist {
    Slot(Arc<Hist>, usize),
    Own(Vec<i64>),
}

impl NodeHist {
    fn values(&self) -> &[i64] {
        match self {
            NodeHist::Slot(h, s) => h.slot(*s),
            NodeHist::Own(v) => v,
        }
    }

    /// `self - built`: the sibling's histogram, made in place when this one is its own.
    fn minus(self, built: &[i64]) -> Vec<i64> {
        match self {
            NodeHist::Own(mut v) => {
                for (a, b) in v.iter_mut().zip(built) {
                    *a -= *b;
                }
                v
            }
            NodeHist::Slot(..) => Hist::difference(self.values(), built),
        }
    }
}

/// Best splits of many nodes, over up to `threads` threads when there are enough of them
/// (the workers wait on these, so the driver may use the cores they leave idle).
fn best_splits(
    nodes: &[(usize, &[i64])],
    cuts: &Cuts,
    split: &SplitParams,
    allowed: &[Vec<bool>],
    threads: usize,
) -> Vec<Option<hist::Split>> {
    let find = |items: &[(usize, &[i64])]| -> Vec<Option<hist::Split>> {
        items
            .iter()
            .map(|(c, h)| hist::best_split(h, cuts, split, &allowed[*c]))
            .collect()
    };
    let threads = threads.min(nodes.len() / SPLITS_PER_THREAD).max(1);
    if threads <= 1 {
        return find(nodes);
    }
    let chunk = nodes.len().div_ceil(threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = nodes
            .chunks(chunk)
            .map(|items| {
                let find = &find;
                s.spawn(move || find(items))
            })
            .collect();
        let mut out = Vec::with_capacity(nodes.len());
        for part in parts {
            match part.join() {
                Ok(found) => out.extend(found),
                Err(e) => std::panic::resume_unwind(e),
            }
        }
        out
    })
}

/// Fewest nodes worth a thread of [`best_splits`]: a node's search takes 30-60 us, starting
/// a thread (measured on a 2-core VM) 150-200 us.
const SPLITS_PER_THREAD: usize = 16;

/// Threads the driver searches splits on.
fn split_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// A round's trees, the depth of the last level the workers ran, the splits they applied, and
/// per class the splits chosen after it (which no worker has applied).
#[derive(Clone, Serialize, Deserialize)]
pub struct Grown {
    trees: Vec<GrownTree>,
    depth: u32,
    applied: Vec<Vec<SplitRule>>,
    final_rules: Vec<Vec<SplitRule>>,
}

/// What growing a round's trees takes besides the histograms.
struct TreeSpec<'a> {
    cuts: &'a Cuts,
    split: &'a SplitParams,
    p: &'a Params,
    /// Trees per round (classes).
    k: usize,
    /// Threads each level's histogram building may use.
    threads: u32,
}

/// Runs one level on every shard (level tasks and a tree of sums): the driver's way of
/// growing a round.
fn level_by_tasks<'a>(
    place: &'a Placement,
    shards: &'a [ObjectRef<ShardData>],
    forest: &'a ObjectRef<Bytes>,
    layout: &'a BinLayout,
    shares_scratch: bool,
) -> impl FnMut(&LevelPlan) -> Result<Hist, MlError> + 'a {
    // The previous level's messages, mostly mapped store files: dropped once this level's
    // tasks are out, as unmapping them takes a while and nothing waits for it then.
    let mut spent: Vec<HistMsg> = Vec::new();
    // With two shards or fewer the driver reads the histograms itself: from the shards'
    // scratch when it shares the node's, the shards leaving them there.
    let scratch = shares_scratch && shards.len() <= 2;
    move |plan: &LevelPlan| {
        let mut plan = plan.clone();
        plan.hist_scratch = scratch;
        loop {
            let outs: Vec<ObjectRef<HistMsg>> = shards
                .iter()
                .enumerate()
                .map(|(r, s)| {
                    place.on(r, ml_level::options()).remote(
                        s,
                        forest,
                        plan.clone(),
                        r as u32,
                        layout.clone(),
                    )
                })
                .collect();
            spent.clear();
            match reduce(place, outs, &plan, &mut spent)? {
                Some(hist) => return Ok(hist),
                // A histogram left in scratch is not there as it should be (its file was
                // replaced or rewritten): the level runs again with its results as values.
                None if plan.hist_scratch => plan.hist_scratch = false,
                None => return Err(MlError::Shape("a level's histograms went missing".into())),
            }
        }
    }
}

impl Grown {
    /// How the round ended, for the next round's margins.
    fn end(&self, fit: u64, round: u32) -> RoundEnd {
        RoundEnd {
            classes: self
                .trees
                .iter()
                .zip(&self.final_rules)
                .map(|(t, rules)| t.end(rules.clone()))
                .collect(),
            fit,
            round,
            depth: self.depth,
            applied: self.applied.clone(),
        }
    }
}

/// Grows one round's trees (one per class) level by level; `run_level` gives each level's
/// summed histograms.
fn grow_round(
    spec: &TreeSpec<'_>,
    ctx: &RoundCtx,
    end: Option<RoundEnd>,
    allowed: &[Vec<bool>],
    mut run_level: impl FnMut(&LevelPlan) -> Result<Hist, MlError>,
) -> Result<Grown, MlError> {
    let TreeSpec {
        cuts,
        split,
        p,
        k,
        threads,
    } = *spec;
    let root_plan = LevelPlan {
        classes: (0..k)
            .map(|_| ClassPlan {
                splits: Vec::new(),
                build: vec![0],
            })
            .collect(),
        threads,
        ctx: ctx.clone(),
        depth: 0,
        applied: vec![Vec::new(); k],
        end,
        hist_scratch: false,
    };
    let hist = Arc::new(run_level(&root_plan)?);
    let mut applied: Vec<Vec<SplitRule>> = vec![Vec::new(); k];
    let mut ran_depth = 0u32;
    let bins = hist.bins;
    let mut trees: Vec<GrownTree> = Vec::with_capacity(k);
    // Per class: the nodes still growing, with their histograms.
    let mut frontier: Vec<Vec<(u32, NodeHist)>> = Vec::with_capacity(k);
    for c in 0..k {
        trees.push(GrownTree::new(hist::totals(hist.slot(c), bins).0, p, split));
        frontier.push(vec![(0, NodeHist::Slot(hist.clone(), c))]);
    }
    drop(hist);
    let search_threads = split_threads();
    let mut final_rules: Vec<Vec<SplitRule>> = vec![Vec::new(); k];
    for depth in 0..p.max_depth {
        let mut plan = LevelPlan {
            classes: vec![ClassPlan::default(); k],
            threads,
            ctx: ctx.clone(),
            depth: depth as u32 + 1,
            applied: applied.clone(),
            end: None,
            hist_scratch: false,
        };
        let mut pending: Vec<Vec<Pending>> = (0..k).map(|_| Vec::new()).collect();
        let searched: Vec<(usize, &[i64])> = frontier
            .iter()
            .enumerate()
            .flat_map(|(c, nodes)| nodes.iter().map(move |(_, h)| (c, h.values())))
            .collect();
        let mut found = best_splits(&searched, cuts, split, allowed, search_threads).into_iter();
        drop(searched);
        for c in 0..k {
            for (node, slot) in std::mem::take(&mut frontier[c]) {
                let Some(s) = found.next().flatten() else {
                    continue;
                };
                let t = &mut trees[c];
                let l = t.push_leaf(s.left, p, split);
                let r = t.push_leaf(s.right, p, split);
                let n = &mut t.nodes[node as usize];
                *n = BinNode {
                    feature: s.feature as u32,
                    bin: s.bin,
                    default_left: s.default_left,
                    left: l as i32,
                    right: r as i32,
                    value: n.value,
                };
                t.gains[node as usize] = s.gain;
                t.kids[node as usize] = (l as i32, r as i32);
                plan.classes[c].splits.push(SplitRule {
                    node,
                    feature: s.feature as u32,
                    bin: s.bin,
                    default_left: s.default_left,
                    left: l,
                    right: r,
                });
                // Build the child with less hessian; the other is the parent minus it.
                let left_built = s.left.h <= s.right.h;
                plan.classes[c].build.push(if left_built { l } else { r });
                pending[c].push((l, r, left_built, slot));
            }
        }
        if pending.iter().all(Vec::is_empty) || depth + 1 == p.max_depth {
            final_rules = plan.classes.into_iter().map(|c| c.splits).collect();
            break;
        }
        let hist = Arc::new(run_level(&plan)?);
        ran_depth = plan.depth;
        for (a, cp) in applied.iter_mut().zip(&plan.classes) {
            a.extend_from_slice(&cp.splits);
        }
        let mut slot = 0usize;
        for c in 0..k {
            for (l, r, left_built, parent) in std::mem::take(&mut pending[c]) {
                let other = NodeHist::Own(parent.minus(hist.slot(slot)));
                let built = NodeHist::Slot(hist.clone(), slot);
                slot += 1;
                let (ls, rs) = if left_built {
                    (built, other)
                } else {
                    (other, built)
                };
                frontier[c].push((l, ls));
                frontier[c].push((r, rs));
            }
        }
    }
    if p.gamma > 0.0 {
        for t in &mut trees {
            t.prune(0, p.gamma, p, split);
        }
    }
    Ok(Grown {
        trees,
        depth: ran_depth,
        applied,
        final_rules,
    })
}

/// The model's form of a grown tree: nodes still reachable, renumbered in growth order,
/// thresholds as values.
fn to_tree(t: &GrownTree, cuts: &Cuts, split: &SplitParams) -> Tree {
    let mut reachable = vec![false; t.nodes.len()];
    let mut stack = vec![0usize];
    while let Some(i) = stack.pop() {
        reachable[i] = true;
        let n = t.nodes[i];
        if n.left >= 0 {
            stack.push(n.left as usize);
            stack.push(n.right as usize);
        }
    }
    let mut id = vec![-1i32; t.nodes.len()];
    let mut next = 0;
    for (i, r) in reachable.iter().enumerate() {
        if *r {
            id[i] = next;
            next += 1;
        }
    }
    let mut out = Tree::default();
    for (i, n) in t.nodes.iter().enumerate() {
        if !reachable[i] {
            continue;
        }
        let leaf = n.left < 0;
        out.left.push(if leaf { -1 } else { id[n.left as usize] });
        out.right.push(if leaf { -1 } else { id[n.right as usize] });
        out.parent.push(i32::MAX);
        out.split_index.push(if leaf { 0 } else { n.feature });
        out.split_condition.push(if leaf {
            n.value
        } else {
            cuts.thresholds[n.feature as usize][n.bin as usize]
        });
        out.default_left.push(!leaf && n.default_left);
        out.base_weight.push(split.weight(t.sums[i]) as f32);
        out.loss_change
            .push(if leaf { 0.0 } else { t.gains[i] as f32 });
        out.sum_hessian.push(split.hessian(t.sums[i]) as f32);
    }
    for i in 0..out.left.len() {
        if out.left[i] >= 0 {
            let (l, r) = (out.left[i] as usize, out.right[i] as usize);
            out.parent[l] = i as i32;
            out.parent[r] = i as i32;
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_left_in_scratch_are_read_back_only_for_their_level() {
        let fit = 0x7e57_0000_0000_0002 ^ u64::from(std::process::id());
        let ctx = RoundCtx {
            objective: Objective::SquaredError,
            base_margin: 0.0,
            round: 7,
            scale: 0,
            grad_bound: 1.0,
            subsample: 1.0,
            seed: 0,
            fit,
            max_depth: 4,
        };
        let mut plan = LevelPlan {
            classes: vec![ClassPlan::default()],
            threads: 1,
            ctx,
            depth: 2,
            applied: vec![Vec::new()],
            end: None,
            hist_scratch: true,
        };
        let mut h = Hist::zeros(2, 3);
        for (i, v) in h.data.iter_mut().enumerate() {
            *v = i as i64 * 1_000_000_007 - 5;
        }
        let msg = HistMsg::to_scratch(&h, &plan, 1).expect("room for two slots at depth 4");
        assert!(msg.data.is_empty());
        assert_eq!(msg.in_scratch, Some(h.data.len() as u64));
        let file = left_in_scratch(&plan, 1, 3, h.data.len()).expect("this level's");
        assert_eq!(i64s(&file.payload()[..8 * h.data.len()]), h.data);
        drop(file);
        // Another rank, level or round, or more values than were left: not found.
        assert!(left_in_scratch(&plan, 0, 3, h.data.len()).is_none());
        assert!(left_in_scratch(&plan, 1, 3, 1 << 20).is_none());
        plan.depth = 3;
        assert!(left_in_scratch(&plan, 1, 3, h.data.len()).is_none());
        plan.depth = 2;
        plan.ctx.round = 8;
        assert!(left_in_scratch(&plan, 1, 3, h.data.len()).is_none());
        // A level too wide for the file travels as a value.
        let wide = Hist::zeros(64, 3);
        assert!(HistMsg::to_scratch(&wide, &plan, 1).is_none());
        scratch::remove(fit, 1);
        assert_eq!(hist_scratch_words(6, 1, 5120), Some(2 * 16 * 10_243));
        assert_eq!(hist_scratch_words(40, 1, 5120), None);
    }

    #[test]
    fn one_class_gradients_match_the_row_by_row_ones() {
        let n = 2500;
        let margins: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 9.0).collect();
        for (objective, bound) in [
            (Objective::BinaryLogistic, 1.0),
            (Objective::SquaredError, 6.0),
        ] {
            let labels: Vec<f32> = (0..n)
                .map(|i| match objective {
                    Objective::BinaryLogistic => (i % 3 == 0) as u8 as f32,
                    _ => (i as f32 * 0.11).cos() * 4.0,
                })
                .collect();
            let shard = ShardData {
                n_rows: n as u64,
                n_features: 0,
                row_offset: 0,
                bins: Bytes::new(Vec::new()),
                columns: Bytes::new(Vec::new()),
                labels: f32_bytes(&labels),
            };
            let ctx = RoundCtx {
                objective,
                base_margin: 0.0,
                round: 0,
                scale: hist::scale_for(bound),
                grad_bound: bound as f32,
                subsample: 1.0,
                seed: 0,
                fit: 0,
                max_depth: 6,
            };
            let (mut fast, mut rows) = (vec![0i32; 2 * n], vec![0i32; 2 * n]);
            one_class_gradients(&shard, &margins, &mut fast, &ctx);
            row_gradients(&shard, &margins, &mut rows, &ctx);
            assert_eq!(fast, rows, "{objective:?}");
            // Clamped to the bound: some rows reach it, none pass it.
            let top = 1i32 << 30;
            assert!(fast.iter().all(|v| v.abs() <= top));
            assert!(fast.iter().step_by(2).any(|v| v.abs() > top / 2));
        }
    }

    #[test]
    fn a_packed_forest_unpacks_to_itself_and_a_cut_one_is_an_error() {
        let node = |feature, bin, default_left, left, right, value| BinNode {
            feature,
            bin,
            default_left,
            left,
            right,
            value,
        };
        let forest: Forest = vec![
            vec![vec![
                node(3, 200, true, 1, 2, 0.0),
                node(0, 0, false, -1, -1, -0.25),
                node(0, 0, false, -1, -1, 1.5e-7),
            ]],
            vec![vec![node(0, 0, false, -1, -1, f32::MAX)], vec![]],
        ];
        let packed = pack_forest(&forest);
        assert_eq!(unpack_forest(&packed).unwrap(), forest);
        assert!(unpack_forest(&packed[..packed.len() - 4]).is_err());
        assert_eq!(
            unpack_forest(&pack_forest(&Vec::new())).unwrap(),
            Forest::new()
        );
    }
}
