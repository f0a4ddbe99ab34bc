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

    /// Makes leaf `node` a split by `s` into the leaves `l` and `r` (already pushed).
    pub(super) fn split(&mut self, node: u32, s: &hist::Split, l: u32, r: u32) {
        let n = &mut self.nodes[node as usize];
        *n = BinNode {
            feature: s.feature as u32,
            bin: s.bin,
            default_left: s.default_left,
            left: l as i32,
            right: r as i32,
            value: n.value,
        };
        self.gains[node as usize] = s.gain;
        self.kids[node as usize] = (l as i32, r as i32);
    }

    pub(super) fn push_leaf(&mut self, sum: GradSum, p: &Params, split: &SplitParams) -> u32 {
        self.nodes.push(BinNode::leaf(leaf_output(sum, p, split)));
        self.sums.push(sum);
        self.gains.push(0.0);
        self.kids.push((-1, -1));
        (self.nodes.len() - 1) as u32
    }
}

pub(super) fn leaf_output(sum: GradSum, p: &Params, split: &SplitParams) -> f32 {
    // XGBoost's: the weight as an `f32`, times `eta` in `f32`.
    (split.weight(sum) as f32) * p.eta
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

/// Grows one round's trees (one per class) as `grow_policy` says; `run_level` gives each
/// level's (or step's) summed histograms.
///
/// A split is made as XGBoost's `hist` makes it: only where it reduces the loss by more than
/// `1e-6` and by at least `gamma`, with some hessian on both sides, while the tree has fewer
/// than `max_leaves` leaves (there is no pruning after growth, as `hist` has none).
pub(super) fn grow_round(
    spec: &TreeSpec<'_>,
    ctx: &RoundCtx,
    end: Option<RoundEnd>,
    allowed: &[Vec<bool>],
    run_level: impl FnMut(&LevelPlan) -> Result<Hist, MlError>,
) -> Result<Grown, MlError> {
    match spec.p.grow_policy {
        GrowPolicy::Depthwise => grow_depthwise(spec, ctx, end, allowed, run_level),
        GrowPolicy::Lossguide => grow_lossguide(spec, ctx, end, allowed, run_level),
    }
}

/// Whether XGBoost would apply `s` to a tree that has `leaves` leaves (its `IsValid`).
fn valid(s: &hist::Split, leaves: usize, p: &Params) -> bool {
    s.gain >= p.gamma
        && s.left.h != 0
        && s.right.h != 0
        && (p.max_leaves == 0 || leaves < p.max_leaves)
}

/// The root step: every class's root histogram, with the plan that asks for it.
fn root_step(
    spec: &TreeSpec<'_>,
    ctx: &RoundCtx,
    end: Option<RoundEnd>,
    run_level: &mut impl FnMut(&LevelPlan) -> Result<Hist, MlError>,
) -> Result<Arc<Hist>, MlError> {
    let root_plan = LevelPlan {
        classes: (0..spec.k)
            .map(|_| ClassPlan {
                splits: Vec::new(),
                build: vec![0],
            })
            .collect(),
        threads: spec.threads,
        ctx: ctx.clone(),
        depth: 0,
        applied: vec![Vec::new(); spec.k],
        end,
        hist_scratch: false,
    };
    Ok(Arc::new(run_level(&root_plan)?))
}

/// Depth-wise: every node of a level is split (in node order, while leaves are allowed)
/// before the next level.
fn grow_depthwise(
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
    let hist = root_step(spec, ctx, end, &mut run_level)?;
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
    let mut leaves = vec![1usize; k];
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
                if !valid(&s, leaves[c], p) {
                    continue;
                }
                leaves[c] += 1;
                let t = &mut trees[c];
                let (l, r, left_built) = ask_children(t, &mut plan.classes[c], node, &s, p, split);
                t.split(node, &s, l, r);
                pending[c].push((l, r, left_built, slot));
            }
        }
        // A tree at its leaf budget evaluates no children (XGBoost's `IsChildValid`).
        let full = |c: usize| p.max_leaves > 0 && leaves[c] >= p.max_leaves;
        if (0..k).all(|c| pending[c].is_empty() || full(c)) || depth + 1 == p.max_depth {
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
            let full = full(c);
            for (l, r, left_built, parent) in std::mem::take(&mut pending[c]) {
                let (ls, rs) = children_hists(parent, &hist, slot, left_built);
                slot += 1;
                if !full {
                    frontier[c].push((l, ls));
                    frontier[c].push((r, rs));
                }
            }
        }
    }
    Ok(Grown {
        trees,
        depth: ran_depth,
        applied,
        final_rules,
    })
}

/// A leaf of a loss-guided tree with its best split, waiting to be expanded.
struct Candidate {
    /// The node, in the grown tree.
    node: u32,
    /// XGBoost's id for the node (given as nodes are expanded), which breaks ties of gain.
    order: u32,
    depth: u32,
    split: hist::Split,
    /// Its histogram, until a step applies its split; then its children's node ids and
    /// histograms.
    state: CandidateState,
}

enum CandidateState {
    Waiting(NodeHist),
    Applied(u32, u32, NodeHist, NodeHist),
}

/// One class's loss-guided tree as it grows.
struct LossGuided {
    tree: GrownTree,
    queue: Vec<Candidate>,
    leaves: usize,
    expanded: u32,
    done: bool,
    /// Splits expanded whose children are not evaluated, so no shard needs them applied.
    final_rules: Vec<SplitRule>,
}

impl LossGuided {
    /// The candidate XGBoost expands next: the largest gain (as the `f32` it keeps), then the
    /// smallest id.
    fn top(&self) -> Option<usize> {
        (0..self.queue.len()).min_by(|&a, &b| expand_order(&self.queue[a], &self.queue[b]))
    }

    /// Whether a split of a node at `depth`, made now, would have its children evaluated.
    fn children_grow(&self, depth: u32, p: &Params) -> bool {
        children_within_depth(depth, p) && (p.max_leaves == 0 || self.leaves + 1 < p.max_leaves)
    }
}

/// XGBoost's expansion order (its `LossGuide` comparator): the larger gain as the `f32` it
/// keeps first, then the smaller node id.
fn expand_order(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    (b.split.gain as f32)
        .partial_cmp(&(a.split.gain as f32))
        .unwrap_or(std::cmp::Ordering::Equal)
        .then(a.order.cmp(&b.order))
}

/// Whether the children of a node at `depth` are within `max_depth` (0: no limit).
fn children_within_depth(depth: u32, p: &Params) -> bool {
    p.max_depth == 0 || (depth as usize) + 1 < p.max_depth
}

/// Loss-guided (XGBoost's `lossguide`, LightGBM's leaf-wise growth): the leaf whose best split
/// reduces the loss most is expanded first, one at a time, until `max_leaves` (or no leaf
/// has a valid split; the first invalid one ends the tree, as in XGBoost).
///
/// The shards must apply a split before its children's histograms exist, and a step of tasks
/// per expansion would cost a round trip each; so each step applies the splits of every
/// waiting leaf that could still be expanded (at most the leaf budget left), and the driver
/// then expands in XGBoost's order for as long as the children it needs are built. A leaf
/// whose split was applied but that is never expanded stays a leaf: its rows sit in its
/// unexpanded children at the shards, which take its value (as [`GrownTree::end`] says).
/// The trees are XGBoost's; only the work of those extra splits is spent.
fn grow_lossguide(
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
    let hist = root_step(spec, ctx, end, &mut run_level)?;
    let bins = hist.bins;
    let search_threads = split_threads();
    let roots: Vec<(usize, &[i64])> = (0..k).map(|c| (c, hist.slot(c))).collect();
    let found = best_splits(&roots, cuts, split, allowed, search_threads);
    let mut classes: Vec<LossGuided> = found
        .into_iter()
        .enumerate()
        .map(|(c, s)| LossGuided {
            tree: GrownTree::new(hist::totals(hist.slot(c), bins).0, p, split),
            queue: s
                .map(|split| Candidate {
                    node: 0,
                    order: 0,
                    depth: 0,
                    split,
                    state: CandidateState::Waiting(NodeHist::Slot(hist.clone(), c)),
                })
                .into_iter()
                .collect(),
            leaves: 1,
            expanded: 0,
            done: false,
            final_rules: Vec::new(),
        })
        .collect();
    drop(roots);
    drop(hist);
    let mut applied: Vec<Vec<SplitRule>> = vec![Vec::new(); k];
    let mut step = 0u32;
    loop {
        // Expand in XGBoost's order while the children needed are built.
        for (c, g) in classes.iter_mut().enumerate() {
            while !g.done {
                let Some(i) = g.top() else {
                    g.done = true;
                    break;
                };
                let cand = &g.queue[i];
                if !valid(&cand.split, g.leaves, p) {
                    g.done = true;
                    break;
                }
                let grow_children = g.children_grow(cand.depth, p);
                if grow_children && matches!(cand.state, CandidateState::Waiting(_)) {
                    break;
                }
                let cand = g.queue.swap_remove(i);
                g.leaves += 1;
                g.expanded += 1;
                let s = cand.split;
                let (l, r, kids) = match cand.state {
                    CandidateState::Applied(l, r, lh, rh) => (l, r, Some((lh, rh))),
                    CandidateState::Waiting(_) => {
                        let l = g.tree.push_leaf(s.left, p, split);
                        let r = g.tree.push_leaf(s.right, p, split);
                        g.final_rules.push(rule(cand.node, &s, l, r));
                        (l, r, None)
                    }
                };
                g.tree.split(cand.node, &s, l, r);
                if let (true, Some((lh, rh))) = (grow_children, kids) {
                    let pair = [(c, lh.values()), (c, rh.values())];
                    let found = best_splits(&pair, cuts, split, allowed, 1);
                    for ((node, h), (s, order)) in [(l, lh), (r, rh)]
                        .into_iter()
                        .zip(found.into_iter().zip([2 * g.expanded - 1, 2 * g.expanded]))
                    {
                        if let Some(split) = s {
                            g.queue.push(Candidate {
                                node,
                                order,
                                depth: cand.depth + 1,
                                split,
                                state: CandidateState::Waiting(h),
                            });
                        }
                    }
                }
            }
        }
        if classes.iter().all(|g| g.done) {
            break;
        }
        // A step: apply the splits of the waiting leaves that could still be expanded with
        // children to evaluate, best first, at most as many as the leaf budget leaves room
        // for; build the smaller child of each.
        step += 1;
        let mut plan = LevelPlan {
            classes: vec![ClassPlan::default(); k],
            threads,
            ctx: ctx.clone(),
            depth: step,
            applied: applied.clone(),
            end: None,
            hist_scratch: false,
        };
        let mut pending: Vec<Vec<(usize, bool)>> = (0..k).map(|_| Vec::new()).collect();
        for (c, g) in classes.iter_mut().enumerate() {
            if g.done {
                continue;
            }
            let room = if p.max_leaves > 0 {
                p.max_leaves.saturating_sub(g.leaves + 1)
            } else {
                usize::MAX
            };
            let mut order: Vec<usize> = (0..g.queue.len())
                .filter(|&i| {
                    let q = &g.queue[i];
                    matches!(q.state, CandidateState::Waiting(_))
                        && children_within_depth(q.depth, p)
                })
                .collect();
            order.sort_by(|&a, &b| expand_order(&g.queue[a], &g.queue[b]));
            order.truncate(room);
            for i in order {
                let (s, node) = (g.queue[i].split, g.queue[i].node);
                let (l, r, left_built) =
                    ask_children(&mut g.tree, &mut plan.classes[c], node, &s, p, split);
                // The node stays a leaf until it is expanded; its children exist for the
                // shards, which route its rows into them from now on.
                g.tree.kids[node as usize] = (l as i32, r as i32);
                pending[c].push((i, left_built));
            }
        }
        let hist = Arc::new(run_level(&plan)?);
        for (a, cp) in applied.iter_mut().zip(&plan.classes) {
            a.extend_from_slice(&cp.splits);
        }
        let mut slot = 0usize;
        for (c, g) in classes.iter_mut().enumerate() {
            for (&(i, left_built), rule) in pending[c].iter().zip(&plan.classes[c].splits) {
                let cand = &mut g.queue[i];
                let CandidateState::Waiting(parent) = std::mem::replace(
                    &mut cand.state,
                    CandidateState::Waiting(NodeHist::Own(Vec::new())),
                ) else {
                    unreachable!("only waiting candidates are applied");
                };
                let (lh, rh) = children_hists(parent, &hist, slot, left_built);
                slot += 1;
                cand.state = CandidateState::Applied(rule.left, rule.right, lh, rh);
            }
        }
    }
    let (trees, final_rules) = classes.into_iter().map(|g| (g.tree, g.final_rules)).unzip();
    Ok(Grown {
        trees,
        depth: step,
        applied,
        final_rules,
    })
}

/// Adds the two leaves split `s` of `node` makes, asks the shards (through `plan`) to apply it
/// and to build the child with less hessian (the other is the parent minus it): the leaves,
/// and whether the left one is built.
fn ask_children(
    tree: &mut GrownTree,
    plan: &mut ClassPlan,
    node: u32,
    s: &hist::Split,
    p: &Params,
    split: &SplitParams,
) -> (u32, u32, bool) {
    let l = tree.push_leaf(s.left, p, split);
    let r = tree.push_leaf(s.right, p, split);
    plan.splits.push(rule(node, s, l, r));
    let left_built = s.left.h <= s.right.h;
    plan.build.push(if left_built { l } else { r });
    (l, r, left_built)
}

/// The children's histograms once a step has built one of them (at `slot` of `hist`): that
/// one as a slot, the other as `parent` minus it; `(left, right)`.
fn children_hists(
    parent: NodeHist,
    hist: &Arc<Hist>,
    slot: usize,
    left_built: bool,
) -> (NodeHist, NodeHist) {
    let other = NodeHist::Own(parent.minus(hist.slot(slot)));
    let built = NodeHist::Slot(hist.clone(), slot);
    if left_built {
        (built, other)
    } else {
        (other, built)
    }
}

/// The rule that applies split `s` of `node` into children `l` and `r`.
fn rule(node: u32, s: &hist::Split, l: u32, r: u32) -> SplitRule {
    SplitRule {
        node,
        feature: s.feature as u32,
        bin: s.bin,
        default_left: s.default_left,
        left: l,
        right: r,
    }
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
            cuts.condition(n.feature as usize, n.bin as usize)
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
