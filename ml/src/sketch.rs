//! Bin edges, and binning.
//!
//! A fit makes its edges with [`Cuts::from_sketches`]: XGBoost's own sketch
//! ([`crate::quantile::Sketch`]), fed every present value in row order across the shards, cut
//! as XGBoost cuts it, so the edges are XGBoost's for the same rows. [`Cuts::from_summaries`]
//! makes edges from per-shard summaries instead ([`Summary::of_column`]: exact when a shard has
//! few distinct values, otherwise [`SUMMARY_POINTS`] values at evenly spaced ranks), for
//! callers that have only those.
//!
//! A value's bin is the number of thresholds at or below it, so `bin <= b` is exactly
//! `x < thresholds[b]`: a split found on bins is the split XGBoost writes (`x < split_condition`
//! goes left), and trees can be evaluated on bins or on raw values with the same result.
//! Missing values (NaN) get bin [`MISSING`].

use serde::{Deserialize, Serialize};

use crate::quantile;

/// The bin of a missing value.
pub const MISSING: u8 = u8::MAX;

/// Most bins a feature with missing values can have (bins are bytes, and [`MISSING`] takes one
/// code). A feature without missing values can have one more, [`MAX_BINS`]` + 1`: its top bin
/// is coded [`MISSING`], which then marks no missing value (its rows sort above every split,
/// as missing values do on splits that send them right, the only kind such a feature gets).
pub const MAX_BINS: usize = 255;

/// Points a shard's summary of a column keeps when the column has more distinct values.
pub const SUMMARY_POINTS: usize = 8192;

/// A weighted summary of one column of one shard: `(value, rows)` pairs by increasing value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Values and how many rows each stands for, sorted by value.
    pub points: Vec<(f32, u64)>,
    /// Rows whose value is missing.
    #[serde(default)]
    pub missing: u64,
}

impl Summary {
    /// Summarizes a column (NaNs are left out).
    pub fn of_column(values: &[f32]) -> Self {
        let mut v: Vec<f32> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        let missing = (values.len() - v.len()) as u64;
        sort_floats(&mut v);
        let mut distinct: Vec<(f32, u64)> = Vec::new();
        for x in &v {
            match distinct.last_mut() {
                Some((last, n)) if *last == *x => *n += 1,
                _ => distinct.push((*x, 1)),
            }
        }
        if distinct.len() <= SUMMARY_POINTS {
            return Summary {
                points: distinct,
                missing,
            };
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
        Summary { points, missing }
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
    /// Per feature, XGBoost's last cut, above every value (`max + |max| + 1e-5`): the
    /// condition of a split that sends every present value left and the missing ones right.
    /// Empty when unknown (such a split then reads `x < inf`).
    #[serde(default)]
    pub upper: Vec<f32>,
}

impl Cuts {
    /// Merges the shards' summaries (`summaries[shard][feature]`) into at most `max_bin` bins
    /// per feature (capped at [`MAX_BINS`]), choosing the cuts as XGBoost does.
    pub fn from_summaries(summaries: &[Vec<Summary>], max_bin: usize) -> Self {
        let n_features = summaries.first().map_or(0, Vec::len);
        let max_bin = max_bin.max(2);
        let (thresholds, upper) = (0..n_features)
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
                let missing = summaries.iter().any(|s| s[f].missing > 0);
                thresholds_of(&merged, max_bin, missing)
            })
            .unzip();
        Cuts { thresholds, upper }
    }

    /// The cuts of columns summarized by XGBoost's sketch ([`quantile::Sketch`], fed every
    /// present value in row order): XGBoost's own cuts for the same rows. `has_missing` says
    /// which features have missing values (they keep at most [`MAX_BINS`]` - 1` cuts).
    pub fn from_sketches(
        sketches: Vec<quantile::Sketch>,
        has_missing: &[bool],
        max_bin: usize,
    ) -> Self {
        let max_bin = max_bin.max(2);
        let (thresholds, upper) = sketches
            .into_iter()
            .zip(has_missing)
            .map(|(sketch, &missing)| {
                let count = sketch.count();
                cuts_of_summary(&sketch.summary(), count, max_bin, missing)
            })
            .unzip();
        Cuts { thresholds, upper }
    }

    /// Number of features.
    pub fn n_features(&self) -> usize {
        self.thresholds.len()
    }

    /// Whether feature `f`'s top bin is coded [`MISSING`] (it has [`MAX_BINS`]` + 1` bins and
    /// no missing values).
    pub fn top_bin_is_missing_code(&self, f: usize) -> bool {
        self.thresholds[f].len() >= MAX_BINS
    }

    /// The condition of a split of feature `f` at `bin` (`x < condition` goes left): its
    /// threshold, or for the top bin, XGBoost's cut above every value.
    pub fn condition(&self, f: usize, bin: usize) -> f32 {
        match self.thresholds[f].get(bin) {
            Some(&t) => t,
            None => self.upper.get(f).copied().unwrap_or(f32::INFINITY),
        }
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
fn thresholds_of(points: &[(f32, u64)], max_bin: usize, has_missing: bool) -> (Vec<f32>, f32) {
    // An exact summary of the points, as a sketch that never filled its queue gives it.
    let count: u64 = points.iter().map(|p| p.1).sum();
    let mut queue: Vec<(f32, f32)> = points.iter().map(|&(v, w)| (v, w as f32)).collect();
    let mut summary = quantile::make_summary(&mut queue);
    let limit = quantile::limit_for(count as usize, max_bin);
    if summary.len() > limit {
        summary = quantile::set_prune(&summary, limit);
    }
    cuts_of_summary(&summary, count as usize, max_bin, has_missing)
}

/// XGBoost's cuts from a column's sketch summary (`HostSketchContainer::AllReduce` and
/// `MakeCuts`): pruned to `max_bin * 8` entries (at most the column's `count`), that to
/// `max_bin + 1`, and entries `1..max_bin` are the cuts: at most `MAX_BINS`, one fewer for a
/// feature with missing values (which needs the `MISSING` code). Also the cut above every
/// value.
fn cuts_of_summary(
    summary: &[quantile::Entry],
    count: usize,
    max_bin: usize,
    has_missing: bool,
) -> (Vec<f32>, f32) {
    let cap = if has_missing { MAX_BINS - 1 } else { MAX_BINS };
    // XGBoost's last cut: `cpt + (fabs(cpt) + 1e-5)` with `cpt` a float and `1e-5` a double.
    let above = |max: f32| (f64::from(max) + (f64::from(max).abs() + 1e-5)) as f32;
    if count == 0 {
        return (Vec::new(), above(1e-5));
    }
    let intermediate = count.min(max_bin * quantile::SKETCH_FACTOR);
    let reduced = quantile::set_prune(summary, intermediate);
    let max_num_bins = intermediate.min(max_bin);
    let pruned = quantile::set_prune(&reduced, max_num_bins + 1);
    let mut out: Vec<f32> = Vec::with_capacity(max_num_bins);
    for e in pruned.iter().take(max_num_bins).skip(1) {
        if out.len() >= cap {
            break;
        }
        if out.last().is_none_or(|l| *l < e.value) {
            out.push(e.value);
        }
    }
    let max = pruned.last().map_or(1e-5, |e| e.value);
    (out, above(max))
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
        assert_eq!(s.missing, 1);
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
        // Near the quartiles (XGBoost's own sketch puts them at 2605, 4857, 7397 here).
        for (t, want) in t.iter().zip([2500.0, 5000.0, 7500.0]) {
            assert!((t - want).abs() <= 200.0, "{t} vs {want}");
        }
        let bins = cuts.bin_columns(std::slice::from_ref(&col), col.len());
        let mut counts = [0usize; 4];
        for b in bins {
            counts[b as usize] += 1;
        }
        for c in counts {
            assert!((2200..=2800).contains(&c), "{counts:?}");
        }
    }

    /// Cuts XGBoost 3.2 makes (`DMatrix.get_quantile_cut()` after a `hist` round, its two
    /// sentinels left out) on columns small enough for its sketch to be exact.
    #[test]
    fn cuts_are_xgboost_s_where_its_sketch_is_exact() {
        let col: Vec<f32> = (0..3000).map(|i| i as f32).collect();
        let cuts = Cuts::from_summaries(&[vec![Summary::of_column(&col)]], 256);
        let t = &cuts.thresholds[0];
        // All of XGBoost's 255 cuts: 256 bins, the top one coded as missing values would be.
        assert_eq!(t.len(), 255);
        assert_eq!(t[..7], [12.0, 24.0, 36.0, 47.0, 59.0, 71.0, 82.0]);
        assert_eq!(t[251..], [2952.0, 2963.0, 2975.0, 2987.0]);
        assert!(cuts.top_bin_is_missing_code(0));
        assert_eq!(cuts.bin(0, 2987.0), MISSING);
        assert_eq!(cuts.bin(0, 2986.0), 254);
        // With a missing value the column keeps 254 cuts (the highest goes).
        let mut with_nan = col.clone();
        with_nan.push(f32::NAN);
        let cuts = Cuts::from_summaries(&[vec![Summary::of_column(&with_nan)]], 256);
        assert_eq!(cuts.thresholds[0].len(), 254);
        assert!(!cuts.top_bin_is_missing_code(0));
        // 600 distinct values in 1,000 rows, 64 bins: XGBoost's summary of 600 entries is
        // pruned to its sketch's 513, to 512, then to 65.
        let col: Vec<f32> = (0..1000).map(|i| (i % 600) as f32).collect();
        let cuts = Cuts::from_summaries(&[vec![Summary::of_column(&col)]], 64);
        let xgboost = [
            8, 16, 24, 32, 39, 47, 55, 63, 71, 78, 86, 94, 102, 110, 117, 125, 133, 141, 148, 156,
            164, 172, 180, 187, 195, 203, 211, 219, 226, 234, 242, 250, 258, 265, 273, 281, 289,
            296, 304, 312, 320, 328, 335, 343, 351, 359, 367, 374, 382, 390, 398, 412, 427, 443,
            458, 474, 489, 505, 521, 536, 552, 567, 583,
        ];
        assert_eq!(cuts.thresholds[0], xgboost.map(|v| v as f32));
    }

    #[test]
    fn a_constant_column_has_one_bin() {
        let cuts = Cuts::from_summaries(&[vec![Summary::of_column(&[7.0; 5])]], 256);
        assert_eq!(cuts.n_bins(0), 1);
        assert_eq!(cuts.offsets(), (vec![0], 1));
    }
}
