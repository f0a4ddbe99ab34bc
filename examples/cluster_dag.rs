//! A DAG over a cluster: N independent `where_am_i` tasks, spread over the nodes, each report
//! the node it ran on; a tree of `combine` tasks (each depending on two earlier results) merges
//! them into one summary. Prints `key=value` lines:
//!
//! ```text
//! tasks=40
//! nodes=1,2          # sorted distinct node ids the leaves ran on
//! sum=780            # 0 + 1 + .. + (N - 1)
//! ```
//!
//! Connects to the head in `STARLING_HEAD` (`starling head`, `starling worker --head ..`), or
//! starts a local cluster when it is unset: `STARLING_HEAD=127.0.0.1:6380 cargo run --example
//! cluster_dag -- 40`.

use std::collections::BTreeSet;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// What a part of the DAG saw: the nodes its leaves ran on and the sum of their inputs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Summary {
    nodes: BTreeSet<u64>,
    sum: u64,
}

#[starling::remote]
fn where_am_i(i: u64) -> Summary {
    // Long enough that the leaves overlap, so placement (not luck) decides where they run.
    std::thread::sleep(std::time::Duration::from_millis(20));
    Summary {
        nodes: BTreeSet::from([starling_examples::this_node()]),
        sum: i,
    }
}

#[starling::remote]
fn combine(a: Summary, b: Summary) -> Summary {
    Summary {
        nodes: a.nodes.union(&b.nodes).copied().collect(),
        sum: a.sum + b.sum,
    }
}

fn main() -> anyhow::Result<()> {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()
        .context("the argument is the number of leaf tasks")?
        .unwrap_or(40);
    anyhow::ensure!(n > 0, "the number of leaf tasks must be positive");
    starling_examples::connect()?;
    let mut level: Vec<_> = (0..n)
        .map(|i| where_am_i::options().spread().remote(i))
        .collect();
    // Pairwise reduction: every leaf feeds the root through `log2(n)` dependent tasks.
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        let mut it = level.into_iter();
        while let Some(a) = it.next() {
            next.push(match it.next() {
                Some(b) => combine::remote(a, b),
                None => a,
            });
        }
        level = next;
    }
    let total = starling::get(&level[0]).context("get the reduction")?;
    let nodes: Vec<String> = total.nodes.iter().map(u64::to_string).collect();
    println!("tasks={n}");
    println!("nodes={}", nodes.join(","));
    println!("sum={}", total.sum);
    Ok(())
}
