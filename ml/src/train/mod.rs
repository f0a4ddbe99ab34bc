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
use crate::params::{GrowPolicy, Params, ScalingConfig};
use crate::partition::{self, Partition};
use crate::quantile::Sketch;
use crate::scratch;
use crate::sketch::Cuts;
use crate::{MlError, Model, Objective, Tree};

mod driver;
mod grow;
mod objects;
mod tasks;

#[allow(unused_imports)]
use driver::*;
#[allow(unused_imports)]
use grow::*;
use objects::*;
#[allow(unused_imports)]
use tasks::*;

pub use driver::{FitReport, GbdtEstimator, XGBEstimator, MIN_ROWS_PER_WORKER};
pub use grow::{Grown, GrownTree};
pub use objects::*;

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
            capacity_depth: 4,
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
    fn shards_left_out_give_their_cpus_to_the_others_as_far_as_a_node_holds_them() {
        let place = |node_cpus: Vec<f64>| Placement {
            nodes: (1..=node_cpus.len() as u64).map(starling::NodeId).collect(),
            node_cpus,
            cpus: 1.0,
            threads: 1,
        };
        let widened = |mut p: Placement, asked, used| {
            p.widen(asked, used);
            (p.threads, p.cpus)
        };
        assert_eq!(widened(place(vec![2.0]), 2, 1), (2, 2.0));
        assert_eq!(widened(place(vec![8.0]), 4, 1), (4, 4.0));
        assert_eq!(widened(place(vec![8.0, 8.0]), 8, 2), (4, 4.0));
        // A node of one CPU could never run a task asking for two.
        assert_eq!(widened(place(vec![1.0, 1.0]), 2, 1), (1, 1.0));
        assert_eq!(widened(place(vec![8.0, 2.0]), 8, 2), (2, 2.0));
        // Whole threads only; all workers used: as asked.
        assert_eq!(widened(place(vec![8.0]), 3, 2), (1, 1.0));
        assert_eq!(widened(place(vec![8.0]), 2, 2), (1, 1.0));
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
                capacity_depth: 6,
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
