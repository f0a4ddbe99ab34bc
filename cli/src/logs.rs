//! `starling logs --task ID | --actor ID | --node ID [--follow] [--raw]`: what a task, an
//! actor or a node agent logged (Ray's `ray logs`), and the printing both it and `starling job
//! logs` use.
//!
//! The head's task records say where a task ran: its node, its worker process's id and its
//! job ([`LogSource::locate`], shared with `starling::state::log`); the node's object service
//! serves that process's log file (`ReadLog`), from which a task's own lines are the ones
//! tagged with its id. Each read is one call; following polls until the process has exited
//! and everything was read.

use std::io::Write;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use starling_proto::jobs::{LogChunk, LogFileRequest};
use starling_proto::rpc::object_service_client::ObjectServiceClient;
use starling_proto::security::Credentials;
use starling_proto::state::{Filter, LogSource, TaskEvent, TaskQuery};
use starling_proto::status::StatusRequest;
use starling_proto::{NodeId, TaskId};

use crate::state::{ask, id_arg, HeadOpts};

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["task", "actor", "node"])))]
pub struct LogsArgs {
    /// What a task printed: its latest attempt that ran on a worker process.
    #[arg(long, value_name = "ID")]
    task: Option<String>,
    /// Everything an actor's worker process printed (its latest incarnation).
    #[arg(long, value_name = "ID")]
    actor: Option<String>,
    /// The node agent's own log (worker processes started and ended, limits, errors).
    #[arg(long, value_name = "ID")]
    node: Option<String>,
    /// Keep printing new output until the process exits (a node's log: until interrupted).
    #[arg(long)]
    follow: bool,
    /// Print the program's own lines, without the `[T..] out|` tags.
    #[arg(long)]
    raw: bool,
    #[command(flatten)]
    head: HeadOpts,
}

/// How often a followed log is read again once nothing new came.
pub const FOLLOW_POLL: Duration = Duration::from_millis(200);

pub fn logs(args: LogsArgs) -> Result<()> {
    let source = match (&args.task, &args.actor, &args.node) {
        (Some(t), _, _) => LogSource::Task(TaskId(id_arg(t)?)),
        (_, Some(a), _) => LogSource::Actor(TaskId(id_arg(a)?)),
        (_, _, Some(n)) => LogSource::Node(NodeId(id_arg(n)?)),
        _ => bail!("say whose log: --task, --actor or --node"),
    };
    let records = |task: TaskId| -> Result<Vec<TaskEvent>> {
        let query = TaskQuery {
            filters: vec![Filter::parse(&format!("task_id={}", task.0)).expect("well-formed")],
            ..Default::default()
        };
        Ok(ask(&args.head, "task list", move |mut head| async move {
            head.list_tasks(query).await
        })?
        .tasks)
    };
    let (node, mut request) = source.locate(records, |e| anyhow!(e))?;
    let nodes = ask(&args.head, "status", |mut head| async move {
        head.status(StatusRequest::default()).await
    })?
    .nodes;
    let Some(address) = nodes.into_iter().find(|n| n.id == node).map(|n| n.address) else {
        bail!("node {node} is not in the cluster (any more): its logs cannot be read");
    };
    let creds = args.head.auth.credentials()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut out = std::io::stdout().lock();
    let mut printer = Printer::new(args.raw);
    loop {
        let chunk = rt.block_on(read(&creds, &address, request, args.head.timeout))?;
        let moved = chunk.offset != request.offset;
        request.offset = chunk.offset;
        printer.write(&mut out, &chunk.data)?;
        if chunk.ended || (!moved && !args.follow) {
            printer.finish(&mut out)?;
            return Ok(());
        }
        if !moved {
            std::thread::sleep(FOLLOW_POLL);
        }
    }
}

/// One `ReadLog` call to the object service at `address`, within `timeout`.
async fn read(
    creds: &Credentials,
    address: &str,
    request: LogFileRequest,
    timeout: Duration,
) -> Result<LogChunk> {
    // Node object services speak plain HTTP/2 unless their address says otherwise.
    let address = if address.contains("://") {
        address.to_string()
    } else {
        format!("http://{address}")
    };
    let endpoint = creds
        .endpoint(&address)
        .map_err(|e| anyhow!("{e}"))?
        .connect_timeout(timeout)
        .timeout(timeout);
    let call = async {
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| anyhow!("the node at {address} is unreachable: {e}"))?;
        ObjectServiceClient::new(creds.intercept(channel))
            .read_log(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| {
                anyhow!(
                    "the node at {address} refused the log read: {}",
                    s.message()
                )
            })
    };
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| anyhow!("the node at {address} did not answer within {timeout:?}"))?
}

/// Writes log bytes as they come: as they are, or (`raw`) each whole line without its tag.
pub struct Printer {
    raw: bool,
    /// With `raw`: the start of a line not complete yet.
    partial: Vec<u8>,
}

impl Printer {
    pub fn new(raw: bool) -> Self {
        Printer {
            raw,
            partial: Vec::new(),
        }
    }

    pub fn write(&mut self, out: &mut impl Write, data: &[u8]) -> std::io::Result<()> {
        if !self.raw {
            out.write_all(data)?;
            return out.flush();
        }
        self.partial.extend_from_slice(data);
        let complete = self
            .partial
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let rest = self.partial.split_off(complete);
        for line in self.partial.split_inclusive(|b| *b == b'\n') {
            out.write_all(untagged(line))?;
        }
        self.partial = rest;
        out.flush()
    }

    /// The end of the output: a last line without its newline is written too.
    pub fn finish(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let rest = std::mem::take(&mut self.partial);
        out.write_all(untagged(&rest))?;
        out.flush()
    }
}

/// A log line without its `[T42] out|` / `[-] err|` tag (other lines as they are).
fn untagged(line: &[u8]) -> &[u8] {
    if line.first() != Some(&b'[') {
        return line;
    }
    let Some(close) = line.iter().position(|b| *b == b']') else {
        return line;
    };
    match line.get(close + 1..) {
        Some(rest) if rest.starts_with(b" out|") || rest.starts_with(b" err|") => &rest[5..],
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_lines_lose_their_tags_across_reads() {
        let mut p = Printer::new(true);
        let mut out = Vec::new();
        p.write(&mut out, b"[T4] out|one\n[-] err|tw").unwrap();
        p.write(&mut out, b"o\n[T4] out|[x] three").unwrap();
        p.finish(&mut out).unwrap();
        assert_eq!(out, b"one\ntwo\n[x] three");
        let mut tagged = Vec::new();
        Printer::new(false)
            .write(&mut tagged, b"[T4] out|one\n")
            .unwrap();
        assert_eq!(tagged, b"[T4] out|one\n");
    }
}
