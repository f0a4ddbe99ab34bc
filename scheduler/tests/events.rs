//! Task events through the reactor: one record per attempt, stamped as the attempt moves from
//! pending to running to finished or failed, with retries and failures upstream recorded.

use starling_proto::state::{Filter, TaskQuery, TaskStatus};
use starling_proto::{NodeId, ObjectId, RemoteError, ResourceSet, TaskArg, TaskId, WorkerId};
use starling_scheduler::reactor::{
    on_cancel, on_node_added, on_submit, on_task_done, on_worker_added, on_worker_removed, schedule,
};
use starling_scheduler::testing::{task, RecordingTransport};
use starling_scheduler::{Core, TaskOutcome};

/// A clock that ticks one microsecond per reading.
fn ticks() -> u64 {
    static T: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000);
    T.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn cluster() -> (Core, RecordingTransport) {
    let mut core = Core::new();
    core.set_clock(ticks);
    on_node_added(&mut core, NodeId(1), ResourceSet::cpus(2.0));
    on_worker_added(&mut core, NodeId(1), WorkerId(1));
    on_worker_added(&mut core, NodeId(1), WorkerId(2));
    (core, RecordingTransport::default())
}

fn records(core: &Core, filters: &[&str]) -> Vec<starling_proto::state::TaskEvent> {
    core.task_events()
        .query(&TaskQuery {
            filters: filters.iter().map(|f| Filter::parse(f).unwrap()).collect(),
            ..Default::default()
        })
        .tasks
}

fn done(core: &mut Core, t: &mut RecordingTransport, w: u64, task: u64) {
    on_task_done(
        core,
        t,
        WorkerId(w),
        TaskId(task),
        TaskOutcome::Stored { size: 8 },
    );
}

#[test]
fn a_chain_moves_through_every_state() {
    let (mut core, mut t) = cluster();
    on_submit(&mut core, &mut t, task(1, Vec::new()));
    on_submit(
        &mut core,
        &mut t,
        task(2, vec![TaskArg::Object(ObjectId(1))]),
    );
    let states = |core: &Core| {
        records(core, &[])
            .iter()
            .map(|e| (e.task.0, e.state))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        states(&core),
        [
            (1, TaskStatus::PendingNodeAssignment),
            (2, TaskStatus::PendingArgsAvail)
        ]
    );
    schedule(&mut core, &mut t);
    assert_eq!(states(&core)[0], (1, TaskStatus::Running));
    let w = t.dispatched()[0].0;
    done(&mut core, &mut t, w.0, 1);
    assert_eq!(states(&core)[0], (1, TaskStatus::Finished));
    assert_eq!(states(&core)[1], (2, TaskStatus::PendingNodeAssignment));
    schedule(&mut core, &mut t);
    let w = t.dispatched().last().unwrap().0;
    done(&mut core, &mut t, w.0, 2);
    let all = records(&core, &[]);
    assert!(all.iter().all(|e| e.state == TaskStatus::Finished));
    let second = &all[1];
    assert_eq!(second.node, Some(NodeId(1)));
    assert_eq!(second.worker, Some(w));
    // Changes of one batch (up to its scheduling pass) share one clock reading.
    assert!(
        second.submitted_us < second.ready_us
            && second.ready_us <= second.started_us
            && second.started_us < second.ended_us,
        "{second:?}"
    );
    // The second became ready when the first ended, in that batch.
    assert_eq!(all[0].ended_us, second.ready_us);
}

#[test]
fn retries_failures_upstream_and_cancels_are_recorded() {
    let (mut core, mut t) = cluster();
    // Task 1 retries application errors once; task 2 depends on it; task 3 loses its worker
    // and is retried; task 4 is cancelled while queued.
    let mut flaky = task(1, Vec::new());
    flaky.max_retries = 1;
    flaky.extras.make_mut().retry_exceptions = true;
    on_submit(&mut core, &mut t, flaky);
    on_submit(
        &mut core,
        &mut t,
        task(2, vec![TaskArg::Object(ObjectId(1))]),
    );
    on_submit(&mut core, &mut t, task(3, Vec::new()));
    schedule(&mut core, &mut t);
    let on = |t: &RecordingTransport, task: u64| {
        t.dispatched()
            .iter()
            .rev()
            .find(|(_, x)| x.0 == task)
            .map(|(w, _)| *w)
            .unwrap()
    };
    let fail = |e: &str| TaskOutcome::Failed(RemoteError::new("app::Oops", e));
    let w1 = on(&t, 1);
    on_task_done(&mut core, &mut t, w1, TaskId(1), fail("first"));
    let w3 = on(&t, 3);
    on_worker_removed(&mut core, &mut t, w3, "killed by signal 9");
    on_worker_added(&mut core, NodeId(1), WorkerId(3));
    schedule(&mut core, &mut t);
    let w1 = on(&t, 1);
    on_task_done(&mut core, &mut t, w1, TaskId(1), fail("second"));
    on_submit(&mut core, &mut t, task(4, Vec::new()));
    assert!(on_cancel(&mut core, &mut t, TaskId(4), false));

    let of = |task: u64| records(&core, &[&format!("task_id={task}")]);
    let one = of(1);
    assert_eq!(one.len(), 2, "{one:?}");
    assert_eq!((one[0].attempt, one[0].state), (0, TaskStatus::Failed));
    assert_eq!((one[1].attempt, one[1].state), (1, TaskStatus::Failed));
    assert_eq!(one[1].error_type, "app::Oops");
    assert!(one[1].error.contains("second"), "{}", one[1].error);
    let two = of(2);
    assert_eq!(two.len(), 1);
    assert_eq!(two[0].state, TaskStatus::Failed);
    assert_eq!(two[0].error_type, "UpstreamFailed");
    let three = of(3);
    assert_eq!(three.len(), 2, "{three:?}");
    assert_eq!(three[0].error_type, "WorkerDied");
    assert_eq!(three[1].attempt, 1);
    assert!(matches!(
        three[1].state,
        TaskStatus::Running | TaskStatus::PendingNodeAssignment
    ));
    let four = of(4);
    assert_eq!(four[0].error_type, "Cancelled");
    assert_eq!(records(&core, &["state=FAILED"]).len(), 5);
    // A summary counts attempts by function and state.
    let summary = core
        .task_events()
        .query(&TaskQuery {
            summary: true,
            ..Default::default()
        })
        .summary;
    let failed: u64 = summary
        .iter()
        .filter(|c| c.state == TaskStatus::Failed)
        .map(|c| c.count)
        .sum();
    assert_eq!(failed, 5);
}
