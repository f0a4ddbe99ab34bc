//! Reactor tests: drive the scheduler's handlers with plain events against a
//! [`RecordingTransport`] and check both what it asked of the outside world and the state it is
//! left in. No threads, no I/O, no timing: every test is a deterministic sequence of events.
//!
//! The last test replays pseudo-random workloads (a seeded xorshift, so failures reproduce) and
//! checks the scheduler's invariants after every event.

use std::collections::HashMap;
use std::sync::Arc;

use starling_proto::{
    EnvId, FailureKind, JobId, NodeId, ObjectId, RemoteError, ResourceSet, SchedulingStrategy,
    TaskArg, TaskFailure, TaskId, TaskSpec, WorkerId,
};
use starling_scheduler::reactor::{
    self, on_add_ref, on_cancel, on_cancel_tree, on_nested, on_node_added, on_objects_lost, on_put,
    on_release, on_submit, on_task_done, on_task_finished, on_worker_added, on_worker_blocked,
    on_worker_unblocked, schedule,
};
use starling_scheduler::testing::{task, RecordingTransport, Sent};
use starling_scheduler::{Core, ObjectState, TaskOutcome, TaskState, Transport};

const N1: NodeId = NodeId(1);
const N2: NodeId = NodeId(2);

/// A scheduler and the transport it talks to, with shorthands for the common events.
struct Cluster {
    core: Core,
    t: RecordingTransport,
}

impl Cluster {
    fn new() -> Self {
        Cluster {
            core: Core::new(),
            t: RecordingTransport::default(),
        }
    }

    /// Adds node `node` with `total` resources and one worker per number in `workers`.
    fn with_node(
        mut self,
        node: u64,
        total: ResourceSet,
        workers: impl IntoIterator<Item = u64>,
    ) -> Self {
        on_node_added(&mut self.core, NodeId(node), total);
        for w in workers {
            on_worker_added(&mut self.core, NodeId(node), WorkerId(w));
        }
        self
    }

    fn submit(&mut self, spec: TaskSpec) -> Vec<Sent> {
        on_submit(&mut self.core, &mut self.t, spec);
        self.t.take()
    }

    fn schedule(&mut self) -> Vec<Sent> {
        schedule(&mut self.core, &mut self.t);
        self.t.take()
    }

    /// Runs a scheduling pass and returns what it dispatched, as `(node, worker, task)`. Fails
    /// the test if the pass sent anything else.
    fn dispatch(&mut self) -> Vec<(NodeId, WorkerId, TaskId)> {
        self.schedule()
            .into_iter()
            .map(|s| match s {
                Sent::Dispatch(n, w, t) => (n, w, t),
                other => panic!("a scheduling pass sent {other:?}"),
            })
            .collect()
    }

    fn finish(&mut self, task: u64, outcome: TaskOutcome) -> Vec<Sent> {
        let worker = self.worker_of(task);
        on_task_finished(&mut self.core, &mut self.t, worker, outcome);
        self.t.take()
    }

    fn succeed(&mut self, task: u64) -> Vec<Sent> {
        self.finish(task, stored())
    }

    fn release(&mut self, object: u64) -> Vec<Sent> {
        on_release(&mut self.core, &mut self.t, ObjectId(object));
        self.t.take()
    }

    fn cancel(&mut self, task: u64, force: bool) -> (bool, Vec<Sent>) {
        let found = on_cancel(&mut self.core, &mut self.t, TaskId(task), force);
        (found, self.t.take())
    }

    /// A user's cancel: the task and what it submitted.
    fn cancel_tree(&mut self, task: u64, force: bool) -> (bool, Vec<Sent>) {
        let found = on_cancel_tree(&mut self.core, &mut self.t, TaskId(task), force);
        (found, self.t.take())
    }

    /// The worker running `task`; fails the test if it is not running.
    fn worker_of(&self, task: u64) -> WorkerId {
        match self.core.task_state(TaskId(task)) {
            Some(TaskState::Running { worker, .. }) => *worker,
            other => panic!("T{task} is not running: {other:?}"),
        }
    }

    fn state(&self, task: u64) -> Option<TaskState> {
        self.core.task_state(TaskId(task)).cloned()
    }

    fn available(&self, node: NodeId) -> ResourceSet {
        self.node(node).available
    }

    fn total(&self, node: NodeId) -> ResourceSet {
        self.node(node).total
    }

    fn node(&self, node: NodeId) -> starling_scheduler::NodeInfo {
        self.core
            .nodes()
            .into_iter()
            .find(|n| n.id == node)
            .expect("known node")
    }

    fn assert_all_free(&self) {
        for n in self.core.nodes() {
            assert_eq!(
                n.available, n.total,
                "node {} has not got everything back",
                n.id
            );
        }
    }
}

fn arg(object: u64) -> TaskArg {
    TaskArg::Object(ObjectId(object))
}

fn stored() -> TaskOutcome {
    TaskOutcome::Stored { size: 8 }
}

fn boom() -> RemoteError {
    RemoteError::new("panic", "boom")
}

fn with_resources(mut spec: TaskSpec, resources: ResourceSet) -> TaskSpec {
    spec.resources = resources;
    spec
}

fn with_strategy(mut spec: TaskSpec, strategy: SchedulingStrategy) -> TaskSpec {
    spec.extras.make_mut().strategy = strategy;
    spec
}

fn failure(task: u64, attempt: u32, kind: FailureKind) -> Arc<TaskFailure> {
    Arc::new(TaskFailure {
        task: TaskId(task),
        attempt,
        kind,
    })
}

fn tasks_of(dispatched: &[(NodeId, WorkerId, TaskId)]) -> Vec<u64> {
    dispatched.iter().map(|(_, _, t)| t.0).collect()
}

fn nodes_of(dispatched: &[(NodeId, WorkerId, TaskId)]) -> Vec<NodeId> {
    dispatched.iter().map(|(n, _, _)| *n).collect()
}

// ---------------------------------------------------------------------------------------------
// Dependency resolution
// ---------------------------------------------------------------------------------------------

#[test]
fn task_waits_for_every_argument_before_dispatch() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(4.0), 1..=4);
    assert!(c.submit(task(1, vec![])).is_empty());
    assert!(c.submit(task(2, vec![])).is_empty());
    assert!(c
        .submit(task(3, vec![arg(1), TaskArg::Inline(vec![7]), arg(2)]))
        .is_empty());

    assert_eq!(c.state(3), Some(TaskState::WaitingForDependencies(2)));
    assert_eq!(
        c.core.pending_reason(TaskId(3)).as_deref(),
        Some("waiting for 2 argument(s)")
    );
    assert_eq!(c.state(1), Some(TaskState::Queued));
    assert_eq!(
        c.core.pending_reason(TaskId(1)).as_deref(),
        Some("waiting for free resources or an idle worker")
    );
    assert_eq!(tasks_of(&c.dispatch()), [1, 2]);
    assert_eq!(
        c.core.pending_reason(TaskId(1)),
        None,
        "a running task has no pending reason"
    );

    assert_eq!(c.succeed(1), [Sent::ObjectReady(ObjectId(1), N1)]);
    assert_eq!(c.state(3), Some(TaskState::WaitingForDependencies(1)));
    assert_eq!(
        c.core.pending_reason(TaskId(3)).as_deref(),
        Some("waiting for 1 argument(s)")
    );
    assert!(c.dispatch().is_empty(), "T3 still misses O2");

    assert_eq!(c.succeed(2), [Sent::ObjectReady(ObjectId(2), N1)]);
    assert_eq!(c.state(3), Some(TaskState::Queued));
    assert_eq!(tasks_of(&c.dispatch()), [3]);

    // An argument that already has a value is not waited for.
    c.submit(task(4, vec![arg(1), arg(3)]));
    assert_eq!(c.state(4), Some(TaskState::WaitingForDependencies(1)));
    c.succeed(3);
    assert_eq!(tasks_of(&c.dispatch()), [4]);
    c.succeed(4);
    assert_eq!(c.core.live_tasks(), 0);
    assert_eq!(c.core.stats().succeeded, 4);
    c.assert_all_free();
}

#[test]
fn a_task_goes_to_the_idle_worker_that_last_read_its_first_argument() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), 1..=2);
    // Two shards, O1 and O2, then rounds of one task per shard, finishing in either order.
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![]));
    c.dispatch();
    c.succeed(1);
    c.succeed(2);
    let mut worker_of_shard: HashMap<u64, WorkerId> = HashMap::new();
    for round in 0..6u64 {
        let (a, b) = (10 + 2 * round, 11 + 2 * round);
        c.submit(task(a, vec![arg(1), arg(2)]));
        c.submit(task(b, vec![arg(2), TaskArg::Inline(vec![1])]));
        let d = c.dispatch();
        assert_eq!(tasks_of(&d), [a, b]);
        for (task, shard) in [(a, 1), (b, 2)] {
            let w = c.worker_of(task);
            let first = *worker_of_shard.entry(shard).or_insert(w);
            assert_eq!(
                w, first,
                "round {round}: shard O{shard} moved to another worker"
            );
        }
        // Alternate which one becomes idle last (the default pick).
        if round % 2 == 0 {
            c.succeed(a);
            c.succeed(b);
        } else {
            c.succeed(b);
            c.succeed(a);
        }
    }
    assert_ne!(worker_of_shard[&1], worker_of_shard[&2]);
}

#[test]
fn a_repeated_argument_is_waited_for_and_released_once_per_use() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), 1..=2);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![arg(1), arg(1)]));
    assert_eq!(c.state(2), Some(TaskState::WaitingForDependencies(2)));
    assert_eq!(c.core.object_refs(ObjectId(1)), Some((1, 2)));

    assert_eq!(tasks_of(&c.dispatch()), [1]);
    c.succeed(1);
    assert_eq!(c.state(2), Some(TaskState::Queued));
    assert_eq!(tasks_of(&c.dispatch()), [2]);

    // The driver drops its handle; T2 still holds two uses.
    assert!(c.release(1).is_empty());
    assert_eq!(c.core.object_refs(ObjectId(1)), Some((0, 2)));
    assert_eq!(
        c.succeed(2),
        [
            Sent::ObjectReady(ObjectId(2), N1),
            Sent::Free(ObjectId(1), Some(N1))
        ]
    );
    assert_eq!(c.core.object_state(ObjectId(1)), None);
}

#[test]
fn diamond_runs_the_join_after_both_branches() {
    // 1 -> {2, 3} -> 4
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(4.0), 1..=4);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![arg(1)]));
    c.submit(task(3, vec![arg(1)]));
    c.submit(task(4, vec![arg(2), arg(3)]));
    // The driver keeps only the result of the join.
    for o in 1..=3 {
        assert!(
            c.release(o).is_empty(),
            "O{o} is pending and used; it must not be freed"
        );
    }

    assert_eq!(tasks_of(&c.dispatch()), [1]);
    assert_eq!(c.succeed(1), [Sent::ObjectReady(ObjectId(1), N1)]);
    assert_eq!(tasks_of(&c.dispatch()), [2, 3]);
    assert_eq!(c.succeed(2), [Sent::ObjectReady(ObjectId(2), N1)]);
    assert_eq!(c.state(4), Some(TaskState::WaitingForDependencies(1)));
    assert!(c.dispatch().is_empty());
    // O1's last user finishes with T3.
    assert_eq!(
        c.succeed(3),
        [
            Sent::ObjectReady(ObjectId(3), N1),
            Sent::Free(ObjectId(1), Some(N1))
        ]
    );
    assert_eq!(tasks_of(&c.dispatch()), [4]);
    assert_eq!(
        c.succeed(4),
        [
            Sent::ObjectReady(ObjectId(4), N1),
            Sent::Free(ObjectId(2), Some(N1)),
            Sent::Free(ObjectId(3), Some(N1)),
        ]
    );
    assert_eq!(
        c.core.object_count(),
        1,
        "only the join's result, still held, is left"
    );
    assert_eq!(c.release(4), [Sent::Free(ObjectId(4), Some(N1))]);
    assert_eq!(c.core.object_count(), 0);
}

// ---------------------------------------------------------------------------------------------
// Resource accounting
// ---------------------------------------------------------------------------------------------

#[test]
fn dispatch_takes_resources_and_finish_returns_them() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(4.0), 1..=4);
    c.submit(with_resources(task(1, vec![]), ResourceSet::cpus(2.5)));
    c.submit(with_resources(task(2, vec![]), ResourceSet::cpus(1.0)));
    let d = c.dispatch();
    assert_eq!(tasks_of(&d), [1, 2]);
    assert_eq!(c.available(N1), ResourceSet::cpus(0.5));
    assert_eq!(
        c.core.worker_held(c.worker_of(1)),
        Some(&ResourceSet::cpus(2.5))
    );
    assert_eq!(
        c.core.worker_held(c.worker_of(2)),
        Some(&ResourceSet::cpus(1.0))
    );
    assert_eq!(c.core.running_tasks(), 2);

    let w1 = c.worker_of(1);
    c.succeed(1);
    assert_eq!(c.available(N1), ResourceSet::cpus(3.0));
    assert_eq!(c.core.worker_held(w1), Some(&ResourceSet::new()));
    c.succeed(2);
    c.assert_all_free();
    assert_eq!(c.core.running_tasks(), 0);
    assert_eq!(c.core.worker_held(WorkerId(99)), None);
}

#[test]
fn ten_tenth_cpu_tasks_share_one_cpu_exactly() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), 1..=10);
    for id in 1..=11 {
        c.submit(with_resources(task(id, vec![]), ResourceSet::cpus(0.1)));
    }
    let d = c.dispatch();
    assert_eq!(tasks_of(&d), (1..=10).collect::<Vec<_>>());
    assert_eq!(c.state(11), Some(TaskState::Queued));
    assert_eq!(c.core.queued_tasks(), 1);
    assert_eq!(
        c.available(N1).cpu_units(),
        0,
        "ten tenths use the whole CPU"
    );
    assert!(
        c.schedule().is_empty(),
        "nothing fits, and no worker is worth asking for"
    );

    c.succeed(4);
    assert_eq!(tasks_of(&c.dispatch()), [11]);
    for id in (1..=11).filter(|id| *id != 4) {
        c.succeed(id);
    }
    // Exact equality: a hundred additions and subtractions of 0.1 must not drift.
    assert_eq!(c.available(N1), c.total(N1));
    assert_eq!(c.core.stats().succeeded, 11);
}

#[test]
fn tasks_are_given_gpu_ids_whole_ones_distinct_fractions_sharing() {
    let total = ResourceSet::cpus(8.0).with("GPU", 2.0);
    let mut c = Cluster::new();
    reactor::on_node_added_with_gpus(&mut c.core, N1, total, &["3".into(), "5".into()]);
    for w in 1..=8 {
        on_worker_added(&mut c.core, N1, WorkerId(w));
    }
    let ids = |c: &Cluster, t: u64| -> Vec<String> {
        let got = c.t.gpu_ids.get(&TaskId(t)).cloned().unwrap_or_default();
        assert_eq!(got, c.core.worker_gpu_ids(c.worker_of(t)), "T{t}");
        got.iter().map(|s| s.to_string()).collect()
    };
    let one = ResourceSet::cpus(1.0).with("GPU", 1.0);
    let half = ResourceSet::cpus(1.0).with("GPU", 0.5);
    c.submit(with_resources(task(1, vec![]), one.clone()));
    c.submit(with_resources(task(2, vec![]), half.clone()));
    c.submit(with_resources(task(3, vec![]), half.clone()));
    c.submit(with_resources(task(4, vec![]), ResourceSet::cpus(1.0)));
    assert_eq!(tasks_of(&c.dispatch()), [1, 2, 3, 4]);
    assert_eq!(ids(&c, 1), ["3"]);
    assert_eq!(ids(&c, 2), ["5"], "a fraction takes the GPU left");
    assert_eq!(ids(&c, 3), ["5"], "fractions share one GPU");
    assert!(ids(&c, 4).is_empty(), "a CPU task holds no GPU");

    // Half of GPU 5 and GPU 3 free up: 1 GPU in all, but not one whole GPU.
    c.submit(with_resources(task(5, vec![]), one.clone()));
    c.succeed(1);
    c.succeed(2);
    assert_eq!(tasks_of(&c.dispatch()), [5], "GPU 3 is whole again");
    assert_eq!(ids(&c, 5), ["3"]);
    c.submit(with_resources(task(6, vec![]), one.clone()));
    assert!(c.dispatch().is_empty(), "half of GPU 5 is not a GPU");
    assert_eq!(c.available(N1).get("GPU"), 0.5);
    c.succeed(3);
    assert_eq!(tasks_of(&c.dispatch()), [6]);
    assert_eq!(ids(&c, 6), ["5"]);

    // A worker that dies gives its GPU back.
    let w6 = c.worker_of(6);
    reactor::on_worker_removed(&mut c.core, &mut c.t, w6, "killed");
    c.t.take();
    let two = ResourceSet::cpus(1.0).with("GPU", 2.0);
    c.submit(with_resources(task(7, vec![]), two));
    c.succeed(5);
    // T6 was retried on GPU 5 or 3; whichever, T7 waits for both.
    assert_eq!(tasks_of(&c.dispatch()), [6]);
    c.succeed(6);
    assert_eq!(tasks_of(&c.dispatch()), [7]);
    assert_eq!(ids(&c, 7), ["3", "5"]);
}

#[test]
fn gpus_and_custom_resources_are_accounted_like_cpus() {
    let total = ResourceSet::cpus(8.0).with("GPU", 2.0).with("tpu", 1.0);
    let mut c = Cluster::new().with_node(1, total.clone(), 1..=8);
    let gpu = ResourceSet::cpus(1.0).with("GPU", 1.0);
    let tpu = ResourceSet::cpus(1.0).with("tpu", 0.5);
    for id in 1..=3 {
        c.submit(with_resources(task(id, vec![]), gpu.clone()));
    }
    for id in 4..=6 {
        c.submit(with_resources(task(id, vec![]), tpu.clone()));
    }
    assert_eq!(tasks_of(&c.dispatch()), [1, 2, 4, 5]);
    assert_eq!(c.state(3), Some(TaskState::Queued), "both GPUs are taken");
    assert_eq!(
        c.state(6),
        Some(TaskState::Queued),
        "the TPU is fully taken"
    );
    let avail = c.available(N1);
    assert_eq!(
        (avail.get("CPU"), avail.get("GPU"), avail.get("tpu")),
        (4.0, 0.0, 0.0)
    );
    assert_eq!(c.core.worker_held(c.worker_of(1)), Some(&gpu));
    assert_eq!(c.core.worker_held(c.worker_of(4)), Some(&tpu));

    c.succeed(2);
    assert_eq!(tasks_of(&c.dispatch()), [3]);
    c.succeed(5);
    assert_eq!(tasks_of(&c.dispatch()), [6]);
    for id in [1, 3, 4, 6] {
        c.succeed(id);
    }
    assert_eq!(c.available(N1), total);
}

// ---------------------------------------------------------------------------------------------
// Placement
// ---------------------------------------------------------------------------------------------

#[test]
fn default_strategy_packs_to_half_then_spreads() {
    let mut c = Cluster::new()
        .with_node(1, ResourceSet::cpus(4.0), 11..=14)
        .with_node(2, ResourceSet::cpus(4.0), 21..=24);
    for id in 1..=6 {
        c.submit(task(id, vec![]));
    }
    let d = c.dispatch();
    assert_eq!(nodes_of(&d), [N1, N1, N2, N2, N1, N2]);
    for (node, worker, _) in &d {
        let expected = if worker.0 / 10 == 1 { N1 } else { N2 };
        assert_eq!(*node, expected, "{worker} is a worker of {expected}");
    }
    assert_eq!(c.available(N1), ResourceSet::cpus(1.0));
    assert_eq!(c.available(N2), ResourceSet::cpus(1.0));
}

#[test]
fn spread_strategy_alternates_nodes() {
    let mut c = Cluster::new()
        .with_node(1, ResourceSet::cpus(4.0), 11..=14)
        .with_node(2, ResourceSet::cpus(4.0), 21..=24);
    for id in 1..=4 {
        c.submit(with_strategy(task(id, vec![]), SchedulingStrategy::Spread));
    }
    assert_eq!(nodes_of(&c.dispatch()), [N1, N2, N1, N2]);
}

#[test]
fn hard_affinity_waits_for_its_node_and_soft_affinity_falls_back() {
    let mut c = Cluster::new()
        .with_node(1, ResourceSet::cpus(1.0), [11])
        .with_node(2, ResourceSet::cpus(1.0), [21]);
    let hard = SchedulingStrategy::NodeAffinity {
        node: N2,
        soft: false,
    };
    let soft = SchedulingStrategy::NodeAffinity {
        node: N2,
        soft: true,
    };
    c.submit(with_strategy(task(1, vec![]), hard));
    c.submit(with_strategy(task(2, vec![]), hard));
    c.submit(with_strategy(task(3, vec![]), soft));

    let d = c.dispatch();
    assert_eq!(
        d,
        [(N2, WorkerId(21), TaskId(1)), (N1, WorkerId(11), TaskId(3))]
    );
    assert_eq!(
        c.state(2),
        Some(TaskState::Queued),
        "hard affinity must not use N1"
    );

    c.succeed(3);
    assert!(c.dispatch().is_empty(), "N1 is free but T2 is pinned to N2");
    c.succeed(1);
    assert_eq!(c.dispatch(), [(N2, WorkerId(21), TaskId(2))]);

    let unknown = SchedulingStrategy::NodeAffinity {
        node: NodeId(9),
        soft: false,
    };
    // Hard affinity to a node that is unknown, or that can never hold the task, fails the task
    // (Ray's TaskUnschedulableError) instead of leaving it pending forever.
    c.submit(with_strategy(task(4, vec![]), unknown));
    let unschedulable =
        |t: u64, why: &str| failure(t, 0, FailureKind::Unschedulable(why.to_string()));
    assert_eq!(
        c.schedule(),
        [Sent::ObjectFailed(
            ObjectId(4),
            unschedulable(4, "needs node N9, which is unknown")
        )]
    );
    assert_eq!(c.state(4), None);
    c.submit(with_strategy(
        with_resources(task(6, vec![]), ResourceSet::cpus(2.0)),
        hard,
    ));
    assert_eq!(
        c.schedule(),
        [Sent::ObjectFailed(
            ObjectId(6),
            unschedulable(6, "needs cpu=2 on node N2, which has cpu=1 in all")
        )]
    );

    // A soft affinity to an unknown node runs anywhere.
    let soft_unknown = SchedulingStrategy::NodeAffinity {
        node: NodeId(9),
        soft: true,
    };
    c.submit(with_strategy(task(5, vec![]), soft_unknown));
    assert_eq!(c.dispatch(), [(N1, WorkerId(11), TaskId(5))]);
}

// ---------------------------------------------------------------------------------------------
// Infeasible tasks
// ---------------------------------------------------------------------------------------------

#[test]
fn gpu_task_is_infeasible_until_a_gpu_node_joins() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(4.0), 1..=4);
    c.submit(with_resources(
        task(1, vec![]),
        ResourceSet::cpus(1.0).with("GPU", 1.0),
    ));
    c.submit(task(2, vec![]));

    // The infeasible task does not hold up the CPU task behind it.
    assert_eq!(tasks_of(&c.dispatch()), [2]);
    assert_eq!(
        c.state(1),
        Some(TaskState::Infeasible("needs gpu=1; no node has gpu".into()))
    );
    assert_eq!(
        c.t.infeasible,
        [(TaskId(1), "needs gpu=1; no node has gpu".to_string())],
        "the transport hears of it, to tell its submitter"
    );
    assert_eq!(
        c.core.infeasible_tasks(5),
        (
            vec![(TaskId(1), "needs gpu=1; no node has gpu".to_string())],
            1
        )
    );
    let reason = c.core.pending_reason(TaskId(1)).expect("pending");
    assert!(reason.starts_with("infeasible:"), "{reason}");
    assert_eq!(reason, "infeasible: needs gpu=1; no node has gpu");
    assert!(c.dispatch().is_empty(), "scheduling again changes nothing");

    on_node_added(&mut c.core, N2, ResourceSet::cpus(4.0).with("GPU", 1.0));
    on_worker_added(&mut c.core, N2, WorkerId(21));
    assert_eq!(c.dispatch(), [(N2, WorkerId(21), TaskId(1))]);
    assert_eq!(c.available(N2), ResourceSet::cpus(3.0));
    c.succeed(1);
    c.succeed(2);
    c.assert_all_free();
}

#[test]
fn task_larger_than_any_node_names_the_largest() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(4.0), 1..=4);
    c.submit(with_resources(task(1, vec![]), ResourceSet::cpus(8.0)));
    assert!(c.dispatch().is_empty());
    assert_eq!(
        c.core.pending_reason(TaskId(1)).as_deref(),
        Some("infeasible: needs cpu=8; the largest node has cpu=4")
    );
}

// ---------------------------------------------------------------------------------------------
// Failures and retries
// ---------------------------------------------------------------------------------------------

#[test]
fn application_failure_fails_the_chain_downstream() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(4.0), 1..=4);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![arg(1)]));
    c.submit(task(3, vec![arg(2), TaskArg::Inline(vec![1])]));
    c.submit(task(5, vec![]));
    assert_eq!(tasks_of(&c.dispatch()), [1, 5]);

    let f1 = failure(1, 0, FailureKind::Application(boom()));
    let f2 = failure(2, 0, FailureKind::Upstream(f1.clone()));
    let f3 = failure(3, 0, FailureKind::Upstream(f2.clone()));
    assert_eq!(
        c.finish(1, TaskOutcome::Failed(boom())),
        [
            Sent::ObjectFailed(ObjectId(1), f1.clone()),
            Sent::ObjectFailed(ObjectId(2), f2.clone()),
            Sent::ObjectFailed(ObjectId(3), f3.clone()),
        ]
    );
    assert_eq!(f3.root(), &*f1);
    assert_eq!(f2.root(), &*f1);
    for t in 1..=3 {
        assert_eq!(c.state(t), None, "T{t} is settled");
    }
    assert_eq!(
        c.core.object_state(ObjectId(3)),
        Some(&ObjectState::Failed(f3))
    );
    assert_eq!(c.core.stats().failed, 3);
    assert_eq!(
        c.state(5),
        Some(TaskState::Running {
            node: N1,
            worker: c.worker_of(5)
        })
    );
    assert!(c.dispatch().is_empty(), "the failed chain must never run");

    // Submitting onto a failed object fails at once, with the same root.
    let f6 = failure(6, 0, FailureKind::Upstream(f1.clone()));
    assert_eq!(
        c.submit(task(6, vec![arg(1)])),
        [Sent::ObjectFailed(ObjectId(6), f6.clone())]
    );
    assert_eq!(f6.root(), &*f1);
    assert_eq!(c.state(6), None);
    c.succeed(5);
    c.assert_all_free();
}

/// A transport that also records which attempt of each task it was asked to run.
#[derive(Default)]
struct AttemptLog {
    rec: RecordingTransport,
    runs: Vec<(TaskId, u32)>,
}

impl Transport for AttemptLog {
    fn dispatch(
        &mut self,
        node: NodeId,
        worker: WorkerId,
        task: &Arc<TaskSpec>,
        gpu_ids: &[Arc<str>],
    ) {
        self.runs.push((task.id, task.attempt));
        self.rec.dispatch(node, worker, task, gpu_ids);
    }
    fn object_failed(&mut self, object: ObjectId, failure: &Arc<TaskFailure>) {
        self.rec.object_failed(object, failure);
    }
    fn object_ready(&mut self, object: ObjectId, node: NodeId) {
        self.rec.object_ready(object, node);
    }
    fn free_object(&mut self, object: ObjectId, node: Option<NodeId>) {
        self.rec.free_object(object, node);
    }
    fn request_worker(&mut self, node: NodeId, job: JobId, env: &starling_proto::TaskEnv) {
        self.rec.request_worker(node, job, env);
    }
    fn cancel_running(&mut self, worker: WorkerId, task: TaskId, force: bool) {
        self.rec.cancel_running(worker, task, force);
    }
    fn kill_worker(&mut self, worker: WorkerId) {
        self.rec.kill_worker(worker);
    }
}

/// Runs a task that fails every time and returns the attempts dispatched and everything else
/// sent.
fn run_always_failing(retry_exceptions: bool, max_retries: u32) -> (Core, AttemptLog) {
    let mut spec = task(1, vec![]);
    spec.extras.make_mut().retry_exceptions = retry_exceptions;
    spec.max_retries = max_retries;
    run_failing(spec, boom())
}

/// Runs `spec` on a one-worker node, failing every run with `error`, until it is no longer
/// retried.
fn run_failing(spec: TaskSpec, error: RemoteError) -> (Core, AttemptLog) {
    let mut core = Core::new();
    let mut t = AttemptLog::default();
    on_node_added(&mut core, N1, ResourceSet::cpus(1.0));
    on_worker_added(&mut core, N1, WorkerId(1));
    on_submit(&mut core, &mut t, spec);
    for _ in 0..10 {
        schedule(&mut core, &mut t);
        if core.running_tasks() == 0 {
            break;
        }
        let failed = TaskOutcome::Failed(error.clone());
        on_task_finished(&mut core, &mut t, WorkerId(1), failed);
    }
    (core, t)
}

#[test]
fn retry_exceptions_reruns_with_the_next_attempt_up_to_max_retries() {
    let (core, t) = run_always_failing(true, 2);
    assert_eq!(t.runs, [(TaskId(1), 0), (TaskId(1), 1), (TaskId(1), 2)]);
    let failed: Vec<_> = t
        .rec
        .sent
        .iter()
        .filter(|s| matches!(s, Sent::ObjectFailed(..)))
        .collect();
    let last = failure(1, 2, FailureKind::Application(boom()));
    assert_eq!(
        failed,
        [&Sent::ObjectFailed(ObjectId(1), last)],
        "fails once, after the last run"
    );
    assert_eq!(core.stats().retried, 2);
    assert_eq!(core.stats().failed, 1);
    assert_eq!(core.live_tasks(), 0);
    assert_eq!(core.nodes()[0].available, core.nodes()[0].total);
}

#[test]
fn application_errors_are_not_retried_without_retry_exceptions() {
    let (core, t) = run_always_failing(false, 3);
    assert_eq!(t.runs, [(TaskId(1), 0)]);
    let first = failure(1, 0, FailureKind::Application(boom()));
    assert!(t.rec.sent.contains(&Sent::ObjectFailed(ObjectId(1), first)));
    assert_eq!(core.stats().retried, 0);
    assert_eq!(core.live_tasks(), 0);
}

/// `retry_on` filters by the error's type: a listed type runs again, any other fails at once.
#[test]
fn retry_on_retries_only_the_listed_error_types() {
    for (listed, runs) in [("test::Boom", 3), ("other::Error", 1)] {
        let mut spec = task(1, vec![]);
        spec.extras.make_mut().retry_exceptions = true;
        spec.extras.make_mut().retry_on = vec![Arc::from("panic"), Arc::from(listed)];
        spec.max_retries = 2;
        let (core, t) = run_failing(spec, RemoteError::new("test::Boom", "boom"));
        assert_eq!(t.runs.len(), runs, "retry_on [panic, {listed}]");
        assert_eq!(core.live_tasks(), 0);
    }
}

#[test]
fn retried_task_keeps_its_dependents_waiting() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), 1..=2);
    let mut spec = task(1, vec![]);
    spec.extras.make_mut().retry_exceptions = true;
    spec.max_retries = 1;
    c.submit(spec);
    c.submit(task(2, vec![arg(1)]));
    assert_eq!(tasks_of(&c.dispatch()), [1]);
    assert!(
        c.finish(1, TaskOutcome::Failed(boom())).is_empty(),
        "a retry settles nothing"
    );
    assert_eq!(c.state(1), Some(TaskState::Queued));
    assert_eq!(c.state(2), Some(TaskState::WaitingForDependencies(1)));
    assert_eq!(
        c.core.object_state(ObjectId(1)),
        Some(&ObjectState::Pending)
    );
    assert_eq!(tasks_of(&c.dispatch()), [1]);
    c.succeed(1);
    assert_eq!(tasks_of(&c.dispatch()), [2]);
}

#[test]
fn unknown_argument_fails_with_object_lost_and_leaves_no_counts() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    let lost = failure(5, 0, FailureKind::ObjectLost(ObjectId(99)));
    assert_eq!(
        c.submit(task(5, vec![arg(1), arg(99)])),
        [Sent::ObjectFailed(ObjectId(5), lost.clone())]
    );
    assert_eq!(c.state(5), None);
    assert_eq!(
        c.core.object_state(ObjectId(5)),
        Some(&ObjectState::Failed(lost))
    );
    assert_eq!(
        c.core.object_refs(ObjectId(1)),
        Some((1, 0)),
        "O1 gained no task ref"
    );
    assert_eq!(c.core.stats().failed, 1);
    assert_eq!(c.release(5), [Sent::Free(ObjectId(5), None)]);
}

#[test]
fn missing_function_and_bad_argument_fail_with_their_kind() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), 1..=2);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![]));
    c.dispatch();
    let not_found = failure(
        1,
        0,
        FailureKind::FunctionNotFound {
            name: "test::f#0".into(),
            build: "b1".into(),
        },
    );
    assert_eq!(
        c.finish(1, TaskOutcome::FunctionNotFound { build: "b1".into() }),
        [Sent::ObjectFailed(ObjectId(1), not_found)]
    );
    let bad = RemoteError::new("bincode::Error", "unexpected end");
    assert_eq!(
        c.finish(2, TaskOutcome::BadArgument(bad.clone())),
        [Sent::ObjectFailed(
            ObjectId(2),
            failure(2, 0, FailureKind::BadArgument(bad))
        )]
    );
    c.assert_all_free();
}

// ---------------------------------------------------------------------------------------------
// Reference counting
// ---------------------------------------------------------------------------------------------

#[test]
fn object_is_kept_while_a_pending_task_uses_it() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![arg(1)]));
    c.dispatch();
    c.succeed(1);
    assert!(c.release(1).is_empty(), "T2 has not run yet");
    assert_eq!(c.core.object_refs(ObjectId(1)), Some((0, 1)));
    assert_eq!(
        c.core.object_state(ObjectId(1)),
        Some(&ObjectState::Ready { node: N1, size: 8 })
    );

    assert_eq!(tasks_of(&c.dispatch()), [2]);
    assert!(
        c.core.object_state(ObjectId(1)).is_some(),
        "T2 is running on it"
    );
    assert_eq!(
        c.succeed(2),
        [
            Sent::ObjectReady(ObjectId(2), N1),
            Sent::Free(ObjectId(1), Some(N1))
        ]
    );
    assert_eq!(c.release(2), [Sent::Free(ObjectId(2), Some(N1))]);
    assert!(
        c.release(2).is_empty(),
        "a second release of a freed object is a no-op"
    );
    assert_eq!(c.core.object_count(), 0);
    assert_eq!(c.core.stats().objects_freed, 2);
}

#[test]
fn add_ref_keeps_a_put_object_for_one_more_release() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    on_put(&mut c.core, ObjectId(100), N1, 64);
    assert_eq!(
        c.core.object_state(ObjectId(100)),
        Some(&ObjectState::Ready { node: N1, size: 64 })
    );
    assert!(on_add_ref(&mut c.core, &mut c.t, ObjectId(100)));
    assert_eq!(c.core.object_refs(ObjectId(100)), Some((2, 0)));
    assert!(c.release(100).is_empty());
    assert_eq!(c.release(100), [Sent::Free(ObjectId(100), Some(N1))]);
    assert!(
        !on_add_ref(&mut c.core, &mut c.t, ObjectId(100)),
        "a freed object cannot be revived"
    );
    assert_eq!(c.core.object_count(), 0);
}

#[test]
fn put_object_as_argument_is_ready_at_once_and_freed_after_its_user() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    on_put(&mut c.core, ObjectId(100), N1, 64);
    c.submit(task(1, vec![arg(100)]));
    assert_eq!(c.state(1), Some(TaskState::Queued));
    assert!(c.release(100).is_empty());
    assert_eq!(tasks_of(&c.dispatch()), [1]);
    assert_eq!(
        c.succeed(1),
        [
            Sent::ObjectReady(ObjectId(1), N1),
            Sent::Free(ObjectId(100), Some(N1))
        ]
    );
}

#[test]
fn results_released_before_they_exist_are_freed_when_settled() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), 1..=2);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![]));
    c.dispatch();
    assert!(c.release(1).is_empty(), "a pending object is not freed");
    assert!(c.release(2).is_empty());
    assert_eq!(
        c.core.object_state(ObjectId(1)),
        Some(&ObjectState::Pending)
    );
    assert_eq!(
        c.succeed(1),
        [
            Sent::ObjectReady(ObjectId(1), N1),
            Sent::Free(ObjectId(1), Some(N1))
        ]
    );
    let f = failure(2, 0, FailureKind::Application(boom()));
    assert_eq!(
        c.finish(2, TaskOutcome::Failed(boom())),
        [
            Sent::ObjectFailed(ObjectId(2), f),
            Sent::Free(ObjectId(2), None)
        ]
    );
    assert_eq!(c.core.object_count(), 0);
}

// ---------------------------------------------------------------------------------------------
// Refs nested in values
// ---------------------------------------------------------------------------------------------

fn nested(core: &mut Core, container: u64, refs: &[u64]) -> bool {
    on_nested(
        core,
        ObjectId(container),
        refs.iter().map(|r| ObjectId(*r)).collect(),
    )
}

#[test]
fn an_object_referenced_only_from_another_lives_until_that_one_is_freed() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    on_put(&mut c.core, ObjectId(100), N1, 8);
    on_put(&mut c.core, ObjectId(101), N1, 8);
    // 101's value holds a ref to 100 (twice: counted once) and to an id that is gone.
    assert!(nested(&mut c.core, 101, &[100, 100, 555]));
    assert_eq!(c.core.object_nested_in(ObjectId(100)), Some(1));
    assert!(c.release(100).is_empty(), "101's value still refers to 100");
    assert_eq!(
        c.release(101),
        [
            Sent::Free(ObjectId(101), Some(N1)),
            Sent::Free(ObjectId(100), Some(N1))
        ]
    );
    assert_eq!(c.core.object_count(), 0);
}

#[test]
fn nested_refs_are_given_once_and_only_to_a_stored_value() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    on_put(&mut c.core, ObjectId(100), N1, 8);
    c.submit(task(1, vec![]));
    assert!(!nested(&mut c.core, 1, &[100]), "1 is still pending");
    assert!(!nested(&mut c.core, 7, &[100]), "7 does not exist");
    on_put(&mut c.core, ObjectId(101), N1, 8);
    assert!(nested(&mut c.core, 101, &[100]));
    assert!(
        !nested(&mut c.core, 101, &[100]),
        "a value's refs are told once"
    );
    assert_eq!(c.core.object_nested_in(ObjectId(100)), Some(1));
}

#[test]
fn a_ref_nested_in_an_argument_is_kept_but_not_waited_for() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), 1..=2);
    c.submit(task(1, vec![]));
    assert_eq!(tasks_of(&c.dispatch()), [1]);
    let mut t2 = task(2, vec![]);
    t2.extras.make_mut().contained = vec![ObjectId(1)];
    c.submit(t2);
    assert_eq!(
        c.state(2),
        Some(TaskState::Queued),
        "T2 does not wait for 1, which is pending"
    );
    assert_eq!(tasks_of(&c.dispatch()), [2]);
    assert!(c.release(1).is_empty(), "T2 still refers to 1");
    c.succeed(1);
    assert!(c.object(1).is_some(), "1 is kept for T2");
    assert!(c.succeed(2).contains(&Sent::Free(ObjectId(1), Some(N1))));
}

#[test]
fn a_nested_ref_to_an_object_not_there_at_submit_holds_nothing_later() {
    for lineage in [false, true] {
        let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
        if lineage {
            c = c.with_lineage();
        }
        // T1 carries refs to 100 (not made yet) and to itself; then 100 is put.
        let mut t1 = task(1, vec![]);
        t1.extras.make_mut().contained = vec![ObjectId(100), ObjectId(1)];
        c.submit(t1);
        on_put(&mut c.core, ObjectId(100), N1, 8);
        c.dispatch();
        c.succeed(1);
        assert!(c.object(100).is_some(), "100 is untouched by T1's end");
        assert_eq!(c.release(1), [Sent::Free(ObjectId(1), Some(N1))]);
        assert_eq!(
            c.release(100),
            [Sent::Free(ObjectId(100), Some(N1))],
            "100 goes with its own handle, once"
        );
        assert_eq!(c.core.object_count(), 0, "lineage {lineage}");
    }
}

#[test]
fn a_result_holding_refs_made_by_its_task_keeps_them_until_it_goes() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    c.dispatch();
    // The task puts 100 and returns a value holding a ref to it; its worker reports the
    // result, then the refs it holds, then drops its own ref.
    on_put(&mut c.core, ObjectId(100), N1, 8);
    c.succeed(1);
    assert!(nested(&mut c.core, 1, &[100]));
    assert!(c.release(100).is_empty());
    // The caller reads the result, deserializes the ref (one more group), drops the result.
    assert!(on_add_ref(&mut c.core, &mut c.t, ObjectId(100)));
    assert_eq!(c.release(1), [Sent::Free(ObjectId(1), Some(N1))]);
    assert_eq!(c.release(100), [Sent::Free(ObjectId(100), Some(N1))]);
    assert_eq!(c.core.object_count(), 0);
}

#[test]
fn a_released_or_lost_value_lets_go_of_its_nested_refs() {
    let mut c = Cluster::new()
        .with_lineage()
        .with_node(1, ResourceSet::cpus(1.0), [1]);
    // T2 takes 1 as an argument: 1's entry stays as T2's lineage once released.
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![arg(1)]));
    c.dispatch();
    c.succeed(1);
    on_put(&mut c.core, ObjectId(100), N1, 8);
    assert!(nested(&mut c.core, 1, &[100]));
    assert!(c.release(100).is_empty());
    c.dispatch();
    c.succeed(2);
    let sent = c.release(1);
    assert_eq!(c.object(1), Some(ObjectState::Released));
    assert!(
        sent.contains(&Sent::Free(ObjectId(100), Some(N1))),
        "1's value went, and with it its ref to 100: {sent:?}"
    );
    // A value lost with its node lets go of its refs too.
    on_put(&mut c.core, ObjectId(101), N1, 8);
    assert!(nested(&mut c.core, 2, &[101]));
    c.release(101);
    assert!(c.object(101).is_some());
    let sent = c.lose(&[2]);
    assert!(
        sent.contains(&Sent::Free(ObjectId(101), Some(N1))),
        "{sent:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Several returns
// ---------------------------------------------------------------------------------------------

fn returning(id: u64, n: u32, args: Vec<TaskArg>) -> TaskSpec {
    let mut spec = task(id, args);
    spec.extras.make_mut().returns = n;
    spec
}

#[test]
fn each_return_is_an_object_of_its_own() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), 1..=2);
    c.submit(returning(10, 3, vec![]));
    assert_eq!(c.core.object_count(), 3);
    assert_eq!(c.core.task_of(ObjectId(12)), TaskId(10));
    assert_eq!(c.core.task_of(ObjectId(10)), TaskId(10));
    // A task waits for a later return like for any object.
    c.submit(task(20, vec![arg(11)]));
    assert_eq!(tasks_of(&c.dispatch()), [10]);
    let sent = c.finish(10, TaskOutcome::Returns(vec![1, 2, 3]));
    for o in 10..=12 {
        assert!(
            sent.contains(&Sent::ObjectReady(ObjectId(o), N1)),
            "{sent:?}"
        );
    }
    assert_eq!(c.object(11), Some(ObjectState::Ready { node: N1, size: 2 }));
    assert_eq!(tasks_of(&c.dispatch()), [20]);
    // Freed one by one.
    assert_eq!(c.release(12), [Sent::Free(ObjectId(12), Some(N1))]);
    assert_eq!(c.core.object_count(), 3, "10, 11 and 20's result");
    c.release(10);
    c.succeed(20);
    assert!(c.release(11).contains(&Sent::Free(ObjectId(11), Some(N1))));
}

#[test]
fn a_failure_or_a_cancel_reaches_every_return() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(returning(10, 2, vec![]));
    c.dispatch();
    let sent = c.finish(10, TaskOutcome::Failed(boom()));
    let f = failure(10, 0, FailureKind::Application(boom()));
    assert!(sent.contains(&Sent::ObjectFailed(ObjectId(10), f.clone())));
    assert!(sent.contains(&Sent::ObjectFailed(ObjectId(11), f)));

    // Cancelled through its later return's id: both settle as cancelled.
    c.submit(returning(20, 2, vec![]));
    let task = c.core.task_of(ObjectId(21));
    let (found, sent) = c.cancel_tree(task.0, false);
    assert!(found);
    let cancelled = failure(20, 0, FailureKind::Cancelled);
    assert!(sent.contains(&Sent::ObjectFailed(ObjectId(20), cancelled.clone())));
    assert!(sent.contains(&Sent::ObjectFailed(ObjectId(21), cancelled)));
}

#[test]
fn a_wrong_number_of_values_fails_the_task() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(returning(10, 3, vec![]));
    c.dispatch();
    c.finish(10, TaskOutcome::Returns(vec![1, 2]));
    match c.object(12) {
        Some(ObjectState::Failed(f)) => match &f.kind {
            FailureKind::Application(e) => assert_eq!(e.type_name, "starling::WrongReturnCount"),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    c.assert_all_free();
}

#[test]
fn a_lost_return_is_made_again_by_one_run_of_its_task() {
    let mut c = Cluster::new()
        .with_lineage()
        .with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(returning(10, 2, vec![]));
    c.dispatch();
    c.finish(10, TaskOutcome::Returns(vec![5, 6]));
    // Both lost: one run makes both again.
    assert!(c.lose(&[10, 11]).is_empty());
    assert_eq!(c.core.stats().reconstructed, 1);
    assert_eq!(tasks_of(&c.dispatch()), [10]);
    let sent = c.finish(10, TaskOutcome::Returns(vec![5, 6]));
    assert!(sent.contains(&Sent::ObjectReady(ObjectId(10), N1)));
    assert!(sent.contains(&Sent::ObjectReady(ObjectId(11), N1)));
    c.release(10);
    c.release(11);
    assert_eq!(c.core.object_count(), 0);
}

// ---------------------------------------------------------------------------------------------
// Cancellation
// ---------------------------------------------------------------------------------------------

#[test]
fn cancelling_a_queued_task_fails_it_and_its_dependents_without_running() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![]));
    c.submit(task(3, vec![arg(2)]));
    assert_eq!(tasks_of(&c.dispatch()), [1]);
    assert_eq!(c.state(2), Some(TaskState::Queued));

    let fc = failure(2, 0, FailureKind::Cancelled);
    let f3 = failure(3, 0, FailureKind::Upstream(fc.clone()));
    let (found, sent) = c.cancel(2, false);
    assert!(found);
    assert_eq!(
        sent,
        [
            Sent::ObjectFailed(ObjectId(2), fc.clone()),
            Sent::ObjectFailed(ObjectId(3), f3.clone())
        ]
    );
    assert_eq!(f3.root(), &*fc);
    assert_eq!((c.state(2), c.state(3)), (None, None));

    c.succeed(1);
    assert!(
        c.dispatch().is_empty(),
        "a cancelled task must never be dispatched"
    );
    assert_eq!(c.core.queued_tasks(), 0);
    assert_eq!(c.core.live_tasks(), 0);
    assert_eq!(c.core.stats().failed, 2);
    assert_eq!(c.cancel(2, false), (false, vec![]));
    c.assert_all_free();
}

#[test]
fn cancelling_a_waiting_task_releases_its_arguments() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![arg(1)]));
    assert!(c.release(1).is_empty());
    assert_eq!(c.core.object_refs(ObjectId(1)), Some((0, 1)));
    let (found, sent) = c.cancel(2, false);
    assert!(found);
    assert_eq!(
        sent,
        [Sent::ObjectFailed(
            ObjectId(2),
            failure(2, 0, FailureKind::Cancelled)
        )]
    );
    assert_eq!(c.core.object_refs(ObjectId(1)), Some((0, 0)));
    c.dispatch();
    assert_eq!(
        c.succeed(1),
        [
            Sent::ObjectReady(ObjectId(1), N1),
            Sent::Free(ObjectId(1), Some(N1))
        ],
        "nobody refers to O1 once T1 is done"
    );
}

#[test]
fn cancelling_a_running_task_ignores_its_late_result() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![arg(1)]));
    assert_eq!(tasks_of(&c.dispatch()), [1]);
    let w = c.worker_of(1);

    let fc = failure(1, 0, FailureKind::Cancelled);
    let (found, sent) = c.cancel(1, false);
    assert!(found);
    assert_eq!(
        sent,
        [
            Sent::CancelRunning(w, TaskId(1), false),
            Sent::ObjectFailed(ObjectId(1), fc.clone()),
            Sent::ObjectFailed(
                ObjectId(2),
                failure(2, 0, FailureKind::Upstream(fc.clone()))
            ),
        ]
    );
    assert_eq!(c.state(1), None);
    // The worker is still busy until it reports back.
    assert_eq!(c.available(N1).cpu_units(), 0);
    c.submit(task(3, vec![]));
    assert!(
        c.dispatch().is_empty(),
        "the cancelled task's worker is not idle yet"
    );

    on_task_finished(&mut c.core, &mut c.t, w, stored());
    assert!(c.t.take().is_empty(), "the late result must be dropped");
    assert_eq!(
        c.core.object_state(ObjectId(1)),
        Some(&ObjectState::Failed(fc))
    );
    assert_eq!(c.core.stats().succeeded, 0);
    c.assert_all_free();
    assert_eq!(c.core.worker_held(w), Some(&ResourceSet::new()));
    assert_eq!(c.dispatch(), [(N1, w, TaskId(3))]);

    // A second report from the same worker for the same run is also ignored.
    c.succeed(3);
    on_task_finished(&mut c.core, &mut c.t, w, stored());
    assert!(c.t.take().is_empty());
    c.assert_all_free();
}

#[test]
fn force_cancel_lets_the_worker_go_at_once_and_never_retries() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    c.dispatch();
    let w = c.worker_of(1);
    let (found, sent) = c.cancel(1, true);
    assert!(found);
    assert_eq!(
        sent,
        [
            Sent::CancelRunning(w, TaskId(1), true),
            Sent::ObjectFailed(ObjectId(1), failure(1, 0, FailureKind::Cancelled)),
        ],
        "the task is cancelled, not retried, although it had retries left"
    );
    // Its CPU is free now, whatever the worker does: the worker is gone for the scheduler.
    c.assert_all_free();
    assert_eq!(c.core.worker_held(w), None);
    c.submit(task(2, vec![]));
    assert_eq!(
        c.schedule(),
        [Sent::RequestWorker(N1, JobId(0), EnvId::NONE)],
        "the freed CPU asks for a fresh worker, never the killed one"
    );
    on_worker_added(&mut c.core, N1, WorkerId(2));
    assert_eq!(c.dispatch(), [(N1, WorkerId(2), TaskId(2))]);
    // The killed worker's late report changes nothing.
    on_task_finished(&mut c.core, &mut c.t, w, stored());
    assert!(c.t.take().is_empty());
    assert_eq!(c.core.stats().retried, 0);
}

#[test]
fn cancel_reaches_what_the_task_submitted_recursively() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), [1, 2]);
    let child = |id: u64, parent: u64| TaskSpec {
        parent: Some(TaskId(parent)),
        ..task(id, vec![])
    };
    c.submit(task(1, vec![]));
    assert_eq!(tasks_of(&c.dispatch()), [1]);
    // T1 submits T2 (it runs) and T3 (queued: no CPU left); T2 submits T4; T5 is another
    // root's and T6 names a parent that already ended.
    c.submit(child(2, 1));
    assert_eq!(tasks_of(&c.dispatch()), [2]);
    c.submit(child(3, 1));
    c.submit(child(4, 2));
    c.submit(task(5, vec![]));
    c.submit(child(6, 99));
    assert!(c.dispatch().is_empty());
    let (w1, w2) = (c.worker_of(1), c.worker_of(2));

    let (found, sent) = c.cancel_tree(1, false);
    assert!(found);
    let cancelled = |t: u64| Sent::ObjectFailed(ObjectId(t), failure(t, 0, FailureKind::Cancelled));
    assert_eq!(
        sent,
        [
            Sent::CancelRunning(w1, TaskId(1), false),
            cancelled(1),
            Sent::CancelRunning(w2, TaskId(2), false),
            cancelled(2),
            cancelled(3),
            cancelled(4),
        ]
    );
    for t in [5, 6] {
        assert_eq!(c.state(t), Some(TaskState::Queued), "T{t} is not T1's");
    }
    assert!(c.core.stats().peak_live >= 6);
    // A cancelled parent's children list is gone with it.
    assert_eq!(c.cancel_tree(1, false), (false, vec![]));
}

#[test]
fn cancelling_without_force_asks_the_worker_to_stop() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    c.dispatch();
    let (found, sent) = c.cancel(1, false);
    assert!(found);
    assert_eq!(sent[0], Sent::CancelRunning(WorkerId(1), TaskId(1), false));
}

#[test]
fn cancelling_a_finished_or_unknown_task_returns_false() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    c.dispatch();
    c.succeed(1);
    assert_eq!(c.cancel(1, false), (false, vec![]));
    assert_eq!(c.cancel(42, true), (false, vec![]));
    assert_eq!(
        c.core.object_state(ObjectId(1)),
        Some(&ObjectState::Ready { node: N1, size: 8 })
    );
}

#[test]
fn cancelled_infeasible_task_does_not_run_when_a_node_joins() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(with_resources(
        task(1, vec![]),
        ResourceSet::cpus(1.0).with("GPU", 1.0),
    ));
    c.dispatch();
    assert!(matches!(c.state(1), Some(TaskState::Infeasible(_))));
    assert!(c.cancel(1, false).0);
    on_node_added(&mut c.core, N2, ResourceSet::cpus(1.0).with("GPU", 1.0));
    on_worker_added(&mut c.core, N2, WorkerId(21));
    assert!(c.dispatch().is_empty());
    assert_eq!(c.core.live_tasks(), 0);
}

// ---------------------------------------------------------------------------------------------
// Workers blocked in `get`
// ---------------------------------------------------------------------------------------------

#[test]
fn blocked_worker_lends_its_cpu_and_a_new_worker_is_requested() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(1))]);
    c.submit(task(2, vec![]));
    assert!(c.dispatch().is_empty());

    on_worker_blocked(&mut c.core, WorkerId(1));
    assert_eq!(
        c.available(N1),
        ResourceSet::cpus(1.0),
        "the blocked task lent its CPU"
    );
    assert_eq!(c.core.worker_held(WorkerId(1)), Some(&ResourceSet::new()));
    // The CPU is free but no worker is idle: ask for one, once.
    assert_eq!(
        c.schedule(),
        [Sent::RequestWorker(N1, JobId(0), EnvId::NONE)]
    );
    assert!(c.schedule().is_empty(), "one request at a time");

    on_worker_added(&mut c.core, N1, WorkerId(2));
    assert_eq!(c.dispatch(), [(N1, WorkerId(2), TaskId(2))]);
    assert_eq!(c.available(N1).cpu_units(), 0);

    on_worker_unblocked(&mut c.core, WorkerId(1));
    c.succeed(1);
    c.succeed(2);
    c.assert_all_free();
}

#[test]
fn node_with_more_cpus_than_idle_workers_requests_a_worker() {
    // Two CPUs, one worker: the second task must wait for a worker, and one is asked for.
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), [1]);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![]));
    assert_eq!(
        c.schedule(),
        [
            Sent::Dispatch(N1, WorkerId(1), TaskId(1)),
            Sent::RequestWorker(N1, JobId(0), EnvId::NONE)
        ]
    );
    assert_eq!(c.state(2), Some(TaskState::Queued));
    on_worker_added(&mut c.core, N1, WorkerId(2));
    assert_eq!(c.dispatch(), [(N1, WorkerId(2), TaskId(2))]);
}

#[test]
fn unblocking_takes_the_cpu_back_when_it_is_free() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0).with("GPU", 1.0), [1]);
    let spec = with_resources(task(1, vec![]), ResourceSet::cpus(1.0).with("GPU", 1.0));
    c.submit(spec);
    c.dispatch();
    on_worker_blocked(&mut c.core, WorkerId(1));
    // GPUs stay held while blocked.
    assert_eq!(c.available(N1), ResourceSet::cpus(1.0));
    assert_eq!(
        c.core.worker_held(WorkerId(1)),
        Some(&ResourceSet::new().with("GPU", 1.0))
    );
    on_worker_blocked(&mut c.core, WorkerId(1));
    assert_eq!(
        c.available(N1),
        ResourceSet::cpus(1.0),
        "blocking twice lends once"
    );

    // Each block is one waiting task (a worker process may have several): the CPUs come back
    // when the last of them resumes.
    on_worker_unblocked(&mut c.core, WorkerId(1));
    assert_eq!(
        c.available(N1),
        ResourceSet::cpus(1.0),
        "one task still blocked"
    );
    on_worker_unblocked(&mut c.core, WorkerId(1));
    assert_eq!(c.available(N1), ResourceSet::new());
    assert_eq!(
        c.core.worker_held(WorkerId(1)),
        Some(&ResourceSet::cpus(1.0).with("GPU", 1.0))
    );
    c.succeed(1);
    c.assert_all_free();
}

#[test]
fn worker_finishing_while_blocked_returns_only_what_it_holds() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), 1..=2);
    c.submit(task(1, vec![]));
    c.dispatch();
    let w = c.worker_of(1);
    on_worker_blocked(&mut c.core, w);
    assert_eq!(c.available(N1), ResourceSet::cpus(2.0));
    c.succeed(1);
    c.assert_all_free();
}

// ---------------------------------------------------------------------------------------------
// Randomized workloads
// ---------------------------------------------------------------------------------------------

/// Marsaglia's xorshift64: enough randomness to shuffle events, and every seed reproduces.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize].clone()
    }
}

/// What the random driver saw the scheduler send, per id.
#[derive(Default)]
struct Observed {
    dispatched: HashMap<TaskId, u32>,
    settled: HashMap<ObjectId, u32>,
    ready: u64,
    freed: HashMap<ObjectId, u32>,
}

#[test]
fn random_workloads_settle_every_task_once_and_free_everything() {
    for seed in 1..=40 {
        run_random_workload(seed, 250);
    }
}

fn run_random_workload(seed: u64, n_tasks: u64) {
    let mut rng = XorShift::new(seed);
    // Every shape needs at least half a CPU and each node has one worker per half CPU, so a
    // node without an idle worker never has room for another task.
    let mut workers: Vec<(NodeId, WorkerId)> = (100..108)
        .map(|w| (N1, WorkerId(w)))
        .chain((200..208).map(|w| (N2, WorkerId(w))))
        .collect();
    let mut c = Cluster::new()
        .with_node(1, ResourceSet::cpus(4.0), 100..108)
        .with_node(
            2,
            ResourceSet::cpus(4.0).with("GPU", 2.0).with("mem", 4.0),
            200..208,
        );
    let shapes = [
        ResourceSet::cpus(0.5),
        ResourceSet::cpus(1.0),
        ResourceSet::cpus(2.0),
        ResourceSet::cpus(0.5).with("GPU", 1.0),
        ResourceSet::cpus(1.0).with("mem", 2.5),
    ];

    let mut next_id = 1u64;
    let mut task_ids = Vec::new();
    let mut put_ids = Vec::new();
    let mut retries: HashMap<TaskId, u32> = HashMap::new();
    // One entry per handle the driver holds (an object appears twice after `on_add_ref`).
    let mut handles: Vec<ObjectId> = Vec::new();
    // Workers with a run in progress, including runs of cancelled tasks.
    let mut busy: Vec<WorkerId> = Vec::new();
    let mut seen = Observed::default();

    loop {
        let submitting = (task_ids.len() as u64) < n_tasks;
        match rng.below(16) {
            0..=4 if submitting => {
                let id = next_id;
                next_id += 1;
                let mut args = Vec::new();
                for _ in 0..rng.below(4) {
                    if !handles.is_empty() && rng.below(4) != 0 {
                        args.push(TaskArg::Object(rng.pick(&handles)));
                    } else {
                        args.push(TaskArg::Inline(vec![id as u8]));
                    }
                }
                let mut spec = with_resources(task(id, args), rng.pick(&shapes));
                if rng.below(4) == 0 {
                    spec.extras.make_mut().strategy = SchedulingStrategy::Spread;
                }
                if rng.below(5) == 0 {
                    spec.extras.make_mut().retry_exceptions = true;
                    spec.max_retries = 1;
                }
                retries.insert(
                    spec.id,
                    if spec.extras.retry_exceptions {
                        spec.max_retries
                    } else {
                        0
                    },
                );
                on_submit(&mut c.core, &mut c.t, spec);
                task_ids.push(TaskId(id));
                handles.push(ObjectId(id));
            }
            5 if submitting => {
                let id = next_id;
                next_id += 1;
                on_put(&mut c.core, ObjectId(id), rng.pick(&[N1, N2]), 16);
                put_ids.push(ObjectId(id));
                handles.push(ObjectId(id));
            }
            6 if !handles.is_empty() => {
                let i = rng.below(handles.len() as u64) as usize;
                let o = handles.swap_remove(i);
                on_release(&mut c.core, &mut c.t, o);
            }
            7 if !handles.is_empty() => {
                let o = rng.pick(&handles);
                assert!(
                    on_add_ref(&mut c.core, &mut c.t, o),
                    "seed {seed}: held {o} is gone"
                );
                handles.push(o);
            }
            8 if next_id > 1 && rng.below(4) == 0 => {
                let t = TaskId(1 + rng.below(next_id - 1));
                let live = c.core.task_state(t).is_some();
                let force = rng.below(2) == 0;
                assert_eq!(
                    on_cancel(&mut c.core, &mut c.t, t, force),
                    live,
                    "seed {seed}: {t}"
                );
            }
            9..=11 => schedule(&mut c.core, &mut c.t),
            _ if !busy.is_empty() => {
                let i = rng.below(busy.len() as u64) as usize;
                let w = busy.swap_remove(i);
                let outcome = match rng.below(10) {
                    0 => TaskOutcome::Failed(boom()),
                    _ => stored(),
                };
                on_task_finished(&mut c.core, &mut c.t, w, outcome);
            }
            _ => {}
        }
        observe(&mut c, &mut seen, &mut busy, &mut workers, &handles, seed);
        check_accounting(&c, &workers, seed);

        if !submitting && busy.is_empty() {
            schedule(&mut c.core, &mut c.t);
            observe(&mut c, &mut seen, &mut busy, &mut workers, &handles, seed);
            if busy.is_empty() {
                break;
            }
        }
    }

    // Every task settled exactly once and ran no more often than its retries allow.
    assert_eq!(
        c.core.live_tasks(),
        0,
        "seed {seed}: tasks left with nothing running"
    );
    assert_eq!(c.core.queued_tasks(), 0, "seed {seed}");
    assert_eq!(c.core.running_tasks(), 0, "seed {seed}");
    for t in &task_ids {
        let o = ObjectId::from(*t);
        assert_eq!(
            seen.settled.get(&o),
            Some(&1),
            "seed {seed}: {o} settled wrongly"
        );
        let runs = seen.dispatched.get(t).copied().unwrap_or(0);
        assert!(runs <= 1 + retries[t], "seed {seed}: {t} ran {runs} times");
    }
    let stats = c.core.stats();
    assert_eq!(stats.submitted, n_tasks, "seed {seed}");
    assert_eq!(stats.succeeded + stats.failed, n_tasks, "seed {seed}");
    assert_eq!(seen.ready, stats.succeeded, "seed {seed}");
    c.assert_all_free();

    // Once the driver lets go of everything, every object is freed exactly once.
    for o in std::mem::take(&mut handles) {
        on_release(&mut c.core, &mut c.t, o);
    }
    observe(&mut c, &mut seen, &mut busy, &mut workers, &handles, seed);
    assert_eq!(c.core.object_count(), 0, "seed {seed}: objects leaked");
    for o in task_ids
        .iter()
        .map(|t| ObjectId::from(*t))
        .chain(put_ids.iter().copied())
    {
        assert_eq!(
            seen.freed.get(&o),
            Some(&1),
            "seed {seed}: {o} freed wrongly"
        );
    }
    assert_eq!(
        c.core.stats().objects_freed,
        (task_ids.len() + put_ids.len()) as u64
    );
}

/// Consumes what the scheduler sent and checks each message against what the driver knows.
fn observe(
    c: &mut Cluster,
    seen: &mut Observed,
    busy: &mut Vec<WorkerId>,
    workers: &mut Vec<(NodeId, WorkerId)>,
    handles: &[ObjectId],
    seed: u64,
) {
    for s in c.t.take() {
        match s {
            Sent::Dispatch(node, w, t) => {
                assert!(
                    workers.contains(&(node, w)),
                    "seed {seed}: {w} is not a worker of {node}"
                );
                assert!(
                    !busy.contains(&w),
                    "seed {seed}: {t} dispatched to busy {w}"
                );
                busy.push(w);
                *seen.dispatched.entry(t).or_default() += 1;
            }
            Sent::ObjectReady(o, _) => {
                seen.ready += 1;
                *seen.settled.entry(o).or_default() += 1;
            }
            Sent::ObjectFailed(o, f) => {
                assert_eq!(
                    f.task,
                    o.task(),
                    "seed {seed}: failure of {o} names another task"
                );
                *seen.settled.entry(o).or_default() += 1;
            }
            Sent::Free(o, _) => {
                assert!(
                    !handles.contains(&o),
                    "seed {seed}: {o} freed while a handle is held"
                );
                *seen.freed.entry(o).or_default() += 1;
            }
            Sent::RequestWorker(n, ..) => {
                panic!("seed {seed}: {n} has a worker per half CPU")
            }
            Sent::CancelRunning(w, _, force) => {
                assert!(busy.contains(&w), "seed {seed}: cancel sent to idle {w}");
                if force {
                    // Its process is killed and its node starts another in its place.
                    busy.retain(|b| *b != w);
                    let i = workers.iter().position(|(_, x)| *x == w).expect("known");
                    let (node, _) = workers.swap_remove(i);
                    // Above every id ever used: ids only grow (the removed one included).
                    let top = workers.iter().map(|(_, x)| x.0).max().unwrap_or(0);
                    let fresh = WorkerId(top.max(w.0) + 1);
                    on_worker_added(&mut c.core, node, fresh);
                    workers.push((node, fresh));
                }
            }
            Sent::ToNode(n, op) => panic!("seed {seed}: no job runs, yet {n} was sent {op:?}"),
            Sent::KillWorker(w) => panic!("seed {seed}: no actor runs, yet {w} was killed"),
            Sent::KeepWorker(w) => panic!("seed {seed}: no actor runs, yet {w} was kept"),
        }
    }
}

/// For every node, `available + Σ held == total`, resource by resource.
fn check_accounting(c: &Cluster, workers: &[(NodeId, WorkerId)], seed: u64) {
    for n in c.core.nodes() {
        let mut sum = n.available.clone();
        for (_, w) in workers.iter().filter(|(node, _)| *node == n.id) {
            sum.add(c.core.worker_held(*w).expect("registered"));
        }
        assert_eq!(sum, n.total, "seed {seed}: {} accounting broke", n.id);
    }
}

#[test]
fn a_node_registering_again_keeps_what_running_tasks_hold() {
    let mut core = Core::new();
    let mut t = RecordingTransport::default();
    on_node_added(&mut core, NodeId(1), ResourceSet::cpus(2.0));
    on_worker_added(&mut core, NodeId(1), WorkerId(1));
    on_submit(&mut core, &mut t, task(1, vec![]));
    schedule(&mut core, &mut t);
    assert_eq!(t.dispatched(), vec![(WorkerId(1), TaskId(1))]);
    on_node_added(&mut core, NodeId(1), ResourceSet::cpus(2.0));
    assert_eq!(core.nodes()[0].available, ResourceSet::cpus(1.0));
    on_task_finished(
        &mut core,
        &mut t,
        WorkerId(1),
        TaskOutcome::Stored { size: 1 },
    );
    assert_eq!(
        core.nodes()[0].available,
        ResourceSet::cpus(2.0),
        "never above total"
    );
}

#[test]
fn hard_affinity_asks_for_a_worker_on_its_own_node() {
    let mut core = Core::new();
    let mut t = RecordingTransport::default();
    on_node_added(&mut core, NodeId(1), ResourceSet::cpus(1.0));
    on_node_added(&mut core, NodeId(2), ResourceSet::cpus(1.0));
    let mut spec = task(1, vec![]);
    spec.extras.make_mut().strategy = SchedulingStrategy::NodeAffinity {
        node: NodeId(2),
        soft: false,
    };
    on_submit(&mut core, &mut t, spec);
    schedule(&mut core, &mut t);
    assert_eq!(
        t.take(),
        vec![Sent::RequestWorker(NodeId(2), JobId(0), EnvId::NONE)]
    );
}

/// One node, one worker, pipelining on: short tasks queue behind the running one on the busy
/// worker; long ones do not.
fn pipelined_core(depth: usize) -> (Core, RecordingTransport) {
    let mut core = Core::new();
    core.set_pipeline_depth(depth);
    let t = RecordingTransport::default();
    on_node_added(&mut core, N1, ResourceSet::cpus(1.0));
    on_worker_added(&mut core, N1, WorkerId(1));
    (core, t)
}

#[test]
fn short_tasks_are_pipelined_to_a_busy_worker_and_finish_in_any_order() {
    let (mut core, mut t) = pipelined_core(8);
    on_submit(&mut core, &mut t, task(1, vec![]));
    schedule(&mut core, &mut t);
    // The class's runtime becomes known: 10 us per task, so the pipeline may fill up.
    starling_scheduler::reactor::on_task_runtime(&mut core, TaskId(1), 10);
    for id in 2..=6 {
        on_submit(&mut core, &mut t, task(id, vec![]));
    }
    schedule(&mut core, &mut t);
    let dispatched: Vec<TaskId> = t.dispatched().into_iter().map(|(_, task)| task).collect();
    assert_eq!(
        dispatched,
        (1..=6).map(TaskId).collect::<Vec<_>>(),
        "all on the one worker"
    );
    assert_eq!(
        core.nodes()[0].available,
        ResourceSet::new(),
        "held once, not per task"
    );
    // Finishing a queued task before the running one is accepted.
    starling_scheduler::reactor::on_task_done(
        &mut core,
        &mut t,
        WorkerId(1),
        TaskId(4),
        TaskOutcome::Stored { size: 1 },
    );
    assert_eq!(core.task_state(TaskId(4)), None);
    for id in [1, 2, 3, 5, 6] {
        starling_scheduler::reactor::on_task_done(
            &mut core,
            &mut t,
            WorkerId(1),
            TaskId(id),
            TaskOutcome::Stored { size: 1 },
        );
    }
    assert_eq!(
        core.nodes()[0].available,
        ResourceSet::cpus(1.0),
        "released when empty"
    );
    assert_eq!(core.live_tasks(), 0);
}

#[test]
fn long_tasks_are_not_pipelined() {
    let (mut core, mut t) = pipelined_core(8);
    on_submit(&mut core, &mut t, task(1, vec![]));
    schedule(&mut core, &mut t);
    starling_scheduler::reactor::on_task_runtime(&mut core, TaskId(1), 50_000);
    on_submit(&mut core, &mut t, task(2, vec![]));
    schedule(&mut core, &mut t);
    assert_eq!(
        t.dispatched().len(),
        1,
        "a 50 ms task waits for a free worker"
    );
    assert_eq!(core.task_state(TaskId(2)), Some(&TaskState::Queued));
}

/// A task is never queued behind one of its ancestors on a worker that is not blocked: the
/// ancestor may wait for it from a thread the worker does not see (a thread it joins), and
/// would then wait forever. A driver's short tasks still queue behind each other.
#[test]
fn nothing_is_pipelined_behind_its_own_ancestor() {
    let (mut core, mut t) = pipelined_core(8);
    on_submit(&mut core, &mut t, task(1, vec![]));
    schedule(&mut core, &mut t);
    starling_scheduler::reactor::on_task_runtime(&mut core, TaskId(1), 10);
    // Task 2 is the running task's child, task 3 its grandchild: neither queues behind it.
    let child = |id: u64, parent: u64| TaskSpec {
        parent: Some(TaskId(parent)),
        ..task(id, vec![])
    };
    // Task 4 is a driver's: it does.
    on_submit(&mut core, &mut t, task(4, vec![]));
    on_submit(&mut core, &mut t, child(2, 1));
    on_submit(&mut core, &mut t, child(3, 2));
    schedule(&mut core, &mut t);
    let dispatched: Vec<TaskId> = t.dispatched().into_iter().map(|(_, task)| task).collect();
    assert_eq!(dispatched, [TaskId(1), TaskId(4)]);
    assert_eq!(core.task_state(TaskId(2)), Some(&TaskState::Queued));
    assert_eq!(core.task_state(TaskId(3)), Some(&TaskState::Queued));
    // Blocked in `get`, the worker runs what it is handed at once, beside the waiting task:
    // there its descendants may go.
    t.take();
    on_worker_blocked(&mut core, WorkerId(1));
    schedule(&mut core, &mut t);
    let dispatched: Vec<TaskId> = t.dispatched().into_iter().map(|(_, task)| task).collect();
    assert_eq!(dispatched, [TaskId(2), TaskId(3)]);
}

/// A thread that runs no task of its own waits in `get` (in-process, maybe one a task
/// spawned): it lends the CPUs of a running task that has not lent them yet, and the same
/// task takes them back when the wait ends.
#[test]
fn a_waiting_thread_lends_a_running_task_s_cpus() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), [1, 2, 3]);
    assert!(
        !reactor::on_thread_blocked(&mut c.core, 100),
        "nothing runs: nothing to lend"
    );
    reactor::on_thread_unblocked(&mut c.core, 100);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![]));
    c.submit(task(3, vec![]));
    let first = c.dispatch();
    assert_eq!(first.len(), 2, "two CPUs, two tasks: {first:?}");
    assert!(reactor::on_thread_blocked(&mut c.core, 101));
    assert_eq!(c.available(N1).cpu_units(), 10_000, "one CPU lent");
    assert!(reactor::on_thread_blocked(&mut c.core, 102));
    assert_eq!(
        c.available(N1).cpu_units(),
        20_000,
        "each running task lends once"
    );
    let third = c.dispatch();
    assert!(
        third.len() == 1 && third[0].2 == TaskId(3),
        "the lent CPU runs the third task: {third:?}"
    );
    reactor::on_thread_unblocked(&mut c.core, 101);
    reactor::on_thread_unblocked(&mut c.core, 102);
    for id in 1..=3 {
        c.succeed(id);
    }
    c.assert_all_free();
}

/// A wait of a thread lends for as long as it lasts: when the task lending for it ends first,
/// another running task lends in its place. Here a parent holding both CPUs has two threads
/// waiting for children; the second thread's wait first borrows from a child, which ends, and
/// when the first thread's wait ends the parent must not take its CPUs back while the second
/// still waits for a child that needs them.
#[test]
fn a_thread_wait_outliving_its_lender_moves_to_another_task() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), [1, 2, 3, 4]);
    let mut parent = task(1, vec![]);
    parent.resources = ResourceSet::cpus(2.0);
    c.submit(parent);
    assert_eq!(tasks_of(&c.dispatch()), [1]);
    // The parent's first thread waits: the parent lends both CPUs; a child runs.
    assert!(reactor::on_thread_blocked(&mut c.core, 101));
    c.submit(task(2, vec![]));
    assert_eq!(tasks_of(&c.dispatch()), [2]);
    // The second thread waits: it borrows from the running child (not yet lending).
    assert!(reactor::on_thread_blocked(&mut c.core, 102));
    assert_eq!(c.core.thread_lender_of(102), Some(c.worker_of(2)));
    c.succeed(2);
    assert_eq!(
        c.core.thread_lender_of(102),
        Some(c.worker_of(1)),
        "the wait moved to the parent"
    );
    // The second thread's child is queued; the first thread's wait ends.
    c.submit(task(3, vec![]));
    reactor::on_thread_unblocked(&mut c.core, 101);
    assert_eq!(
        tasks_of(&c.dispatch()),
        [3],
        "the parent still lends for the second thread"
    );
    c.succeed(3);
    reactor::on_thread_unblocked(&mut c.core, 102);
    assert_eq!(
        c.available(N1).cpu_units(),
        0,
        "the parent holds its CPUs again"
    );
    c.succeed(1);
    c.assert_all_free();
}

/// A class is a resource shape, so it mixes functions: a short function's tasks are not
/// queued behind a task of a function that never reported how long it runs (it may hold its
/// worker for minutes while another worker frees up), and such a task is not queued behind
/// anything either.
#[test]
fn nothing_is_pipelined_behind_a_function_that_may_run_long() {
    let (mut core, mut t) = pipelined_core(8);
    let named = |id: u64, function: &str| {
        let mut spec = task(id, vec![]);
        spec.function = function.into();
        spec
    };
    // `short` is known to take 10 us.
    on_submit(&mut core, &mut t, named(1, "test::short#0"));
    schedule(&mut core, &mut t);
    starling_scheduler::reactor::on_task_runtime(&mut core, TaskId(1), 10);
    starling_scheduler::reactor::on_task_done(
        &mut core,
        &mut t,
        WorkerId(1),
        TaskId(1),
        TaskOutcome::Stored { size: 1 },
    );
    // `hold` runs, its time unknown: a `short` task waits for the worker instead of queueing
    // behind it.
    on_submit(&mut core, &mut t, named(2, "test::hold#0"));
    schedule(&mut core, &mut t);
    on_submit(&mut core, &mut t, named(3, "test::short#0"));
    schedule(&mut core, &mut t);
    assert_eq!(core.task_state(TaskId(3)), Some(&TaskState::Queued));
    starling_scheduler::reactor::on_task_done(
        &mut core,
        &mut t,
        WorkerId(1),
        TaskId(2),
        TaskOutcome::Stored { size: 1 },
    );
    schedule(&mut core, &mut t);
    assert!(
        matches!(core.task_state(TaskId(3)), Some(TaskState::Running { .. })),
        "it runs once the worker is free"
    );
    // Behind a running `short` task, another `short` one is pipelined, an unknown one is not.
    on_submit(&mut core, &mut t, named(4, "test::short#0"));
    on_submit(&mut core, &mut t, named(5, "test::other#0"));
    schedule(&mut core, &mut t);
    assert!(matches!(
        core.task_state(TaskId(4)),
        Some(TaskState::Running { .. })
    ));
    assert_eq!(core.task_state(TaskId(5)), Some(&TaskState::Queued));
}

#[test]
fn a_lost_worker_retries_every_task_pipelined_to_it() {
    let (mut core, mut t) = pipelined_core(8);
    on_submit(&mut core, &mut t, task(1, vec![]));
    schedule(&mut core, &mut t);
    starling_scheduler::reactor::on_task_runtime(&mut core, TaskId(1), 10);
    on_submit(&mut core, &mut t, task(2, vec![]));
    schedule(&mut core, &mut t);
    assert_eq!(t.dispatched().len(), 2);
    starling_scheduler::reactor::on_worker_removed(&mut core, &mut t, WorkerId(1), "killed");
    assert_eq!(core.task_state(TaskId(1)), Some(&TaskState::Queued));
    assert_eq!(core.task_state(TaskId(2)), Some(&TaskState::Queued));
    assert_eq!(core.nodes()[0].available, ResourceSet::cpus(1.0));
    on_worker_added(&mut core, N1, WorkerId(2));
    schedule(&mut core, &mut t);
    let last: Vec<_> = t.dispatched().into_iter().skip(2).collect();
    assert_eq!(
        last.first(),
        Some(&(WorkerId(2), TaskId(1))),
        "retried on the new worker"
    );
}

fn chain_task(id: u64, prev: u64) -> starling_proto::TaskSpec {
    task(id, vec![TaskArg::Object(ObjectId(prev))])
}

#[test]
fn a_chain_is_pipelined_behind_its_producer_and_a_failure_still_propagates() {
    let (mut core, mut t) = pipelined_core(8);
    on_submit(&mut core, &mut t, task(1, vec![]));
    schedule(&mut core, &mut t);
    starling_scheduler::reactor::on_task_runtime(&mut core, TaskId(1), 10);
    for id in 2..=4 {
        on_submit(&mut core, &mut t, chain_task(id, id - 1));
    }
    schedule(&mut core, &mut t);
    let dispatched: Vec<TaskId> = t.dispatched().into_iter().map(|(_, task)| task).collect();
    assert_eq!(
        dispatched,
        (1..=4).map(TaskId).collect::<Vec<_>>(),
        "the chain went ahead"
    );
    // Task 2 fails: 3 and 4 fail upstream although they were already handed to the worker.
    starling_scheduler::reactor::on_task_done(
        &mut core,
        &mut t,
        WorkerId(1),
        TaskId(1),
        TaskOutcome::Stored { size: 1 },
    );
    starling_scheduler::reactor::on_task_done(
        &mut core,
        &mut t,
        WorkerId(1),
        TaskId(2),
        TaskOutcome::Failed(RemoteError::new("panic", "boom")),
    );
    for id in [3, 4] {
        let failed = t.sent.iter().find_map(|s| match s {
            Sent::ObjectFailed(o, f) if *o == ObjectId(id) => Some(f.clone()),
            _ => None,
        });
        let f = failed.unwrap_or_else(|| panic!("task {id} should fail"));
        assert_eq!(f.root().task, TaskId(2));
        // The worker's late report is ignored, and its pipeline drains.
        starling_scheduler::reactor::on_task_done(
            &mut core,
            &mut t,
            WorkerId(1),
            TaskId(id),
            TaskOutcome::BadArgument(RemoteError::new("starling::ObjectLost", "gone")),
        );
    }
    assert_eq!(core.live_tasks(), 0);
    assert_eq!(core.nodes()[0].available, ResourceSet::cpus(1.0));
}

#[test]
fn a_pipelined_chain_on_a_lost_worker_waits_for_its_inputs_again() {
    let (mut core, mut t) = pipelined_core(8);
    on_submit(&mut core, &mut t, task(1, vec![]));
    schedule(&mut core, &mut t);
    starling_scheduler::reactor::on_task_runtime(&mut core, TaskId(1), 10);
    on_submit(&mut core, &mut t, chain_task(2, 1));
    assert!(matches!(
        core.task_state(TaskId(2)),
        Some(TaskState::Running { .. })
    ));
    starling_scheduler::reactor::on_worker_removed(&mut core, &mut t, WorkerId(1), "killed");
    assert_eq!(core.task_state(TaskId(1)), Some(&TaskState::Queued));
    assert_eq!(
        core.task_state(TaskId(2)),
        Some(&TaskState::WaitingForDependencies(1))
    );
    on_worker_added(&mut core, N1, WorkerId(2));
    schedule(&mut core, &mut t);
    starling_scheduler::reactor::on_task_done(
        &mut core,
        &mut t,
        WorkerId(2),
        TaskId(1),
        TaskOutcome::Stored { size: 1 },
    );
    schedule(&mut core, &mut t);
    assert!(matches!(
        core.task_state(TaskId(2)),
        Some(TaskState::Running { .. })
    ));
}

#[test]
fn a_worker_blocked_in_get_is_handed_the_tasks_it_waits_for() {
    let (mut core, mut t) = pipelined_core(8);
    on_submit(&mut core, &mut t, task(1, vec![]));
    schedule(&mut core, &mut t);
    // Even a long-running class: the blocked worker runs what it is handed on a spare thread.
    starling_scheduler::reactor::on_task_runtime(&mut core, TaskId(1), 50_000);
    on_worker_blocked(&mut core, WorkerId(1));
    on_submit(&mut core, &mut t, task(2, vec![]));
    schedule(&mut core, &mut t);
    assert_eq!(
        t.dispatched(),
        vec![(WorkerId(1), TaskId(1)), (WorkerId(1), TaskId(2))]
    );
    assert!(
        !t.sent.iter().any(|s| matches!(s, Sent::RequestWorker(..))),
        "no new worker process for a nested child"
    );
}

#[test]
fn a_worker_stays_blocked_until_its_last_blocked_task_resumes() {
    let (mut core, mut t) = pipelined_core(8);
    on_submit(&mut core, &mut t, task(1, vec![]));
    schedule(&mut core, &mut t);
    // Two tasks of the worker process block (one on a spare thread), one resumes.
    on_worker_blocked(&mut core, WorkerId(1));
    on_submit(&mut core, &mut t, task(2, vec![]));
    schedule(&mut core, &mut t);
    on_worker_blocked(&mut core, WorkerId(1));
    on_worker_unblocked(&mut core, WorkerId(1));
    assert_eq!(
        core.nodes()[0].available,
        ResourceSet::cpus(1.0),
        "still lent"
    );
    // The blocked worker still takes children (else nested graphs deadlock).
    on_submit(&mut core, &mut t, task(3, vec![]));
    schedule(&mut core, &mut t);
    assert_eq!(t.dispatched().last(), Some(&(WorkerId(1), TaskId(3))));
    on_worker_unblocked(&mut core, WorkerId(1));
    assert_eq!(
        core.nodes()[0].available,
        ResourceSet::new(),
        "taken back with the last one"
    );
}

// ---------------------------------------------------------------------------------------------
// Lineage: objects lost with their node are made again
// ---------------------------------------------------------------------------------------------

impl Cluster {
    fn with_lineage(mut self) -> Self {
        self.core.set_lineage(true);
        self
    }

    fn lose(&mut self, objects: &[u64]) -> Vec<Sent> {
        let ids: Vec<ObjectId> = objects.iter().map(|o| ObjectId(*o)).collect();
        on_objects_lost(&mut self.core, &mut self.t, &ids);
        self.t.take()
    }

    fn object(&self, object: u64) -> Option<ObjectState> {
        self.core.object_state(ObjectId(object)).cloned()
    }
}

#[test]
fn a_lost_object_is_made_again_with_its_released_arguments() {
    let mut c = Cluster::new()
        .with_lineage()
        .with_node(1, ResourceSet::cpus(1.0), [1]);
    // 1 -> 2 -> 3, the driver keeps only 3.
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![arg(1)]));
    c.submit(task(3, vec![arg(2)]));
    for t in 1..=3 {
        assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(t))]);
        c.succeed(t);
    }
    assert!(c.release(1).contains(&Sent::Free(ObjectId(1), Some(N1))));
    assert!(c.release(2).contains(&Sent::Free(ObjectId(2), Some(N1))));
    // Their values are gone; their entries stay, as 3's lineage.
    assert_eq!(c.object(1), Some(ObjectState::Released));
    assert_eq!(c.object(2), Some(ObjectState::Released));
    assert_eq!(c.core.object_count(), 3);

    // 3's only copy is lost: 1, then 2, then 3 run again, each after its argument.
    assert!(c.lose(&[3]).is_empty());
    assert_eq!(c.object(3), Some(ObjectState::Pending));
    assert_eq!(c.state(3), Some(TaskState::WaitingForDependencies(1)));
    assert_eq!(c.state(2), Some(TaskState::WaitingForDependencies(1)));
    for t in 1..=3 {
        assert_eq!(
            c.dispatch(),
            [(N1, WorkerId(1), TaskId(t))],
            "T{t} runs again"
        );
        let sent = c.succeed(t);
        assert!(sent.contains(&Sent::ObjectReady(ObjectId(t), N1)));
    }
    assert_eq!(c.object(3), Some(ObjectState::Ready { node: N1, size: 8 }));
    assert_eq!(c.core.stats().reconstructed, 3);
    // The arguments made again were only needed for 3: their values go, the entries stay.
    assert_eq!(c.object(1), Some(ObjectState::Released));
    assert_eq!(c.object(2), Some(ObjectState::Released));

    // When 3 goes, its whole lineage goes.
    c.release(3);
    assert_eq!(c.core.object_count(), 0, "no entry is left behind");
    c.assert_all_free();
}

#[test]
fn a_lost_put_fails_with_object_lost_and_so_does_what_waits_for_it() {
    let mut c = Cluster::new()
        .with_lineage()
        .with_node(1, ResourceSet::cpus(1.0), [1]);
    // Put on node 2 (a node of its own, not a scheduler node here).
    on_put(&mut c.core, ObjectId(100), N2, 1 << 20);
    // T1 runs on N1's only worker; T2 (which reads the put) waits behind it.
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![arg(100)]));
    assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(1))]);
    let sent = c.lose(&[100]);
    let lost = Arc::new(TaskFailure {
        task: ObjectId(100).task(),
        attempt: 0,
        kind: FailureKind::ObjectLost(ObjectId(100)),
    });
    assert!(sent.contains(&Sent::ObjectFailed(ObjectId(100), lost.clone())));
    assert_eq!(c.object(100), Some(ObjectState::Failed(lost.clone())));
    match c.object(2) {
        Some(ObjectState::Failed(f)) => {
            assert_eq!(f.kind, FailureKind::Upstream(lost), "T2 fails upstream")
        }
        other => panic!("T2 should have failed: {other:?}"),
    }
    c.succeed(1);
    assert!(c.dispatch().is_empty(), "T2 never runs");
}

#[test]
fn a_queued_task_whose_argument_is_lost_waits_for_it_to_be_made_again() {
    let mut c = Cluster::new()
        .with_lineage()
        .with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(1))]);
    c.succeed(1);
    // T9 holds the only worker; T2 (reads 1) is queued behind it.
    c.submit(task(9, vec![]));
    assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(9))]);
    c.submit(task(2, vec![arg(1)]));
    assert!(c.dispatch().is_empty());
    assert_eq!(c.state(2), Some(TaskState::Queued));
    c.lose(&[1]);
    assert_eq!(c.state(2), Some(TaskState::WaitingForDependencies(1)));
    c.succeed(9);
    // 1 runs again first, then 2.
    assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(1))]);
    c.succeed(1);
    assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(2))]);
    c.succeed(2);
    assert_eq!(c.object(2), Some(ObjectState::Ready { node: N1, size: 8 }));
}

#[test]
fn a_running_task_that_cannot_fetch_a_lost_argument_runs_again_after_it() {
    let mut c = Cluster::new()
        .with_lineage()
        .with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(1))]);
    c.succeed(1);
    c.submit(task(2, vec![arg(1)]));
    assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(2))]);
    c.lose(&[1]);
    // T2 was running already; its worker reports that the argument could not be fetched.
    let e = RemoteError::new(reactor::LOST_ARGUMENT, "node N2 is gone");
    c.finish(2, TaskOutcome::BadArgument(e));
    assert_eq!(c.state(2), Some(TaskState::WaitingForDependencies(1)));
    assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(1))]);
    c.succeed(1);
    assert_eq!(c.dispatch(), [(N1, WorkerId(1), TaskId(2))]);
    c.succeed(2);
    assert_eq!(c.object(2), Some(ObjectState::Ready { node: N1, size: 8 }));
}

#[test]
fn without_lineage_a_released_object_is_freed_at_once() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.submit(task(1, vec![]));
    c.submit(task(2, vec![arg(1)]));
    for t in 1..=2 {
        c.dispatch();
        c.succeed(t);
    }
    c.release(1);
    assert_eq!(c.object(1), None, "in one process nothing keeps lineage");
    assert_eq!(c.core.object_count(), 1);
}

/// Random DAGs on two nodes with lineage on; at random moments every value on node 2 is lost.
/// Every task the driver still holds ends with a value or a failure traced to a lost `put`, no
/// task runs while an argument is missing, and once the driver lets go nothing is left.
#[test]
fn random_losses_are_rebuilt_and_nothing_leaks() {
    let mut rebuilt = 0;
    for seed in 1..=30 {
        let mut rng = XorShift::new(seed);
        let mut c = Cluster::new()
            .with_lineage()
            .with_node(1, ResourceSet::cpus(2.0), [1, 2])
            .with_node(2, ResourceSet::cpus(2.0), [3, 4]);
        let mut handles: Vec<ObjectId> = Vec::new();
        let mut tasks: Vec<u64> = Vec::new();
        let mut puts: Vec<ObjectId> = Vec::new();
        let mut next = 1u64;
        let mut running: Vec<(WorkerId, TaskId)> = Vec::new();
        for step in 0..2_000u32 {
            match rng.below(12) {
                0..=3 if next < 300 => {
                    let args = (0..rng.below(3))
                        .filter(|_| !handles.is_empty())
                        .map(|_| TaskArg::Object(rng.pick(&handles)))
                        .collect();
                    on_submit(&mut c.core, &mut c.t, task(next, args));
                    handles.push(ObjectId(next));
                    tasks.push(next);
                    next += 1;
                }
                4 if next < 300 && rng.below(3) == 0 => {
                    on_put(&mut c.core, ObjectId(next), rng.pick(&[N1, N2]), 64);
                    handles.push(ObjectId(next));
                    puts.push(ObjectId(next));
                    next += 1;
                }
                5 if handles.len() > 4 => {
                    let i = rng.below(handles.len() as u64) as usize;
                    on_release(&mut c.core, &mut c.t, handles.swap_remove(i));
                }
                6 if rng.below(8) == 0 => {
                    let on_n2: Vec<ObjectId> = (1..next)
                        .map(ObjectId)
                        .filter(|o| {
                            matches!(c.core.object_state(*o),
                                     Some(ObjectState::Ready { node, .. }) if *node == N2)
                        })
                        .collect();
                    on_objects_lost(&mut c.core, &mut c.t, &on_n2);
                }
                7..=9 => schedule(&mut c.core, &mut c.t),
                _ if !running.is_empty() => {
                    let i = rng.below(running.len() as u64) as usize;
                    let (w, t) = running.swap_remove(i);
                    on_task_done(&mut c.core, &mut c.t, w, t, stored());
                }
                _ => {}
            }
            for s in c.t.take() {
                if let Sent::Dispatch(_, w, t) = s {
                    // A task runs only when every argument has a value.
                    let spec_args: Vec<ObjectId> = c
                        .core
                        .task_spec(t)
                        .expect("a dispatched task is live")
                        .dependencies()
                        .collect();
                    for a in spec_args {
                        assert!(
                            matches!(c.core.object_state(a), Some(ObjectState::Ready { .. })),
                            "seed {seed} step {step}: {t} dispatched while {a} is {:?}",
                            c.core.object_state(a)
                        );
                    }
                    running.push((w, t));
                }
            }
        }
        // Drain: run everything that is left.
        for _ in 0..10_000 {
            schedule(&mut c.core, &mut c.t);
            for s in c.t.take() {
                if let Sent::Dispatch(_, w, t) = s {
                    running.push((w, t));
                }
            }
            let Some((w, t)) = running.pop() else {
                break;
            };
            on_task_done(&mut c.core, &mut c.t, w, t, stored());
        }
        assert!(running.is_empty(), "seed {seed}: tasks still running");
        assert_eq!(c.core.live_tasks(), 0, "seed {seed}: tasks never finished");
        for o in &handles {
            match c.core.object_state(*o) {
                Some(ObjectState::Ready { .. }) => {}
                Some(ObjectState::Failed(f)) => {
                    let mut root = &**f;
                    while let FailureKind::Upstream(up) = &root.kind {
                        root = up;
                    }
                    assert!(
                        matches!(&root.kind, FailureKind::ObjectLost(p) if puts.contains(p)),
                        "seed {seed}: {o} failed for another reason: {root:?}"
                    );
                }
                other => panic!("seed {seed}: held {o} is {other:?}"),
            }
        }
        for o in std::mem::take(&mut handles) {
            on_release(&mut c.core, &mut c.t, o);
        }
        assert_eq!(c.core.object_count(), 0, "seed {seed}: entries leaked");
        c.assert_all_free();
        rebuilt += c.core.stats().reconstructed;
    }
    assert!(
        rebuilt > 100,
        "the workloads should lose and rebuild objects: {rebuilt}"
    );
}

/// Three nodes serving multi-node job J7, one worker each (W1 on N1, W2 on N2, W3 on N3).
fn job_cluster() -> (Cluster, JobId) {
    let job = JobId(7);
    let mut c = Cluster::new();
    reactor::on_job_restricted(&mut c.core, job, true);
    for n in 1..=3 {
        on_node_added(&mut c.core, NodeId(n), ResourceSet::cpus(1.0));
        reactor::on_node_use(
            &mut c.core,
            NodeId(n),
            starling_scheduler::NodeUse::Job(job),
        );
        reactor::on_job_worker_added(&mut c.core, NodeId(n), job, WorkerId(n));
    }
    (c, job)
}

fn job_task(id: u64, job: JobId, strategy: SchedulingStrategy) -> TaskSpec {
    let mut spec = with_strategy(task(id, vec![]), strategy);
    spec.job = job;
    spec
}

#[test]
fn a_task_of_a_lost_job_instance_runs_again_on_another_instance() {
    let (mut c, job) = job_cluster();
    let soft = SchedulingStrategy::NodeAffinity {
        node: NodeId(3),
        soft: true,
    };
    c.submit(job_task(1, job, soft));
    assert_eq!(nodes_of(&c.dispatch()), [NodeId(3)]);
    reactor::on_node_lost(&mut c.core, &mut c.t, NodeId(2), "agent connection dropped");
    reactor::on_node_lost(&mut c.core, &mut c.t, NodeId(3), "agent connection dropped");
    c.t.take();
    let again = c.dispatch();
    assert_eq!(tasks_of(&again), [1]);
    assert_ne!(nodes_of(&again), [NodeId(3)], "the lost node runs nothing");
}

#[test]
fn a_job_that_ends_cancels_every_task_of_it_and_no_other() {
    let (mut c, job) = job_cluster();
    c.submit(job_task(1, job, SchedulingStrategy::Default));
    c.submit(job_task(2, job, SchedulingStrategy::Default));
    assert_eq!(c.dispatch().len(), 2);
    c.submit(job_task(3, job, SchedulingStrategy::Default));
    c.submit(job_task(4, job, SchedulingStrategy::Default));
    // T5 waits for T4.
    c.submit(job_task(5, job, SchedulingStrategy::Default));
    let mut waiting = job_task(6, job, SchedulingStrategy::Default);
    waiting.args = vec![arg(4)];
    c.submit(waiting);
    c.submit(task(9, vec![]));
    c.dispatch();
    let cancelled = reactor::on_job_ended(&mut c.core, &mut c.t, job);
    assert_eq!(
        cancelled, 5,
        "T1..T6 but the one already settled as a dependent"
    );
    let sent = c.t.take();
    for t in 1..=6 {
        assert_eq!(c.state(t), None, "T{t} is gone");
    }
    assert!(
        sent.iter()
            .any(|s| matches!(s, Sent::CancelRunning(_, TaskId(1), true))),
        "running tasks are stopped by force: {sent:?}"
    );
    assert!(c.state(9).is_some(), "another job's task stays");
    // The workers that ran T1 and T2 are stopped with the job: nothing is retried.
    reactor::on_worker_removed(&mut c.core, &mut c.t, WorkerId(1), "killed");
    reactor::on_worker_removed(&mut c.core, &mut c.t, WorkerId(2), "killed");
    assert!(c.dispatch().is_empty());
    assert_eq!(c.core.live_tasks(), 1);
}

/// A busy worker of a short class with room in its pipeline: T1 runs on W1, and T2 (ready)
/// and T3 (waiting for T1) are what the pipeline would hand it next.
fn busy_pipelined_worker(draining: bool) -> Vec<(NodeId, WorkerId, TaskId)> {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(1.0), [1]);
    c.core.set_pipeline_depth(8);
    c.submit(task(1, vec![]));
    assert_eq!(tasks_of(&c.dispatch()), [1]);
    reactor::on_task_runtime(&mut c.core, TaskId(1), 10);
    if draining {
        reactor::on_worker_draining(&mut c.core, WorkerId(1));
    }
    // Pipelining happens at submit (behind a producer) and in the scheduling pass.
    let mut sent = c.submit(task(2, vec![]));
    sent.extend(c.submit(task(3, vec![arg(1)])));
    sent.extend(c.schedule());
    sent.into_iter()
        .map(|s| match s {
            Sent::Dispatch(n, w, t) => (n, w, t),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

#[test]
fn a_worker_whose_connection_is_gone_is_handed_nothing_more() {
    // The control: a live worker is handed both (T3 at its submit, T2 in the pass).
    let mut live = tasks_of(&busy_pipelined_worker(false));
    live.sort_unstable();
    assert_eq!(live, [2, 3]);
    // A draining one (its session ended, its exit not reported yet) gets neither: what it
    // would be sent nobody reads.
    assert_eq!(tasks_of(&busy_pipelined_worker(true)), Vec::<u64>::new());
}

#[test]
fn a_job_s_pending_worker_requests_never_hold_back_another_job_and_end_with_it() {
    let (a, b) = (JobId(1), JobId(2));
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(2.0), []);
    let of = |job: JobId, id: u64| {
        let mut spec = task(id, vec![]);
        spec.job = job;
        spec
    };
    // Driver A's workers were asked for at its start and never came (it was killed first).
    reactor::on_workers_requested(&mut c.core, N1, starling_scheduler::Pool::plain(a), 2);
    c.submit(of(a, 1));
    assert!(c.schedule().is_empty(), "A's workers are on their way");
    // Driver B's task still gets a worker of its own asked for.
    c.submit(of(b, 2));
    assert!(
        c.schedule()
            .contains(&Sent::RequestWorker(N1, b, EnvId::NONE)),
        "B's class is starved and must ask for a worker"
    );
    // A ends: its task is cancelled and its requests dropped.
    assert_eq!(reactor::on_job_ended(&mut c.core, &mut c.t, a), 1);
    c.t.take();
    c.submit(of(a, 3));
    assert_eq!(
        c.schedule(),
        [Sent::RequestWorker(N1, a, EnvId::NONE)],
        "A's old requests no longer count once it ended"
    );
}

#[test]
fn a_job_s_scheduling_classes_end_with_it_and_their_slots_are_reused() {
    let mut c = Cluster::new().with_node(1, ResourceSet::cpus(4.0), []);
    reactor::on_job_worker_added(&mut c.core, N1, JobId(1), WorkerId(1));
    reactor::on_job_worker_added(&mut c.core, N1, JobId(2), WorkerId(2));
    let of = |job: u64, id: u64, cpus: f64| {
        let mut spec = with_resources(task(id, vec![]), ResourceSet::cpus(cpus));
        spec.job = JobId(job);
        spec
    };
    // Job 1: three shapes, one running and two queued.
    c.submit(of(1, 1, 1.0));
    c.submit(of(1, 2, 0.5));
    c.submit(of(1, 3, 0.25));
    let sent = c.schedule();
    assert!(
        sent.contains(&Sent::Dispatch(N1, WorkerId(1), TaskId(1))),
        "{sent:?}"
    );
    assert_eq!(c.core.class_count(), 3);
    assert_eq!(reactor::on_job_ended(&mut c.core, &mut c.t, JobId(1)), 3);
    c.t.take();
    assert_eq!(c.core.class_count(), 0, "an ended job keeps no class");
    let w = WorkerId(1);
    on_task_done(&mut c.core, &mut c.t, w, TaskId(1), stored());
    c.t.take();
    // Job 2 takes freed slots: the table does not grow, and its tasks run as usual.
    c.submit(of(2, 4, 1.0));
    c.submit(of(2, 5, 2.0));
    assert_eq!(c.core.class_count(), 2);
    assert_eq!(c.core.class_slots(), 3, "freed slots are reused");
    // Job 2's one worker runs both, one after the other.
    let mut ran = Vec::new();
    for _ in 0..2 {
        let sent = c.schedule();
        let Some(Sent::Dispatch(_, _, t)) = sent.iter().find(|s| matches!(s, Sent::Dispatch(..)))
        else {
            panic!("nothing dispatched: {sent:?}");
        };
        ran.push(t.0);
        c.succeed(t.0);
    }
    ran.sort_unstable();
    assert_eq!(ran, [4, 5]);
    assert_eq!(c.core.stats().succeeded, 2);
}
