//! `starling list`, `summary`, `get` and `timeline`: the state API from the command line
//! (Ray's `ray list tasks`, `ray summary tasks`, `ray get task`, `ray timeline`).
//!
//! Tasks come from the head's task events (one record per attempt, `ListTasks`); actors and
//! nodes from its status report; jobs and pools from the job service. Each command is one
//! connection and one or two calls, all within `--timeout`. It joins no job: asking does not
//! start a driver.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use starling_proto::jobs::{JobInfo, PoolInfo};
use starling_proto::rpc::Empty;
use starling_proto::state::{
    chrome_trace, json_array, Filter, ObjectRecord, StateList, TaskEvent, TaskQuery, TaskStatus,
    WorkerRecord,
};
use starling_proto::status::{ActorStatus, NodeStatus, StatusReply, StatusRequest};
use starling_proto::JobId;

use crate::parse;
use crate::status::call;

#[derive(Args, Debug)]
pub struct HeadOpts {
    /// The head to ask (host:port).
    #[arg(long, value_name = "ADDR", env = starling_proto::env::HEAD, global = true)]
    head: Option<String>,
    /// Seconds to wait for the head's answer.
    #[arg(long, value_name = "SECS", value_parser = parse::seconds, default_value = "10", global = true)]
    pub timeout: Duration,
    #[command(flatten)]
    pub auth: crate::auth::AuthArgs,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Listed {
    Tasks,
    Actors,
    Objects,
    Workers,
    Nodes,
    Jobs,
    Pools,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// What to list.
    what: Listed,
    /// Keep only rows where `key=value` (or `key!=value`); repeat for several (all must pass).
    /// Task keys: task_id, attempt, job_id, name, type, state, parent_task_id, actor_id,
    /// node_id, worker_id, worker_pid, error_type. Actor keys: actor_id, class_name, name,
    /// state, node_id, job_id. Object keys: object_id, state, node_id. Worker keys: worker_id,
    /// node_id, job_id, state, actor_id, pid.
    #[arg(long = "filter", short = 'f', value_name = "KEY=VALUE")]
    filters: Vec<String>,
    /// At most this many rows, the newest (0: all).
    #[arg(long, value_name = "N", default_value = "100")]
    limit: u32,
    /// Only this job's tasks.
    #[arg(long, value_name = "ID")]
    job: Option<u64>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    #[command(flatten)]
    head: HeadOpts,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Summarized {
    Tasks,
    Actors,
    Objects,
}

#[derive(Args, Debug)]
pub struct SummaryArgs {
    /// What to count.
    what: Summarized,
    /// Count only rows where `key=value` (or `key!=value`).
    #[arg(long = "filter", short = 'f', value_name = "KEY=VALUE")]
    filters: Vec<String>,
    /// Only this job's tasks.
    #[arg(long, value_name = "ID")]
    job: Option<u64>,
    #[command(flatten)]
    head: HeadOpts,
}

#[derive(Subcommand, Debug)]
pub enum GetCommand {
    /// Every attempt of a task: its function, states with times, node, worker, error and
    /// backtrace.
    Task { id: String },
    /// One actor.
    Actor { id: String },
    /// One object: its state, size, where its value is (its holder), who refers to it, and the
    /// task that made it.
    Object { id: String },
    /// One node.
    Node { id: String },
}

#[derive(Args, Debug)]
pub struct GetArgs {
    #[command(subcommand)]
    what: GetCommand,
    #[command(flatten)]
    head: HeadOpts,
}

#[derive(Args, Debug)]
pub struct TimelineArgs {
    /// Only this job's tasks.
    #[arg(long, value_name = "ID")]
    job: Option<u64>,
    /// Where to write the trace (Chrome trace JSON: chrome://tracing or Perfetto).
    #[arg(long, short = 'o', value_name = "FILE")]
    output: PathBuf,
    #[command(flatten)]
    head: HeadOpts,
}

/// Runs one call on the head the options name.
pub fn ask<T, F, Fut>(opts: &HeadOpts, what: &str, f: F) -> Result<T>
where
    F: FnOnce(
        starling_proto::rpc::head_client::HeadClient<starling_proto::security::AuthChannel>,
    ) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let Some(addr) = &opts.head else {
        bail!("no head given: pass --head ADDR or set STARLING_HEAD");
    };
    let creds = opts.auth.credentials()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the I/O runtime")?;
    rt.block_on(call(addr, &creds, opts.timeout, what, f))
}

fn parse_filters(filters: &[String]) -> Result<Vec<Filter>> {
    filters
        .iter()
        .map(|f| Filter::parse(f).map_err(anyhow::Error::msg))
        .collect()
}

fn tasks(opts: &HeadOpts, query: TaskQuery) -> Result<starling_proto::state::TaskList> {
    query.check().map_err(anyhow::Error::msg)?;
    ask(opts, "task list", move |mut head| async move {
        head.list_tasks(query).await
    })
}

fn state_list(opts: &HeadOpts, query: TaskQuery, workers: bool) -> Result<StateList> {
    ask(opts, "listing", move |mut head| async move {
        if workers {
            head.list_workers(query).await
        } else {
            head.list_objects(query).await
        }
    })
}

fn status(opts: &HeadOpts) -> Result<StatusReply> {
    ask(opts, "status", |mut head| async move {
        head.status(StatusRequest::default()).await
    })
}

pub fn list(args: ListArgs) -> Result<()> {
    let filters = parse_filters(&args.filters)?;
    let json = args.format == Format::Json;
    let out = match args.what {
        Listed::Tasks => {
            let list = tasks(
                &args.head,
                TaskQuery {
                    job: args.job.map(JobId),
                    filters,
                    limit: args.limit,
                    summary: false,
                },
            )?;
            if json {
                json_lines(list.tasks.iter().map(TaskEvent::to_json))
            } else {
                let mut out = task_table(&list.tasks);
                if list.total > list.tasks.len() as u64 {
                    let _ = writeln!(
                        out,
                        "({} of {} matching attempts shown, the newest; --limit 0 for all)",
                        list.tasks.len(),
                        list.total
                    );
                }
                if list.dropped > 0 {
                    let _ = writeln!(
                        out,
                        "({} older attempts were dropped to keep the head's task events within \
                         its bound: `starling head --task-events`)",
                        list.dropped
                    );
                }
                out
            }
        }
        Listed::Actors => {
            let actors = filtered_actors(status(&args.head)?.actors, &filters)?;
            let actors = newest(actors, args.limit);
            if json {
                json_lines(actors.iter().map(ActorStatus::to_json))
            } else {
                actor_table(&actors)
            }
        }
        Listed::Objects | Listed::Workers => {
            let workers = args.what == Listed::Workers;
            let list = state_list(
                &args.head,
                TaskQuery {
                    job: args.job.map(JobId),
                    filters,
                    limit: args.limit,
                    summary: false,
                },
                workers,
            )?;
            let shown = list.objects.len() + list.workers.len();
            let mut out = if json && workers {
                json_lines(list.workers.iter().map(WorkerRecord::to_json))
            } else if json {
                json_lines(list.objects.iter().map(ObjectRecord::to_json))
            } else if workers {
                worker_table(&list.workers)
            } else {
                object_table(&list.objects)
            };
            if !json && list.total > shown as u64 {
                let _ = writeln!(
                    out,
                    "({shown} of {} shown, the newest; --limit 0 for all)",
                    list.total
                );
            }
            out
        }
        Listed::Nodes => {
            no_filters(&filters, "nodes")?;
            let nodes = status(&args.head)?.nodes;
            if json {
                json_lines(nodes.iter().map(NodeStatus::to_json))
            } else {
                node_table(&nodes)
            }
        }
        Listed::Jobs => {
            no_filters(&filters, "jobs")?;
            let jobs = ask(&args.head, "job list", |mut head| async move {
                head.list_jobs(Empty).await
            })?;
            let jobs = newest(jobs, args.limit);
            if json {
                json_lines(jobs.iter().map(JobInfo::to_json))
            } else {
                job_table(&jobs)
            }
        }
        Listed::Pools => {
            no_filters(&filters, "pools")?;
            let pools = ask(&args.head, "pool list", |mut head| async move {
                head.list_pools(Empty).await
            })?;
            if json {
                json_lines(pools.iter().map(PoolInfo::to_json))
            } else {
                pool_table(&pools)
            }
        }
    };
    print!("{out}");
    Ok(())
}

fn no_filters(filters: &[Filter], what: &str) -> Result<()> {
    if let Some(f) = filters.first() {
        bail!("{what} take no filters (got `{f}`): filter tasks or actors");
    }
    Ok(())
}

fn newest<T>(mut rows: Vec<T>, limit: u32) -> Vec<T> {
    if limit > 0 && rows.len() > limit as usize {
        rows.drain(..rows.len() - limit as usize);
    }
    rows
}

pub fn summary(args: SummaryArgs) -> Result<()> {
    let filters = parse_filters(&args.filters)?;
    match args.what {
        Summarized::Tasks => {
            let list = tasks(
                &args.head,
                TaskQuery {
                    job: args.job.map(JobId),
                    filters,
                    limit: 0,
                    summary: true,
                },
            )?;
            // One row per function, one column per state.
            let mut names: Vec<&str> = list.summary.iter().map(|c| c.name.as_str()).collect();
            names.dedup();
            let mut rows = vec![std::iter::once("FUNCTION".to_string())
                .chain(TaskStatus::ALL.iter().map(|s| s.as_str().to_string()))
                .chain(std::iter::once("TOTAL".to_string()))
                .collect::<Vec<_>>()];
            for name in names {
                let count = |s: TaskStatus| {
                    list.summary
                        .iter()
                        .find(|c| c.name == name && c.state == s)
                        .map_or(0, |c| c.count)
                };
                let total: u64 = TaskStatus::ALL.iter().map(|s| count(*s)).sum();
                rows.push(
                    std::iter::once(name.to_string())
                        .chain(TaskStatus::ALL.iter().map(|s| count(*s).to_string()))
                        .chain(std::iter::once(total.to_string()))
                        .collect(),
                );
            }
            let mut out = table(&rows);
            let _ = writeln!(out, "{} attempts", list.total);
            if list.dropped > 0 {
                let _ = writeln!(out, "({} older attempts dropped)", list.dropped);
            }
            print!("{out}");
        }
        Summarized::Objects => {
            let list = state_list(
                &args.head,
                TaskQuery {
                    job: args.job.map(JobId),
                    filters,
                    limit: 0,
                    summary: false,
                },
                false,
            )?;
            let mut counts: std::collections::BTreeMap<(String, String), (u64, u64)> =
                Default::default();
            for o in &list.objects {
                let node = o.node.map_or("-".to_string(), |n| n.to_string());
                let c = counts.entry((o.state.clone(), node)).or_default();
                c.0 += 1;
                c.1 += o.size;
            }
            let mut rows = vec![["STATE", "NODE", "OBJECTS", "BYTES"]
                .map(String::from)
                .to_vec()];
            for ((state, node), (n, bytes)) in counts {
                rows.push(vec![state, node, n.to_string(), bytes.to_string()]);
            }
            print!("{}", table(&rows));
        }
        Summarized::Actors => {
            let actors = filtered_actors(status(&args.head)?.actors, &filters)?;
            let mut counts: std::collections::BTreeMap<(String, String), u64> = Default::default();
            for a in &actors {
                *counts
                    .entry((a.class_name.clone(), a.state.clone()))
                    .or_default() += 1;
            }
            let mut rows = vec![["CLASS", "STATE", "COUNT"].map(String::from).to_vec()];
            for ((class, state), n) in counts {
                rows.push(vec![class, state, n.to_string()]);
            }
            print!("{}", table(&rows));
        }
    }
    Ok(())
}

/// An id given as `T42` or `42`.
pub fn id_arg(s: &str) -> Result<u64> {
    s.trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .with_context(|| format!("`{s}` is not an id (a number, or one with its letter: T42)"))
}

pub fn get(args: GetArgs) -> Result<()> {
    match &args.what {
        GetCommand::Task { id } => {
            let id = id_arg(id)?;
            let list = tasks(
                &args.head,
                TaskQuery {
                    filters: vec![Filter::parse(&format!("task_id={id}")).expect("well-formed")],
                    ..Default::default()
                },
            )?;
            if list.tasks.is_empty() {
                bail!(
                    "no record of task T{id}: it was never submitted, or its records were \
                     dropped ({} attempts dropped so far)",
                    list.dropped
                );
            }
            for e in &list.tasks {
                print!("{}", describe_task(e));
            }
        }
        GetCommand::Actor { id } => {
            let id = id_arg(id)?;
            let actors = status(&args.head)?.actors;
            let Some(a) = actors.iter().find(|a| a.id.0 == id) else {
                bail!("no actor T{id} (the head keeps the latest 10,000 dead actors)");
            };
            print!("{}", actor_table(std::slice::from_ref(a)));
            if !a.cause.is_empty() {
                println!("cause: {}", a.cause);
            }
        }
        GetCommand::Object { id } => {
            let id = id_arg(id)?;
            let by_id = |key: &str| TaskQuery {
                filters: vec![Filter::parse(&format!("{key}={id}")).expect("well-formed")],
                ..Default::default()
            };
            let list = state_list(&args.head, by_id("object_id"), false)?;
            let Some(o) = list.objects.first() else {
                bail!(
                    "no object {} at the head: never made, freed with its last reference, or \
                     another job's",
                    starling_proto::ObjectId(id)
                );
            };
            print!("{}", object_table(std::slice::from_ref(o)));
            // A task's (first) return object has the task's number; a `put` has no task.
            match tasks(&args.head, by_id("task_id"))?.tasks.last() {
                Some(t) => println!(
                    "made by task {} ({}, attempt {}, {})",
                    t.task,
                    t.short_name(),
                    t.attempt,
                    t.state.as_str()
                ),
                None => println!("made by a put, or by a task whose records were dropped"),
            }
        }
        GetCommand::Node { id } => {
            let id = id_arg(id)?;
            let nodes = status(&args.head)?.nodes;
            let Some(n) = nodes.iter().find(|n| n.id.0 == id) else {
                bail!("no node N{id}");
            };
            print!("{}", node_table(std::slice::from_ref(n)));
        }
    }
    Ok(())
}

pub fn timeline(args: TimelineArgs) -> Result<()> {
    let list = tasks(
        &args.head,
        TaskQuery {
            job: args.job.map(JobId),
            ..Default::default()
        },
    )?;
    let trace = chrome_trace(&list.tasks, starling_proto::state::now_us());
    let ran = list.tasks.iter().filter(|e| e.started_us > 0).count();
    std::fs::write(&args.output, trace)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    eprintln!(
        "wrote {} task slices to {} (open it in chrome://tracing or https://ui.perfetto.dev)",
        ran,
        args.output.display()
    );
    Ok(())
}

fn filtered_actors(actors: Vec<ActorStatus>, filters: &[Filter]) -> Result<Vec<ActorStatus>> {
    ActorStatus::filter(actors, filters).map_err(anyhow::Error::msg)
}

/// Rows as aligned columns.
fn table(rows: &[Vec<String>]) -> String {
    crate::status::columns(rows, "")
}

/// JSON values as one array, on a line of its own.
fn json_lines(items: impl Iterator<Item = String>) -> String {
    json_array(items) + "\n"
}

/// A duration in microseconds, short.
fn micros(us: u64) -> String {
    match us {
        0..=9_999 => format!("{us}us"),
        10_000..=9_999_999 => format!("{:.1}ms", us as f64 / 1e3),
        _ => format!("{:.1}s", us as f64 / 1e6),
    }
}

fn task_table(tasks: &[TaskEvent]) -> String {
    let mut rows = vec![[
        "TASK", "ATTEMPT", "NAME", "STATE", "JOB", "NODE", "WORKER", "RAN", "ERROR",
    ]
    .map(String::from)
    .to_vec()];
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for e in tasks {
        let mut error = e.error_type.clone();
        if error.chars().count() > 40 {
            error = error.chars().take(39).collect::<String>() + "…";
        }
        rows.push(vec![
            e.task.to_string(),
            e.attempt.to_string(),
            e.short_name().to_string(),
            e.state.to_string(),
            e.job.to_string(),
            opt(e.node.map(|n| n.to_string())),
            opt(e.worker.map(|w| w.to_string())),
            opt(e.run_us().map(micros)),
            if error.is_empty() { "-".into() } else { error },
        ]);
    }
    table(&rows)
}

fn describe_task(e: &TaskEvent) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "task {} attempt {}", e.task, e.attempt);
    let _ = writeln!(out, "  name:      {}", e.name);
    let _ = writeln!(out, "  type:      {}", e.kind.as_str());
    let _ = writeln!(out, "  state:     {}", e.state);
    let _ = writeln!(out, "  job:       {}", e.job);
    if let Some(p) = e.parent {
        let _ = writeln!(out, "  parent:    {p}");
    }
    if let Some(a) = e.actor {
        let _ = writeln!(out, "  actor:     {a}");
    }
    if let (Some(n), Some(w)) = (e.node, e.worker) {
        let _ = writeln!(out, "  ran on:    node {n}, worker {w}");
    }
    let at = |us: u64| {
        if us == 0 {
            "-".to_string()
        } else {
            format!("+{}", micros(us.saturating_sub(e.submitted_us)))
        }
    };
    let _ = writeln!(
        out,
        "  times:     submitted {} (Unix us), ready {}, started {}, ended {}",
        e.submitted_us,
        at(e.ready_us),
        at(e.started_us),
        at(e.ended_us)
    );
    if let Some(run) = e.run_us() {
        let _ = writeln!(out, "  ran for:   {}", micros(run));
    }
    if !e.error_type.is_empty() {
        let _ = writeln!(out, "  error:     {}", e.error_type);
        let _ = writeln!(out, "  message:   {}", e.error);
    }
    if !e.backtrace.is_empty() {
        let _ = writeln!(out, "  backtrace:");
        for line in e.backtrace.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    out
}

fn object_table(objects: &[ObjectRecord]) -> String {
    let mut rows = vec![[
        "OBJECT",
        "STATE",
        "NODE",
        "BYTES",
        "HANDLES",
        "TASK REFS",
        "IN VALUES",
    ]
    .map(String::from)
    .to_vec()];
    for o in objects {
        rows.push(vec![
            o.object.to_string(),
            o.state.clone(),
            o.node.map_or("-".into(), |n| n.to_string()),
            o.size.to_string(),
            o.handles.to_string(),
            o.task_refs.to_string(),
            o.nested_in.to_string(),
        ]);
    }
    table(&rows)
}

fn worker_table(workers: &[WorkerRecord]) -> String {
    let mut rows = vec![["WORKER", "NODE", "JOB", "STATE", "TASKS", "ACTOR", "PID"]
        .map(String::from)
        .to_vec()];
    for w in workers {
        rows.push(vec![
            w.worker.to_string(),
            w.node.to_string(),
            w.job.to_string(),
            w.state.clone(),
            w.tasks.to_string(),
            w.actor.map_or("-".into(), |a| a.to_string()),
            if w.pid == 0 {
                "-".into()
            } else {
                w.pid.to_string()
            },
        ]);
    }
    table(&rows)
}

fn actor_table(actors: &[ActorStatus]) -> String {
    let mut rows = vec![[
        "ACTOR", "CLASS", "NAME", "STATE", "NODE", "RESTARTS", "CALLS", "JOB",
    ]
    .map(String::from)
    .to_vec()];
    for a in actors {
        rows.push(vec![
            a.id.to_string(),
            a.class_name.clone(),
            if a.name.is_empty() {
                "-".into()
            } else {
                a.name.clone()
            },
            a.state.clone(),
            a.node.map_or("-".into(), |n| n.to_string()),
            a.restarts.to_string(),
            a.calls_served.to_string(),
            a.job.to_string(),
        ]);
    }
    table(&rows)
}

fn node_table(nodes: &[NodeStatus]) -> String {
    table(&crate::status::node_rows(nodes))
}

fn job_table(jobs: &[JobInfo]) -> String {
    let mut rows = vec![["JOB", "NAME", "STATUS", "POOL", "INSTANCES", "MESSAGE"]
        .map(String::from)
        .to_vec()];
    for j in jobs {
        rows.push(vec![
            j.id.to_string(),
            j.spec.name.clone(),
            j.status.clone(),
            j.spec.pool.clone(),
            j.nodes.len().to_string(),
            j.message.clone(),
        ]);
    }
    table(&rows)
}

fn pool_table(pools: &[PoolInfo]) -> String {
    let mut rows = vec![["POOL", "NODES", "BUSY", "STARTING", "MIN", "MAX"]
        .map(String::from)
        .to_vec()];
    for p in pools {
        rows.push(vec![
            p.spec.name.clone(),
            p.nodes.len().to_string(),
            p.busy.to_string(),
            p.starting.to_string(),
            p.spec.min_nodes.to_string(),
            p.spec.max_nodes.to_string(),
        ]);
    }
    table(&rows)
}
