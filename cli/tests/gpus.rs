//! GPUs are assigned, not just counted: a task holding GPUs is told which (`starling::gpu_ids()`,
//! and in a worker process `CUDA_VISIBLE_DEVICES` and `STARLING_GPU_IDS`), two tasks holding a
//! GPU each at once hold different ones, fractions share one, and a task that asked for none
//! sees none. One check, run in each mode: in-process, a local cluster, and a head with a node
//! agent as separate processes (its GPUs declared with `--num-gpus 2 --gpu-ids 3,5`, so no GPU
//! is needed).

mod harness;

use std::collections::HashMap;
use std::process::Command;

use harness::{examples_dir, output_within, Cluster, PAYLOAD, STARLING};

/// What `examples/gpu_tasks` printed, checked against a node whose GPUs are `ids`. `env`:
/// whether tasks run in worker processes, where the variables carry the ids too.
fn check(out: &str, ids: [&str; 2], env: bool) {
    let seen: HashMap<&str, (&str, &str, &str)> = out
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter_map(|(k, v)| {
            let mut parts = v.splitn(3, '|');
            Some((k, (parts.next()?, parts.next()?, parts.next()?)))
        })
        .collect();
    let get = |key: &str| -> &str {
        let (ids_seen, cuda, starling) = *seen
            .get(key)
            .unwrap_or_else(|| panic!("no {key}= line in:\n{out}"));
        if env {
            assert_eq!(cuda, ids_seen, "{key}: CUDA_VISIBLE_DEVICES in:\n{out}");
            assert_eq!(starling, ids_seen, "{key}: STARLING_GPU_IDS in:\n{out}");
        } else {
            assert_eq!(
                (cuda, starling),
                ("-", "-"),
                "{key}: in-process sets no variable"
            );
        }
        ids_seen
    };
    let mut whole = [get("one_a"), get("one_b")];
    whole.sort_unstable();
    let mut expected = ids;
    expected.sort_unstable();
    assert_eq!(
        whole, expected,
        "two one-GPU tasks held at once hold one GPU each, different ones:\n{out}"
    );
    assert_eq!(
        get("two"),
        ids.join(","),
        "a two-GPU task holds both:\n{out}"
    );
    let half = get("half_a");
    assert!(
        ids.contains(&half),
        "half a GPU is one of the node's GPUs: {half:?}\n{out}"
    );
    assert_eq!(
        get("half_b"),
        half,
        "two halves held at once share one GPU:\n{out}"
    );
    assert_eq!(
        get("none"),
        "",
        "a task that asked for no GPU holds none:\n{out}"
    );
}

/// Runs the payload on its own (in-process or a local cluster): its stdout.
fn run_alone(args: &[&str]) -> String {
    let bin = examples_dir().join("gpu_tasks");
    let (status, out, err) = output_within(
        Command::new(&bin)
            .args(args)
            .env_remove("STARLING_HEAD")
            .env_remove("CUDA_VISIBLE_DEVICES"),
        PAYLOAD,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        status.success(),
        "gpu_tasks {args:?}: {status}\n{out}\n{err}"
    );
    out
}

#[test]
fn in_process_tasks_are_told_their_gpus() {
    check(&run_alone(&["--in-process"]), ["0", "1"], false);
}

#[test]
fn local_cluster_tasks_see_their_gpus() {
    check(&run_alone(&[]), ["0", "1"], true);
}

#[test]
fn cluster_tasks_see_the_ids_their_node_declared() {
    let c = Cluster::start_with("gpus", 1, &["--num-gpus", "2", "--gpu-ids", "3,5"], false);
    let (status, _, stdout) = c.run_status("gpu_tasks", &[]);
    c.check(
        status.success(),
        &format!("gpu_tasks exited with {status}:\n{stdout}"),
    );
    check(&stdout, ["3", "5"], true);
}

#[test]
fn a_node_refuses_gpu_ids_it_cannot_use() {
    for (args, says) in [
        (
            &["--num-gpus", "2", "--gpu-ids", "0"][..],
            "needs 2 GPU ids",
        ),
        (&["--gpu-ids", "0,0"][..], "twice"),
        (&["--gpu-ids", "0;1"][..], "not an index"),
    ] {
        let mut cmd = Command::new(STARLING);
        cmd.args(["worker", "--head", "127.0.0.1:1", "--connect-timeout", "1"])
            .args(args);
        let (status, _, err) = output_within(&mut cmd, PAYLOAD).unwrap_or_else(|e| panic!("{e}"));
        assert!(!status.success(), "{args:?} was accepted");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
