//! Bin edges from a distributed quantile sketch, and binning.
//!
//! Every worker summarizes each feature of its shard ([`Summary::of_column`]): exactly (each
//! distinct value with its count) when the shard has few distinct values, otherwise as
//! [`SUMMARY_POINTS`] values at evenly spaced ranks, each weighted by the rows it stands for.
//! The driver merges the summaries of all shards ([`Cuts::from_summaries`]) and picks at most
//! `max_bin - 1` thresholds per feature at evenly spaced weighted ranks.
//!
//! A value's bin is the number of thresholds at or below it, so `bin <= b` is exactly
//! `x < thresholds[b]`: a split found on bins is the split XGBoost writes (`x < split_condition`
//! goes left), and trees can be evaluated on bins or on raw values with the same result.
//! Missing values (NaN) get bin [`MISSING`].

use serde::{Deserialize, Serialize};

/// The bin of a missing value.
pub const MISSING: u8 = u8::MAX;

/// Most bins a feature can have (bins are bytes, and [`MISSING`] takes one code).
pub const MAX_BINS: usize = 255;

/// Points a shard's summary of a column keeps when the column has more distinct values.
pub const SUMMARY_POINTS: usize = 8192;

/// A weighted summary of one column of one shard: `(value, rows)` pairs by increasing value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Values and how many rows each stands for, sorted by value.
    pub points: Vec<(f32, u64)>,
}

impl Summary {
    /// Summarizes a column (NaNs are left out).
    pub fn of_column(values: &[f32]) -> Self {
        let mut v: Vec<f32> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        sort_floats(&mut v);
        let mut distinct: Vec<(f32, u64)> = Vec::new();
        for x in &v {
            match distinct.last_mut() {
                Some((last, n)) if *last == *x => *n += 1,
                _ => distinct.push((*x, 1)),
            }
        }
        if distinct.len() <= SUMMARY_POINTS {
            return Summary { points: distinct };
        }
        // Evenly spaced ranks; the point at rank r stands for the rows since the previous point.
        let n = v.len();
        let mut points: Vec<(f32, u64)> = Vec::with_capacity(SUMMARY_POINTS);
        let mut prev = 0usize;
        for i in 1..=SUMMARY_POINTS {
            let rank = i * n / SUMMARY_POINTS;
            if rank == prev {
                continue;
            }
            let x = v[rank - 1];
            let w = (rank - prev) as u64;
            match points.last_mut() {
                Some((last, c)) if *last == x => *c += w,
                _ => points.push((x, w)),
            }
            prev = rank;
        }
        Summary { points }
    }
}

/// Sorts by [`f32::total_cmp`]: a radix sort of the bits for long columns (three passes over
/// the values instead of ~20 comparisons each).
fn sort_floats(v: &mut [f32]) {
    if v.len() < 4096 {
        v.sort_unstable_by(f32::total_cmp);
        return;
    }
    // Keys that order as unsigned integers the way `total_cmp` orders the floats.
    let key = |x: f32| {
        let b = x.to_bits();
        if b >> 31 == 1 {
            !b
        } else {
            b | 0x8000_0000
        }
    };
    let mut a: Vec<u32> = v.iter().map(|&x| key(x)).collect();
    let mut b = vec![0u32; a.len()];
    for shift in [0u32, 11, 22] {
        let mut count = [0usize; 2048];
        for &k in &a {
            count[((k >> shift) & 2047) as usize] += 1;
        }
        let mut at = 0;
        for c in count.iter_mut() {
            let n = *c;
            *c = at;
            at += n;
        }
        for &k in &a {
            let d = ((k >> shift) & 2047) as usize;
            b[count[d]] = k;
            count[d] += 1;
        }
        std::mem::swap(&mut a, &mut b);
    }
    for (x, k) in v.iter_mut().zip(a) {
        let bits = if k >> 31 == 1 { k & 0x7fff_ffff } else { !k };
        *x = f32::from_bits(bits);
    }
}

/// Bin thresholds for every feature.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cuts {
    /// Per feature, increasing thresholds; a value's bin is how many are `<=` it.
    pub thresholds: Vec<Vec<f32>>,
}

impl Cuts {
    /// Merges the shards' summaries (`summaries[shard][feature]`) into at most `max_bin` bins
    /// per feature (capped at [`MAX_BINS`]), choosing the cuts as XGBoost does.
    pub fn from_summaries(summaries: &[Vec<Summary>], max_bin: usize) -> Self {
        let n_features = summaries.first().map_or(0, Vec::len);
        let max_bin = max_bin.max(2);
        let thresholds = (0..n_features)
            .map(|f| {
                let mut all: Vec<(f32, u64)> = summaries
                    .iter()
                    .flat_map(|s| s[f].points.iter().copied())
                    .collect();
                all.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
                let mut merged: Vec<(f32, u64)> = Vec::with_capacity(all.len());
                for (x, w) in all {
                    match merged.last_mut() {
                        Some((last, c)) if *last == x => *c += w,
                        _ => merged.push((x, w)),
                    }
                }
                thresholds_of(&merged, max_bin)
            })
            .collect();
        Cuts { thresholds }
    }

    /// Number of features.
    pub fn n_features(&self) -> usize {
        self.thresholds.len()
    }

    /// Number of bins of feature `f` (thresholds + 1).
    pub fn n_bins(&self, f: usize) -> usize {
        self.thresholds[f].len() + 1
    }

    /// Where each feature's bins start in a histogram row, and the total.
    pub fn offsets(&self) -> (Vec<usize>, usize) {
        let mut off = Vec::with_capacity(self.n_features());
        let mut total = 0;
        for f in 0..self.n_features() {
            off.push(total);
            total += self.n_bins(f);
        }
        (off, total)
    }

    /// The bin of `x` for feature `f`.
    #[inline]
    pub fn bin(&self, f: usize, x: f32) -> u8 {
        if x.is_nan() {
            return MISSING;
        }
        self.thresholds[f].partition_point(|t| *t <= x) as u8
    }

    /// Bins a column-major table into row-major bin codes (`rows x features`).
    pub fn bin_columns(&self, columns: &[Vec<f32>], n_rows: usize) -> Vec<u8> {
        let nf = columns.len();
        let mut out = vec![0u8; n_rows * nf];
        for (f, col) in columns.iter().enumerate() {
            for (i, x) in col.iter().enumerate() {
                out[i * nf + f] = self.bin(f, *x);
            }
        }
        out
    }
}

/// Thresholds for one feature from its merged weighted points.
fn thresholds_of(points: &[(f32, u64)], max_bin: usize) -> Vec<f32> {
    // XGBoost's choice: prune the weighted summary to `max_bin + 1` entries at evenly spaced
    // ranks (`WQSummary::SetPrune`), then cut at entries `1..max_bin`. Bins are bytes with one
    // code for missing values, so at most `MAX_BINS - 1` of those cuts are kept (the highest
    // goes when `max_bin` is 256).
    let pruned = prune(points, max_bin + 1);
    let mut out: Vec<f32> = Vec::with_capacity(max_bin);
    for p in pruned.iter().take(max_bin).skip(1) {
        if out.len() + 1 >= MAX_BINS {
            break;
        }
        if out.last().is_none_or(|l| *l < p.0) {
            out.push(p.0);
        }
    }
    out
}

/// At most `maxsize` of `points` (sorted, distinct values with weights), chosen at evenly
/// spaced ranks the way XGBoost's weighted quantile summary prunes: each entry spans the ranks
/// `rmin..rmax` of its rows, and for each target rank the entry whose span is nearest wins.
fn prune(points: &[(f32, u64)], maxsize: usize) -> Vec<(f32, u64)> {
    if points.len() <= maxsize || maxsize < 2 {
        return points.to_vec();
    }
    // rmin, rmax of each entry (rows strictly before it; rows up to and including it).
    let mut rmin = Vec::with_capacity(points.len());
    let mut rmax = Vec::with_capacity(points.len());
    let mut cum = 0f64;
    for (_, w) in points {
        rmin.push(cum);
        cum += *w as f64;
        rmax.push(cum);
    }
    let last = points.len() - 1;
    let begin = rmax[0];
    let range = rmin[last] - rmax[0];
    let n = (maxsize - 1) as f64;
    let mut out = vec![points[0]];
    let (mut i, mut lastidx) = (1usize, 0usize);
    for k in 1..maxsize - 1 {
        let dx2 = 2.0 * ((k as f64 * range) / n + begin);
        while i < last && dx2 >= rmax[i + 1] + rmin[i + 1] {
            i += 1;
        }
        if i == last {
            break;
        }
        // RMinNext(i) + RMaxPrev(i + 1).
        let w_i = points[i].1 as f64;
        let w_next = points[i + 1].1 as f64;
        if dx2 < (rmin[i] + w_i) + (rmax[i + 1] - w_next) {
            if i != lastidx {
                out.push(points[i]);
                lastidx = i;
            }
        } else if i + 1 != lastidx {
            out.push(points[i + 1]);
            lastidx = i + 1;
        }
    }
    if lastidx != last {
        out.push(points[last]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_radix_sort_orders_like_total_cmp() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut v: Vec<f32> = (0..10_000)
            .map(|i| match i % 7 {
                0 => f32::from_bits(next() as u32),
                1 => 0.0,
                2 => -0.0,
                3 => f32::INFINITY,
                4 => f32::NEG_INFINITY,
                _ => (next() % 1000) as f32 / 7.0 - 70.0,
            })
            .filter(|x| !x.is_nan())
            .collect();
        let mut want = v.clone();
        want.sort_unstable_by(f32::total_cmp);
        sort_floats(&mut v);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&v), bits(&want));
    }

    #[test]
    fn few_distinct_values_get_a_bin_each() {
        let col = [3.0, 1.0, 2.0, 2.0, f32::NAN, 1.0];
        let s = Summary::of_column(&col);
        assert_eq!(s.points, vec![(1.0, 2), (2.0, 2), (3.0, 1)]);
        let cuts = Cuts::from_summaries(&[vec![s]], 256);
        assert_eq!(cuts.thresholds, vec![vec![2.0, 3.0]]);
        assert_eq!(cuts.bin(0, 0.5), 0);
        assert_eq!(cuts.bin(0, 1.0), 0);
        assert_eq!(cuts.bin(0, 2.0), 1);
        assert_eq!(cuts.bin(0, 2.5), 1);
        assert_eq!(cuts.bin(0, 9.0), 2);
        assert_eq!(cuts.bin(0, f32::NAN), MISSING);
    }

    #[test]
    fn many_values_split_into_equal_weight_bins() {
        let col: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
        let half = col.len() / 2;
        let shards = [
            vec![Summary::of_column(&col[..half])],
            vec![Summary::of_column(&col[half..])],
        ];
        let cuts = Cuts::from_summaries(&shards, 4);
        let t = &cuts.thresholds[0];
        assert_eq!(t.len(), 3, "{t:?}");
        for (t, want) in t.iter().zip([2500.0, 5000.0, 7500.0]) {
            assert!((t - want).abs() <= 10.0, "{t} vs {want}");
        }
        let bins = cuts.bin_columns(std::slice::from_ref(&col), col.len());
        let mut counts = [0usize; 4];
        for b in bins {
            counts[b as usize] += 1;
        }
        for c in counts {
            assert!((2400..=2600).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn a_constant_column_has_one_bin() {
        let cuts = Cuts::from_summaries(&[vec![Summary::of_column(&[7.0; 5])]], 256);
        assert_eq!(cuts.n_bins(0), 1);
        assert_eq!(cuts.offsets(), (vec![0], 1));
    }
}
