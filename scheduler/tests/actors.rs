//! Actors in the scheduler: creation on a worker that then belongs to the actor, calls routed
//! there in submission order, restarts, kills, names, and the actor's life tied to its handles.

use std::sync::Arc;

use starling_proto::{
    ActorOptions, ActorRole, FailureKind, JobId, NodeId, ObjectId, RemoteError, ResourceSet,
    TaskArg, TaskId, TaskSpec, WorkerId,
};
use starling_scheduler::actors::ActorState;
use starling_scheduler::reactor::{
    on_cancel, on_job_ended, on_kill_actor, on_node_added, on_put, on_release, on_submit,
    on_task_done, on_worker_added, on_worker_removed, schedule,
};
use starling_scheduler::testing::{task, RecordingTransport, Sent};
use starling_scheduler::{Core, ObjectState, TaskOutcome};

const N1: NodeId = NodeId(1);
const A: u64 = 10;

fn options(max_restarts: u32, max_task_retries: u32) -> ActorOptions {
    ActorOptions {
        class_name: "Counter".into(),
        max_restarts,
        max_task_retries,
        name: String::new(),
        detached: false,
        max_concurrency: 0,
    }
}

fn create(id: u64, o: ActorOptions) -> TaskSpec {
    let mut spec = task(id, Vec::new());
    spec.extras.make_mut().actor = ActorRole::Create(Arc::new(o));
    spec
}

fn call(id: u64, actor: u64, args: Vec<TaskArg>) -> TaskSpec {
    let mut spec = task(id, args);
    spec.resources = ResourceSet::new();
    spec.extras.make_mut().actor = ActorRole::Call(TaskId(actor));
    spec
}

/// One node with 2 CPUs and workers 1 and 2 (1 the most recently idle, so the first taken).
fn cluster() -> (Core, RecordingTransport) {
    let mut core = Core::new();
    core.set_pipeline_depth(4);
    on_node_added(&mut core, N1, ResourceSet::cpus(2.0));
    for w in [2, 1] {
        on_worker_added(&mut core, N1, WorkerId(w));
    }
    (core, RecordingTransport::default())
}

/// A scheduling pass; the `(worker, task)` dispatched.
fn pass(core: &mut Core, t: &mut RecordingTransport) -> Vec<(u64, u64)> {
    schedule(core, t);
    t.take()
        .into_iter()
        .filter_map(|s| match s {
            Sent::Dispatch(_, w, task) => Some((w.0, task.0)),
            _ => None,
        })
        .collect()
}

fn stored() -> TaskOutcome {
    TaskOutcome::Stored { size: 8 }
}

fn done(core: &mut Core, t: &mut RecordingTransport, worker: u64, task_id: u64) {
    on_task_done(core, t, WorkerId(worker), TaskId(task_id), stored());
}

fn state(core: &Core, actor: u64) -> ActorState {
    core.actors()
        .into_iter()
        .find(|a| a.id == TaskId(actor))
        .expect("a known actor")
        .state
}

fn cpus_free(core: &Core) -> f64 {
    core.nodes()[0].available.get("CPU")
}

/// The cause of `task`'s `ActorDied` failure.
fn died(core: &Core, task_id: u64) -> String {
    match core.object_state(ObjectId(task_id)) {
        Some(ObjectState::Failed(f)) => match &f.kind {
            FailureKind::ActorDied { actor, cause } => {
                assert_eq!(*actor, TaskId(A));
                cause.clone()
            }
            other => panic!("T{task_id} failed otherwise: {other:?}"),
        },
        other => panic!("T{task_id} did not fail: {other:?}"),
    }
}

/// An actor created on worker 1 and alive.
fn alive(o: ActorOptions) -> (Core, RecordingTransport) {
    let (mut core, mut t) = cluster();
    on_submit(&mut core, &mut t, create(A, o));
    assert_eq!(pass(&mut core, &mut t), [(1, A)]);
    done(&mut core, &mut t, 1, A);
    assert!(matches!(state(&core, A), ActorState::Alive { .. }));
    (core, t)
}

#[test]
fn calls_go_to_the_actor_s_worker_in_the_order_they_were_submitted() {
    let (mut core, mut t) = cluster();
    on_submit(&mut core, &mut t, create(A, options(0, 0)));
    // Calls made before the actor exists wait for it.
    for id in 11..=13 {
        on_submit(&mut core, &mut t, call(id, A, Vec::new()));
    }
    assert_eq!(pass(&mut core, &mut t), [(1, A)]);
    assert_eq!(state(&core, A), ActorState::PendingCreation);
    done(&mut core, &mut t, 1, A);
    assert_eq!(pass(&mut core, &mut t), [(1, 11), (1, 12), (1, 13)]);
    // The actor keeps its CPU between calls and after them; its worker is nobody else's.
    for id in 11..=13 {
        done(&mut core, &mut t, 1, id);
    }
    assert_eq!(cpus_free(&core), 1.0);
    on_submit(&mut core, &mut t, task(20, Vec::new()));
    on_submit(&mut core, &mut t, task(21, Vec::new()));
    assert_eq!(
        pass(&mut core, &mut t),
        [(2, 20)],
        "T21 waits: worker 1 is the actor's"
    );
    assert_eq!(core.actors()[0].calls_served, 3);
}

#[test]
fn a_call_waiting_for_its_argument_holds_back_the_calls_behind_it() {
    let (mut core, mut t) = alive(options(0, 0));
    // T30 makes the argument of the first call; the second call has none.
    on_submit(&mut core, &mut t, task(30, Vec::new()));
    on_submit(
        &mut core,
        &mut t,
        call(11, A, vec![TaskArg::Object(ObjectId(30))]),
    );
    on_submit(&mut core, &mut t, call(12, A, Vec::new()));
    assert_eq!(pass(&mut core, &mut t), [(2, 30)]);
    done(&mut core, &mut t, 2, 30);
    assert_eq!(pass(&mut core, &mut t), [(1, 11), (1, 12)]);
}

#[test]
fn a_failing_constructor_kills_the_actor_and_its_calls_say_why() {
    let (mut core, mut t) = cluster();
    on_submit(&mut core, &mut t, create(A, options(3, 0)));
    on_submit(&mut core, &mut t, call(11, A, Vec::new()));
    pass(&mut core, &mut t);
    let err = RemoteError::new("my::Error", "no database".to_string());
    on_task_done(
        &mut core,
        &mut t,
        WorkerId(1),
        TaskId(A),
        TaskOutcome::Failed(err),
    );
    assert!(died(&core, A).contains("no database"), "{}", died(&core, A));
    assert!(died(&core, 11).contains("no database"));
    assert!(matches!(state(&core, A), ActorState::Dead(_)));
    assert!(
        t.sent.contains(&Sent::KillWorker(WorkerId(1))),
        "the worker is stopped"
    );
    assert_eq!(cpus_free(&core), 2.0, "what the actor held is free");
    // A call made now fails at once.
    on_submit(&mut core, &mut t, call(12, A, Vec::new()));
    assert!(died(&core, 12).contains("no database"));
}

#[test]
fn a_lost_worker_restarts_the_actor_and_retries_its_calls_while_it_may() {
    let (mut core, mut t) = alive(options(1, 1));
    on_submit(&mut core, &mut t, call(11, A, Vec::new()));
    on_submit(&mut core, &mut t, call(12, A, Vec::new()));
    assert_eq!(pass(&mut core, &mut t), [(1, 11), (1, 12)]);
    on_worker_removed(&mut core, &mut t, WorkerId(1), "killed by signal 9");
    assert_eq!(state(&core, A), ActorState::Restarting);
    // The constructor runs again (on a new worker), then the lost calls, in order.
    on_worker_added(&mut core, N1, WorkerId(3));
    assert_eq!(pass(&mut core, &mut t), [(3, A)]);
    done(&mut core, &mut t, 3, A);
    assert_eq!(pass(&mut core, &mut t), [(3, 11), (3, 12)]);
    assert_eq!(core.actors()[0].restarts, 1);
    // Lost again: no restarts left, so it dies; the calls on it fail.
    on_worker_removed(&mut core, &mut t, WorkerId(3), "killed by signal 9");
    assert!(matches!(state(&core, A), ActorState::Dead(_)));
    assert!(
        died(&core, 11).contains("killed by signal 9"),
        "{}",
        died(&core, 11)
    );
    assert!(died(&core, 12).contains("no restarts left"));
    assert_eq!(cpus_free(&core), 2.0);
}

#[test]
fn a_call_without_retries_fails_when_the_actor_restarts() {
    let (mut core, mut t) = alive(options(1, 0));
    on_submit(&mut core, &mut t, call(11, A, Vec::new()));
    pass(&mut core, &mut t);
    on_worker_removed(&mut core, &mut t, WorkerId(1), "exit code 1");
    assert!(died(&core, 11).contains("during the call"));
    assert_eq!(state(&core, A), ActorState::Restarting);
}

#[test]
fn kill_ends_the_actor_at_once_and_fails_what_it_had() {
    let (mut core, mut t) = alive(options(5, 5));
    on_submit(&mut core, &mut t, call(11, A, Vec::new()));
    pass(&mut core, &mut t);
    on_submit(&mut core, &mut t, task(30, Vec::new()));
    on_submit(
        &mut core,
        &mut t,
        call(12, A, vec![TaskArg::Object(ObjectId(30))]),
    );
    assert!(on_kill_actor(&mut core, &mut t, TaskId(A), true));
    assert!(t.sent.contains(&Sent::KillWorker(WorkerId(1))));
    assert!(died(&core, 11).contains("killed"));
    assert!(died(&core, 12).contains("killed"));
    assert!(matches!(state(&core, A), ActorState::Dead(_)), "no restart");
    // Its worker's late report changes nothing.
    done(&mut core, &mut t, 1, 11);
    assert_eq!(
        cpus_free(&core),
        2.0,
        "the actor's CPU is free (T30 is not placed yet)"
    );
    assert!(
        !on_kill_actor(&mut core, &mut t, TaskId(A), true),
        "already dead"
    );
}

#[test]
fn kill_with_restart_starts_the_actor_again() {
    let (mut core, mut t) = alive(options(1, 0));
    assert!(on_kill_actor(&mut core, &mut t, TaskId(A), false));
    assert_eq!(state(&core, A), ActorState::Restarting);
    assert_eq!(pass(&mut core, &mut t), [(2, A)]);
}

#[test]
fn the_actor_ends_when_its_last_handle_goes_and_its_calls_are_done() {
    let (mut core, mut t) = alive(options(0, 0));
    on_submit(&mut core, &mut t, call(11, A, Vec::new()));
    pass(&mut core, &mut t);
    // The creator drops its handle while a call runs: the call finishes first.
    on_release(&mut core, &mut t, ObjectId(A));
    assert!(matches!(state(&core, A), ActorState::Alive { .. }));
    done(&mut core, &mut t, 1, 11);
    assert!(matches!(state(&core, A), ActorState::Dead(_)));
    assert!(t.sent.contains(&Sent::KillWorker(WorkerId(1))));
    assert_eq!(cpus_free(&core), 2.0);
}

#[test]
fn a_detached_actor_outlives_its_handles_until_killed() {
    let mut o = options(0, 0);
    o.detached = true;
    o.name = "keeper".into();
    let (mut core, mut t) = alive(o);
    assert!(
        t.sent.contains(&Sent::KeepWorker(WorkerId(1))),
        "its process is kept past its job's end"
    );
    on_release(&mut core, &mut t, ObjectId(A));
    assert!(matches!(state(&core, A), ActorState::Alive { .. }));
    on_job_ended(&mut core, &mut t, JobId(0));
    assert!(
        matches!(state(&core, A), ActorState::Alive { .. }),
        "detached outlives its job"
    );
    assert!(core.has_live_detached_actors(JobId(0)));
    assert_eq!(core.actor_named("keeper"), Some(TaskId(A)));
    on_kill_actor(&mut core, &mut t, TaskId(A), true);
    assert_eq!(
        core.actor_named("keeper"),
        None,
        "a dead actor's name is free"
    );
    assert_eq!(
        core.object_state(ObjectId(A)),
        None,
        "its object went with its last hold"
    );
}

#[test]
fn a_name_is_one_live_actor_s() {
    let mut o = options(0, 0);
    o.name = "counter".into();
    let (mut core, mut t) = alive(o.clone());
    on_submit(&mut core, &mut t, create(20, o));
    match core.object_state(ObjectId(20)) {
        Some(ObjectState::Failed(f)) => assert!(f.to_string().contains("is taken by actor")),
        other => panic!("a second actor named counter: {other:?}"),
    }
    assert_eq!(core.actor_named("counter"), Some(TaskId(A)));
}

#[test]
fn a_job_that_ends_takes_its_actors_with_it() {
    let (mut core, mut t) = alive(options(3, 0));
    assert!(!t.sent.iter().any(|s| matches!(s, Sent::KeepWorker(_))));
    assert!(!core.has_live_detached_actors(JobId(0)));
    on_submit(&mut core, &mut t, call(11, A, Vec::new()));
    on_job_ended(&mut core, &mut t, JobId(0));
    assert!(matches!(state(&core, A), ActorState::Dead(_)));
    assert_eq!(cpus_free(&core), 2.0);
}

#[test]
fn calls_of_an_unknown_actor_fail_and_calls_are_never_forced() {
    let (mut core, mut t) = alive(options(0, 0));
    on_submit(&mut core, &mut t, call(11, 99, Vec::new()));
    match core.object_state(ObjectId(11)) {
        Some(ObjectState::Failed(f)) => assert!(f.to_string().contains("no such actor")),
        other => panic!("a call of no actor: {other:?}"),
    }
    on_submit(&mut core, &mut t, call(12, A, Vec::new()));
    pass(&mut core, &mut t);
    assert!(on_cancel(&mut core, &mut t, TaskId(12), true));
    assert!(
        t.sent
            .contains(&Sent::CancelRunning(WorkerId(1), TaskId(12), false)),
        "a call is asked to stop, its worker not killed: {:?}",
        t.sent
    );
    assert!(matches!(state(&core, A), ActorState::Alive { .. }));
}

#[test]
fn the_actor_holds_its_constructor_s_arguments_until_it_dies() {
    let (mut core, mut t) = cluster();
    on_put(&mut core, ObjectId(50), N1, 8);
    let mut spec = create(A, options(1, 0));
    spec.args = vec![TaskArg::Object(ObjectId(50))];
    on_submit(&mut core, &mut t, spec);
    on_release(&mut core, &mut t, ObjectId(50));
    pass(&mut core, &mut t);
    done(&mut core, &mut t, 1, A);
    assert!(
        core.object_state(ObjectId(50)).is_some(),
        "kept for a restart"
    );
    // Restarted: the constructor gets its argument again.
    on_worker_removed(&mut core, &mut t, WorkerId(1), "exit code 1");
    assert_eq!(pass(&mut core, &mut t), [(2, A)]);
    done(&mut core, &mut t, 2, A);
    on_kill_actor(&mut core, &mut t, TaskId(A), true);
    assert_eq!(
        core.object_state(ObjectId(50)),
        None,
        "let go with the actor"
    );
}

#[test]
fn an_async_actor_has_at_most_max_concurrency_calls_in_flight() {
    let mut o = options(0, 0);
    o.max_concurrency = 2;
    let (mut core, mut t) = alive(o);
    for id in 11..=14 {
        on_submit(&mut core, &mut t, call(id, A, Vec::new()));
    }
    assert_eq!(pass(&mut core, &mut t), [(1, 11), (1, 12)]);
    // Either may end first; each end lets the next call in.
    done(&mut core, &mut t, 1, 12);
    assert_eq!(pass(&mut core, &mut t), [(1, 13)]);
    done(&mut core, &mut t, 1, 11);
    assert_eq!(pass(&mut core, &mut t), [(1, 14)]);
}

#[test]
fn actors_waiting_to_be_created_ask_for_their_workers_together() {
    let (mut core, mut t) = cluster();
    let zero = |id| {
        let mut spec = create(id, options(0, 0));
        spec.resources = ResourceSet::new();
        spec
    };
    for id in 20..32 {
        on_submit(&mut core, &mut t, zero(id));
    }
    schedule(&mut core, &mut t);
    let sent = t.take();
    let dispatched = sent
        .iter()
        .filter(|s| matches!(s, Sent::Dispatch(..)))
        .count();
    let asked = sent
        .iter()
        .filter(|s| matches!(s, Sent::RequestWorker(..)))
        .count();
    assert_eq!(dispatched, 2, "the two idle workers take two actors");
    assert_eq!(
        asked,
        starling_scheduler::reactor::PARALLEL_ACTOR_STARTS,
        "the next actors' workers are asked for together, up to the limit"
    );
    // Asked again on the next pass: nothing more while those start.
    schedule(&mut core, &mut t);
    assert!(!t
        .take()
        .iter()
        .any(|s| matches!(s, Sent::RequestWorker(..))));
    // One arrives and takes an actor: one more is asked for.
    on_worker_added(&mut core, N1, WorkerId(3));
    schedule(&mut core, &mut t);
    let sent = t.take();
    assert_eq!(
        sent.iter()
            .filter(|s| matches!(s, Sent::RequestWorker(..)))
            .count(),
        1
    );
}

#[test]
fn only_the_latest_dead_actors_are_kept() {
    let (mut core, mut t) = cluster();
    let max = starling_scheduler::actors::MAX_DEAD_ACTORS as u64;
    let zero = |id| {
        let mut spec = create(id, options(0, 0));
        spec.resources = ResourceSet::new();
        spec
    };
    for id in 100..100 + max + 5 {
        on_submit(&mut core, &mut t, zero(id));
        on_kill_actor(&mut core, &mut t, TaskId(id), true);
    }
    let listed = core.actors();
    assert_eq!(
        listed.len() as u64,
        max,
        "dead actors past the cap are forgotten"
    );
    assert_eq!(listed[0].id, TaskId(105), "the oldest go first");
    assert!(listed
        .iter()
        .all(|a| matches!(a.state, ActorState::Dead(_))));
    on_submit(&mut core, &mut t, call(50_000, 100, Vec::new()));
    match core.object_state(ObjectId(50_000)) {
        Some(ObjectState::Failed(f)) => assert!(f.to_string().contains("no such actor")),
        other => panic!("a call of a forgotten actor: {other:?}"),
    }
}

/// A call its caller also sent straight to `worker`.
fn straight(id: u64, actor: u64, worker: u64) -> TaskSpec {
    let mut spec = call(id, actor, Vec::new());
    spec.extras.make_mut().direct = Some(WorkerId(worker));
    spec
}

fn running_on(core: &Core, task_id: u64, worker: u64) -> bool {
    matches!(
        core.task_state(TaskId(task_id)),
        Some(starling_scheduler::TaskState::Running { worker: w, .. }) if *w == WorkerId(worker)
    )
}

fn settled(core: &Core, task_id: u64) -> bool {
    matches!(
        core.object_state(ObjectId(task_id)),
        Some(ObjectState::Ready { .. })
    )
}

#[test]
fn calls_sent_straight_run_without_a_hand_over_and_hold_back_their_caller_s_queued_calls() {
    let (mut core, mut t) = alive(options(0, 0));
    on_submit(&mut core, &mut t, straight(11, A, 1));
    on_submit(&mut core, &mut t, straight(12, A, 1));
    // The same caller's next call takes the scheduler's way (ids 11..13: one session).
    on_submit(&mut core, &mut t, call(13, A, Vec::new()));
    assert_eq!(pass(&mut core, &mut t), [], "nothing handed over yet");
    assert!(running_on(&core, 11, 1) && running_on(&core, 12, 1));
    done(&mut core, &mut t, 1, 11);
    assert_eq!(pass(&mut core, &mut t), [], "13 waits for 12");
    done(&mut core, &mut t, 1, 12);
    assert_eq!(pass(&mut core, &mut t), [(1, 13)]);
    done(&mut core, &mut t, 1, 13);
    assert!((11..=13).all(|id| settled(&core, id)));
}

#[test]
fn a_call_sent_straight_may_be_reported_before_the_scheduler_saw_its_actor_made() {
    let (mut core, mut t) = cluster();
    on_submit(&mut core, &mut t, create(A, options(0, 0)));
    assert_eq!(pass(&mut core, &mut t), [(1, A)]);
    // The constructor ran and the worker answered the call before its creation was reported.
    on_submit(&mut core, &mut t, straight(11, A, 1));
    assert!(!running_on(&core, 11, 1));
    starling_scheduler::actors::direct_report(&mut core, WorkerId(1), TaskId(11));
    assert!(running_on(&core, 11, 1));
    done(&mut core, &mut t, 1, 11);
    assert!(settled(&core, 11));
    done(&mut core, &mut t, 1, A);
    assert!(matches!(state(&core, A), ActorState::Alive { .. }));
    assert_eq!(pass(&mut core, &mut t), [], "not handed over after all");
    // Another task's report on a worker is not taken for a call sent straight.
    on_submit(&mut core, &mut t, call(12, A, Vec::new()));
    starling_scheduler::actors::direct_report(&mut core, WorkerId(1), TaskId(12));
    assert_eq!(pass(&mut core, &mut t), [(1, 12)]);
}

#[test]
fn calls_sent_to_a_worker_the_actor_no_longer_has_run_on_its_next_one_in_order() {
    let (mut core, mut t) = alive(options(1, 1));
    on_submit(&mut core, &mut t, straight(11, A, 1));
    on_submit(&mut core, &mut t, straight(12, A, 1));
    on_worker_removed(&mut core, &mut t, WorkerId(1), "killed by signal 9");
    // The caller had not noticed yet: one more sent to the dead worker, then one of the
    // scheduler's way.
    on_submit(&mut core, &mut t, straight(13, A, 1));
    on_submit(&mut core, &mut t, call(14, A, Vec::new()));
    assert_eq!(pass(&mut core, &mut t), [(2, A)], "restarted on worker 2");
    done(&mut core, &mut t, 2, A);
    assert_eq!(
        pass(&mut core, &mut t),
        [(2, 11), (2, 12), (2, 13), (2, 14)],
        "run again (11, 12), or handed over (13), in their caller's order"
    );
    for id in 11..=14 {
        done(&mut core, &mut t, 2, id);
    }
    assert!((11..=14).all(|id| settled(&core, id)));
}

#[test]
fn a_call_is_taken_as_sent_straight_only_to_the_worker_the_actor_runs_on_now() {
    use starling_scheduler::actors::takes_direct;
    let (mut core, mut t) = cluster();
    on_submit(&mut core, &mut t, create(A, options(1, 0)));
    assert!(
        !takes_direct(&core, TaskId(A), WorkerId(1)),
        "not placed yet"
    );
    assert_eq!(pass(&mut core, &mut t), [(1, A)]);
    assert!(
        takes_direct(&core, TaskId(A), WorkerId(1)),
        "being made there"
    );
    assert!(!takes_direct(&core, TaskId(A), WorkerId(2)));
    done(&mut core, &mut t, 1, A);
    assert!(takes_direct(&core, TaskId(A), WorkerId(1)), "alive there");
    on_worker_removed(&mut core, &mut t, WorkerId(1), "killed by signal 9");
    assert!(!takes_direct(&core, TaskId(A), WorkerId(1)), "gone");
    assert_eq!(pass(&mut core, &mut t), [(2, A)]);
    assert!(
        takes_direct(&core, TaskId(A), WorkerId(2)),
        "being made again there"
    );
    on_kill_actor(&mut core, &mut t, TaskId(A), true);
    assert!(!takes_direct(&core, TaskId(A), WorkerId(2)), "dead");
    assert!(
        !takes_direct(&core, TaskId(99), WorkerId(2)),
        "no such actor"
    );
}
