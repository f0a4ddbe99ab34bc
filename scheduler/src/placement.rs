//! Placement: which node runs a task of a given shape.
//!
//! The default policy is Ray's hybrid one: walk the nodes in a fixed order and take the first
//! that stays at most half used after placing the task, so small workloads pack onto few nodes
//! (warm workers, local objects); once every node is past half, take the least used one, so
//! large workloads spread. `Spread` rotates over the nodes that fit. Node affinity pins a node,
//! falling back to the default policy when `soft` and the node cannot take it.

use starling_proto::{ResourceSet, SchedulingStrategy, RESOURCE_SCALE};

use crate::core::{NodeState, Pool};

/// The outcome of looking for a node.
#[derive(Debug, PartialEq)]
pub(crate) enum Placement {
    /// Run on the node at this index.
    Node(usize),
    /// Some node could run it later; none has room now.
    Wait,
    /// No node could ever run it: the reason.
    Infeasible(String),
    /// It must run on one node (hard affinity) that can never run it: the reason. Unlike an
    /// infeasible task, it does not wait for nodes to join (as Ray).
    Unschedulable(String),
}

const PACK_THRESHOLD: f64 = 0.5;

/// Whether `n` can start a task of `pool` right now: resources free and a worker of it idle.
fn fits_now(n: &NodeState, need: &ResourceSet, pool: Pool, restricted: bool) -> bool {
    n.alive
        && n.serves(pool.job, restricted)
        && n.idle.iter().any(|(p, _)| *p == pool)
        && n.available.contains(need)
        && n.gpus.fits(need.gpu_units())
}

fn fits_ever(n: &NodeState, need: &ResourceSet, pool: Pool, restricted: bool) -> bool {
    n.alive && n.serves(pool.job, restricted) && n.total.contains(need)
}

/// Picks a node for a task needing `need` under `strategy`.
pub(crate) fn place(
    nodes: &[NodeState],
    need: &ResourceSet,
    strategy: SchedulingStrategy,
    pool: Pool,
    restricted: bool,
    spread_cursor: &mut usize,
) -> Placement {
    match strategy {
        SchedulingStrategy::Default => hybrid(nodes, need, pool, restricted),
        SchedulingStrategy::Spread => {
            let n = nodes.len();
            for k in 0..n {
                let i = (*spread_cursor + k) % n;
                if fits_now(&nodes[i], need, pool, restricted) {
                    *spread_cursor = (i + 1) % n;
                    return Placement::Node(i);
                }
            }
            wait_or_infeasible(nodes, need, pool, restricted)
        }
        SchedulingStrategy::NodeAffinity { node, soft } => {
            match nodes.iter().position(|n| n.id == node) {
                Some(i) if fits_now(&nodes[i], need, pool, restricted) => Placement::Node(i),
                Some(i) if fits_ever(&nodes[i], need, pool, restricted) && !soft => Placement::Wait,
                _ if soft => hybrid(nodes, need, pool, restricted),
                Some(i) if !nodes[i].alive => Placement::Unschedulable(format!(
                    "needs node {node}, which is dead (affinity is hard; use soft affinity to \
                     allow other nodes)"
                )),
                Some(i) => Placement::Unschedulable(format!(
                    "needs {need} on node {node}, which has {} in all",
                    nodes[i].total
                )),
                None => Placement::Unschedulable(format!("needs node {node}, which is unknown")),
            }
        }
    }
}

fn hybrid(nodes: &[NodeState], need: &ResourceSet, pool: Pool, restricted: bool) -> Placement {
    let mut best: Option<(usize, f64)> = None;
    for (i, n) in nodes.iter().enumerate() {
        if !fits_now(n, need, pool, restricted) {
            continue;
        }
        let after = utilization_after(n, need);
        if after <= PACK_THRESHOLD {
            return Placement::Node(i);
        }
        if best.is_none_or(|(_, u)| after < u) {
            best = Some((i, after));
        }
    }
    match best {
        Some((i, _)) => Placement::Node(i),
        None => wait_or_infeasible(nodes, need, pool, restricted),
    }
}

fn utilization_after(n: &NodeState, need: &ResourceSet) -> f64 {
    n.available.utilization_after(need, &n.total)
}

fn wait_or_infeasible(
    nodes: &[NodeState],
    need: &ResourceSet,
    pool: Pool,
    restricted: bool,
) -> Placement {
    if nodes.iter().any(|n| fits_ever(n, need, pool, restricted)) {
        return Placement::Wait;
    }
    let serving: Vec<&NodeState> = nodes
        .iter()
        .filter(|n| n.serves(pool.job, restricted))
        .collect();
    if serving.is_empty() && nodes.iter().any(|n| n.alive) {
        // Nodes exist but none is this job's yet (a multi-node job between allocations, or a
        // driver on a cluster whose nodes all belong to pools): wait for one.
        return Placement::Wait;
    }
    Placement::Infeasible(infeasible_reason(nodes, need))
}

/// Says why no node can run a task: `needs gpu=1; no node has gpu`.
pub(crate) fn infeasible_reason(nodes: &[NodeState], need: &ResourceSet) -> String {
    let alive: Vec<&NodeState> = nodes.iter().filter(|n| n.alive).collect();
    if alive.is_empty() {
        return format!("needs {need}; no node is alive");
    }
    // Name the first resource that no single node has enough of.
    for (name, units) in need.iter_units() {
        let most = alive.iter().map(|n| n.total.units(name)).max().unwrap_or(0);
        if most < units {
            let lname = name.to_ascii_lowercase();
            let amount = units as f64 / RESOURCE_SCALE as f64;
            return if most == 0 {
                format!("needs {lname}={amount}; no node has {lname}")
            } else {
                format!(
                    "needs {lname}={amount}; the largest node has {lname}={}",
                    most as f64 / RESOURCE_SCALE as f64
                )
            };
        }
    }
    format!("needs {need}; no single node has all of it")
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::{JobId, NodeId};

    fn node(id: u64, total: ResourceSet) -> NodeState {
        NodeState {
            id: NodeId(id),
            gpus: crate::gpus::GpuSlots::new(total.units("GPU"), &[]),
            available: total.clone(),
            total,
            alive: true,
            idle: vec![(Pool::plain(JobId(0)), starling_proto::WorkerId(id))],
            workers: 1,
            requested_workers: Default::default(),
            usage: Default::default(),
        }
    }

    #[test]
    fn hybrid_packs_until_half_then_spreads() {
        let mut nodes = vec![
            node(1, ResourceSet::cpus(4.0)),
            node(2, ResourceSet::cpus(4.0)),
        ];
        let one = ResourceSet::cpus(1.0);
        let mut cur = 0;
        let mut picks = Vec::new();
        for _ in 0..6 {
            let Placement::Node(i) = place(
                &nodes,
                &one,
                SchedulingStrategy::Default,
                Pool::plain(JobId(0)),
                false,
                &mut cur,
            ) else {
                panic!("should place")
            };
            nodes[i].available.subtract(&one);
            picks.push(i);
        }
        // Two on node 1 (half), two on node 2 (half), then the least used each time.
        assert_eq!(&picks[..4], &[0, 0, 1, 1]);
        assert_eq!(
            nodes[0].available.cpu_units() + nodes[1].available.cpu_units(),
            2 * 10_000
        );
    }

    #[test]
    fn spread_rotates() {
        let nodes = vec![
            node(1, ResourceSet::cpus(4.0)),
            node(2, ResourceSet::cpus(4.0)),
        ];
        let mut cur = 0;
        let one = ResourceSet::cpus(1.0);
        let a = place(
            &nodes,
            &one,
            SchedulingStrategy::Spread,
            Pool::plain(JobId(0)),
            false,
            &mut cur,
        );
        let b = place(
            &nodes,
            &one,
            SchedulingStrategy::Spread,
            Pool::plain(JobId(0)),
            false,
            &mut cur,
        );
        assert_eq!((a, b), (Placement::Node(0), Placement::Node(1)));
    }

    #[test]
    fn infeasible_reasons_name_the_resource() {
        let nodes = vec![
            node(1, ResourceSet::cpus(4.0)),
            node(2, ResourceSet::cpus(2.0)),
        ];
        let gpu = ResourceSet::cpus(1.0).with("gpu", 1.0);
        assert_eq!(
            infeasible_reason(&nodes, &gpu),
            "needs gpu=1; no node has gpu"
        );
        let big = ResourceSet::cpus(8.0);
        assert_eq!(
            infeasible_reason(&nodes, &big),
            "needs cpu=8; the largest node has cpu=4"
        );
    }

    #[test]
    fn affinity_hard_waits_or_is_unschedulable_soft_falls_back() {
        let mut nodes = vec![
            node(1, ResourceSet::cpus(1.0)),
            node(2, ResourceSet::cpus(1.0)),
        ];
        nodes[1].available = ResourceSet::new();
        let one = ResourceSet::cpus(1.0);
        let mut cur = 0;
        let hard = SchedulingStrategy::NodeAffinity {
            node: NodeId(2),
            soft: false,
        };
        let soft = SchedulingStrategy::NodeAffinity {
            node: NodeId(2),
            soft: true,
        };
        assert_eq!(
            place(&nodes, &one, hard, Pool::plain(JobId(0)), false, &mut cur),
            Placement::Wait
        );
        assert_eq!(
            place(&nodes, &one, soft, Pool::plain(JobId(0)), false, &mut cur),
            Placement::Node(0)
        );
        let unknown = SchedulingStrategy::NodeAffinity {
            node: NodeId(9),
            soft: false,
        };
        assert!(matches!(
            place(
                &nodes,
                &one,
                unknown,
                Pool::plain(JobId(0)),
                false,
                &mut cur
            ),
            Placement::Unschedulable(_)
        ));
        nodes[1].alive = false;
        assert!(matches!(
            place(&nodes, &one, hard, Pool::plain(JobId(0)), false, &mut cur),
            Placement::Unschedulable(why) if why.contains("dead")
        ));
    }
}
