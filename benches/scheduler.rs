//! Criterion micro-benches of the scheduler's handlers, driven with a recording transport so
//! the figures are the state machine's own cost: no threads, no I/O, no serialization.
//!
//! Each iteration starts from a fresh [`Core`] built outside the timed region, submits a whole
//! graph, runs it to completion one finished task (and one scheduling pass) at a time, as a
//! driver would, and releases every handle. Throughput is reported per task.

use std::collections::VecDeque;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use starling_scheduler::proto::{NodeId, ObjectId, ResourceSet, TaskArg, TaskSpec, WorkerId};
use starling_scheduler::reactor::{
    on_node_added, on_release, on_submit, on_task_finished, on_worker_added, schedule,
};
use starling_scheduler::testing::{task, RecordingTransport, Sent};
use starling_scheduler::{Core, TaskOutcome};

/// One node with `cpus` CPUs and `workers` workers.
fn one_node(cpus: f64, workers: u64) -> Core {
    let mut core = Core::new();
    on_node_added(&mut core, NodeId(1), ResourceSet::cpus(cpus));
    for w in 0..workers {
        on_worker_added(&mut core, NodeId(1), WorkerId(w));
    }
    core
}

/// Submits `specs`, runs them all to completion and releases every result. Returns how many
/// tasks finished, so the work cannot be optimized away.
fn run_graph(core: &mut Core, t: &mut RecordingTransport, specs: Vec<TaskSpec>) -> usize {
    let results: Vec<ObjectId> = specs.iter().map(TaskSpec::return_object).collect();
    for spec in specs {
        on_submit(core, t, spec);
    }
    let mut running = VecDeque::new();
    let mut finished = 0;
    loop {
        schedule(core, t);
        // Draining keeps the recorded messages from growing with the graph.
        for s in t.sent.drain(..) {
            if let Sent::Dispatch(_, w, _) = s {
                running.push_back(w);
            }
        }
        let Some(w) = running.pop_front() else { break };
        on_task_finished(core, t, w, TaskOutcome::Stored { size: 8 });
        finished += 1;
    }
    for o in results {
        on_release(core, t, o);
    }
    t.sent.clear();
    assert_eq!(core.live_tasks(), 0, "the graph did not run to completion");
    assert_eq!(core.object_count(), 0, "objects leaked");
    finished
}

/// `n` tasks with no arguments.
fn independent(n: u64) -> Vec<TaskSpec> {
    (1..=n).map(|i| task(i, vec![])).collect()
}

/// `n` tasks, each taking the previous one's result.
fn chain(n: u64) -> Vec<TaskSpec> {
    (1..=n)
        .map(|i| {
            let args = if i == 1 {
                vec![]
            } else {
                vec![TaskArg::Object(ObjectId(i - 1))]
            };
            task(i, args)
        })
        .collect()
}

/// A binary reduction over `leaves` leaf tasks: `2 * leaves - 1` tasks in all.
fn tree(leaves: u64) -> Vec<TaskSpec> {
    let mut specs: Vec<TaskSpec> = (1..=leaves).map(|i| task(i, vec![])).collect();
    let mut level: Vec<u64> = (1..=leaves).collect();
    let mut next = leaves + 1;
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| {
                let args = pair.iter().map(|o| TaskArg::Object(ObjectId(*o))).collect();
                specs.push(task(next, args));
                next += 1;
                next - 1
            })
            .collect();
    }
    specs
}

fn bench_graph(
    c: &mut Criterion,
    name: &str,
    cpus: f64,
    workers: u64,
    graph: impl Fn() -> Vec<TaskSpec>,
) {
    let n = graph().len();
    let mut group = c.benchmark_group("scheduler");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(n as u64));
    group.bench_function(name, |b| {
        b.iter_batched(
            || {
                (
                    one_node(cpus, workers),
                    RecordingTransport::default(),
                    graph(),
                )
            },
            |(mut core, mut t, specs)| {
                assert_eq!(run_graph(&mut core, &mut t, specs), n);
                // Returned, so dropping the state is not timed.
                (core, t)
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    bench_graph(c, "independent_10000_on_2_workers", 2.0, 2, || {
        independent(10_000)
    });
    bench_graph(c, "chain_1000", 1.0, 1, || chain(1_000));
    bench_graph(c, "tree_4096_leaves", 8.0, 8, || tree(4_096));
}

criterion_group!(scheduler_benches, benches);
criterion_main!(scheduler_benches);
