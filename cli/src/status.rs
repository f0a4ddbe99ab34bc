//! `starling status`: asks the head for its `Status` report and prints it.
//!
//! One connection attempt and one call, both inside `--timeout`: a status query should answer
//! "the head is not there" quickly rather than wait for it to come up.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use starling_proto::rpc::head_client::HeadClient;
use starling_proto::security::{AuthChannel, Credentials};
use starling_proto::status::{NodeStatus, StatusReply, StatusRequest};
use starling_proto::ResourceSet;

use crate::parse;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The head to ask (host:port).
    #[arg(long, value_name = "ADDR", env = starling_proto::env::HEAD)]
    head: String,
    /// Seconds to wait for the head's answer.
    #[arg(long, value_name = "SECS", value_parser = parse::seconds, default_value = "5")]
    timeout: Duration,
    #[command(flatten)]
    auth: crate::auth::AuthArgs,
}

pub fn run(args: StatusArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the I/O runtime")?;
    let creds = args.auth.credentials()?;
    let reply = rt.block_on(fetch(&args.head, &creds, args.timeout))?;
    print!("{}", render(&args.head, &reply));
    Ok(())
}

/// Calls `Status` on the head at `addr`, all within `timeout`.
pub async fn fetch(addr: &str, creds: &Credentials, timeout: Duration) -> Result<StatusReply> {
    call(addr, creds, timeout, "status", |mut head| async move {
        head.status(StatusRequest::default()).await
    })
    .await
}

/// Connects to the head at `addr` and makes one call (`what`, for errors) with `f`, all within
/// `timeout`.
pub async fn call<T, F, Fut>(
    addr: &str,
    creds: &Credentials,
    timeout: Duration,
    what: &str,
    f: F,
) -> Result<T>
where
    F: FnOnce(HeadClient<AuthChannel>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let endpoint = creds
        .endpoint(addr)
        .map_err(|e| anyhow!("{}", root(&e)))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let unreachable = |why: String| anyhow!("head at {addr} is unreachable: {why}");
    let call = async {
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| unreachable(root(&e)))?;
        f(HeadClient::new(creds.intercept(channel)))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| match s.code() {
                tonic::Code::Unavailable | tonic::Code::Cancelled => unreachable(root(&s)),
                tonic::Code::Unauthenticated => {
                    anyhow!("head at {addr} refused the connection: {}", s.message())
                }
                code => anyhow!(
                    "head at {addr} refused the {what} request ({code:?}): {}",
                    s.message()
                ),
            })
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(unreachable(format!(
            "no answer within {:.1}s",
            timeout.as_secs_f64()
        ))),
    }
}

/// The innermost cause of an error: tonic's own messages ("transport error") say little.
fn root(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    let s = cur.to_string();
    if s.is_empty() {
        e.to_string()
    } else {
        s
    }
}

/// The report as text: a summary line, one row per node, the task counters.
pub fn render(head: &str, r: &StatusReply) -> String {
    let alive = r.nodes.iter().filter(|n| n.alive).count();
    let mut out = String::new();
    let _ = writeln!(out, "head {head}");
    let _ = writeln!(out, "nodes: {alive} alive, {} dead", r.nodes.len() - alive);
    if !r.nodes.is_empty() {
        out.push_str(&columns(&node_rows(&r.nodes), "  "));
    }
    let _ = writeln!(
        out,
        "tasks: submitted={} queued={} running={} succeeded={} failed={} retried={} \
         reconstructed={}",
        r.submitted, r.queued, r.running, r.succeeded, r.failed, r.retried, r.reconstructed
    );
    let _ = write!(
        out,
        "head holds {} of at most {} tasks (peak {})",
        r.live, r.max_live, r.peak_live
    );
    let _ = match r.drivers_waiting {
        0 => writeln!(out),
        n => writeln!(out, ", {n} driver(s) waiting for room"),
    };
    if r.infeasible > 0 {
        let _ = writeln!(
            out,
            "infeasible: {} task(s) no node can hold now (they wait for one that can)",
            r.infeasible
        );
        for (task, reason) in &r.infeasible_tasks {
            let _ = writeln!(out, "  {task}: {reason}");
        }
    }
    if !r.actors.is_empty() {
        let alive = r.actors.iter().filter(|a| a.state == "ALIVE").count();
        let _ = writeln!(out, "actors: {} ({alive} alive)", r.actors.len());
        for a in &r.actors {
            let name = if a.name.is_empty() { "-" } else { &a.name };
            let node = a.node.map_or_else(|| "-".to_string(), |n| n.to_string());
            let _ = write!(
                out,
                "  {} {} {name} {} node={node} restarts={} calls={}",
                a.id, a.class_name, a.state, a.restarts, a.calls_served
            );
            let _ = match a.cause.as_str() {
                "" => writeln!(out),
                cause => writeln!(out, " ({cause})"),
            };
        }
    }
    let _ = writeln!(
        out,
        "objects: {} (head store {}, {} on its disk)",
        r.objects,
        parse::human_bytes(r.head_store_bytes),
        parse::human_bytes(r.head_spilled_bytes)
    );
    out
}

/// The nodes as table rows, a header first (`starling status`, `starling list nodes`).
pub fn node_rows(nodes: &[NodeStatus]) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "NODE",
        "ADDRESS",
        "POOL",
        "STATE",
        "WORKERS",
        "RESOURCES (used/total)",
        "STORE (memory, spilled, objects)",
    ]
    .map(String::from)
    .to_vec()];
    for n in nodes {
        let store = n.store;
        rows.push(vec![
            format!("N{}", n.id.0),
            n.address.clone(),
            if n.pool.is_empty() {
                "default".into()
            } else {
                n.pool.clone()
            },
            if n.alive { "alive" } else { "dead" }.into(),
            n.workers.to_string(),
            resources(&n.total, &n.available),
            format!(
                "{}, {}, {}",
                parse::human_bytes(store.memory_bytes),
                parse::human_bytes(store.spilled_bytes),
                store.objects
            ),
        ]);
    }
    rows
}

/// Rows as aligned columns, two spaces apart, each line after `indent`.
pub fn columns(rows: &[Vec<String>], indent: &str) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| format!("{s:<w$}", w = widths[c]))
            .collect();
        let _ = writeln!(out, "{indent}{}", cells.join("  ").trim_end());
    }
    out
}

/// `cpu 1/2, gpu 0/1, ssd 0/4`: per resource of the node, in use and offered.
fn resources(total: &ResourceSet, available: &ResourceSet) -> String {
    let units = |r: &ResourceSet| -> BTreeMap<String, u64> {
        r.iter_units()
            .map(|(name, u)| (name.to_ascii_lowercase(), u))
            .collect()
    };
    let (total, available) = (units(total), units(available));
    if total.is_empty() {
        return "nothing".into();
    }
    // CPU and GPU first, then custom resources by name.
    let mut names: Vec<&String> = total.keys().collect();
    names.sort_by_key(|n| (n.as_str() != "cpu", n.as_str() != "gpu", n.as_str()));
    names
        .into_iter()
        .map(|name| {
            let t = total[name];
            let free = available.get(name).copied().unwrap_or(0);
            format!(
                "{name} {}/{}",
                parse::units(t.saturating_sub(free)),
                parse::units(t)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::node::StoreUsage;
    use starling_proto::status::NodeStatus;
    use starling_proto::{NodeId, TaskId};

    fn amounts(list: &[(&str, u64)]) -> ResourceSet {
        let mut set = ResourceSet::new();
        for (name, units) in list {
            set.set_units(name, *units);
        }
        set
    }

    #[test]
    fn renders_nodes_and_counters() {
        let reply = StatusReply {
            nodes: vec![
                NodeStatus {
                    id: NodeId(1),
                    address: "127.0.0.1:4000".into(),
                    total: amounts(&[("ssd", 40_000), ("CPU", 20_000)]),
                    available: amounts(&[("ssd", 40_000), ("CPU", 5_000)]),
                    alive: true,
                    workers: 2,
                    store: StoreUsage {
                        memory_bytes: 100_000_000,
                        spilled_bytes: 0,
                        objects: 1,
                    },
                    pool: String::new(),
                },
                NodeStatus {
                    id: NodeId(2),
                    address: "10.0.0.2:4000".into(),
                    alive: false,
                    pool: "gpu".into(),
                    ..Default::default()
                },
            ],
            submitted: 41,
            queued: 1,
            running: 2,
            succeeded: 37,
            failed: 1,
            objects: 3,
            head_store_bytes: 2048,
            head_spilled_bytes: 3 << 20,
            retried: 4,
            reconstructed: 2,
            live: 3,
            max_live: 1000,
            drivers_waiting: 1,
            peak_live: 7,
            infeasible: 3,
            infeasible_tasks: vec![(TaskId(5), "needs gpu=1; no node has gpu".into())],
            actors: vec![
                starling_proto::status::ActorStatus {
                    id: TaskId(9),
                    class_name: "app::Counter".into(),
                    name: "main".into(),
                    state: "ALIVE".into(),
                    node: Some(NodeId(1)),
                    calls_served: 12,
                    ..Default::default()
                },
                starling_proto::status::ActorStatus {
                    id: TaskId(10),
                    class_name: "app::Counter".into(),
                    state: "DEAD".into(),
                    cause: "killed".into(),
                    restarts: 1,
                    ..Default::default()
                },
            ],
        };
        let text = render("127.0.0.1:6380", &reply);
        assert!(text.starts_with("head 127.0.0.1:6380\nnodes: 1 alive, 1 dead\n"));
        assert!(
            text.contains("  N1    127.0.0.1:4000  default  alive  2        cpu 1.5/2, ssd 0/4")
        );
        assert!(text.contains("95.4 MiB, 0 B, 1"), "{text}");
        assert!(text.contains("  N2    10.0.0.2:4000   gpu      dead   0        nothing"));
        assert!(text.contains(
            "tasks: submitted=41 queued=1 running=2 succeeded=37 failed=1 retried=4 \
             reconstructed=2\nhead holds 3 of at most 1000 tasks (peak 7), 1 driver(s) waiting for room\n"
        ));
        assert!(
            text.contains(
                "infeasible: 3 task(s) no node can hold now (they wait for one that can)\n  \
                 T5: needs gpu=1; no node has gpu\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "actors: 2 (1 alive)\n  T9 app::Counter main ALIVE node=N1 restarts=0 calls=12\n  \
                 T10 app::Counter - DEAD node=- restarts=1 calls=0 (killed)\n"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("objects: 3 (head store 2.0 KiB, 3.0 MiB on its disk)\n"),
            "{text}"
        );
    }

    #[test]
    fn an_empty_cluster_has_no_table() {
        let text = render("h:1", &StatusReply::default());
        assert!(text.contains("nodes: 0 alive, 0 dead\ntasks:"), "{text}");
        assert!(!text.contains("infeasible"), "{text}");
    }

    #[test]
    fn a_dead_port_is_unreachable_at_once() {
        // Bound (so no one else takes the port) but never listening: connections are refused.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = socket.local_addr().unwrap().port();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let addr = format!("127.0.0.1:{port}");
        let t0 = std::time::Instant::now();
        let e = rt
            .block_on(fetch(
                &addr,
                &Credentials::default(),
                Duration::from_secs(5),
            ))
            .unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(5));
        let msg = format!("{e:#}");
        assert!(
            msg.starts_with(&format!("head at {addr} is unreachable: ")),
            "{msg}"
        );
        let e = rt
            .block_on(fetch(
                "a b:1",
                &Credentials::default(),
                Duration::from_secs(1),
            ))
            .unwrap_err();
        assert!(format!("{e:#}").contains("not a head address"), "{e:#}");
    }
}
