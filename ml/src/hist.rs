//! Gradient histograms and split finding.
//!
//! Gradients and hessians are summed in fixed point: each row's values are rounded to `i32`
//! (scaled by `2^scale`, the scale chosen from a bound on the gradients so a row's value fits in
//! 31 bits) and summed as `i64`, exact for up to `2^32` rows. Integer sums do not depend on the
//! order they are added in, so a histogram summed over 1, 2 or 4 shards is bit-for-bit the same
//! and distributed training grows the same trees as one worker.
//!
//! A histogram holds, for each node it covers (a *slot*), the `(g, h)` sums of every bin of
//! every feature, then the node's totals `(g, h, rows)`; a feature's missing values are what its
//! bins lack of the totals.

use serde::{Deserialize, Serialize};

use crate::sketch::{Cuts, MISSING};

/// Fixed-point gradient statistics: `(g, h)` scaled by `2^scale`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradSum {
    /// Sum of gradients.
    pub g: i64,
    /// Sum of hessians.
    pub h: i64,
}

impl GradSum {
    fn sub(self, o: GradSum) -> GradSum {
        GradSum {
            g: self.g - o.g,
            h: self.h - o.h,
        }
    }
    fn add(self, o: GradSum) -> GradSum {
        GradSum {
            g: self.g + o.g,
            h: self.h + o.h,
        }
    }
}

/// The fixed-point scale for values whose magnitude is at most `bound`: a row's value stays
/// within `2^30`.
pub fn scale_for(bound: f64) -> i32 {
    let mag = bound.max(1e-30).log2().ceil() as i32;
    (30 - mag).clamp(-60, 60)
}

/// Rounds a value to fixed point (saturating at `2^30`); `factor` is `2^scale`
/// ([`factor`]).
#[inline]
pub fn quantize(x: f32, factor: f64) -> i32 {
    // Half away from zero, without a libm call; `as` saturates (and maps NaN to 0).
    let v = f64::from(x) * factor;
    (v + 0.5f64.copysign(v)).clamp(-(2f64.powi(30)), 2f64.powi(30)) as i32
}

/// `2^scale`, the multiplier [`quantize`] takes.
pub fn factor(scale: i32) -> f64 {
    f64::from(scale).exp2()
}

/// Histograms of several nodes over one binning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hist {
    /// Total bins over all features.
    pub bins: usize,
    /// Per slot: `2 * bins` values (`g`, `h` per bin), then `g`, `h`, rows.
    pub data: Vec<i64>,
}

impl Hist {
    /// An all-zero histogram of `slots` nodes.
    pub fn zeros(slots: usize, bins: usize) -> Self {
        Hist {
            bins,
            data: vec![0; slots * (2 * bins + 3)],
        }
    }

    fn stride(&self) -> usize {
        2 * self.bins + 3
    }

    /// Number of nodes covered.
    pub fn slots(&self) -> usize {
        self.data.len() / self.stride().max(1)
    }

    /// One slot's values.
    pub fn slot(&self, s: usize) -> &[i64] {
        let st = self.stride();
        &self.data[s * st..(s + 1) * st]
    }

    fn slot_mut(&mut self, s: usize) -> &mut [i64] {
        let st = self.stride();
        &mut self.data[s * st..(s + 1) * st]
    }

    /// Adds `o` (same shape) into `self`.
    pub fn add(&mut self, o: &Hist) {
        for (a, b) in self.data.iter_mut().zip(&o.data) {
            *a += *b;
        }
    }

    /// `parent - child` for one slot each: the sibling's histogram.
    pub fn difference(parent: &[i64], child: &[i64]) -> Vec<i64> {
        parent.iter().zip(child).map(|(p, c)| p - c).collect()
    }

    /// Adds rows into slot histograms: `slot_of(row)` picks the slot (or none), `grad(row)`
    /// its statistics; `bins` is row-major with `n_features` codes per row.
    pub fn accumulate(
        &mut self,
        bins: &[u8],
        n_features: usize,
        offsets: &[usize],
        rows: std::ops::Range<usize>,
        mut slot_of: impl FnMut(usize) -> Option<usize>,
        mut grad: impl FnMut(usize) -> GradSum,
    ) {
        for i in rows {
            let Some(s) = slot_of(i) else { continue };
            self.add_row(
                s,
                &bins[i * n_features..(i + 1) * n_features],
                offsets,
                grad(i),
            );
        }
    }

    /// Adds one row (its bin codes, one per feature) with statistics `gs` into slot `s`; a
    /// row with zero gradient and hessian (left out by `subsample`) is not counted.
    #[inline(always)]
    pub fn add_row(&mut self, s: usize, row: &[u8], offsets: &[usize], gs: GradSum) {
        if gs.h == 0 && gs.g == 0 {
            return;
        }
        let st = self.stride();
        let nb = self.bins;
        let slot = &mut self.data[s * st..(s + 1) * st];
        let (cells, totals) = slot.split_at_mut(2 * nb);
        let (cells, _) = cells.as_chunks_mut::<2>();
        for (&b, &off) in row.iter().zip(offsets) {
            if b != MISSING {
                let cell = &mut cells[off + b as usize];
                cell[0] += gs.g;
                cell[1] += gs.h;
            }
        }
        totals[0] += gs.g;
        totals[1] += gs.h;
        totals[2] += 1;
    }

    /// Puts `values` (one slot's worth) into slot `s`.
    pub fn set_slot(&mut self, s: usize, values: &[i64]) {
        self.slot_mut(s).copy_from_slice(values);
    }
}

/// A slot's totals: `(g, h)` and rows.
pub fn totals(slot: &[i64], bins: usize) -> (GradSum, i64) {
    (
        GradSum {
            g: slot[2 * bins],
            h: slot[2 * bins + 1],
        },
        slot[2 * bins + 2],
    )
}

/// The regularization parameters split finding uses (XGBoost's names).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct SplitParams {
    /// L2 regularization on leaf weights.
    pub lambda: f64,
    /// L1 regularization on leaf weights.
    pub alpha: f64,
    /// Least hessian sum a child may have.
    pub min_child_weight: f64,
    /// The fixed-point scale of the sums.
    pub scale: i32,
}

impl SplitParams {
    fn real(&self, x: i64) -> f64 {
        // Exact: a power of two.
        x as f64 * f64::from(-self.scale).exp2()
    }

    fn threshold_l1(&self, g: f64) -> f64 {
        if g > self.alpha {
            g - self.alpha
        } else if g < -self.alpha {
            g + self.alpha
        } else {
            0.0
        }
    }

    /// The score of a node with these sums: `T(G)^2 / (H + lambda)`.
    pub fn gain(&self, s: GradSum) -> f64 {
        let g = self.threshold_l1(self.real(s.g));
        let h = self.real(s.h);
        if h + self.lambda <= 0.0 {
            return 0.0;
        }
        g * g / (h + self.lambda)
    }

    /// A node's score as XGBoost's split evaluator computes it (an `f32`), from real sums.
    #[inline]
    fn score32(&self, g: f64, h: f64) -> f32 {
        if h <= 0.0 {
            return 0.0;
        }
        // `T(G)^2` and `H + lambda` as `f32`s, divided in `f32` (XGBoost's `Divide`).
        let t = self.threshold_l1(g);
        (t * t) as f32 / (h + self.lambda) as f32
    }

    /// The optimal weight of a node with these sums: `-T(G) / (H + lambda)`.
    pub fn weight(&self, s: GradSum) -> f64 {
        let h = self.real(s.h);
        if h + self.lambda <= 0.0 {
            return 0.0;
        }
        -self.threshold_l1(self.real(s.g)) / (h + self.lambda)
    }

    /// The hessian sum as a real number.
    pub fn hessian(&self, s: GradSum) -> f64 {
        self.real(s.h)
    }
}

/// The best split of a node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Split {
    /// Feature.
    pub feature: usize,
    /// Rows with bin `<= bin` go left.
    pub bin: u8,
    /// Missing values go left.
    pub default_left: bool,
    /// Loss reduction.
    pub gain: f64,
    /// Sums of the left child.
    pub left: GradSum,
    /// Sums of the right child.
    pub right: GradSum,
}

/// The best split of one node's histogram slot over the features in `allowed` (all when
/// empty), or `None` when no split gains more than `1e-6` within `min_child_weight`.
///
/// For each feature the bins are scanned left to right with missing values going right; when
/// the node has missing values for the feature, the scan is repeated with them going left
/// (XGBoost's order, so ties resolve the same way: first feature, first bin, missing right).
pub fn best_split(slot: &[i64], cuts: &Cuts, p: &SplitParams, allowed: &[bool]) -> Option<Split> {
    let (offsets, bins) = cuts.offsets();
    let (total, _) = totals(slot, bins);
    // XGBoost's arithmetic: each node's score is an `f32`, a split's loss reduction the `f32`
    // sum of its children's minus the parent's, and splits are compared as those `f32`s (an
    // `f64` comparison would break near-ties differently and grow other trees).
    let unit = f64::from(-p.scale).exp2();
    let hessian = |s: GradSum| s.h as f64 * unit;
    let score = |s: GradSum| p.score32(s.g as f64 * unit, s.h as f64 * unit);
    let parent = score(total);
    let mut best: Option<Split> = None;
    let mut best_gain = 1e-6f32;
    for (f, &off) in offsets.iter().enumerate() {
        if !allowed.is_empty() && !allowed[f] {
            continue;
        }
        let nb = cuts.n_bins(f);
        let bin = |b: usize| GradSum {
            g: slot[2 * (off + b)],
            h: slot[2 * (off + b) + 1],
        };
        let present = (0..nb).fold(GradSum::default(), |a, b| a.add(bin(b)));
        let missing = total.sub(present);
        // A feature whose top bin is coded as missing has no missing values: its "missing"
        // rows are that bin's, which the forward scan sends right, above every split.
        let has_missing = (missing.h != 0 || missing.g != 0) && !cuts.top_bin_is_missing_code(f);
        let mut consider = |left: GradSum, b: usize, missing_left: bool| {
            let right = total.sub(left);
            if hessian(left) < p.min_child_weight || hessian(right) < p.min_child_weight {
                return;
            }
            let gain = (score(left) + score(right)) - parent;
            if gain > best_gain {
                best_gain = gain;
                best = Some(Split {
                    feature: f,
                    bin: b as u8,
                    default_left: missing_left,
                    gain: f64::from(gain),
                    left,
                    right,
                });
            }
        };
        // XGBoost's forward scan: bins `0..=b` left, missing values right; with missing values
        // it ends at the last bin (every present value left, the missing ones right).
        let mut left = GradSum::default();
        for b in 0..if has_missing { nb } else { nb - 1 } {
            left = left.add(bin(b));
            consider(left, b, false);
        }
        if has_missing {
            // Its backward scan, from the top bin down: bins `b + 1..` right, the rest and the
            // missing values left. (Its last step, every present value right and the missing
            // ones left, is the forward scan's last split mirrored: same gain, found second, so
            // never kept.)
            let mut right = GradSum::default();
            for b in (0..nb - 1).rev() {
                right = right.add(bin(b + 1));
                consider(total.sub(right), b, true);
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SplitParams {
        SplitParams {
            lambda: 1.0,
            alpha: 0.0,
            min_child_weight: 1.0,
            scale: 0,
        }
    }

    /// Two features; feature 0 has 3 bins, feature 1 has 2. Four rows, whole-number gradients
    /// (scale 0) so every sum below is checked by hand.
    fn four_rows() -> (Cuts, Hist) {
        let cuts = Cuts {
            thresholds: vec![vec![1.0, 2.0], vec![5.0]],
            ..Cuts::default()
        };
        let (off, bins) = cuts.offsets();
        assert_eq!((off.clone(), bins), (vec![0, 3], 5));
        // rows: (f0 bin, f1 bin, g, h)
        let rows = [
            (0u8, 0u8, -4, 1),
            (0, 1, -2, 1),
            (1, MISSING, 3, 1),
            (2, 1, 5, 1),
        ];
        let codes: Vec<u8> = rows.iter().flat_map(|r| [r.0, r.1]).collect();
        let mut h = Hist::zeros(1, bins);
        h.accumulate(
            &codes,
            2,
            &off,
            0..4,
            |_| Some(0),
            |i| GradSum {
                g: rows[i].2,
                h: rows[i].3,
            },
        );
        (cuts, h)
    }

    #[test]
    fn histograms_sum_each_bin_and_the_totals() {
        let (_, h) = four_rows();
        // f0: bin0 = rows 0,1 (-6, 2); bin1 = row 2 (3, 1); bin2 = row 3 (5, 1)
        // f1: bin0 = row 0 (-4, 1); bin1 = rows 1,3 (3, 2); row 2 missing
        // totals: g = 2, h = 4, rows = 4
        assert_eq!(h.slot(0), &[-6, 2, 3, 1, 5, 1, -4, 1, 3, 2, 2, 4, 4]);
    }

    #[test]
    fn the_best_split_is_the_hand_computed_one() {
        let (cuts, h) = four_rows();
        let p = params();
        // parent: G=2, H=4 -> 4/5 = 0.8
        // f0 after bin0: L(-6,2) 36/3 = 12, R(8,2) 64/3 = 21.33 -> gain 32.53
        // f0 after bin1: L(-3,3) 9/4 = 2.25, R(5,1) 25/2 = 12.5 -> 13.95
        // f1 missing right: L(-4,1) 8, R(6,3) 9 -> 16.2; missing left: L(-1,2) 1/3, R(3,2) 3 -> 2.53
        let s = best_split(h.slot(0), &cuts, &p, &[]).unwrap();
        assert_eq!((s.feature, s.bin, s.default_left), (0, 0, false));
        // Gains are XGBoost's `f32`s.
        assert!(
            (s.gain - (12.0 + 64.0 / 3.0 - 0.8)).abs() < 1e-5,
            "{}",
            s.gain
        );
        assert_eq!(s.left, GradSum { g: -6, h: 2 });
        assert_eq!(s.right, GradSum { g: 8, h: 2 });
        // Without feature 0, feature 1 with its missing row on the right wins.
        let s = best_split(h.slot(0), &cuts, &p, &[false, true]).unwrap();
        assert_eq!((s.feature, s.bin, s.default_left), (1, 0, false));
        assert!((s.gain - (8.0 + 9.0 - 0.8)).abs() < 1e-5);
        // Weights: -G/(H+lambda).
        assert!((p.weight(s.left) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn missing_values_go_where_they_gain_most() {
        // f1 only; the missing row has a large negative gradient, like row 0.
        let cuts = Cuts {
            thresholds: vec![vec![5.0]],
            ..Cuts::default()
        };
        let rows = [(0u8, -4i64), (1, 3), (1, 5), (MISSING, -6)];
        let codes: Vec<u8> = rows.iter().map(|r| r.0).collect();
        let mut h = Hist::zeros(1, 2);
        h.accumulate(
            &codes,
            1,
            &[0],
            0..4,
            |_| Some(0),
            |i| GradSum { g: rows[i].1, h: 1 },
        );
        let s = best_split(h.slot(0), &cuts, &params(), &[]).unwrap();
        // missing left: L(-10,2) 100/3, R(8,2) 64/3 beats missing right: L(-4,1) 8, R(2,3) 1.
        assert!(s.default_left);
        assert_eq!(s.left, GradSum { g: -10, h: 2 });
    }

    #[test]
    fn min_child_weight_and_l1_are_respected() {
        let (cuts, h) = four_rows();
        let strict = SplitParams {
            min_child_weight: 2.5,
            ..params()
        };
        // Every split leaves a child with fewer than 2.5 hessian.
        assert_eq!(best_split(h.slot(0), &cuts, &strict, &[]), None);
        let l1 = SplitParams {
            alpha: 1.0,
            ..params()
        };
        // T(-6) = -5, T(8) = 7, T(2) = 1: 25/3 + 49/3 - 1/5
        let s = best_split(h.slot(0), &cuts, &l1, &[]).unwrap();
        assert!((s.gain - (25.0 / 3.0 + 49.0 / 3.0 - 0.2)).abs() < 1e-5);
        assert!((l1.weight(s.left) - 5.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn sums_are_exact_in_any_order_and_siblings_come_from_subtraction() {
        let scale = scale_for(1.0);
        let g: Vec<i64> = (0..1000)
            .map(|i| {
                i64::from(quantize(
                    ((i * 7919) % 1000) as f32 / 999.0 - 0.5,
                    factor(scale),
                ))
            })
            .collect();
        let codes: Vec<u8> = (0..1000).map(|i| (i % 3) as u8).collect();
        let whole = {
            let mut h = Hist::zeros(1, 3);
            h.accumulate(
                &codes,
                1,
                &[0],
                0..1000,
                |_| Some(0),
                |i| GradSum { g: g[i], h: 1 },
            );
            h
        };
        let mut parts = Hist::zeros(1, 3);
        for r in [700..1000, 0..300, 300..700] {
            let mut h = Hist::zeros(1, 3);
            h.accumulate(
                &codes,
                1,
                &[0],
                r,
                |_| Some(0),
                |i| GradSum { g: g[i], h: 1 },
            );
            parts.add(&h);
        }
        assert_eq!(whole, parts);
        let mut left = Hist::zeros(1, 3);
        left.accumulate(
            &codes,
            1,
            &[0],
            0..1000,
            |i| (i < 400).then_some(0),
            |i| GradSum { g: g[i], h: 1 },
        );
        let mut right = Hist::zeros(1, 3);
        right.accumulate(
            &codes,
            1,
            &[0],
            400..1000,
            |_| Some(0),
            |i| GradSum { g: g[i], h: 1 },
        );
        assert_eq!(Hist::difference(whole.slot(0), left.slot(0)), right.slot(0));
    }
}
