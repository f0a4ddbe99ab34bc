//! Tasks with environment variables of their own (`TaskSpec::env`): each environment of a job
//! is a worker pool of its own, asked for with that environment and never mixed with another.

use starling_proto::{
    EnvId, FailureKind, JobId, NodeId, ObjectId, ResourceSet, TaskEnv, TaskId, TaskSpec, WorkerId,
};
use starling_scheduler::reactor::{
    on_node_added, on_pool_worker_added, on_submit, on_task_done, on_worker_added,
    on_worker_removed, schedule,
};
use starling_scheduler::testing::{task, RecordingTransport, Sent};
use starling_scheduler::{Core, ObjectState, Pool, TaskOutcome};

const N1: NodeId = NodeId(1);

fn env(vars: &[(&str, &str)]) -> TaskEnv {
    TaskEnv::new(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

fn with_env(id: u64, e: &TaskEnv) -> TaskSpec {
    let mut spec = task(id, Vec::new());
    spec.extras.make_mut().env = e.clone();
    spec
}

fn node(cpus: f64) -> (Core, RecordingTransport) {
    let mut core = Core::new();
    core.set_pipeline_depth(8);
    on_node_added(&mut core, N1, ResourceSet::cpus(cpus));
    (core, RecordingTransport::default())
}

fn pool(e: &TaskEnv) -> Pool {
    Pool {
        job: JobId(0),
        env: e.id(),
    }
}

/// Runs a scheduling pass and returns the dispatches and worker requests sent since the last.
fn pass(core: &mut Core, t: &mut RecordingTransport) -> Vec<Sent> {
    schedule(core, t);
    t.take()
        .into_iter()
        .filter(|s| matches!(s, Sent::Dispatch(..) | Sent::RequestWorker(..)))
        .collect()
}

fn unschedulable_reason(core: &Core, task: u64) -> String {
    match core.object_state(ObjectId(task)) {
        Some(ObjectState::Failed(f)) => match &f.kind {
            FailureKind::Unschedulable(reason) => reason.clone(),
            other => panic!("T{task} failed otherwise: {other:?}"),
        },
        other => panic!("T{task} did not fail: {other:?}"),
    }
}

#[test]
fn a_task_with_an_environment_asks_for_a_worker_of_it_and_runs_only_there() {
    let (mut core, mut t) = node(4.0);
    // A plain worker is idle: it does not run a task of another environment.
    on_worker_added(&mut core, N1, WorkerId(1));
    let e = env(&[("MODE", "fast")]);
    on_submit(&mut core, &mut t, with_env(1, &e));
    assert_eq!(
        pass(&mut core, &mut t),
        [Sent::RequestWorker(N1, JobId(0), e.id())]
    );
    assert_eq!(t.envs[&e.id()], e, "the request carries the variables");
    // Asked once: a second pass does not ask again while the first request is pending.
    assert_eq!(pass(&mut core, &mut t), []);
    on_pool_worker_added(&mut core, N1, pool(&e), WorkerId(2));
    assert_eq!(
        pass(&mut core, &mut t),
        [Sent::Dispatch(N1, WorkerId(2), TaskId(1))]
    );
    // A plain task goes to the plain worker, never to the environment's.
    on_submit(&mut core, &mut t, task(2, Vec::new()));
    assert_eq!(
        pass(&mut core, &mut t),
        [Sent::Dispatch(N1, WorkerId(1), TaskId(2))]
    );
}

#[test]
fn the_same_variables_share_a_pool_and_different_ones_do_not() {
    let (mut core, mut t) = node(4.0);
    let a = env(&[("A", "1"), ("B", "2")]);
    let same = env(&[("B", "2"), ("A", "1")]);
    let other = env(&[("A", "2")]);
    on_pool_worker_added(&mut core, N1, pool(&a), WorkerId(1));
    on_submit(&mut core, &mut t, with_env(1, &a));
    assert_eq!(
        pass(&mut core, &mut t),
        [Sent::Dispatch(N1, WorkerId(1), TaskId(1))]
    );
    on_task_done(
        &mut core,
        &mut t,
        WorkerId(1),
        TaskId(1),
        TaskOutcome::Stored { size: 1 },
    );
    // The same set, written in another order, reuses the warm worker.
    on_submit(&mut core, &mut t, with_env(2, &same));
    assert_eq!(
        pass(&mut core, &mut t),
        [Sent::Dispatch(N1, WorkerId(1), TaskId(2))]
    );
    on_task_done(
        &mut core,
        &mut t,
        WorkerId(1),
        TaskId(2),
        TaskOutcome::Stored { size: 1 },
    );
    // Another value is another pool: asked for, not run on the idle worker of `a`.
    on_submit(&mut core, &mut t, with_env(3, &other));
    assert_eq!(
        pass(&mut core, &mut t),
        [Sent::RequestWorker(N1, JobId(0), other.id())]
    );
}

#[test]
fn a_busy_worker_of_another_environment_never_takes_a_task_behind_its_own() {
    let (mut core, mut t) = node(1.0);
    let a = env(&[("A", "1")]);
    let b = env(&[("A", "2")]);
    on_pool_worker_added(&mut core, N1, pool(&a), WorkerId(1));
    on_submit(&mut core, &mut t, with_env(1, &a));
    assert_eq!(
        pass(&mut core, &mut t),
        [Sent::Dispatch(N1, WorkerId(1), TaskId(1))]
    );
    // The node is full; a task of `b` is not pipelined behind the task of `a`.
    on_submit(&mut core, &mut t, with_env(2, &b));
    let sent = pass(&mut core, &mut t);
    assert!(
        !sent.iter().any(|s| matches!(s, Sent::Dispatch(..))),
        "{sent:?}"
    );
}

#[test]
fn a_lost_worker_of_an_environment_is_replaced_by_one_of_the_same() {
    let (mut core, mut t) = node(2.0);
    let e = env(&[("K", "v")]);
    on_pool_worker_added(&mut core, N1, pool(&e), WorkerId(1));
    on_submit(&mut core, &mut t, with_env(1, &e));
    pass(&mut core, &mut t);
    on_worker_removed(&mut core, &mut t, WorkerId(1), "killed");
    // The retry asks for a worker of the task's environment.
    assert!(
        pass(&mut core, &mut t).contains(&Sent::RequestWorker(N1, JobId(0), e.id())),
        "no worker of the environment asked for"
    );
}

#[test]
fn variables_no_process_could_be_started_with_fail_the_task_as_unschedulable() {
    let (mut core, mut t) = node(2.0);
    on_submit(&mut core, &mut t, with_env(1, &env(&[("A=B", "v")])));
    assert!(unschedulable_reason(&core, 1).contains("NAME=VALUE"));
    on_submit(
        &mut core,
        &mut t,
        with_env(2, &env(&[("STARLING_JOB_ID", "9")])),
    );
    assert!(unschedulable_reason(&core, 2).contains("Starling's own"));
    assert_eq!(
        pass(&mut core, &mut t),
        [],
        "nothing asked for a refused task"
    );
    assert_eq!(core.live_tasks(), 0);
}

#[test]
fn where_environments_are_refused_a_task_with_one_fails_and_plain_tasks_run() {
    let (mut core, mut t) = node(2.0);
    core.refuse_task_envs("tasks run on threads of one process");
    on_worker_added(&mut core, N1, WorkerId(1));
    on_submit(&mut core, &mut t, with_env(1, &env(&[("A", "1")])));
    assert_eq!(
        unschedulable_reason(&core, 1),
        "tasks run on threads of one process"
    );
    on_submit(&mut core, &mut t, task(2, Vec::new()));
    assert_eq!(
        pass(&mut core, &mut t),
        [Sent::Dispatch(N1, WorkerId(1), TaskId(2))]
    );
    assert_eq!(EnvId::NONE, TaskEnv::default().id());
}
