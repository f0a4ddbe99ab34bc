//! Runnable Starling payloads, one per scenario: `cargo run --release --example <name>`.
//!
//! - `quickstart`: fan out squares, reduce them with a dependent task.
//! - `pi`: Monte Carlo estimate of π over N tasks.
//! - `tree_reduce`: a recursive sum where each task submits and awaits its two halves.
//! - `cluster_dag`, `cluster_big_object`, `cluster_nested`, `cluster_missing_fn`: payloads for a
//!   running cluster (`STARLING_HEAD=host:port`), used by the multi-process tests.
