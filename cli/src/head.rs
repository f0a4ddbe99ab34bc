//! `starling head`: runs the head (the scheduler behind gRPC) in the foreground.
//!
//! The first line of stdout is the address to connect to and nothing else, flushed at once, so
//! scripts and tests can start a head on port 0 and read where it listens; everything meant for
//! people goes to stderr. The head runs until SIGINT or SIGTERM (then it closes every stream, so
//! node agents and drivers see it leave) or until the process is killed.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use starling_scheduler::head::{self, HeadConfig};

/// The port `starling head` listens on by default (and the one the README uses).
pub const DEFAULT_PORT: u16 = 6380;

#[derive(Args, Debug)]
pub struct HeadArgs {
    /// Port to listen on; 0 picks a free one (read it from the first line of stdout).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// IP address to listen on; 0.0.0.0 accepts node agents and drivers from other hosts.
    #[arg(long, value_name = "ADDR", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
    /// Where the head keeps uploaded binaries [default: $TMPDIR/starling/head-<port>; with
    /// --port 0, a directory of this process that is removed when the head stops].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

pub fn run(args: HeadArgs) -> Result<()> {
    let (data_dir, scratch) = match args.data_dir {
        Some(dir) => (dir, false),
        None => {
            let root = std::env::temp_dir().join("starling");
            if args.port == 0 {
                // A fresh port every run: nothing worth keeping for the next head.
                let dir = root.join(format!("head-0-{}", std::process::id()));
                (dir, true)
            } else {
                (root.join(format!("head-{}", args.port)), false)
            }
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("starling-head")
        .enable_all()
        .build()
        .context("cannot start the I/O runtime")?;
    let outcome = rt.block_on(serve(
        SocketAddr::new(args.bind, args.port),
        data_dir.clone(),
    ));
    if scratch {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    outcome
}

async fn serve(bind: SocketAddr, data_dir: PathBuf) -> Result<()> {
    let mut handle = head::serve(HeadConfig::new(bind, data_dir.clone()))
        .await
        .context("cannot start the head")?;
    let addr = handle.addr();
    let connect = connect_address(addr);
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{connect}")
            .and_then(|()| out.flush())
            .context("cannot write the address to stdout")?;
    }
    eprintln!(
        "starling head listening on {addr} (data in {}); join with `starling worker --head \
         {connect}`, drive with STARLING_HEAD={connect}; stop with Ctrl-C",
        data_dir.display()
    );
    let stopped_by = tokio::select! {
        signal = crate::shutdown_signal() => Some(signal?),
        () = handle.wait() => None,
    };
    match stopped_by {
        Some(signal) => {
            eprintln!("starling head: {signal}, shutting down");
            handle.shutdown().await;
            Ok(())
        }
        None => anyhow::bail!("the head's server on {addr} stopped unexpectedly"),
    }
}

/// The address clients on this host should dial: the bound one, with an unspecified IP
/// (`0.0.0.0`, `::`) replaced by loopback.
fn connect_address(bound: SocketAddr) -> SocketAddr {
    match bound.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, bound.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, bound.port()).into(),
        _ => bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_binds_are_dialed_on_loopback() {
        let a: SocketAddr = "0.0.0.0:7".parse().unwrap();
        assert_eq!(connect_address(a), "127.0.0.1:7".parse().unwrap());
        let b: SocketAddr = "[::]:7".parse().unwrap();
        assert_eq!(connect_address(b), "[::1]:7".parse().unwrap());
        let c: SocketAddr = "10.1.2.3:7".parse().unwrap();
        assert_eq!(connect_address(c), c);
    }
}
