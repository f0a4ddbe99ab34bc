//! `starling`: the command-line tool.
//!
//! The engine currently runs in-process (see `starling::Runtime`); the cluster verbs (`head`,
//! `worker`, `status`, `job ..`) arrive with the distributed engine. Today the tool reports its
//! version and what a program linked against this build of Starling would get.

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
    /// Start an in-process runtime, report its node and resources, and shut it down.
    Info {
        /// Executor threads (default: one per core).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
        threads: Option<u16>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Info { threads } => {
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
        }
    }
    Ok(())
}
