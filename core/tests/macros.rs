//! Tests for `#[starling::remote]`: compile tests for what must expand and what must be refused,
//! and in-process runs that check the generated stubs and invokers end to end.
//!
//! The trybuild pass cases only type-check calls (inside functions that are never called), so they
//! need no runtime. The fail cases' expected compiler output lives next to them in `.stderr`
//! files; regenerate those with `TRYBUILD=overwrite cargo test -p starling --test macros` and read
//! the diff before committing it.

use std::time::Duration;

use anyhow::{ensure, Context};
use starling::{Config, ObjectRef, Runtime};

/// Every wait in these tests is bounded, so a broken runtime fails the test instead of hanging it.
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn compile_cases() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}

#[starling::remote]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[starling::remote]
async fn concat(parts: Vec<String>, sep: String) -> String {
    parts.join(&sep)
}

#[starling::remote]
fn parse(text: String) -> Result<u32, std::num::ParseIntError> {
    text.parse()
}

#[starling::remote]
fn read_len(path: String) -> std::io::Result<u64> {
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("no file {path}"),
    ))
}

#[starling::remote]
fn nothing(_: u8) {}

#[starling::remote(num_cpus = 0.5, resources(tpu = 1, "my-res" = 0.5), max_retries = 0)]
fn on_tpu(x: u32) -> u32 {
    x * 2
}

/// Runs `body` inside a fresh in-process runtime that offers the custom resources used above.
fn with_runtime(body: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    let rt = Runtime::with_config(
        Config::default()
            .threads(2)
            .resource("tpu", 1.0)
            .resource("my-res", 1.0),
    )
    .context("start an in-process runtime")?;
    let result = {
        let _guard = rt.enter();
        body()
    };
    rt.shutdown();
    result
}

#[test]
fn values_refs_and_borrowed_refs_are_arguments() -> anyhow::Result<()> {
    with_runtime(|| {
        let r: ObjectRef<i64> = add::remote(1, 2);
        let s = add::remote(r.clone(), 10);
        let t = add::options().num_cpus(1.0).max_retries(1).remote(&r, &s);
        ensure!(starling::get_timeout(&t, WAIT)? == 16);
        ensure!(add(1, 2) == 3, "the function stays callable directly");
        Ok(())
    })
}

#[test]
fn async_functions_run_to_completion() -> anyhow::Result<()> {
    with_runtime(|| {
        let joined = concat::remote(vec!["a".to_owned(), "b".to_owned()], "-".to_owned());
        ensure!(starling::get_timeout(&joined, WAIT)? == "a-b");
        Ok(())
    })
}

#[test]
fn ok_values_are_unwrapped_and_errs_fail_the_task() -> anyhow::Result<()> {
    with_runtime(|| {
        let ok: ObjectRef<u32> = parse::remote("42".to_owned());
        ensure!(starling::get_timeout(&ok, WAIT)? == 42);

        let err = starling::get_timeout(&parse::remote("x".to_owned()), WAIT).unwrap_err();
        let cause = err.remote_error().context("an Err is a task failure")?;
        ensure!(
            cause.type_name.contains("ParseIntError"),
            "type name: {}",
            cause.type_name
        );
        ensure!(
            cause.message == "invalid digit found in string",
            "message: {}",
            cause.message
        );

        let err = starling::get_timeout(&read_len::remote("/x".to_owned()), WAIT).unwrap_err();
        let cause = err
            .remote_error()
            .context("an io::Result Err is a task failure")?;
        ensure!(cause.message == "no file /x", "message: {}", cause.message);
        Ok(())
    })
}

#[test]
fn unit_functions_give_unit_refs() -> anyhow::Result<()> {
    with_runtime(|| {
        let done: ObjectRef<()> = nothing::remote(7);
        starling::get_timeout(&done, WAIT)?;
        Ok(())
    })
}

#[test]
fn attribute_options_reach_the_scheduler() -> anyhow::Result<()> {
    with_runtime(|| {
        // The runtime offers exactly the custom resources this function asks for, so it runs.
        let doubled = on_tpu::remote(21);
        ensure!(starling::get_timeout(&doubled, WAIT)? == 42);
        Ok(())
    })?;
    // A runtime without `tpu` cannot run it: the resource request came from the attribute.
    let rt = Runtime::in_process(1)?;
    let _guard = rt.enter();
    let stuck = on_tpu::remote(21);
    let result = starling::get_timeout(&stuck, Duration::from_millis(300));
    rt.shutdown();
    ensure!(
        result.is_err(),
        "a task needing `tpu` ran on a runtime without it: {result:?}"
    );
    Ok(())
}

#[test]
fn names_carry_the_module_path_and_a_signature_hash() {
    let (path, hash) = add::NAME.split_once('#').unwrap();
    assert_eq!(path, "macros::add");
    assert_eq!(hash.len(), 16);
    assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
    // The hash of `fn(i64, i64) -> i64` is fixed: changing it renames every function.
    assert_eq!(hash, "2b77b8d30deadbfe");
}
