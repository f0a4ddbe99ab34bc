//! XGBoost's weighted quantile sketch (`WQuantileSketch<float, float>` and `WQSummary`, as its
//! `hist` method uses them), in the same `f32` arithmetic, so that bin edges are the ones
//! XGBoost chooses on the same rows in the same order.
//!
//! A column's values are pushed in row order into a queue of `2 * limit_size` entries
//! (consecutive equal values share one); a full queue becomes a summary that is merged up a
//! binary counter of levels, each pruned to `limit_size` entries. The sketch is plain data
//! (serde), so a fit can push a shard's rows, hand the sketch to the next shard's task, and
//! push those: the result depends on the rows and their order, never on the sharding.

use serde::{Deserialize, Serialize};

/// XGBoost's `WQSketch::kFactor`: a column's sketch keeps `max_bin` times this many entries
/// per level.
pub const SKETCH_FACTOR: usize = 8;

/// An entry of a weighted quantile summary (`WQSummary::Entry`): a value and the ranks its
/// rows span.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Weight strictly before the value.
    pub rmin: f32,
    /// Weight up to and including the value.
    pub rmax: f32,
    /// The value's own weight.
    pub wmin: f32,
    /// The value.
    pub value: f32,
}

impl Entry {
    /// This entry in a merge with another summary: its ranks moved by the other summary's
    /// weight below it (`rmin`) and at most up to it (`rmax`).
    fn shifted(&self, rmin: f32, rmax: f32) -> Entry {
        Entry {
            rmin: self.rmin + rmin,
            rmax: self.rmax + rmax,
            wmin: self.wmin,
            value: self.value,
        }
    }

    fn rmin_next(&self) -> f32 {
        self.rmin + self.wmin
    }

    fn rmax_prev(&self) -> f32 {
        self.rmax - self.wmin
    }
}

/// The exact summary of `(value, weight)` pairs (`Queue::MakeSummary`): sorted, equal values
/// merged.
pub fn make_summary(queue: &mut [(f32, f32)]) -> Vec<Entry> {
    queue.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = Vec::with_capacity(queue.len());
    let mut wsum = 0f32;
    let mut i = 0;
    while i < queue.len() {
        let mut j = i + 1;
        let mut w = queue[i].1;
        while j < queue.len() && queue[j].0 == queue[i].0 {
            w += queue[j].1;
            j += 1;
        }
        out.push(Entry {
            rmin: wsum,
            rmax: wsum + w,
            wmin: w,
            value: queue[i].0,
        });
        wsum += w;
        i = j;
    }
    out
}

/// At most `maxsize` of `src`'s entries at evenly spaced ranks (`WQSummary::SetPrune`): for
/// each target rank, the entry whose span is nearest.
pub fn set_prune(src: &[Entry], maxsize: usize) -> Vec<Entry> {
    if src.len() <= maxsize {
        return src.to_vec();
    }
    let last = src.len() - 1;
    let begin = src[0].rmax;
    let range = src[last].rmin - src[0].rmax;
    let n = maxsize - 1;
    let mut out = Vec::with_capacity(maxsize);
    out.push(src[0]);
    let (mut i, mut lastidx) = (1usize, 0usize);
    for k in 1..n {
        let dx2 = 2.0f32 * ((k as f32 * range) / n as f32 + begin);
        while i < last && dx2 >= src[i + 1].rmax + src[i + 1].rmin {
            i += 1;
        }
        if i == last {
            break;
        }
        if dx2 < src[i].rmin_next() + src[i + 1].rmax_prev() {
            if i != lastidx {
                out.push(src[i]);
                lastidx = i;
            }
        } else if i + 1 != lastidx {
            out.push(src[i + 1]);
            lastidx = i + 1;
        }
    }
    if lastidx != last {
        out.push(src[last]);
    }
    out
}

/// The merge of two summaries (`WQSummary::SetCombine`, with its `FixError`).
pub fn set_combine(sa: &[Entry], sb: &[Entry]) -> Vec<Entry> {
    if sa.is_empty() {
        return sb.to_vec();
    }
    if sb.is_empty() {
        return sa.to_vec();
    }
    let mut out = Vec::with_capacity(sa.len() + sb.len());
    let (mut a, mut b) = (0usize, 0usize);
    let (mut aprev_rmin, mut bprev_rmin) = (0f32, 0f32);
    while a < sa.len() && b < sb.len() {
        let (x, y) = (&sa[a], &sb[b]);
        if x.value == y.value {
            out.push(Entry {
                rmin: x.rmin + y.rmin,
                rmax: x.rmax + y.rmax,
                wmin: x.wmin + y.wmin,
                value: x.value,
            });
            aprev_rmin = x.rmin_next();
            bprev_rmin = y.rmin_next();
            a += 1;
            b += 1;
        } else if x.value < y.value {
            out.push(x.shifted(bprev_rmin, y.rmax_prev()));
            aprev_rmin = x.rmin_next();
            a += 1;
        } else {
            out.push(y.shifted(aprev_rmin, x.rmax_prev()));
            bprev_rmin = y.rmin_next();
            b += 1;
        }
    }
    // What is left of one side lies above all of the other.
    let (brmax, armax) = (sb[sb.len() - 1].rmax, sa[sa.len() - 1].rmax);
    out.extend(sa[a..].iter().map(|x| x.shifted(bprev_rmin, brmax)));
    out.extend(sb[b..].iter().map(|y| y.shifted(aprev_rmin, armax)));
    fix_error(&mut out);
    out
}

/// `WQSummary::FixError`: re-establishes the rank invariants after rounding.
fn fix_error(data: &mut [Entry]) {
    let (mut prev_rmin, mut prev_rmax) = (0f32, 0f32);
    for e in data.iter_mut() {
        if e.rmin < prev_rmin {
            e.rmin = prev_rmin;
        } else {
            prev_rmin = e.rmin;
        }
        if e.rmax < prev_rmax {
            e.rmax = prev_rmax;
        }
        let rmin_next = e.rmin_next();
        if e.rmax < rmin_next {
            e.rmax = rmin_next;
        }
        prev_rmax = e.rmax;
    }
}

/// The entries per level of a sketch for `maxn` values at accuracy `eps`
/// (`QuantileSketchTemplate::LimitSizeLevel`).
pub fn limit_size(maxn: usize, eps: f64) -> usize {
    let mut nlevel = 1usize;
    loop {
        let limit = ((nlevel as f64 / eps).ceil() as usize + 1).min(maxn);
        if (1usize << nlevel.min(62)) * limit >= maxn {
            return limit;
        }
        nlevel += 1;
    }
}

/// The entries per level of the sketch `HostSketchContainer` makes for a column of `count`
/// present values binned into at most `max_bin` bins: accuracy `1 / (min(max_bin, count) *
/// 8)`.
pub fn limit_for(count: usize, max_bin: usize) -> usize {
    let n_bins = max_bin.min(count).max(1);
    let eps = 1.0 / (n_bins as f32 * SKETCH_FACTOR as f32) as f64;
    limit_size(count, eps)
}

/// One column's sketch (`WQuantileSketch<float, float>` as `HostSketchContainer` sets it up:
/// accuracy `1 / (min(max_bin, count) * 8)`, its queue sized at once).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sketch {
    /// Present values the column has in all (what the sketch was sized for).
    count: usize,
    limit: usize,
    queue: Vec<(f32, f32)>,
    /// Level 0 is scratch space, as in XGBoost; levels `1..` hold summaries.
    levels: Vec<Vec<Entry>>,
}

impl Sketch {
    /// A sketch for a column of `count` present values, binned into at most `max_bin` bins.
    pub fn new(count: usize, max_bin: usize) -> Self {
        let limit = limit_for(count, max_bin).max(1);
        Sketch {
            count,
            limit,
            queue: Vec::with_capacity(2 * limit),
            levels: Vec::new(),
        }
    }

    /// The present values the column has in all.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Adds one value (missing values are not pushed).
    pub fn push(&mut self, x: f32) {
        if self.queue.len() == 2 * self.limit {
            let temp = make_summary(&mut self.queue);
            self.queue.clear();
            self.push_temp(temp);
        }
        match self.queue.last_mut() {
            Some(last) if last.0 == x => last.1 += 1.0,
            _ => self.queue.push((x, 1.0)),
        }
    }

    /// `QuantileSketchTemplate::PushTemp`: carries a full queue's summary up the levels.
    fn push_temp(&mut self, mut temp: Vec<Entry>) {
        let mut l = 1;
        loop {
            if self.levels.len() < l + 1 {
                self.levels.resize(l + 1, Vec::new());
            }
            if self.levels[l].is_empty() {
                self.levels[l] = set_prune(&temp, self.limit);
                return;
            }
            self.levels[0] = set_prune(&temp, self.limit);
            temp = set_combine(&self.levels[0], &self.levels[l]);
            if temp.len() > self.limit {
                self.levels[l].clear();
                l += 1;
            } else {
                self.levels[l] = temp;
                return;
            }
        }
    }

    /// The column's summary (`QuantileSketchTemplate::GetSummary`).
    pub fn summary(mut self) -> Vec<Entry> {
        let mut out = make_summary(&mut self.queue);
        if !self.levels.is_empty() {
            let mut level0 = set_prune(&out, self.limit);
            for l in 1..self.levels.len() {
                if self.levels[l].is_empty() {
                    continue;
                }
                if level0.is_empty() {
                    level0 = self.levels[l].clone();
                } else {
                    out = set_combine(&level0, &self.levels[l]);
                    level0 = set_prune(&out, self.limit);
                }
            }
            level0
        } else if out.len() > self.limit {
            set_prune(&out, self.limit)
        } else {
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_summary_has_every_value_with_its_ranks() {
        let mut q = vec![(3.0, 1.0), (1.0, 1.0), (3.0, 2.0), (2.0, 1.0)];
        let s = make_summary(&mut q);
        let got: Vec<(f32, f32, f32, f32)> = s
            .iter()
            .map(|e| (e.value, e.rmin, e.rmax, e.wmin))
            .collect();
        assert_eq!(
            got,
            vec![
                (1.0, 0.0, 1.0, 1.0),
                (2.0, 1.0, 2.0, 1.0),
                (3.0, 2.0, 5.0, 3.0)
            ]
        );
    }

    #[test]
    fn combining_adds_the_ranks_of_both_sides() {
        let a = make_summary(&mut [(1.0, 1.0), (3.0, 1.0)]);
        let b = make_summary(&mut [(2.0, 1.0), (3.0, 1.0)]);
        let c = set_combine(&a, &b);
        let got: Vec<(f32, f32, f32)> = c.iter().map(|e| (e.value, e.rmin, e.rmax)).collect();
        assert_eq!(got, vec![(1.0, 0.0, 1.0), (2.0, 1.0, 2.0), (3.0, 2.0, 4.0)]);
    }

    #[test]
    fn a_sketch_that_never_fills_its_queue_is_exact() {
        let mut s = Sketch::new(100, 256);
        for i in 0..100 {
            s.push((i % 10) as f32);
        }
        let summary = s.summary();
        assert_eq!(summary.len(), 10);
        assert!(summary.iter().all(|e| e.wmin == 10.0));
    }

    #[test]
    fn a_long_column_is_summarized_within_the_sketch_s_accuracy() {
        let n = 200_000usize;
        let mut s = Sketch::new(n, 16);
        // A permutation of 0..n, so every rank is known.
        let mut x = 0usize;
        for _ in 0..n {
            x = (x + 7919) % n;
            s.push(x as f32);
        }
        let limit = s.limit;
        let summary = s.summary();
        assert!(summary.len() <= limit);
        // eps = 1 / (16 * 8): each entry's true rank lies within its span, and spans are
        // narrow.
        for e in &summary {
            let rank = e.value;
            assert!(e.rmin <= rank + 1.0 && rank <= e.rmax, "{e:?}");
            assert!(e.rmax - e.rmin <= n as f32 / 64.0, "{e:?}");
        }
    }
}
