//! Growing a tree on the driver: split search over summed histograms (on idle cores for wide
//! levels), sibling histograms by subtraction, pruning, and the bin-space tree turned into a
//! model tree.

use super::*;

/// A tree as grown: bin-space nodes plus what the model keeps of each.
#[derive(Clone, Serialize, Deserialize)]
pub struct GrownTree {
    pub(super) nodes: Vec<BinNode>,
    pub(super) sums: Vec<GradSum>,
    pub(super) gains: Vec<f64>,
    /// Children as grown (pruning turns a split into a leaf but keeps these).
    pub(super) kids: Vec<(i32, i32)>,
}

impl GrownTree {
    pub(super) fn new(root: GradSum, p: &Params, split: &SplitParams) -> Self {
        GrownTree {
            nodes: vec![BinNode::leaf(leaf_output(root, p, split))],
            sums: vec![root],
            gains: vec![0.0],
            kids: vec![(-1, -1)],
        }
    }

    /// The round's end for this tree: the `rules` still to apply that survived pruning, and
    /// each grown node's output (that of the leaf it is, or lies under).
    pub(super) fn end(&self, rules: Vec<SplitRule>) -> ClassEnd {
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

    pub(super) fn push_leaf(&mut self, sum: GradSum, p: &Params, split: &SplitParams) -> u32 {
        self.nodes.push(BinNode::leaf(leaf_output(sum, p, split)));
        self.sums.push(sum);
        self.gains.push(0.0);
        self.kids.push((-1, -1));
        (self.nodes.len() - 1) as u32
    }

    /// XGBoost's pruning by `gamma`: bottom up, a split whose children are leaves and whose
    /// loss reduction is under `gamma` becomes a leaf again.
    pub(super) fn prune(&mut self, i: usize, gamma: f64, p: &Params, split: &SplitParams) {
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

pub(super) fn leaf_output(sum: GradSum, p: &Params, split: &SplitParams) -> f32 {
    (split.weight(sum) * f64::from(p.eta)) as f32
}

/// A split whose children's histograms are on their way: (left, right, whether the left one
/// is built, the parent's histogram).
pub(super) type Pending = (u32, u32, bool, NodeHist);

/// A growing node's histogram: a slot of its level's summed histograms (shared, not copied),
/// or its own (a sibling's, made by subtraction).
pub(super) enum NodeHist {
    Slot(Arc<Hist>, usize),
    Own(Vec<i64>),
}

impl NodeHist {
    pub(super) fn values(&self) -> &[i64] {
        match self {
            NodeHist::Slot(h, s) => h.slot(*s),
            NodeHist::Own(v) => v,
        }
    }

    /// `self - built`: the sibling's histogram, made in place when this one is its own.
    pub(super) fn minus(self, built: &[i64]) -> Vec<i64> {
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
pub(super) fn best_splits(
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
pub(super) const SPLITS_PER_THREAD: usize = 16;

/// Threads the driver searches splits on.
pub(super) fn split_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// A round's trees, the depth of the last level the workers ran, the splits they applied, and
/// per class the splits chosen after it (which no worker has applied).
#[derive(Clone, Serialize, Deserialize)]
pub struct Grown {
    pub(super) trees: Vec<GrownTree>,
    pub(super) depth: u32,
    pub(super) applied: Vec<Vec<SplitRule>>,
    pub(super) final_rules: Vec<Vec<SplitRule>>,
}

/// What growing a round's trees takes besides the histograms.
pub(super) struct TreeSpec<'a> {
    pub(super) cuts: &'a Cuts,
    pub(super) split: &'a SplitParams,
    pub(super) p: &'a Params,
    /// Trees per round (classes).
    pub(super) k: usize,
    /// Threads each level's histogram building may use.
    pub(super) threads: u32,
}

/// Runs one level on every shard (level tasks and a tree of sums): the driver's way of
/// growing a round.
pub(super) fn level_by_tasks<'a>(
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
    pub(super) fn end(&self, fit: u64, round: u32) -> RoundEnd {
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
pub(super) fn grow_round(
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
pub(super) fn to_tree(t: &GrownTree, cuts: &Cuts, split: &SplitParams) -> Tree {
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
