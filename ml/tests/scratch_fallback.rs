//! The node-local scratch (row positions, margins and gradients kept between a shard's tasks)
//! changes the speed of a fit, never its result: with no scratch space at all, every task
//! rebuilds what it needs from the trees and splits it is given, and the model is the same.
//!
//! Its own test binary: it points `STARLING_ML_SCRATCH` at a directory that does not exist.

use starling_ml::{DataConnector, GbdtEstimator, Params, ScalingConfig, Table};

#[test]
fn without_scratch_space_the_trees_are_the_same() {
    let rt = starling::Runtime::in_process(2).expect("runtime starts");
    let _g = rt.enter();
    let n = 3000;
    let mut s = 7u64;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut cols: Vec<Vec<f32>> = (0..4).map(|_| Vec::with_capacity(n)).collect();
    for _ in 0..n {
        let x: Vec<f32> = (0..3).map(|_| next()).collect();
        let y = (x[0] * 6.0).sin() + x[1] * x[2] + 0.1 * next();
        for (c, v) in x.iter().enumerate() {
            cols[c].push(if c == 2 && next() < 0.05 {
                f32::NAN
            } else {
                *v
            });
        }
        cols[3].push(y);
    }
    let data = DataConnector::table(Table {
        columns: ["a", "b", "c", "y"].map(String::from).to_vec(),
        data: cols,
    });
    // Three shards (a level task each) and one (runs of rounds in one task).
    let fit = |workers: usize| {
        GbdtEstimator::new(12)
            .params(
                Params::from_pairs(&[("max_depth", "5"), ("subsample", "0.8"), ("gamma", "0.001")])
                    .expect("params"),
            )
            .scaling_config(ScalingConfig {
                num_workers: workers,
                num_cpu_per_worker: 1,
            })
            .min_rows_per_worker(0)
            .fit(&data, &["a", "b", "c"], "y")
            .expect("fit")
    };
    let with_scratch = fit(3);
    assert_eq!(with_scratch.trees.len(), 12);
    assert_eq!(fit(1), with_scratch, "one shard, with scratch");
    std::env::set_var("STARLING_ML_SCRATCH", "/nonexistent/starling-ml-scratch");
    assert_eq!(fit(3), with_scratch, "three shards, no scratch");
    assert_eq!(fit(1), with_scratch, "one shard, no scratch");
}
