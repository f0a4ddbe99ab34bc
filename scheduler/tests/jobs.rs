//! Multi-node jobs and pools driven as reactor handlers: no runtime, no sockets, no files, and
//! a clock the test moves (timeouts are checked without waiting for them).

use std::time::{Duration, Instant};

use starling_scheduler::jobs::{
    instance_state, status, JobNodeOp, JobSpec, Jobs, Now, PoolSpec, HEAD_RESTARTED, STOP_TIMEOUT,
};
use starling_scheduler::proto::jobs::{Payload, PayloadKind};
use starling_scheduler::proto::{JobId, NodeId, ResourceSet};
use starling_scheduler::reactor;
use starling_scheduler::testing::{RecordingTransport, Sent};
use starling_scheduler::Core;

/// A job table, the scheduler it places jobs with, and the clock they are given.
struct Table {
    core: Core,
    t: RecordingTransport,
    jobs: Jobs,
    start: Instant,
    now: Now,
}

impl Table {
    /// An empty table with pool `p` of at most `max_nodes` nodes that join by themselves.
    fn new(max_nodes: u32) -> Table {
        let start = Instant::now();
        let mut table = Table {
            core: Core::new(),
            t: RecordingTransport::default(),
            jobs: Jobs::new(),
            start,
            now: Now {
                at: start,
                unix_ms: 1_700_000_000_000,
            },
        };
        table.jobs.head_addr = "127.0.0.1:7000".into();
        let pool = PoolSpec {
            name: "p".into(),
            max_nodes,
            ..Default::default()
        };
        table
            .jobs
            .create_pool(&mut table.t, pool, false)
            .expect("a pool");
        table
    }

    /// Moves the clock to `secs` after the start.
    fn at(&mut self, secs: f64) {
        let d = Duration::from_secs_f64(secs);
        self.now = Now {
            at: self.start + d,
            unix_ms: 1_700_000_000_000 + d.as_millis() as u64,
        };
    }

    fn join(&mut self, node: u64) -> NodeId {
        let n = NodeId(node);
        reactor::on_node_added(&mut self.core, n, ResourceSet::cpus(2.0));
        self.jobs
            .on_node_added(&mut self.core, n, "p", 1000 + node as u32, self.now);
        n
    }

    fn submit(&mut self, id: u64, target: u32, min: u32) -> JobId {
        let spec = JobSpec {
            name: format!("job{id}"),
            pool: "p".into(),
            payload: Payload {
                kind: Some(PayloadKind::Binary("ab".repeat(32))),
                ..Default::default()
            },
            args: vec!["--steps".into(), "3".into()],
            target_instances: target,
            min_instances: min,
            instance_timeout_ms: 5_000,
            ..Default::default()
        };
        let info = self
            .jobs
            .submit(&mut self.t, id, spec, self.now)
            .expect("a valid job");
        assert_eq!(info.status, status::PENDING);
        JobId(id)
    }

    fn tick(&mut self) {
        let actions = self.jobs.tick(&mut self.t, &mut self.core, self.now);
        assert!(
            actions.launch.is_empty() && actions.stop.is_empty(),
            "no pool is launched"
        );
    }

    fn status(&self, job: JobId) -> (String, String) {
        let info = self.jobs.info(job.0).expect("a job");
        // Every change reached the transport before it was visible here.
        assert_eq!(
            self.t.persisted.get(&job.0),
            Some(&info),
            "the persisted record lags the table"
        );
        (info.status, info.message)
    }

    /// The node ops sent since the last call.
    fn node_ops(&mut self) -> Vec<(NodeId, JobNodeOp)> {
        self.t
            .take()
            .into_iter()
            .filter_map(|s| match s {
                Sent::ToNode(n, op) => Some((n, op)),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn a_job_waits_for_its_nodes_runs_its_entrypoint_on_instance_zero_and_ends_once_all_stopped() {
    let mut tb = Table::new(4);
    let job = tb.submit(1, 2, 2);
    assert_eq!(
        tb.status(job).1,
        "waiting for 2 instances, 0 available",
        "the reason it waits"
    );
    let a = tb.join(1);
    tb.tick();
    assert_eq!(tb.status(job).1, "waiting for 2 instances, 1 available");
    let b = tb.join(2);
    tb.tick();
    assert_eq!(tb.status(job).0, status::RUNNING);
    let ops = tb.node_ops();
    // Gang allocation: both instances at once, the entrypoint on instance 0 only.
    assert_eq!(ops.len(), 2, "{ops:?}");
    let instance = |n: NodeId| {
        ops.iter()
            .find_map(|(to, op)| match op {
                JobNodeOp::Instance(i) if *to == n => Some((**i).clone()),
                _ => None,
            })
            .expect("an instance op")
    };
    let (zero, one) = (instance(a), instance(b));
    assert_eq!((zero.instance, one.instance), (0, 1));
    assert_eq!((zero.num_instances, one.num_instances), (2, 2));
    let entry = zero.entrypoint.expect("instance 0 runs the entrypoint");
    assert_eq!(entry.head, "127.0.0.1:7000");
    assert_eq!(entry.args, vec!["--steps", "3"]);
    assert!(one.entrypoint.is_none(), "instance 1 runs no entrypoint");

    // The entrypoint exits: every instance is told to stop, and the job is not final until
    // each reported its processes gone.
    tb.at(1.0);
    tb.jobs
        .on_entrypoint_exit(&mut tb.t, &mut tb.core, 1, 0, "", tb.now);
    let stops: Vec<NodeId> = tb
        .node_ops()
        .into_iter()
        .filter_map(|(n, op)| (op == JobNodeOp::Stop(1)).then_some(n))
        .collect();
    assert_eq!(stops, vec![a, b]);
    assert_eq!(
        tb.status(job).0,
        status::RUNNING,
        "instances are still stopping"
    );
    tb.jobs
        .on_job_stopped(&mut tb.t, &mut tb.core, 1, a, tb.now);
    assert_eq!(
        tb.status(job).0,
        status::RUNNING,
        "instance 1 has not stopped"
    );
    tb.jobs
        .on_job_stopped(&mut tb.t, &mut tb.core, 1, b, tb.now);
    let info = tb.jobs.info(1).expect("a job");
    assert_eq!(info.status, status::DONE);
    assert_eq!(info.exit_code, Some(0));
    assert!(info
        .instances
        .iter()
        .all(|i| i.state == instance_state::STOPPED));
    assert_eq!(tb.t.finished, vec![job]);

    // The nodes are back in the pool: the next job gets them at once.
    let next = tb.submit(2, 2, 2);
    tb.tick();
    assert_eq!(tb.status(next).0, status::RUNNING);
}

#[test]
fn waits_and_timeouts_follow_the_clock_they_are_given() {
    let mut tb = Table::new(4);
    tb.join(1);
    let job = tb.submit(1, 2, 2);
    tb.at(4.9);
    tb.tick();
    assert_eq!(tb.status(job).0, status::PENDING, "5 s have not passed");
    tb.at(5.0);
    tb.tick();
    let (state, message) = tb.status(job);
    assert_eq!(state, status::FAILED);
    assert_eq!(
        message,
        "Timed out after 5s waiting for 2 instances, only 1 available"
    );

    // With min_instances free, a job waits out the grace period for more, then starts with
    // what it has.
    let small = tb.submit(2, 3, 1);
    tb.tick();
    assert_eq!(tb.status(small).0, status::PENDING, "the grace wait starts");
    tb.at(5.0 + tb.jobs.start_grace.as_secs_f64());
    tb.tick();
    let info = tb.jobs.info(2).expect("a job");
    assert_eq!(info.status, status::RUNNING);
    assert_eq!(info.nodes, vec![1], "it started with the one node it had");
}

#[test]
fn a_lost_worker_instance_is_replaced_and_losing_instance_zero_fails_the_job() {
    let mut tb = Table::new(0);
    let (a, b) = (tb.join(1), tb.join(2));
    let job = tb.submit(1, 2, 2);
    tb.tick();
    assert_eq!(tb.status(job).0, status::RUNNING);
    tb.node_ops();

    tb.at(2.0);
    tb.jobs
        .on_node_lost(&mut tb.t, &mut tb.core, b, "heartbeat timeout", tb.now);
    let (state, message) = tb.status(job);
    assert_eq!(
        state,
        status::RUNNING,
        "losing instance 1 does not end the job"
    );
    assert!(
        message.contains("instance 1 (node N2) lost at") && message.contains("heartbeat timeout"),
        "{message}"
    );
    let c = tb.join(3);
    tb.tick();
    let info = tb.jobs.info(1).expect("a job");
    assert_eq!(info.nodes, vec![1, 2, 3]);
    assert_eq!(info.instances[1].state, instance_state::LOST);
    assert_eq!(info.instances[2].state, instance_state::UP);
    assert!(
        tb.node_ops().iter().any(|(n, op)| *n == c
            && matches!(op, JobNodeOp::Instance(i) if i.instance == 2 && i.entrypoint.is_none())),
        "node N3 joins as instance 2"
    );

    tb.jobs.on_node_lost(
        &mut tb.t,
        &mut tb.core,
        a,
        "agent connection dropped",
        tb.now,
    );
    let (state, message) = tb.status(job);
    assert_eq!(state, status::RUNNING, "N3 has not stopped yet");
    assert!(message.contains("instance 0 (node N1) lost"), "{message}");
    tb.jobs
        .on_job_stopped(&mut tb.t, &mut tb.core, 1, c, tb.now);
    assert_eq!(tb.status(job).0, status::FAILED);
}

#[test]
fn a_cancelled_job_ends_even_when_an_instance_never_reports() {
    let mut tb = Table::new(4);
    let pending = tb.submit(1, 2, 2);
    tb.jobs
        .cancel(&mut tb.t, &mut tb.core, 1, tb.now)
        .expect("cancel");
    assert_eq!(
        tb.status(pending),
        (
            status::CANCELLED.to_string(),
            "cancelled before it started".to_string()
        )
    );

    let (a, b) = (tb.join(1), tb.join(2));
    let job = tb.submit(2, 2, 2);
    tb.tick();
    tb.node_ops();
    let info = tb
        .jobs
        .cancel(&mut tb.t, &mut tb.core, 2, tb.now)
        .expect("cancel");
    assert_eq!(info.status, status::CANCELLING);
    assert_eq!(tb.node_ops().len(), 2, "both instances are told to stop");
    tb.jobs
        .on_job_stopped(&mut tb.t, &mut tb.core, 2, a, tb.now);
    tb.at(STOP_TIMEOUT.as_secs_f64() - 1.0);
    tb.tick();
    assert_eq!(tb.status(job).0, status::CANCELLING);
    tb.at(STOP_TIMEOUT.as_secs_f64());
    tb.tick();
    let (state, message) = tb.status(job);
    assert_eq!(state, status::CANCELLED);
    assert!(
        message.contains(&format!("node(s) {b} did not report")),
        "{message}"
    );
    // An ended job can be deleted, with its record.
    tb.jobs.delete(&mut tb.t, 2).expect("delete");
    assert!(tb.jobs.info(2).is_none() && !tb.t.persisted.contains_key(&2));
}

#[test]
fn a_restarted_table_fails_the_jobs_that_had_not_ended() {
    let mut tb = Table::new(4);
    let (done, running) = (tb.submit(1, 1, 1), tb.submit(2, 1, 1));
    tb.jobs
        .cancel(&mut tb.t, &mut tb.core, done.0, tb.now)
        .expect("cancel");
    tb.join(1);
    tb.tick();
    assert_eq!(tb.status(running).0, status::RUNNING);

    let kept: Vec<_> = tb.t.persisted.values().cloned().collect();
    let pools: Vec<_> = tb.t.pools.values().cloned().collect();
    let mut t = RecordingTransport::default();
    let mut again = Jobs::new();
    assert_eq!(again.restore(&mut t, kept, pools, tb.now), 2);
    assert_eq!(again.info(1).expect("job 1").status, status::CANCELLED);
    let failed = again.info(2).expect("job 2");
    assert_eq!(
        (failed.status.as_str(), failed.message.as_str()),
        (status::FAILED, HEAD_RESTARTED)
    );
    assert_eq!(
        t.persisted.get(&2),
        Some(&failed),
        "the change is persisted"
    );
    assert!(
        !t.persisted.contains_key(&1),
        "an ended job is not written again"
    );
    assert_eq!(again.pools().len(), 1, "the pool is back");
}

#[test]
fn a_job_function_s_value_is_kept_and_its_error_is_the_job_s_message() {
    let mut tb = Table::new(4);
    tb.join(1);
    tb.submit(1, 1, 1);
    tb.submit(2, 1, 1);
    tb.jobs
        .set_result(&mut tb.t, 1, Ok(b"42".to_vec()))
        .expect("a value");
    assert_eq!(tb.t.results.get(&1).map(Vec::as_slice), Some(&b"42"[..]));
    let e = starling_scheduler::proto::RemoteError {
        type_name: "panic".into(),
        message: "no data".into(),
        backtrace: String::new(),
    };
    tb.jobs.set_result(&mut tb.t, 2, Err(e)).expect("an error");
    assert_eq!(tb.status(JobId(2)).1, "panic: no data");
    assert!(
        tb.jobs.set_result(&mut tb.t, 9, Ok(vec![])).is_err(),
        "no job 9"
    );
}
