//! The worker side of a fit: every `#[remote]` task (load, summarize, bin, level, rounds,
//! histogram sums, evaluation, prediction) and what they compute on a shard: gradients,
//! margins kept in scratch, the rows' routing down a level's splits.

use super::*;

#[starling::remote]
pub(super) fn ml_load(
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
pub(super) fn ml_summarize(raw: RawShard, objective: Objective) -> Result<ShardSummary, MlError> {
    let labels = f32s(&raw.labels);
    check_labels(&labels, objective)?;
    let missing: Vec<u64> = (0..raw.columns.len())
        .map(|j| raw.column_values(j).filter(|x| x.is_nan()).count() as u64)
        .collect();
    Ok(ShardSummary {
        present: missing.iter().map(|m| raw.n_rows - m).collect(),
        missing,
        rows: raw.n_rows,
        label_sum: labels.iter().map(|y| f64::from(*y)).sum(),
        label_min: labels.iter().copied().fold(f32::INFINITY, f32::min),
        label_max: labels.iter().copied().fold(f32::NEG_INFINITY, f32::max),
    })
}

/// The first shard's part of the fit's quantile sketches: one per feature, sized for the
/// feature's `present` values over all shards, fed this shard's values in row order.
#[starling::remote]
pub(super) fn ml_sketch_first(raw: RawShard, present: Vec<u64>, max_bin: u32) -> Vec<Sketch> {
    let mut sketches: Vec<Sketch> = present
        .iter()
        .map(|&n| Sketch::new(n as usize, max_bin as usize))
        .collect();
    push_rows(&raw, &mut sketches);
    sketches
}

/// The next shard's part: the sketches so far, fed this shard's values in row order.
#[starling::remote]
pub(super) fn ml_sketch_next(raw: RawShard, mut sketches: Vec<Sketch>) -> Vec<Sketch> {
    push_rows(&raw, &mut sketches);
    sketches
}

fn push_rows(raw: &RawShard, sketches: &mut [Sketch]) {
    for (j, sketch) in sketches.iter_mut().enumerate() {
        for x in raw.column_values(j).filter(|x| !x.is_nan()) {
            sketch.push(x);
        }
    }
}

pub(super) fn check_labels(labels: &[f32], objective: Objective) -> Result<(), MlError> {
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
pub(super) fn ml_bin(raw: RawShard, cuts: Cuts, row_offset: u64) -> ShardData {
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
pub(super) fn draw(seed: u64, round: u32, row: u64) -> f64 {
    let mut z = seed
        .wrapping_add(u64::from(round).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(row.wrapping_mul(0xD1B5_4A32_D192_ED03));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Gradients and hessians of one row's margins (`g`, `h` per class).
pub(super) fn gradients(objective: Objective, margins: &[f32], label: f32, out: &mut [(f32, f32)]) {
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
pub(super) fn gradients_into(
    shard: &ShardData,
    margins: &[f32],
    grads: &mut [i32],
    ctx: &RoundCtx,
) {
    if ctx.objective.groups() == 1 && ctx.subsample >= 1.0 {
        one_class_gradients(shard, margins, grads, ctx);
    } else {
        row_gradients(shard, margins, grads, ctx);
    }
}

/// A shard's little-endian `f32` label.
pub(super) fn label(b: &[u8]) -> f32 {
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// [`gradients_into`] for one class and every row: in blocks, the probabilities first (the
/// libm call), then the fixed-point pairs in a pass of plain arithmetic. The same values as
/// [`row_gradients`], about twice as fast.
pub(super) fn one_class_gradients(
    shard: &ShardData,
    margins: &[f32],
    grads: &mut [i32],
    ctx: &RoundCtx,
) {
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
pub(super) fn row_gradients(shard: &ShardData, margins: &[f32], grads: &mut [i32], ctx: &RoundCtx) {
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
pub(super) fn margins_from(
    shard: &ShardData,
    forest: &Forest,
    ctx: &RoundCtx,
    margins: &mut [f32],
) {
    margins.fill(ctx.base_margin);
    for trees in forest {
        add_trees(shard, margins, trees);
    }
}

/// Brings `margins` (`3 * rows * classes` words: margins, then gradients) to `ctx.round`:
/// adds the round `end` finished when they hold the round before (its rows' groups read from
/// `part` when they are still there), rebuilds them from `forest` otherwise; then the round's
/// gradients.
pub(super) fn advance_margins(
    margins: &mut Words,
    part: &mut Words,
    shard: &ShardData,
    forest: &[u8],
    end: Option<&RoundEnd>,
    ctx: &RoundCtx,
) -> Result<(), MlError> {
    let len = shard.n_rows as usize * ctx.objective.groups();
    if margins.stamp() == Some((ctx.round, 0)) {
        return Ok(());
    }
    let previous = ctx.round.checked_sub(1).map(|r| (r, 0));
    let continues = previous.is_some() && margins.stamp() == previous && end.is_some();
    margins.set_stamp(None);
    let (m, grads) = margins.split(len);
    match end {
        Some(end) if continues => add_round(shard, m, end, part, ctx.leaves()),
        _ => margins_from(shard, &unpack_forest(forest)?, ctx, m),
    }
    gradients_into(shard, m, grads, ctx);
    margins.set_stamp(Some((ctx.round, 0)));
    Ok(())
}

/// A shard's state between the steps of a fit (its margins and gradients, or its rows' groups):
/// a mapped scratch file on the node, which any worker process there continues, or a task's
/// own memory where there is no scratch space. Stamped with the round and level its contents
/// are after; `None` while they change.
pub(super) enum Words {
    Mapped(scratch::Scratch),
    Memory(Vec<u32>, Option<(u32, u32)>),
}

impl Words {
    /// The shard's scratch file `kind` of `len` words; memory where there is no scratch space.
    pub(super) fn scratch(fit: u64, rank: u32, kind: &str, len: usize) -> Words {
        match scratch::Scratch::open(fit, rank, kind, len) {
            Ok(f) => Words::Mapped(f),
            Err(_) => Words::Memory(vec![0; len], None),
        }
    }

    pub(super) fn stamp(&self) -> Option<(u32, u32)> {
        match self {
            Words::Mapped(f) => f.stamp(),
            Words::Memory(_, at) => *at,
        }
    }

    pub(super) fn set_stamp(&mut self, at: Option<(u32, u32)>) {
        match self {
            Words::Mapped(f) => f.set_stamp(at),
            Words::Memory(_, stamp) => *stamp = at,
        }
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [u32] {
        match self {
            Words::Mapped(f) => f.as_mut_slice(),
            Words::Memory(v, _) => v,
        }
    }

    /// Margins (`len` of them) and gradients (`2 * len`).
    pub(super) fn split(&mut self, len: usize) -> (&mut [f32], &mut [i32]) {
        match self {
            Words::Mapped(f) => f.f32s_and_i32s(len),
            Words::Memory(v, _) => {
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
pub(super) fn add_trees(shard: &ShardData, margins: &mut [f32], trees: &[Vec<BinNode>]) {
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
    pub(super) classes: Vec<ClassEnd>,
    pub(super) fit: u64,
    pub(super) round: u32,
    /// The last level the workers ran.
    pub(super) depth: u32,
    /// Per class, the splits the workers applied.
    pub(super) applied: Vec<Vec<SplitRule>>,
}

/// One class's part of a [`RoundEnd`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClassEnd {
    pub(super) rules: Vec<SplitRule>,
    pub(super) values: Vec<f32>,
}

/// Split rules as flat per-node arrays, for the hot loop (a node's right child is its left
/// child + 1: children are always made in pairs).
pub(super) struct Router {
    /// Feature of each node's split, `u32::MAX` for a node not split this level.
    pub(super) feature: Vec<u32>,
    pub(super) bin: Vec<u8>,
    pub(super) default_left: Vec<bool>,
    pub(super) left: Vec<u32>,
}

impl Router {
    pub(super) fn new(rules: &[SplitRule]) -> Self {
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
    pub(super) fn route(&self, p: u32, row: &[u8]) -> u32 {
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
pub(super) fn partition_from(shard: &ShardData, applied: &[Vec<SplitRule>], words: &mut [u32]) {
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
pub(super) fn add_round(
    shard: &ShardData,
    margins: &mut [f32],
    end: &RoundEnd,
    part: &mut Words,
    leaves: usize,
) {
    let k = end.classes.len();
    let nf = shard.n_features as usize;
    let n = shard.n_rows as usize;
    let per = partition::words(n, leaves);
    // Each row's node: scattered from the groups (a small array, so the scatter stays in
    // cache), then every row is walked in order, reading the bins and margins sequentially.
    let mut positions = vec![0u32; n * k];
    match part.stamp() {
        Some(at) if at == (end.round, end.depth) => {
            for (c, block) in part.as_mut_slice().chunks_exact_mut(per).enumerate() {
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
pub(super) fn level(
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
    // A thread only for work that outlasts starting one.
    let cells: usize = work.iter().map(|w| (w.3 - w.2) * nf).sum();
    let threads = (plan.threads as usize)
        .min(cells / CELLS_PER_THREAD)
        .clamp(1, 64);
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

/// Fewest histogram cell updates (rows times features) worth a thread of [`level`]: about a
/// millisecond of adding, against 150-200 us to start a thread (measured on a 2-core VM).
pub(super) const CELLS_PER_THREAD: usize = 1 << 19;

/// Cuts row ranges `(class, slot, start, end)` into `threads` lists of about as many rows.
pub(super) fn cut_work(
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
pub(super) fn ml_level(
    shard: ShardData,
    forest: Bytes,
    plan: LevelPlan,
    rank: u32,
    layout: BinLayout,
) -> Result<HistMsg, MlError> {
    let (mut margins, mut part) = scratch_words(&shard, rank, &plan.ctx);
    level_step(
        &shard,
        &mut margins,
        &mut part,
        &forest,
        &plan,
        rank,
        &layout,
    )
}

/// The shard's margins and rows' groups in its scratch files on this node.
fn scratch_words(shard: &ShardData, rank: u32, ctx: &RoundCtx) -> (Words, Words) {
    let n = shard.n_rows as usize;
    let k = ctx.objective.groups();
    let fit = ctx.fit;
    (
        Words::scratch(fit, rank, scratch::MARGINS, 3 * n * k),
        Words::scratch(
            fit,
            rank,
            scratch::PARTITION,
            partition::words(n, ctx.leaves()) * k,
        ),
    )
}

/// One level of `plan` on a shard whose state is in `margins` and `part`: the root level
/// brings the margins up to this round, the others find them there (rebuilt from the forest
/// when they are not); the histograms travel as a value, or are left in scratch for a driver
/// on this node.
pub(super) fn level_step(
    shard: &ShardData,
    margins: &mut Words,
    part: &mut Words,
    forest: &[u8],
    plan: &LevelPlan,
    rank: u32,
    layout: &BinLayout,
) -> Result<HistMsg, MlError> {
    let len = shard.n_rows as usize * plan.ctx.objective.groups();
    advance_margins(margins, part, shard, forest, plan.end.as_ref(), &plan.ctx)?;
    let (_, grads) = margins.split(len);
    let hist = level_on(shard, grads, plan, layout, part);
    let shared = plan.hist_scratch && scratch::driver_here(plan.ctx.fit);
    Ok(shared
        .then(|| HistMsg::to_scratch(&hist, plan, rank))
        .flatten()
        .unwrap_or_else(|| HistMsg::from_hist(&hist)))
}

/// Runs `plan`'s level on the shard's row groups: kept in `part` between levels, or made
/// again from the plan's earlier splits.
pub(super) fn level_on(
    shard: &ShardData,
    grads: &[i32],
    plan: &LevelPlan,
    layout: &BinLayout,
    part: &mut Words,
) -> Hist {
    let n = shard.n_rows as usize;
    let before = plan.depth.checked_sub(1).map(|d| (plan.ctx.round, d));
    let per = partition::words(n, plan.ctx.leaves());
    let valid = before.is_some() && part.stamp() == before;
    part.set_stamp(None);
    let words = part.as_mut_slice();
    // The rows' groups as the previous level left them, or made again.
    if before.is_none() {
        for block in words.chunks_exact_mut(per) {
            let mut p = Partition::open(block, n);
            p.reset();
            p.store();
        }
    } else if !valid {
        partition_from(shard, &plan.applied, words);
    }
    let hist = level(shard, grads, words, plan, layout);
    part.set_stamp(Some((plan.ctx.round, plan.depth)));
    hist
}

/// Rounds grown inside one task, next to a fit's only shard: no task hop per level.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoundsPlan {
    /// The first round's context (the others differ in `round` only).
    pub(super) first: RoundCtx,
    pub(super) count: u32,
    /// How the round before the first ended.
    pub(super) end: Option<RoundEnd>,
    pub(super) params: Params,
    pub(super) split: SplitParams,
    pub(super) threads: u32,
}

#[starling::remote]
pub(super) fn ml_rounds(
    shard: ShardData,
    forest: Bytes,
    cuts: Cuts,
    plan: RoundsPlan,
) -> Result<Vec<Grown>, MlError> {
    let (mut margins, mut part) = scratch_words(&shard, 0, &plan.first);
    rounds_step(&shard, &mut margins, &mut part, &forest, &cuts, plan)
}

/// `plan`'s rounds on a shard whose state is in `margins` and `part`.
pub(super) fn rounds_step(
    shard: &ShardData,
    margins: &mut Words,
    part: &mut Words,
    forest: &Bytes,
    cuts: &Cuts,
    plan: RoundsPlan,
) -> Result<Vec<Grown>, MlError> {
    let k = plan.first.objective.groups();
    let len = shard.n_rows as usize * k;
    let layout = BinLayout::of(cuts);
    let spec = TreeSpec {
        cuts,
        split: &plan.split,
        p: &plan.params,
        k,
        threads: plan.threads,
    };
    let mut end = plan.end;
    let mut grown: Vec<Grown> = Vec::with_capacity(plan.count as usize);
    for i in 0..plan.count {
        let ctx = RoundCtx {
            round: plan.first.round + i,
            ..plan.first.clone()
        };
        // The margins continue from this task's last round unless the scratch file changed
        // under it; then they are rebuilt from the forest with this task's trees added.
        let forest = if i > 0 && margins.stamp() != Some((ctx.round - 1, 0)) {
            let mut all = unpack_forest(forest)?;
            all.extend(
                grown
                    .iter()
                    .map(|g| g.trees.iter().map(|t| t.nodes.clone()).collect()),
            );
            pack_forest(&all)
        } else {
            forest.clone()
        };
        advance_margins(margins, part, shard, &forest, end.as_ref(), &ctx)?;
        let (_, grads) = margins.split(len);
        let grads: &[i32] = grads;
        let allowed = allowed_features(&plan.params, cuts.n_features(), ctx.round, k);
        let g = grow_round(&spec, &ctx, None, &allowed, |lp| {
            Ok(level_on(shard, grads, lp, &layout, part))
        })?;
        end = Some(g.end(ctx.fit, ctx.round));
        grown.push(g);
    }
    Ok(grown)
}

#[starling::remote]
pub(super) fn ml_forget(fit: u64, rank: u32) {
    scratch::remove(fit, rank);
}

#[starling::remote]
pub(super) fn ml_sum_hists(a: HistMsg, b: HistMsg) -> Result<HistMsg, MlError> {
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
pub(super) fn row_loss(objective: Objective, margins: &[f32], label: f32) -> f64 {
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

pub(super) fn eval_state(shard: &ShardData, margins: Vec<f32>, objective: Objective) -> EvalState {
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
pub(super) fn ml_eval_first(shard: ShardData, base_margin: f32, objective: Objective) -> EvalState {
    let margins = vec![base_margin; shard.n_rows as usize * objective.groups()];
    eval_state(&shard, margins, objective)
}

#[starling::remote]
pub(super) fn ml_eval_next(
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
pub(super) fn ml_eval_loss(s: EvalState) -> (f64, u64) {
    (s.loss_sum, s.rows)
}

#[starling::remote]
pub(super) fn ml_predict(
    data: DataConnector,
    rank: u32,
    world: u32,
    cols: Vec<String>,
    model: Model,
) -> Result<Vec<f32>, MlError> {
    let frame = data.load_shard(rank as usize, world as usize, &cols, None)?;
    model.predict_rows(&frame.row_major())
}
