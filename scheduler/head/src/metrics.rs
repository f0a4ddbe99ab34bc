//! The head's Prometheus metrics (`GET /metrics` on its dashboard port), in the OpenMetrics
//! text format written by the `prometheus-client` crate.
//!
//! Every figure is read at scrape time from the state the head keeps anyway (the scheduler's
//! core, its task figures, the nodes' store reports, the job table): a scrape is one walk of
//! the live tasks under the head's lock, and nothing is counted twice on the hot path. Names
//! start with `starling_`:
//!
//! - `starling_tasks{name,state}`: live tasks by state (`PENDING_ARGS_AVAIL`,
//!   `PENDING_NODE_ASSIGNMENT`, `RUNNING`), and attempts ended (`FINISHED`, `FAILED`) since the
//!   head started, by function (Ray's `ray_tasks`).
//! - `starling_task_run_seconds`, `starling_task_scheduling_seconds`: histograms of how long
//!   attempts ran, and how long ready ones waited for a worker.
//! - `starling_tasks_submitted`, `_succeeded`, `_failed`, `_retried`, `_reconstructed`
//!   (counters, `_total`), `starling_task_events_dropped` (records dropped past the bound).
//! - `starling_nodes{state}`, `starling_node_resources{node,resource}` and
//!   `starling_node_resources_used{node,resource}`, `starling_node_workers{node}`,
//!   `starling_object_store_bytes{node,kind=memory|spilled}`, `starling_object_store_objects{node}`.
//! - `starling_head_store_bytes{kind}`, `starling_head_live_tasks`, `starling_head_queued_tasks`,
//!   `starling_head_drivers_waiting`, `starling_objects`.
//! - `starling_jobs{state}` (multi-node jobs), `starling_actors{state}`.
//! - `starling_rpc_errors{kind=unauthenticated|malformed}` (counter): calls refused for a
//!   missing or wrong token, messages that did not decode.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use starling_proto::state::TaskStatus;
use starling_scheduler::events::{Histogram, SECONDS_BUCKETS};

use crate::state::Head;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(String, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A histogram the scheduler filled, encoded as one.
#[derive(Debug)]
struct Buckets(Histogram);

impl EncodeMetric for Buckets {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = SECONDS_BUCKETS
            .iter()
            .copied()
            .chain(std::iter::once(f64::MAX))
            .zip(self.0.counts.iter().copied())
            .collect();
        encoder.encode_histogram::<NoLabelSet>(self.0.sum, self.0.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn counter(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let c: Counter = Counter::default();
    c.inc_by(value);
    registry.register(name, help, c);
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: i64) {
    let g: Gauge = Gauge::default();
    g.set(value);
    registry.register(name, help, g);
}

/// The head's metrics now, as OpenMetrics text.
pub fn render(head: &Head) -> String {
    let mut r = Registry::default();
    let g = head.state.lock();
    let core = &g.core;
    let stats = core.stats();

    // Tasks by function and state: live ones from the task table, ended attempts counted.
    let tasks: Family<Labels, Gauge> = Family::default();
    for (name, state, n) in core.live_tasks_by_state() {
        tasks
            .get_or_create(&labels(&[("name", &name), ("state", state.as_str())]))
            .set(n as i64);
    }
    let figures = core.task_events().figures();
    let mut ended: BTreeMap<String, [u64; 2]> = BTreeMap::new();
    for (function, n) in &figures.ended {
        let e = ended
            .entry(starling_proto::state::short_name(function).to_string())
            .or_default();
        e[0] += n[0];
        e[1] += n[1];
    }
    for (name, [finished, failed]) in &ended {
        for (state, n) in [
            (TaskStatus::Finished, finished),
            (TaskStatus::Failed, failed),
        ] {
            tasks
                .get_or_create(&labels(&[("name", name), ("state", state.as_str())]))
                .set(*n as i64);
        }
    }
    r.register(
        "starling_tasks",
        "Tasks by function and state: live ones waiting or running, and attempts ended since \
         the head started",
        tasks,
    );
    r.register(
        "starling_task_run_seconds",
        "How long task attempts ran, from being handed to a worker until they ended",
        Buckets(figures.run_time.clone()),
    );
    r.register(
        "starling_task_scheduling_seconds",
        "How long ready task attempts waited for a node and a worker",
        Buckets(figures.scheduling.clone()),
    );
    counter(
        &mut r,
        "starling_tasks_submitted",
        "Tasks submitted",
        stats.submitted,
    );
    counter(
        &mut r,
        "starling_tasks_succeeded",
        "Tasks that finished with values",
        stats.succeeded,
    );
    counter(
        &mut r,
        "starling_tasks_failed",
        "Tasks that failed (cancelled included)",
        stats.failed,
    );
    counter(
        &mut r,
        "starling_tasks_retried",
        "Task attempts retried",
        stats.retried,
    );
    counter(
        &mut r,
        "starling_tasks_reconstructed",
        "Task runs made to remake objects lost with their node",
        stats.reconstructed,
    );
    counter(
        &mut r,
        "starling_task_events_dropped",
        "Task event records dropped to keep the store within its bound",
        core.task_events().dropped(),
    );
    gauge(
        &mut r,
        "starling_head_live_tasks",
        "Tasks the head holds (waiting, queued or running)",
        core.live_tasks() as i64,
    );
    gauge(
        &mut r,
        "starling_head_queued_tasks",
        "Tasks ready and waiting for a worker (the head's queue depth)",
        core.queued_tasks() as i64,
    );
    gauge(
        &mut r,
        "starling_head_drivers_waiting",
        "Drivers waiting for room to submit more tasks",
        head.room.waiting() as i64,
    );
    gauge(
        &mut r,
        "starling_objects",
        "Objects the head tracks",
        core.object_count() as i64,
    );
    let head_store: Family<Labels, Gauge> = Family::default();
    head_store
        .get_or_create(&labels(&[("kind", "memory")]))
        .set(g.out.values.memory_bytes() as i64);
    head_store
        .get_or_create(&labels(&[("kind", "spilled")]))
        .set(g.out.values.spilled_bytes() as i64);
    r.register(
        "starling_head_store_bytes",
        "Bytes of values the head holds, in memory and on its disk",
        head_store,
    );

    // Nodes: state, resources, workers, object stores.
    let nodes: Family<Labels, Gauge> = Family::default();
    let total: Family<Labels, FloatGauge> = Family::default();
    let used: Family<Labels, FloatGauge> = Family::default();
    let workers: Family<Labels, Gauge> = Family::default();
    let store: Family<Labels, Gauge> = Family::default();
    let objects: Family<Labels, Gauge> = Family::default();
    let (mut alive, mut dead) = (0, 0);
    for n in core.nodes() {
        if n.alive {
            alive += 1;
        } else {
            dead += 1;
        }
        let node = n.id.0.to_string();
        for (resource, _) in n.total.iter_units() {
            let t = n.total.get(resource);
            let free = n.available.get(resource);
            let l = labels(&[("node", &node), ("resource", resource)]);
            total.get_or_create(&l).set(t);
            used.get_or_create(&l).set((t - free).max(0.0));
        }
        workers
            .get_or_create(&labels(&[("node", &node)]))
            .set(n.workers as i64);
        if let Some(conn) = g.out.nodes.get(&n.id) {
            let u = conn.usage;
            store
                .get_or_create(&labels(&[("node", &node), ("kind", "memory")]))
                .set(u.memory_bytes as i64);
            store
                .get_or_create(&labels(&[("node", &node), ("kind", "spilled")]))
                .set(u.spilled_bytes as i64);
            objects
                .get_or_create(&labels(&[("node", &node)]))
                .set(u.objects as i64);
        }
    }
    nodes
        .get_or_create(&labels(&[("state", "ALIVE")]))
        .set(alive);
    nodes.get_or_create(&labels(&[("state", "DEAD")])).set(dead);
    r.register("starling_nodes", "Nodes by state", nodes);
    r.register(
        "starling_node_resources",
        "Resources each node offers",
        total,
    );
    r.register(
        "starling_node_resources_used",
        "Resources held on each node by running tasks and actors",
        used,
    );
    r.register(
        "starling_node_workers",
        "Worker processes of each node",
        workers,
    );
    r.register(
        "starling_object_store_bytes",
        "Bytes in each node's object store, in memory and spilled to disk",
        store,
    );
    r.register(
        "starling_object_store_objects",
        "Objects in each node's object store",
        objects,
    );

    // Jobs and actors by state.
    let jobs: Family<Labels, Gauge> = Family::default();
    for state in [
        "PENDING",
        "RUNNING",
        "DONE",
        "FAILED",
        "CANCELLING",
        "CANCELLED",
    ] {
        jobs.get_or_create(&labels(&[("state", state)])).set(0);
    }
    for j in g.jobs.list() {
        jobs.get_or_create(&labels(&[("state", &j.status)])).inc();
    }
    r.register("starling_jobs", "Multi-node jobs by state", jobs);
    let actors: Family<Labels, Gauge> = Family::default();
    for state in ["PENDING_CREATION", "ALIVE", "RESTARTING", "DEAD"] {
        actors.get_or_create(&labels(&[("state", state)])).set(0);
    }
    for a in core.actors() {
        actors
            .get_or_create(&labels(&[("state", a.state.name())]))
            .inc();
    }
    r.register("starling_actors", "Actors by state", actors);
    drop(g);

    let errors: Family<Labels, Counter> = Family::default();
    let (unauthenticated, malformed) = starling_proto::rpc::refused_calls();
    errors
        .get_or_create(&labels(&[("kind", "unauthenticated")]))
        .inc_by(unauthenticated);
    errors
        .get_or_create(&labels(&[("kind", "malformed")]))
        .inc_by(malformed);
    r.register(
        "starling_rpc_errors",
        "Calls refused: a missing or wrong token, or a message that did not decode",
        errors,
    );

    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &r);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::state::tests::test_head as head;

    /// The families `/metrics` declares (`# TYPE name kind`).
    fn families(text: &str) -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .map(String::from)
            .collect()
    }

    #[test]
    fn an_empty_head_declares_every_family_and_ends_as_openmetrics_does() {
        let (dir, head) = head("metrics-empty");
        let text = render(&head);
        let declared = families(&text);
        for name in [
            "starling_tasks",
            "starling_task_run_seconds",
            "starling_task_scheduling_seconds",
            "starling_nodes",
            "starling_jobs",
            "starling_actors",
            "starling_rpc_errors",
            "starling_head_queued_tasks",
        ] {
            assert!(declared.iter().any(|d| d == name), "{name} in:\n{text}");
        }
        assert!(text.contains("starling_nodes{state=\"ALIVE\"} 0"), "{text}");
        assert!(text.trim_end().ends_with("# EOF"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_grafana_dashboard_queries_only_metrics_the_head_exports() {
        let (dir, head) = head("metrics-grafana");
        let declared = families(&render(&head));
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/grafana/starling.json"
        );
        let Ok(dashboard) = std::fs::read_to_string(path) else {
            // A packaged crate has no deploy/ beside it; the workspace always does.
            assert!(
                !std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.ci")).exists()
            );
            return;
        };
        let mut queried: Vec<String> = dashboard
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("starling_"))
            .map(|w| {
                ["_bucket", "_total", "_sum", "_count"]
                    .iter()
                    .fold(w.to_string(), |w, s| {
                        w.strip_suffix(s).map_or(w.clone(), String::from)
                    })
            })
            .collect();
        queried.sort();
        queried.dedup();
        assert!(queried.len() > 10, "{queried:?}");
        for q in &queried {
            assert!(
                declared.contains(q),
                "the dashboard queries {q}, which /metrics lacks"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
