//! `starling job ...` and `starling pool ...`: multi-node jobs and compute pools.
//!
//! `starling job submit` prints the job id alone on the first line of stdout (scripts capture
//! it); progress goes to stderr (the upload of a large payload and `--wait`: a bar and a
//! spinner on a terminal, plain lines otherwise). `wait` and `submit --wait` exit non-zero when the job did not
//! end DONE.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use starling::jobs::{Job, JobClient, JobInfo, JobOptions, JobStatus, PoolInfo, PoolOptions};
use starling::progress::{Progress, Unit};

use crate::parse;

#[derive(Args, Debug)]
pub struct HeadArg {
    /// The head (host:port).
    #[arg(long, value_name = "ADDR", env = starling_proto::env::HEAD, global = true)]
    head: Option<String>,
    #[command(flatten)]
    auth: crate::auth::AuthArgs,
}

impl HeadArg {
    fn client(&self) -> Result<JobClient> {
        let Some(addr) = &self.head else {
            bail!("no head given: pass --head ADDR or set STARLING_HEAD");
        };
        JobClient::with_config(&self.auth.config(addr)?)
            .with_context(|| format!("cannot reach the head at {addr}"))
    }
}

#[derive(Args, Debug)]
pub struct JobArgs {
    #[command(flatten)]
    head: HeadArg,
    #[command(subcommand)]
    command: JobCommand,
}

/// Commands that take a job accept its id or, where no other job has it, its name.
#[derive(Subcommand, Debug)]
enum JobCommand {
    /// Submit a payload (an executable, or a directory with --entrypoint) to a pool.
    Submit(SubmitArgs),
    /// Print a job's state, and each instance's.
    Status { job: String },
    /// Wait until a job ends; exit non-zero unless it ended DONE.
    Wait {
        job: String,
        /// Give up after this many seconds.
        #[arg(long, value_name = "SECS", value_parser = parse::seconds)]
        timeout: Option<Duration>,
    },
    /// Print an instance's log.
    Logs {
        job: String,
        /// The instance (0 runs the entrypoint).
        #[arg(long, default_value_t = 0)]
        instance: u32,
        /// Keep printing new output until the job ends.
        #[arg(long)]
        follow: bool,
        /// Print the program's own lines, without the `[T..] out|` tags.
        #[arg(long)]
        raw: bool,
    },
    /// List jobs, oldest first.
    List {
        /// Only jobs in this state (PENDING, RUNNING, DONE, FAILED, CANCELLING, CANCELLED).
        #[arg(long, value_name = "STATE", value_parser = parse_status)]
        status: Option<JobStatus>,
        /// Only the N most recent (of those in --status).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Cancel a job: every process of it on every instance is stopped.
    Cancel { job: String },
    /// Delete an ended job and its logs.
    Delete { job: String },
}

fn parse_status(s: &str) -> Result<JobStatus, String> {
    let all = [
        JobStatus::Pending,
        JobStatus::Running,
        JobStatus::Done,
        JobStatus::Failed,
        JobStatus::Cancelling,
        JobStatus::Cancelled,
    ];
    all.into_iter()
        .find(|j| j.to_string().eq_ignore_ascii_case(s))
        .ok_or_else(|| {
            let names: Vec<String> = all.iter().map(|j| j.to_string()).collect();
            format!("`{s}` is not a job state ({})", names.join(", "))
        })
}

/// The id of the job `job` names: an id, or a name no other job has.
fn resolve(client: &JobClient, job: &str) -> Result<u64> {
    if let Ok(id) = job.parse::<u64>() {
        return Ok(id);
    }
    let ids: Vec<u64> = client
        .list_jobs()?
        .into_iter()
        .filter(|j| j.name == job)
        .map(|j| j.id)
        .collect();
    match ids.as_slice() {
        [id] => Ok(*id),
        [] => bail!("no job is named `{job}` (see `starling job list`)"),
        _ => {
            let list: Vec<String> = ids.iter().map(u64::to_string).collect();
            bail!(
                "jobs {} are all named `{job}`: say which by its id",
                list.join(", ")
            )
        }
    }
}

#[derive(Args, Debug)]
struct SubmitArgs {
    /// The compute pool to run on.
    #[arg(long)]
    pool: String,
    /// Nodes the job wants.
    #[arg(long, default_value_t = 1)]
    target_instances: u32,
    /// Nodes it may start with after a short wait [default: --target-instances].
    #[arg(long)]
    min_instances: Option<u32>,
    /// Seconds it may wait for --min-instances nodes before it fails.
    #[arg(long, value_name = "SECS", value_parser = parse::seconds, default_value = "720")]
    instance_timeout: Duration,
    /// Fail the job once more than N of its instances were lost [default: go on while at
    /// least --min-instances are up]. Losing instance 0 always fails it.
    #[arg(long, value_name = "N")]
    max_instance_failures: Option<u32>,
    /// A name to list it by.
    #[arg(long)]
    name: Option<String>,
    /// Environment variables of the entrypoint (`K=V`, repeatable).
    #[arg(long = "env", value_name = "K=V")]
    env_vars: Vec<String>,
    /// For a directory payload: what to run from its root, a file of it with its first
    /// arguments (`run.sh`, `main.py --fast`) or a program of the nodes' (`python3 -m pkg.main`).
    #[arg(long)]
    entrypoint: Option<String>,
    /// The program that runs the payload file [default: python3 for a `.py` file; anything
    /// else runs itself], with its arguments (`--interpreter 'python3 -u'`).
    #[arg(long, value_name = "COMMAND")]
    interpreter: Option<String>,
    /// Wait until it ends, showing progress; exit non-zero unless it ended DONE.
    #[arg(long)]
    wait: bool,
    /// The payload: an executable file, a `.py` file, or a directory (with --entrypoint).
    payload: PathBuf,
    /// Arguments of the entrypoint (after `--`).
    #[arg(last = true)]
    args: Vec<String>,
}

pub fn run(args: JobArgs) -> Result<()> {
    let client = args.head.client()?;
    match args.command {
        JobCommand::Submit(s) => submit(&client, s),
        JobCommand::Status { job } => {
            let info = client.get_job(resolve(&client, &job)?)?.info()?;
            print!("{}", describe(&info));
            Ok(())
        }
        JobCommand::Wait { job, timeout } => {
            let job = client.get_job(resolve(&client, &job)?)?;
            wait(&job, timeout)
        }
        JobCommand::Logs {
            job,
            instance,
            follow,
            raw,
        } => logs(
            &client.get_job(resolve(&client, &job)?)?,
            instance,
            follow,
            raw,
        ),
        JobCommand::List { status, limit } => {
            let mut jobs = client.list_jobs()?;
            if let Some(s) = status {
                jobs.retain(|j| j.status == s);
            }
            if let Some(n) = limit {
                jobs.drain(..jobs.len().saturating_sub(n));
            }
            println!(
                "{:<6} {:<20} {:<11} {:<12} {:>9}  {:<20} MESSAGE",
                "ID", "NAME", "STATUS", "POOL", "INSTANCES", "CREATED"
            );
            for j in jobs {
                println!(
                    "{:<6} {:<20} {:<11} {:<12} {:>9}  {:<20} {}",
                    j.id,
                    j.name,
                    j.status,
                    j.pool,
                    format!("{}/{}", j.min_instances, j.target_instances),
                    ago(j.created),
                    j.message.lines().next().unwrap_or_default()
                );
            }
            Ok(())
        }
        JobCommand::Cancel { job } => {
            let id = resolve(&client, &job)?;
            let status = client.get_job(id)?.cancel()?;
            println!("job {id}: {status}");
            Ok(())
        }
        JobCommand::Delete { job } => {
            let id = resolve(&client, &job)?;
            client.delete_job(id)?;
            println!("job {id} deleted");
            Ok(())
        }
    }
}

fn submit(client: &JobClient, s: SubmitArgs) -> Result<()> {
    let client = &client.clone().show_progress();
    let mut options = JobOptions::new()
        .target_instances(s.target_instances)
        .instance_timeout(s.instance_timeout)
        .args(s.args.clone());
    if let Some(m) = s.min_instances {
        options = options.min_instances(m);
    }
    if let Some(n) = &s.name {
        options = options.name(n.clone());
    }
    if let Some(n) = s.max_instance_failures {
        options = options.max_instance_failures(n);
    }
    if let Some(i) = &s.interpreter {
        options = options.interpreter(i.split_whitespace());
    }
    for kv in &s.env_vars {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("--env takes K=V, not `{kv}`");
        };
        options = options.env(k, v);
    }
    let job = if s.payload.is_dir() {
        let Some(entry) = &s.entrypoint else {
            bail!(
                "{} is a directory: say which program in it to run with --entrypoint",
                s.payload.display()
            );
        };
        client.submit_directory(&s.payload, &s.pool, entry, options)?
    } else {
        if s.entrypoint.is_some() {
            bail!("--entrypoint is for directory payloads");
        }
        client.submit_file(&s.payload, &s.pool, options)?
    };
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", job.id())?;
        out.flush()?;
    }
    eprintln!("submitted job {} to pool {}", job.id(), s.pool);
    if s.wait {
        wait(&job, None)
    } else {
        Ok(())
    }
}

fn wait(job: &Job, timeout: Option<Duration>) -> Result<()> {
    // On a terminal a spinner with the state and the time waited, each change a line above it;
    // otherwise a plain line per change.
    let progress = Progress::new(&format!("job {}", job.id()), 0, Unit::Count);
    let info = job.wait_with(timeout, |i| {
        let detail = if i.message.is_empty() {
            match i.status {
                JobStatus::Running => format!(
                    " on {} instance(s) ({}/{} wanted)",
                    i.nodes.len(),
                    i.nodes.len(),
                    i.target_instances
                ),
                _ => String::new(),
            }
        } else {
            format!(": {}", i.message)
        };
        progress.line(&format!("job {}: {}{detail}", i.id, i.status));
        progress.note(&format!("{}{detail}", i.status));
    })?;
    progress.finish();
    println!("{}", info.status);
    match info.status {
        JobStatus::Done => Ok(()),
        s => bail!("job {} ended {s}: {}", info.id, info.message),
    }
}

fn logs(job: &Job, instance: u32, follow: bool, raw: bool) -> Result<()> {
    let mut offset = 0;
    let mut out = std::io::stdout().lock();
    let mut printer = crate::logs::Printer::new(raw);
    loop {
        let (data, next, ended) = job.logs_from(instance, offset)?;
        printer.write(&mut out, &data)?;
        offset = next;
        if data.is_empty() {
            if !follow || ended {
                printer.finish(&mut out)?;
                return Ok(());
            }
            std::thread::sleep(crate::logs::FOLLOW_POLL);
        }
    }
}

fn ago(t: SystemTime) -> String {
    match SystemTime::now().duration_since(t) {
        Ok(d) if d.as_secs() < 120 => format!("{}s ago", d.as_secs()),
        Ok(d) if d.as_secs() < 7200 => format!("{}m ago", d.as_secs() / 60),
        Ok(d) => format!("{}h ago", d.as_secs() / 3600),
        Err(_) => "now".into(),
    }
}

fn describe(i: &JobInfo) -> String {
    let mut s = format!(
        "job {} ({})\n  status:    {}\n  pool:      {}\n  instances: {} wanted, at least {}\n",
        i.id, i.name, i.status, i.pool, i.target_instances, i.min_instances
    );
    if !i.message.is_empty() {
        s += &format!(
            "  message:   {}\n",
            i.message.replace('\n', "\n             ")
        );
    }
    for k in &i.instances {
        s += &format!("  instance {}: node {}, {}", k.index, k.node, k.state);
        if let Some((at, why)) = &k.lost {
            s += &format!(" {} ({why})", ago(*at));
        }
        if k.index == 0 {
            if let Some(c) = i.exit_code {
                s += &format!(", entrypoint exit code {c}");
            }
        }
        s += "\n";
    }
    if !i.nodes.is_empty() {
        let nodes: Vec<String> = i.nodes.iter().map(|n| n.to_string()).collect();
        s += &format!("  nodes:     {}\n", nodes.join(", "));
    }
    if let Some(c) = i.exit_code {
        s += &format!("  exit code: {c}\n");
    }
    s += &format!("  created:   {}\n", ago(i.created));
    if let Some(t) = i.completed {
        s += &format!("  ended:     {}\n", ago(t));
    }
    s
}

#[derive(Args, Debug)]
pub struct PoolArgs {
    #[command(flatten)]
    head: HeadArg,
    #[command(subcommand)]
    command: PoolCommand,
}

#[derive(Subcommand, Debug)]
enum PoolCommand {
    /// Create (or resize) a pool. The head starts its nodes on its own machine, up to
    /// --max-nodes when jobs need them; with --external, nodes join it with
    /// `starling worker --pool NAME` instead.
    Create {
        name: String,
        #[arg(long, default_value_t = 0)]
        min_nodes: u32,
        #[arg(long)]
        max_nodes: Option<u32>,
        /// CPUs of each node the head starts [default: the machine's].
        #[arg(long)]
        num_cpus_per_node: Option<u32>,
        /// Seconds a started node may stay idle before it is stopped (above --min-nodes).
        #[arg(long, value_name = "SECS", value_parser = parse::seconds, default_value = "60")]
        idle_timeout: Duration,
        /// Nodes join by themselves; the head starts none.
        #[arg(long)]
        external: bool,
    },
    /// List the pools.
    List,
    /// Show one pool.
    Describe { name: String },
    /// Delete a pool with no running job (its started nodes are stopped).
    Delete { name: String },
}

pub fn run_pool(args: PoolArgs) -> Result<()> {
    let client = args.head.client()?;
    match args.command {
        PoolCommand::Create {
            name,
            min_nodes,
            max_nodes,
            num_cpus_per_node,
            idle_timeout,
            external,
        } => {
            if !external && max_nodes.is_none() {
                bail!("--max-nodes is required (or --external for a pool nodes join themselves)");
            }
            let p = client.create_pool(&PoolOptions {
                name,
                min_nodes,
                max_nodes: max_nodes.unwrap_or(0),
                num_cpus_per_node: num_cpus_per_node.unwrap_or(0),
                launched: !external,
                idle_timeout,
            })?;
            print!("{}", pool_line(&p));
            Ok(())
        }
        PoolCommand::List => {
            for p in client.list_pools()? {
                print!("{}", pool_line(&p));
            }
            Ok(())
        }
        PoolCommand::Describe { name } => {
            let p = client.describe_pool(&name)?;
            print!("{}", pool_line(&p));
            let nodes: Vec<String> = p.nodes.iter().map(|n| n.to_string()).collect();
            println!("  nodes: {}", nodes.join(", "));
            Ok(())
        }
        PoolCommand::Delete { name } => {
            client.delete_pool(&name)?;
            println!("pool {name} deleted");
            Ok(())
        }
    }
}

fn pool_line(p: &PoolInfo) -> String {
    let o = &p.options;
    let max = if o.max_nodes == 0 {
        "no limit".to_string()
    } else {
        o.max_nodes.to_string()
    };
    format!(
        "pool {}: {} node(s) ({} busy, {} starting), min {}, max {}, {}\n",
        o.name,
        p.nodes.len(),
        p.busy,
        p.starting,
        o.min_nodes,
        max,
        if o.launched {
            "nodes started by the head"
        } else {
            "nodes join by themselves"
        }
    )
}
