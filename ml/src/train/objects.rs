//! The objects the fit's tasks exchange: shards (raw, summarized, binned), the round's
//! context, the packed forest, bin-space trees and split rules, level plans and histogram
//! messages.

use super::*;

/// A shard as read: columns and labels, stored on the node that read it.
#[derive(Clone, Serialize, Deserialize)]
pub struct RawShard {
    pub(super) n_rows: u64,
    pub(super) columns: Vec<Bytes>,
    pub(super) labels: Bytes,
}

impl RawShard {
    pub(super) fn from_frame(f: Frame) -> Result<Self, MlError> {
        let labels = f
            .labels
            .ok_or_else(|| MlError::Param("training data needs a label column".into()))?;
        Ok(RawShard {
            n_rows: f.n_rows as u64,
            columns: f.columns.iter().map(|c| f32_bytes(c)).collect(),
            labels: f32_bytes(&labels),
        })
    }

    pub(super) fn columns(&self) -> Vec<Vec<f32>> {
        self.columns.iter().map(|c| f32s(c)).collect()
    }

    /// Column `j`'s values, decoded as they are read (no copy of the column).
    pub(super) fn column_values(&self, j: usize) -> impl Iterator<Item = f32> + '_ {
        self.columns[j]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// What the driver learns of a shard before binning.
#[derive(Clone, Serialize, Deserialize)]
pub struct ShardSummary {
    /// Per feature, rows with a value and rows without.
    pub(super) present: Vec<u64>,
    pub(super) missing: Vec<u64>,
    pub(super) rows: u64,
    pub(super) label_sum: f64,
    pub(super) label_min: f32,
    pub(super) label_max: f32,
}

/// A binned shard, resident in its node's object store for the whole fit.
#[derive(Clone, Serialize, Deserialize)]
pub struct ShardData {
    pub(super) n_rows: u64,
    pub(super) n_features: u32,
    /// Global index of the shard's first row (for `subsample`, which must not depend on how
    /// the data is sharded).
    pub(super) row_offset: u64,
    /// Row-major bin codes.
    pub(super) bins: Bytes,
    /// The same codes column-major: splitting a node's rows reads one feature's codes, which
    /// as a column (a byte per row) stay in cache where the rows do not.
    pub(super) columns: Bytes,
    pub(super) labels: Bytes,
}

/// What a round's tasks need to (re)compute a shard's margins and gradients.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoundCtx {
    pub(super) objective: Objective,
    pub(super) base_margin: f32,
    pub(super) round: u32,
    pub(super) scale: i32,
    pub(super) grad_bound: f32,
    pub(super) subsample: f64,
    pub(super) seed: u64,
    pub(super) fit: u64,
    /// The depth whose full binary tree bounds a round's tree as the shards see it: its
    /// leaves (the row groups a shard keeps) and the widest step (`Params::capacity_depth`).
    pub(super) capacity_depth: u32,
}

impl RoundCtx {
    /// Most leaves a tree can have at the shards.
    pub(super) fn leaves(&self) -> usize {
        1usize << self.capacity_depth.min(30)
    }
}

/// Every tree grown so far, round by round (one per class per round), in bin space: what a
/// task needs to rebuild a shard's margins from nothing.
pub type Forest = Vec<Vec<Vec<BinNode>>>;

/// [`Forest`] packed as little-endian words (per round its class count, per tree its node
/// count, per node five words): tasks take it as bytes, shared with the store, and unpack it
/// only when they must rebuild margins.
pub(super) fn pack_forest(forest: &Forest) -> Bytes {
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

pub(super) fn unpack_forest(bytes: &[u8]) -> Result<Forest, MlError> {
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
    pub(super) offsets: Vec<u32>,
    pub(super) total: u32,
}

impl BinLayout {
    pub(super) fn of(cuts: &Cuts) -> Self {
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
    pub(super) feature: u32,
    pub(super) bin: u8,
    pub(super) default_left: bool,
    pub(super) left: i32,
    pub(super) right: i32,
    /// Leaf output (already times eta).
    pub(super) value: f32,
}

impl BinNode {
    pub(super) fn leaf(value: f32) -> Self {
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
    pub(super) fn goes_left(&self, code: u8) -> bool {
        if code == crate::sketch::MISSING {
            self.default_left
        } else {
            code <= self.bin
        }
    }
}

#[inline]
pub(super) fn leaf_value(tree: &[BinNode], row: &[u8]) -> f32 {
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
    pub(super) node: u32,
    pub(super) feature: u32,
    pub(super) bin: u8,
    pub(super) default_left: bool,
    pub(super) left: u32,
    pub(super) right: u32,
}

/// One class's work in a level: splits to apply, nodes to build histograms of.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClassPlan {
    pub(super) splits: Vec<SplitRule>,
    pub(super) build: Vec<u32>,
}

/// One level's work for every class.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LevelPlan {
    pub(super) classes: Vec<ClassPlan>,
    pub(super) threads: u32,
    /// The round (and fit), to rebuild margins if needed.
    pub(super) ctx: RoundCtx,
    /// Depth of the nodes whose histograms are built.
    pub(super) depth: u32,
    /// Per class, the splits of the round's earlier levels (to recompute the row groups).
    pub(super) applied: Vec<Vec<SplitRule>>,
    /// At the root: how the previous round ended, to bring the margins up to this round.
    pub(super) end: Option<RoundEnd>,
    /// Leave the histograms in the shard's `hist` scratch file when the driver shares it.
    pub(super) hist_scratch: bool,
}

/// A histogram as it travels (one block of little-endian i64s), or a note that it was left in
/// the shard's `hist` scratch file for a driver on the same node.
#[derive(Clone, Serialize, Deserialize)]
pub struct HistMsg {
    pub(super) bins: u64,
    pub(super) data: Bytes,
    /// How many values the shard's `hist` scratch file holds instead (`data` is empty).
    pub(super) in_scratch: Option<u64>,
}

impl HistMsg {
    pub(super) fn from_hist(h: &Hist) -> Self {
        HistMsg {
            bins: h.bins as u64,
            data: i64_bytes(&h.data),
            in_scratch: None,
        }
    }

    /// Leaves `h` in shard `rank`'s `hist` scratch file, stamped with the plan's round and
    /// level, and returns a message saying so; `None` where there is no room or no file.
    pub(super) fn to_scratch(h: &Hist, plan: &LevelPlan, rank: u32) -> Option<Self> {
        let words = hist_scratch_words(plan.ctx.capacity_depth, plan.classes.len(), h.bins)?;
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
pub(super) fn sum_le(bins_a: u64, a: &[u8], bins_b: u64, b: &[u8]) -> Result<Hist, MlError> {
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
pub(super) fn left_in_scratch(
    plan: &LevelPlan,
    rank: u32,
    bins: usize,
    len: usize,
) -> Option<scratch::Scratch> {
    let words = hist_scratch_words(plan.ctx.capacity_depth, plan.classes.len(), bins)?;
    let file = scratch::Scratch::open_existing(plan.ctx.fit, rank, scratch::HIST, words).ok()?;
    (file.stamp() == Some((plan.ctx.round, plan.depth)) && 8 * len <= file.payload().len())
        .then_some(file)
}

/// Room (32-bit words) in a shard's `hist` scratch file for the largest level of a fit: the
/// root builds `classes` slots, a level below it at most `classes * 2^(depth - 1)`, and the
/// deepest level run is `capacity_depth - 1` (a loss-guided step builds fewer slots than the
/// leaf budget, which `capacity_depth` covers too). `None` above 64 MiB: such levels travel
/// as results.
pub(super) fn hist_scratch_words(
    capacity_depth: u32,
    classes: usize,
    bins: usize,
) -> Option<usize> {
    let widest = 1usize.checked_shl(capacity_depth.saturating_sub(2))?;
    let words = classes
        .checked_mul(widest)?
        .checked_mul(2 * bins + 3)?
        .checked_mul(2)?;
    (words <= 16 << 20).then_some(words)
}

/// Positions recomputed: every row walked from the root through `applied` (per class).
pub(super) fn positions_from(shard: &ShardData, applied: &[Vec<SplitRule>], positions: &mut [u32]) {
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
    pub(super) margins: Bytes,
    pub(super) loss_sum: f64,
    pub(super) rows: u64,
}

// ---------------------------------------------------------------------------------------------
