//! A call of a function no worker has: the driver submits the raw name `nowhere::missing#0`
//! (what a `#[remote]` stub would send for a function compiled into another binary), and the
//! worker that receives it fails the task with `FunctionNotFound` instead of hanging. Prints
//! `key=value` lines and exits 0 when that is what happened:
//!
//! ```text
//! kind=FunctionNotFound
//! error=function `nowhere::missing#0` is not registered in build ..: ..
//! ```
//!
//! Connects to the head in `STARLING_HEAD`, or starts a local cluster when it is unset.

use std::time::Duration;

/// The name no binary registers.
const MISSING: &str = "nowhere::missing#0";

fn main() -> anyhow::Result<()> {
    starling_examples::connect()?;
    let r = starling::__private::submit::<u64>(
        MISSING,
        starling::__private::ArgsBuilder::with_capacity(0),
        starling::TaskOptions::default(),
    );
    // Bounded: a hang here is exactly the bug this payload exists to catch.
    match starling::get_timeout(&r, Duration::from_secs(60)) {
        Ok(v) => {
            println!("kind=Value");
            println!("value={v}");
            anyhow::bail!("`{MISSING}` returned a value")
        }
        Err(e) => {
            let kind = match &e {
                starling::Error::FunctionNotFound { .. } => "FunctionNotFound",
                starling::Error::Timeout { .. } => "Timeout",
                _ => "Other",
            };
            println!("kind={kind}");
            println!("error={e}");
            anyhow::ensure!(
                kind == "FunctionNotFound",
                "expected FunctionNotFound, got {e:?}"
            );
            Ok(())
        }
    }
}
