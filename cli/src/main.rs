//! `starling`: the command-line tool.
//!
//! - `starling head`: run a head (the scheduler behind gRPC) in the foreground.
//! - `starling worker --head ADDR`: run a node agent that joins that head.
//! - `starling status --head ADDR`: print the head's nodes, task counters and objects.
//! - `starling job submit|status|wait|logs|list|cancel|delete`: multi-node jobs.
//! - `starling pool create|list|describe|delete`: compute pools.
//! - `starling list|summary|get|timeline|logs`: the state API (tasks, actors, objects,
//!   workers, nodes, jobs, pools) and what tasks, actors and nodes logged.
//! - `starling info`: start an in-process runtime and report what this build offers.
//!
//! Client commands take the head from `--head` or, without it, from `STARLING_HEAD` (the same
//! variable payloads read to connect), and the cluster token from `--token-file` or
//! `STARLING_TOKEN`. Errors are one line on stderr, `error: ...` with the
//! chain of causes, and a non-zero exit code.

mod auth;
mod head;
mod job;
mod logs;
mod parse;
mod state;
mod status;
mod worker;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "starling",
    version,
    about = "Starling: a distributed task engine for Rust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a head: the scheduler that node agents join and drivers connect to.
    ///
    /// Prints the address to connect to as the first line of stdout (and nothing else there);
    /// stops on Ctrl-C or SIGTERM.
    Head(head::HeadArgs),
    /// Run a node agent that joins a head and runs worker processes for its jobs.
    ///
    /// Stops on Ctrl-C or SIGTERM (exit code 0), or with exit code 1 when the head is lost and
    /// does not come back within --reconnect-timeout.
    Worker(worker::WorkerArgs),
    /// Print a head's nodes, task counters and objects.
    Status(status::StatusArgs),
    /// Submit, follow and manage multi-node jobs.
    Job(job::JobArgs),
    /// Create, list, describe and delete compute pools.
    Pool(job::PoolArgs),
    /// List tasks (one row per attempt), actors, nodes, jobs or pools, with filters.
    List(state::ListArgs),
    /// Count tasks by function and state, or actors by class and state.
    Summary(state::SummaryArgs),
    /// Show one task (every attempt, with times, node, worker, error and backtrace), actor or
    /// node.
    Get(state::GetArgs),
    /// Print what a task, an actor or a node agent logged, from the node where it ran.
    Logs(logs::LogsArgs),
    /// Write the tasks that ran as a Chrome trace (chrome://tracing, Perfetto): one row per
    /// worker process, one slice per task.
    Timeline(state::TimelineArgs),
    /// Start an in-process runtime, report its node and resources, and shut it down.
    Info {
        /// Executor threads (default: one per core).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
        threads: Option<u16>,
    },
}

fn main() -> ExitCode {
    let outcome = match Cli::parse().command {
        Command::Head(args) => head::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Status(args) => status::run(args),
        Command::Job(args) => job::run(args),
        Command::Pool(args) => job::run_pool(args),
        Command::List(args) => state::list(args),
        Command::Summary(args) => state::summary(args),
        Command::Get(args) => state::get(args),
        Command::Timeline(args) => state::timeline(args),
        Command::Logs(args) => logs::logs(args),
        Command::Info { threads } => info(threads),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The chain of causes on one line, `outer: inner: root`. A cause whose text an outer message
/// already contains is left out: some error types both print their source and return it from
/// `source()`, which would otherwise show the same words twice.
fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn info(threads: Option<u16>) -> Result<()> {
    let config = match threads {
        Some(n) => starling::Config::default().threads(usize::from(n)),
        None => starling::Config::default(),
    };
    let rt = starling::Runtime::with_config(config)?;
    println!("starling {}", env!("CARGO_PKG_VERSION"));
    for n in rt.nodes() {
        println!(
            "node {} at {}: resources {}, available {}, alive {}",
            n.id, n.address, n.resources, n.available, n.alive
        );
    }
    rt.shutdown();
    Ok(())
}

/// Resolves with the signal's name on the first SIGINT or SIGTERM.
async fn shutdown_signal() -> Result<&'static str> {
    #[cfg(unix)]
    {
        use anyhow::Context;
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
        tokio::select! {
            _ = term.recv() => Ok("SIGTERM"),
            _ = int.recv() => Ok("SIGINT"),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await?;
        Ok("Ctrl-C")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_fit_on_one_line_without_repeats() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use");
        // Like `HeadError::Bind`: the source is in the message and in `source()`.
        #[derive(Debug)]
        struct Bind(std::io::Error);
        impl std::fmt::Display for Bind {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "cannot listen on 127.0.0.1:1: {}", self.0)
            }
        }
        impl std::error::Error for Bind {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = anyhow::Error::new(Bind(io)).context("cannot start the head");
        assert_eq!(
            one_line(&e),
            "cannot start the head: cannot listen on 127.0.0.1:1: Address already in use"
        );
        let e = anyhow::anyhow!("root").context("middle").context("outer");
        assert_eq!(one_line(&e), "outer: middle: root");
    }

    /// Random command lines, built from the tool's own words and the values its parsers find
    /// hard, must parse or give clap's error: never a panic.
    #[test]
    fn fuzz_command_lines_parse_or_err() {
        use clap::CommandFactory;
        use starling_proto::fuzz::{self, Rng};
        Cli::command().debug_assert();
        const WORDS: &[&str] = &[
            "head",
            "worker",
            "status",
            "job",
            "pool",
            "info",
            "submit",
            "wait",
            "logs",
            "list",
            "cancel",
            "delete",
            "create",
            "describe",
            "help",
            "--",
            "-",
            "-h",
            "-V",
            "--help",
            "--version",
        ];
        const FLAGS: &[&str] = &[
            "--head",
            "--port",
            "--bind",
            "--data-dir",
            "--num-cpus",
            "--num-gpus",
            "--resources",
            "--store-cap",
            "--log-dir",
            "--cache-dir",
            "--connect-timeout",
            "--pool",
            "--timeout",
            "--target-instances",
            "--min-instances",
            "--instance-timeout",
            "--name",
            "--env",
            "--entrypoint",
            "--wait",
            "--instance",
            "--follow",
            "--threads",
            "--min-nodes",
            "--max-nodes",
            "--num-cpus-per-node",
            "--idle-timeout",
            "--external",
        ];
        const VALUES: &[&str] = &[
            "",
            "0",
            "1",
            "-1",
            "1e308",
            "1e-300",
            "NaN",
            "inf",
            "-0",
            "0.00001",
            "86400.0001",
            "a=b",
            "a=1,b=2",
            "a=1,",
            "CPU=1",
            "=",
            ",",
            "18446744073709551616",
            "99999999999999999999",
            "4294967296",
            "65536",
            "512M",
            "16777216T",
            "1.5G",
            "12Q",
            "127.0.0.1:0",
            "[::1]:1",
            "::",
            "300.1.1.1",
            "\u{e9}",
            "\0",
        ];
        let mut ok = 0u64;
        fuzz::run("cli argv", 2.0, 500, |rng: &mut Rng| {
            let mut argv = vec!["starling".to_string()];
            for _ in 0..rng.below(8) {
                let word = match rng.below(5) {
                    0 | 1 => rng.pick(WORDS).to_string(),
                    2 => rng.pick(FLAGS).to_string(),
                    3 => rng.pick(VALUES).to_string(),
                    _ if rng.one_in(2) => format!("{}={}", rng.pick(FLAGS), rng.pick(VALUES)),
                    _ => rng.string(),
                };
                argv.push(word);
            }
            match Cli::try_parse_from(&argv) {
                Ok(_) => ok += 1,
                Err(e) => {
                    // Rendering the message must not panic either.
                    let _ = e.render().to_string();
                }
            }
        });
        assert!(ok > 0, "some random command lines are valid");
    }
}
