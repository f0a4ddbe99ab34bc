//! Tasks run together on one worker (`TaskSpec::max_concurrency`, async functions): how many a
//! worker takes, what each holds, and that nothing else is queued behind them.

use starling_proto::{NodeId, ResourceSet, TaskId, TaskSpec, WorkerId};
use starling_scheduler::reactor::{
    on_cancel, on_node_added, on_submit, on_task_done, on_worker_added, on_worker_removed, schedule,
};
use starling_scheduler::testing::{task, RecordingTransport, Sent};
use starling_scheduler::{Core, TaskOutcome, TaskState};

const N1: NodeId = NodeId(1);

fn stored() -> TaskOutcome {
    TaskOutcome::Stored { size: 8 }
}

/// A task of an async function that allows `n` at once, holding `cpus`.
fn concurrent(id: u64, n: u32, cpus: f64) -> TaskSpec {
    let mut spec = task(id, Vec::new());
    spec.resources = ResourceSet::cpus(cpus);
    spec.extras.make_mut().max_concurrency = n;
    spec
}

/// One node with `cpus` CPUs and workers 1..=workers, pipelining allowed (so the tests also
/// show that tasks run together are never pipelined).
fn node(cpus: f64, workers: u64) -> (Core, RecordingTransport) {
    let mut core = Core::new();
    core.set_pipeline_depth(8);
    on_node_added(&mut core, N1, ResourceSet::cpus(cpus));
    for w in 1..=workers {
        on_worker_added(&mut core, N1, WorkerId(w));
    }
    (core, RecordingTransport::default())
}

/// Runs a scheduling pass and returns `(worker, task)` for each dispatch.
fn dispatch(core: &mut Core, t: &mut RecordingTransport) -> Vec<(u64, u64)> {
    schedule(core, t);
    t.take()
        .into_iter()
        .filter_map(|s| match s {
            Sent::Dispatch(_, w, task) => Some((w.0, task.0)),
            _ => None,
        })
        .collect()
}

fn worker_of(core: &Core, task: u64) -> WorkerId {
    match core.task_state(TaskId(task)) {
        Some(TaskState::Running { worker, .. }) => *worker,
        other => panic!("T{task} is not running: {other:?}"),
    }
}

fn available_cpus(core: &Core) -> f64 {
    core.nodes()[0].available.get("CPU")
}

fn done(core: &mut Core, t: &mut RecordingTransport, task: u64) {
    let w = worker_of(core, task);
    on_task_done(core, t, w, TaskId(task), stored());
}

#[test]
fn one_worker_runs_up_to_max_concurrency_tasks_each_holding_its_resources() {
    let (mut core, mut t) = node(2.0, 2);
    for id in 1..=6 {
        on_submit(&mut core, &mut t, concurrent(id, 4, 0.25));
    }
    let sent = dispatch(&mut core, &mut t);
    // Four together on one worker; the other two start a second worker's group.
    let first = sent[0].0;
    assert_eq!(
        sent.iter().filter(|(w, _)| *w == first).count(),
        4,
        "{sent:?}"
    );
    assert_eq!(sent.len(), 6, "{sent:?}");
    assert_eq!(core.worker_tasks(WorkerId(first)), 4);
    assert_eq!(core.worker_held(WorkerId(first)).unwrap().get("CPU"), 1.0);
    assert_eq!(available_cpus(&core), 2.0 - 6.0 * 0.25);

    // One ends: its share goes back, the others keep theirs, and a queued one takes its place
    // on the same worker.
    on_submit(&mut core, &mut t, concurrent(7, 4, 0.25));
    let t1 = sent[0].1;
    done(&mut core, &mut t, t1);
    assert_eq!(core.worker_held(WorkerId(first)).unwrap().get("CPU"), 0.75);
    let next = dispatch(&mut core, &mut t);
    assert_eq!(next.len(), 1);
    assert_eq!(core.worker_tasks(WorkerId(first)), 4);
    for id in (2..=7).filter(|id| *id != t1) {
        done(&mut core, &mut t, id);
    }
    assert_eq!(available_cpus(&core), 2.0, "everything back");
    assert_eq!(core.running_tasks(), 0);
    // Both workers are idle again: two serial tasks start at once.
    for id in 8..=9 {
        on_submit(&mut core, &mut t, task(id, Vec::new()));
    }
    assert_eq!(dispatch(&mut core, &mut t).len(), 2);
}

#[test]
fn resources_bound_how_many_run_together() {
    // One CPU, tasks of half a CPU allowing 8: only two fit at once.
    let (mut core, mut t) = node(1.0, 1);
    for id in 1..=3 {
        on_submit(&mut core, &mut t, concurrent(id, 8, 0.5));
    }
    assert_eq!(dispatch(&mut core, &mut t), vec![(1, 1), (1, 2)]);
    assert_eq!(available_cpus(&core), 0.0);
    done(&mut core, &mut t, 1);
    assert_eq!(dispatch(&mut core, &mut t), vec![(1, 3)]);
}

#[test]
fn a_worker_runs_together_only_as_many_as_each_of_its_tasks_allows() {
    let (mut core, mut t) = node(4.0, 1);
    on_submit(&mut core, &mut t, concurrent(1, 4, 0.1));
    on_submit(&mut core, &mut t, concurrent(2, 2, 0.1));
    on_submit(&mut core, &mut t, concurrent(3, 4, 0.1));
    // T2 allows two at once: with it running, the worker takes no third.
    assert_eq!(dispatch(&mut core, &mut t), vec![(1, 1), (1, 2)]);
    assert_eq!(core.worker_tasks(WorkerId(1)), 2);
    done(&mut core, &mut t, 2);
    // Without T2 the limit is T1's again.
    assert_eq!(dispatch(&mut core, &mut t), vec![(1, 3)]);
}

#[test]
fn serial_tasks_never_join_nor_queue_behind_tasks_run_together() {
    let (mut core, mut t) = node(4.0, 1);
    on_submit(&mut core, &mut t, concurrent(1, 4, 0.5));
    on_submit(&mut core, &mut t, task(2, Vec::new()));
    assert_eq!(dispatch(&mut core, &mut t), vec![(1, 1)]);
    // The serial task waits for a worker of its own, which it asks for.
    assert!(matches!(
        core.task_state(TaskId(2)),
        Some(TaskState::Queued)
    ));
    done(&mut core, &mut t, 1);
    assert_eq!(dispatch(&mut core, &mut t), vec![(1, 2)]);
    // And a concurrent task is not queued behind a serial one.
    on_submit(&mut core, &mut t, concurrent(3, 4, 0.5));
    assert_eq!(dispatch(&mut core, &mut t), vec![]);
    assert_eq!(core.worker_tasks(WorkerId(1)), 1);
}

#[test]
fn tasks_holding_gpus_run_one_at_a_time() {
    let mut core = Core::new();
    on_node_added(&mut core, N1, ResourceSet::cpus(4.0).with("GPU", 4.0));
    on_worker_added(&mut core, N1, WorkerId(1));
    let mut t = RecordingTransport::default();
    for id in 1..=2 {
        let mut spec = concurrent(id, 4, 0.5);
        spec.resources = spec.resources.with("GPU", 1.0);
        on_submit(&mut core, &mut t, spec);
    }
    assert_eq!(dispatch(&mut core, &mut t), vec![(1, 1)]);
    assert_eq!(core.worker_tasks(WorkerId(1)), 1);
}

#[test]
fn losing_the_worker_retries_every_task_it_ran_and_frees_what_they_held() {
    let (mut core, mut t) = node(2.0, 1);
    for id in 1..=3 {
        on_submit(&mut core, &mut t, concurrent(id, 4, 0.5));
    }
    assert_eq!(dispatch(&mut core, &mut t).len(), 3);
    on_worker_removed(&mut core, &mut t, WorkerId(1), "killed");
    assert_eq!(available_cpus(&core), 2.0);
    for id in 1..=3 {
        assert!(
            matches!(core.task_state(TaskId(id)), Some(TaskState::Queued)),
            "T{id} waits to run again"
        );
    }
    // A new worker runs them together again.
    on_worker_added(&mut core, N1, WorkerId(2));
    assert_eq!(dispatch(&mut core, &mut t).len(), 3);
    assert_eq!(core.worker_tasks(WorkerId(2)), 3);
}

#[test]
fn force_cancel_of_one_task_run_together_stops_its_worker_and_retries_the_others() {
    let (mut core, mut t) = node(2.0, 1);
    for id in 1..=2 {
        on_submit(&mut core, &mut t, concurrent(id, 4, 0.5));
    }
    assert_eq!(dispatch(&mut core, &mut t).len(), 2);
    assert!(on_cancel(&mut core, &mut t, TaskId(1), true));
    assert!(
        core.task_state(TaskId(1)).is_none(),
        "the cancelled task ended"
    );
    assert!(
        matches!(core.task_state(TaskId(2)), Some(TaskState::Queued)),
        "its neighbour runs again elsewhere"
    );
    assert_eq!(available_cpus(&core), 2.0);
}
