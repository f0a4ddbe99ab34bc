//! Multi-process cluster tests: a `starling head`, two `starling worker`s and the example
//! payloads (`examples/cluster_*.rs`), each a separate process with its own log file.
//!
//! Every test starts its own cluster on a free port, under its own temporary directory. Every
//! wait is bounded; a failure message carries the tail of every log file (the head's, the
//! agents', each worker process's and each payload's). Dropping the cluster stops the agents,
//! then the head (SIGTERM, then SIGKILL for whatever is still there after a grace period).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a head or a set of agents may take to come up.
const STARTUP: Duration = Duration::from_secs(30);
/// How long a payload may run (debug builds; the big-object payload moves 100 MB).
const PAYLOAD: Duration = Duration::from_secs(180);
/// How long a process may take to exit after SIGTERM.
const GRACE: Duration = Duration::from_secs(10);

const STARLING: &str = env!("CARGO_BIN_EXE_starling");

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn dag_lands_on_both_nodes() {
    let mut c = Cluster::start("dag", 2);
    let out = c.run("cluster_dag", &["40"]);
    let nodes: Vec<&str> = out.get(&c, "nodes").split(',').collect();
    c.check(
        nodes.len() == 2 && nodes[0] != nodes[1],
        &format!("the DAG ran on nodes {nodes:?}, expected 2 distinct ones"),
    );
    c.check(
        out.get(&c, "sum") == (0..40u64).sum::<u64>().to_string(),
        "the DAG's sum is wrong",
    );
    c.assert_running();
    c.stop_cleanly();
}

#[test]
fn big_object_moves_from_node_a_to_node_b() {
    let c = Cluster::start("big", 2);
    let out = c.run("cluster_big_object", &[]);
    c.check(out.get(&c, "len") == "100000000", "wrong length");
    c.check(out.get(&c, "checksum_ok") == "true", "checksum mismatch");
    c.check(
        out.get(&c, "producer_node") != out.get(&c, "consumer_node"),
        "producer and consumer ran on the same node",
    );
    c.assert_running();
}

#[test]
fn nested_tasks_sum_up() {
    let c = Cluster::start("nested", 2);
    let out = c.run("cluster_nested", &["1024"]);
    c.check(
        out.get(&c, "sum") == (0..1024u64).sum::<u64>().to_string(),
        "the nested sum is wrong",
    );
    c.assert_running();
}

#[test]
fn a_missing_function_fails_with_function_not_found() {
    let c = Cluster::start("missing", 2);
    // A first payload's binary is uploaded and cached on the nodes; the second driver is
    // another binary that asks for a function nobody has.
    c.run("cluster_dag", &["8"]);
    let out = c.run("cluster_missing_fn", &[]);
    c.check(
        out.get(&c, "kind") == "FunctionNotFound",
        "wrong error kind",
    );
    c.check(
        out.get(&c, "error").contains("nowhere::missing#0"),
        "the error does not name the function",
    );
    c.assert_running();
}

#[test]
fn status_lists_two_alive_nodes() {
    let c = Cluster::start("status", 2);
    let (status, stdout, stderr) = c.status();
    c.check(
        status.success(),
        &format!("status failed: {stdout}{stderr}"),
    );
    let alive_rows = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('N') && l.contains(" alive "))
        .count();
    c.check(
        stdout.contains("nodes: 2 alive, 0 dead")
            && alive_rows == 2
            && stdout.contains("tasks: submitted="),
        &format!("unexpected status:\n{stdout}"),
    );
    c.assert_running();
}

#[test]
fn dead_heads_and_bad_flags_fail_fast() {
    let closed = ClosedPort::new();
    let dead = closed.addr.to_string();
    let t0 = Instant::now();
    let (status, _, stderr) = output_within(
        Command::new(STARLING).args(["status", "--head", &dead]),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("status against a dead port: {e}"));
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: head at {dead} is unreachable")),
        "{stderr}"
    );

    let t0 = Instant::now();
    let (status, _, stderr) = output_within(
        Command::new(STARLING).args(["worker", "--head", &dead, "--connect-timeout", "1"]),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("worker against a dead port: {e}"));
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("head at {dead} is unreachable")),
        "{stderr}"
    );

    for (flag, value, says) in [
        ("--resources", "ssd", "not a `name=amount` pair"),
        ("--resources", "ssd=-2", "non-negative"),
        ("--num-cpus", "two", "not a number"),
        ("--store-cap", "1.5G", "not a size unit"),
    ] {
        let (status, _, stderr) = output_within(
            Command::new(STARLING).args(["worker", "--head", &dead, flag, value]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(!status.success(), "{flag} {value} was accepted");
        assert!(stderr.contains(says), "{flag} {value}: {stderr}");
    }
}

#[test]
fn garbage_on_the_head_port_does_not_stop_it() {
    let c = Cluster::start("garbage", 2);
    let mut rng = XorShift::seeded();
    let mut noise = vec![0u8; 64 * 1024];
    rng.fill(&mut noise);
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let payloads: Vec<Vec<u8>> = vec![
        noise.clone(),
        // A valid HTTP/2 preface, then junk where frames should be.
        [&preface[..], &noise[..4096]].concat(),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        Vec::new(),
    ];
    for bytes in &payloads {
        let mut s = TcpStream::connect(&c.head)
            .unwrap_or_else(|e| c.fail(&format!("cannot connect to the head: {e}")));
        // The head may hang up halfway through the junk; that is its right.
        let _ = s.write_all(bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        drop(s);
    }
    c.assert_running();
    let out = c.run("cluster_dag", &["20"]);
    c.check(
        out.get(&c, "nodes").split(',').count() == 2,
        "the DAG did not reach both nodes after the garbage",
    );
    c.check(
        out.get(&c, "sum") == (0..20u64).sum::<u64>().to_string(),
        "wrong sum after the garbage",
    );
    c.wait_alive(2);
    c.assert_running();
}

#[test]
fn a_worker_rejoins_a_restarted_head_and_gives_up_on_a_dead_one() {
    let mut c = Cluster::start_with("headloss", 1, &["--reconnect-timeout", "5"], false);
    // A job running across the restart, on a node the head launched.
    c.cli_ok(&[
        "pool",
        "create",
        "p",
        "--max-nodes",
        "1",
        "--num-cpus-per-node",
        "1",
    ]);
    let payload = c.script_payload("sleepy", "echo started; sleep 120");
    let out = c.cli_ok(&[
        "job",
        "submit",
        "--pool",
        "p",
        "--entrypoint",
        "run.sh",
        &payload,
    ]);
    let id = out.lines().next().unwrap_or_default().trim().to_string();
    let deadline = Instant::now() + STARTUP;
    while !c.cli_ok(&["job", "status", &id]).contains("RUNNING") {
        if Instant::now() > deadline {
            c.fail(&format!("job {id} did not start within {STARTUP:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    let began = Instant::now();
    c.restart_head();
    c.wait_alive(1);
    eprintln!(
        "the agent rejoined {:?} after the head restart began",
        began.elapsed()
    );
    let out = c.run("cluster_dag", &["10"]);
    c.check(
        out.get(&c, "sum") == (0..10u64).sum::<u64>().to_string(),
        "wrong sum on the rejoined node",
    );
    let status = c.cli_ok(&["job", "status", &id]);
    c.check(
        status.contains("FAILED") && status.contains("head restarted"),
        &format!("a job running across the restart should fail with \"head restarted\":\n{status}"),
    );
    let log = std::fs::read_to_string(&c.procs[1].log).unwrap_or_default();
    c.check(
        log.contains("lost the head") && log.contains("registered again as N1"),
        "the worker did not log losing the head and registering again",
    );

    // The head goes away for good: the agent gives up after its reconnect timeout.
    c.procs[0].child.kill().expect("kill the head");
    let lost = Instant::now();
    let Some(status) = wait_within(&mut c.procs[1].child, STARTUP) else {
        c.fail("the worker kept running after its head died for good")
    };
    c.check(
        status.code() == Some(1),
        &format!("the worker exited with {status}, expected code 1"),
    );
    c.check(
        lost.elapsed() >= Duration::from_secs(4),
        &format!(
            "the worker gave up after {:?}, before its reconnect timeout",
            lost.elapsed()
        ),
    );
    let log = std::fs::read_to_string(&c.procs[1].log).unwrap_or_default();
    c.check(
        log.contains("error: node N1 stopped: lost the head at")
            && log.contains("no head took the node back within 5s")
            && log.contains("reconnect attempt 1 "),
        "the worker did not say it lost the head for good",
    );
}

#[test]
fn the_cluster_token_is_required_and_kept_private() {
    use std::os::unix::fs::PermissionsExt;
    let c = Cluster::start("token", 1);
    let mode = std::fs::metadata(&c.token_file)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0);
    c.check(mode == 0o600, &format!("the token file has mode {mode:o}"));
    let wrong = c.dir.join("wrong-token");
    std::fs::write(&wrong, "not-the-token\n").expect("write a token file");
    let hint = format!(
        "missing or wrong cluster token: pass --token-file {}",
        c.token_file.display()
    );
    let calls: [(&str, Vec<&str>); 2] = [
        ("status", vec!["status", "--head", &c.head]),
        ("job list", vec!["job", "--head", &c.head, "list"]),
    ];
    for (what, file) in [("no token", None), ("a wrong token", Some(&wrong))] {
        for (call, args) in &calls {
            let mut cmd = Command::new(STARLING);
            cmd.args(args).env_remove("STARLING_TOKEN");
            if let Some(f) = file {
                cmd.arg("--token-file").arg(f);
            }
            let (st, _, err) =
                output_within(&mut cmd, Duration::from_secs(15)).unwrap_or_else(|e| c.fail(&e));
            c.check(
                st.code() == Some(1) && err.contains(&hint),
                &format!("{call} with {what}: {st}: {err}"),
            );
        }
    }
    let (st, _, err) = output_within(
        Command::new(STARLING)
            .args(["worker", "--head", &c.head, "--token-file"])
            .arg(&wrong)
            .env_remove("STARLING_TOKEN"),
        Duration::from_secs(15),
    )
    .unwrap_or_else(|e| c.fail(&e));
    c.check(
        st.code() == Some(1) && err.contains(&format!("refused this node: {hint}")),
        &format!("a worker with a wrong token: {st}: {err}"),
    );
    // A driver with the wrong token gets a typed error, not a hang.
    let (st, out, err) = output_within(
        Command::new(examples_dir().join("cluster_dag"))
            .arg("4")
            .env("STARLING_HEAD", &c.head)
            .env("STARLING_TOKEN", "not-the-token"),
        PAYLOAD,
    )
    .unwrap_or_else(|e| c.fail(&e));
    c.check(
        !st.success() && format!("{out}{err}").contains("missing or wrong cluster token"),
        &format!("a driver with a wrong token: {st}: {out}{err}"),
    );
    // With the token, all of them work.
    c.cli_ok(&["job", "list"]);
    let out = c.run("cluster_dag", &["4"]);
    c.check(out.get(&c, "sum") == "6", "wrong sum with the token");
    c.assert_running();
}

#[test]
fn tls_carries_the_cluster_traffic() {
    let c = Cluster::start_with("tls", 1, &[], true);
    let out = c.run("cluster_dag", &["10"]);
    c.check(out.get(&c, "sum") == "45", "wrong sum over TLS");
    c.cli_ok(&["job", "list"]);
    // A client that does not trust the head's CA cannot talk to it.
    let (st, _, err) = output_within(
        Command::new(STARLING)
            .args([
                "status",
                "--head",
                &format!("https://{}", c.head),
                "--token-file",
            ])
            .arg(&c.token_file)
            .env_remove("STARLING_TLS_CA"),
        Duration::from_secs(15),
    )
    .unwrap_or_else(|e| c.fail(&e));
    c.check(
        st.code() == Some(1) && err.contains("needs a CA to trust"),
        &format!("status without the CA: {st}: {err}"),
    );
    // Nor can a plain-text client.
    let (st, _, err) = output_within(
        Command::new(STARLING)
            .args([
                "status",
                "--head",
                &c.head,
                "--timeout",
                "3",
                "--token-file",
            ])
            .arg(&c.token_file)
            .env_remove("STARLING_TLS_CA"),
        Duration::from_secs(15),
    )
    .unwrap_or_else(|e| c.fail(&e));
    c.check(
        !st.success(),
        &format!("plain text reached a TLS head: {err}"),
    );
    c.assert_running();
}

// ---------------------------------------------------------------------------------------------
// Multi-node jobs

#[test]
fn gbdt_trains_as_a_job_across_two_instances() {
    let c = Cluster::start("gbdt", 0);
    c.cli_ok(&[
        "pool",
        "create",
        "ml",
        "--max-nodes",
        "2",
        "--num-cpus-per-node",
        "1",
    ]);
    // y = 3*x0 - 2*x1 (+ a step on x2), rows the same on every run.
    let write = |name: &str, rows: usize, seed: u64| {
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 40) as f64 / (1u64 << 24) as f64
        };
        let mut text = String::from("x0,x1,x2,y\n");
        for _ in 0..rows {
            let x = [next(), next(), next()];
            let y = 3.0 * x[0] - 2.0 * x[1] + if x[2] > 0.5 { 1.0 } else { 0.0 };
            text.push_str(&format!("{:.6},{:.6},{:.6},{y:.6}\n", x[0], x[1], x[2]));
        }
        let path = c.dir.join(name);
        std::fs::write(&path, text).expect("write data");
        path.display().to_string()
    };
    let train = write("train.csv", 2000, 1);
    let test = write("test.csv", 500, 2);
    let model = c.dir.join("model.json").display().to_string();
    let bin = examples_dir().join("gbdt");
    let (status, stdout, stderr) = c.cli(&[
        "job",
        "submit",
        "--pool",
        "ml",
        "--target-instances",
        "2",
        "--wait",
        bin.to_str().expect("utf-8 path"),
        "--",
        "--train",
        &train,
        "--test",
        &test,
        "--label",
        "y",
        "--n-estimators",
        "30",
        "--max-depth",
        "4",
        // Small data trains on one worker by default; this job shards it across both.
        "--min-rows-per-worker",
        "0",
        "--save",
        &model,
    ]);
    c.check(
        status.success(),
        &format!("gbdt job failed: {stdout}{stderr}"),
    );
    let id = stdout.lines().next().unwrap_or_default().trim().to_string();
    let log = c.cli_ok(&["job", "logs", &id]);
    c.check(
        log.contains("with 2 workers on 2 node(s)") && log.contains("workers_used=2"),
        &format!("the job did not train with one worker per instance:\n{log}"),
    );
    let rmse: f64 = log
        .lines()
        .find_map(|l| l.split_once("rmse=").map(|(_, v)| v.trim()))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::MAX);
    c.check(rmse < 0.15, &format!("test rmse {rmse}:\n{log}"));
    let saved = std::fs::read_to_string(&model).unwrap_or_default();
    c.check(
        saved.contains("\"num_trees\":\"30\""),
        &format!("the saved model has not 30 trees: {} bytes", saved.len()),
    );
}

#[test]
fn a_job_runs_on_three_instances_of_a_launched_pool() {
    let c = Cluster::start("job3", 0);
    c.cli_ok(&[
        "pool",
        "create",
        "train",
        "--max-nodes",
        "3",
        "--num-cpus-per-node",
        "1",
    ]);
    let bin = examples_dir().join("distributed_training");
    let (status, stdout, stderr) = c.cli(&[
        "job",
        "submit",
        "--pool",
        "train",
        "--target-instances",
        "3",
        "--wait",
        bin.to_str().expect("utf-8 path"),
    ]);
    c.check(
        status.success(),
        &format!("submit --wait failed: {stdout}{stderr}"),
    );
    let id = stdout.lines().next().unwrap_or_default().trim().to_string();
    c.check(
        id.parse::<u64>().is_ok(),
        &format!("the first stdout line is not a job id: {stdout:?}"),
    );
    // Progress went to stderr, in order.
    let p = stderr
        .find("PENDING")
        .zip(stderr.find("RUNNING"))
        .zip(stderr.find("DONE"));
    c.check(
        matches!(p, Some(((a, b), d)) if a < b && b < d),
        &format!("progress should show PENDING, RUNNING, DONE in order:\n{stderr}"),
    );
    let head_log = c.cli_ok(&["job", "logs", &id]);
    c.check(
        head_log.contains("instances=3") && head_log.contains("training on 3 node(s)"),
        &format!("instance 0's log lacks the result:\n{head_log}"),
    );
    let err: f64 = head_log
        .lines()
        .find_map(|l| l.split_once("max_weight_error=").map(|(_, v)| v.trim()))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::MAX);
    c.check(err < 0.01, &format!("the model did not converge: {err}"));
    // Each instance's log shows the tasks that ran there, tagged with their task ids.
    for k in 0..3 {
        let log = c.cli_ok(&["job", "logs", &id, "--instance", &k.to_string()]);
        c.check(
            log.lines()
                .any(|l| l.starts_with("[T") && l.contains(&format!("shard {k} on node"))),
            &format!("instance {k}'s log shows no task of shard {k}:\n{log}"),
        );
    }
    let status = c.cli_ok(&["job", "status", &id]);
    c.check(
        status.contains("DONE") && status.contains("exit code: 0"),
        &format!("unexpected status:\n{status}"),
    );
    let (st, _, err) = c.cli(&["job", "logs", &id, "--instance", "3"]);
    c.check(
        !st.success() && err.contains("3 instance(s)"),
        &format!("a log of a missing instance should be refused: {err}"),
    );
}

#[test]
fn jobs_start_with_min_instances_and_bad_ones_are_refused() {
    let mut c = Cluster::start("jobmin", 0);
    let payload = c.script_payload(
        "hello",
        "echo \"instance $STARLING_INSTANCE_ID of $STARLING_NUM_INSTANCES: $1\"",
    );
    c.cli_ok(&[
        "pool",
        "create",
        "two",
        "--max-nodes",
        "2",
        "--num-cpus-per-node",
        "1",
    ]);
    // Only 2 nodes can be had: the job starts with 2.
    let out = c.cli_ok(&[
        "job",
        "submit",
        "--pool",
        "two",
        "--target-instances",
        "3",
        "--min-instances",
        "2",
        "--entrypoint",
        "run.sh",
        "--wait",
        &payload,
        "--",
        "hi",
    ]);
    let id = out.lines().next().unwrap_or_default().trim().to_string();
    let log = c.cli_ok(&["job", "logs", &id]);
    c.check(
        log.contains("instance 0 of 2: hi"),
        &format!("unexpected log:\n{log}"),
    );
    // Refused at submit.
    for (args, says) in [
        (
            vec!["--target-instances", "3", "--min-instances", "3"],
            "exceeds the 2 nodes",
        ),
        (
            vec!["--target-instances", "2", "--min-instances", "3"],
            "min_instances must be in 1..=2",
        ),
        (
            vec!["--target-instances", "0"],
            "target_instances must be at least 1",
        ),
    ] {
        let mut cmd = vec!["job", "submit", "--pool", "two", "--entrypoint", "run.sh"];
        cmd.extend(args);
        cmd.push(&payload);
        let (st, stdout, stderr) = c.cli(&cmd);
        c.check(
            !st.success() && stdout.is_empty() && stderr.contains(says),
            &format!("{cmd:?} should be refused with `{says}`: {stdout}{stderr}"),
        );
    }
    let (st, _, stderr) = c.cli(&[
        "job",
        "submit",
        "--pool",
        "nope",
        "--entrypoint",
        "run.sh",
        &payload,
    ]);
    c.check(
        !st.success() && stderr.contains("unknown pool `nope`"),
        &stderr,
    );
    let (st, _, stderr) = c.cli(&[
        "job",
        "submit",
        "--pool",
        "two",
        "--entrypoint",
        "missing.sh",
        &payload,
    ]);
    c.check(
        !st.success() && stderr.contains("`missing.sh` is not a file"),
        &stderr,
    );
    // A pool that never gets a node: the job fails with the timeout message.
    c.cli_ok(&["pool", "create", "empty", "--external"]);
    let (st, stdout, stderr) = c.cli(&[
        "job",
        "submit",
        "--pool",
        "empty",
        "--instance-timeout",
        "2",
        "--entrypoint",
        "run.sh",
        "--wait",
        &payload,
    ]);
    c.check(
        !st.success()
            && stdout.contains("FAILED")
            && stderr.contains("Timed out after 2s waiting for 1 instances, only 0 available"),
        &format!("expected the timeout failure: {stdout}{stderr}"),
    );
    // After a head restart, finished jobs and their logs are still there.
    c.restart_head();
    let list = c.cli_ok(&["job", "list"]);
    c.check(
        list.lines()
            .any(|l| l.starts_with(&format!("{id} ")) && l.contains("DONE")),
        &format!("the restarted head does not list job {id} as DONE:\n{list}"),
    );
    let log = c.cli_ok(&["job", "logs", &id]);
    c.check(
        log.contains("instance 0 of 2: hi"),
        &format!("logs lost in the restart:\n{log}"),
    );
}

#[test]
fn cancelled_jobs_leave_no_process_and_failures_are_reported() {
    let c = Cluster::start("jobcancel", 0);
    c.cli_ok(&[
        "pool",
        "create",
        "p",
        "--max-nodes",
        "2",
        "--num-cpus-per-node",
        "1",
    ]);
    let mark = format!("starling-test-mark-{}", std::process::id());
    let payload = c.script_payload(
        "sleepy",
        "sh -c \"sleep 300; echo $1\" &\necho started\nsleep 300",
    );
    let out = c.cli_ok(&[
        "job",
        "submit",
        "--pool",
        "p",
        "--target-instances",
        "2",
        "--entrypoint",
        "run.sh",
        &payload,
        "--",
        &mark,
    ]);
    let id = out.lines().next().unwrap_or_default().trim().to_string();
    let deadline = Instant::now() + PAYLOAD;
    while !c.cli_ok(&["job", "logs", &id]).contains("started") || marked(&mark) < 2 {
        c.check(Instant::now() < deadline, "the payload did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = c.cli_ok(&["job", "cancel", &id]);
    c.check(out.contains("CANCEL"), &out);
    let (st, stdout, _) = c.cli(&["job", "wait", &id, "--timeout", "60"]);
    c.check(
        !st.success() && stdout.contains("CANCELLED"),
        &format!("the job did not end CANCELLED: {stdout}"),
    );
    c.check(
        marked(&mark) == 0,
        "processes of the cancelled job are still running",
    );

    let failing = c.script_payload("failing", "echo about to fail >&2\nexit 3");
    let (st, stdout, stderr) = c.cli(&[
        "job",
        "submit",
        "--pool",
        "p",
        "--entrypoint",
        "run.sh",
        "--wait",
        &failing,
    ]);
    c.check(
        !st.success()
            && stdout.contains("FAILED")
            && stderr.contains("the entrypoint exited with code 3"),
        &format!("expected FAILED with the exit code: {stdout}{stderr}"),
    );
    let id = stdout.lines().next().unwrap_or_default().trim().to_string();
    let log = c.cli_ok(&["job", "logs", &id]);
    c.check(
        log.contains("err|about to fail"),
        &format!("stderr not in the log:\n{log}"),
    );
}

/// A node agent is killed while its node holds the only copy of an object that a later task
/// reads: the head declares the node lost at once (its connection dropped), makes the object
/// again from its lineage on the other node (its freed argument first), and the task gets the
/// exact bytes. A new agent then joins in its place.
#[test]
fn a_lost_node_s_objects_are_made_again_from_lineage() {
    let mut c = Cluster::start("lineage", 2);
    let go = c.dir.join("go");
    let out = c.spawn_payload(
        "cluster_lineage",
        &["--go", go.to_str().expect("utf-8 path")],
    );
    let node = c.wait_line(&out, "stored_on=", "the payload never stored its object");
    c.kill_node(&node);
    // The head has noticed (the agent's connection dropped) before the object is read; until
    // then the dying node's worker processes may still be handed work for a few milliseconds.
    c.wait_alive(1);
    std::fs::write(&go, b"").expect("write the go file");
    let p = c.wait_payload("cluster_lineage", &out, PAYLOAD);
    c.check(
        p.get(&c, "checksum_ok") == "true",
        "the object made again has other bytes",
    );
    c.check(
        p.get(&c, "remade_on") != node && p.get(&c, "checked_on") != node,
        &format!("the object should have been made again off {node}"),
    );
    eprintln!(
        "recovery after losing {node}: {} ms (node lost, 2 tasks run again, 1 MiB read)",
        p.get(&c, "recovery_ms")
    );
    // The node comes back as a new agent and the cluster is whole again.
    c.start_agent("worker-again");
    c.wait_alive(2);
}

/// A driver survives a head restart: its task in flight fails at once with `HeadLost` (never a
/// hang), and its next task runs over a new session once the node has rejoined.
#[test]
fn a_driver_carries_on_after_its_head_restarts() {
    let mut c = Cluster::start("reconnect", 1);
    let go = c.dir.join("go");
    let out = c.spawn_payload(
        "cluster_reconnect",
        &["--go", go.to_str().expect("utf-8 path")],
    );
    let first = c.wait_line(&out, "first=", "the payload's first task never finished");
    c.check(first == "3", &format!("the first task gave {first}, not 3"));
    c.restart_head();
    c.wait_alive(1);
    std::fs::write(&go, b"").expect("write the go file");
    let p = c.wait_payload("cluster_reconnect", &out, PAYLOAD);
    c.check(
        p.get(&c, "in_flight") == "HeadLost",
        "the task in flight should fail with HeadLost",
    );
    c.check(
        p.get(&c, "second") == "5",
        "a task after the restart should run",
    );
}

/// The chaos test: a 20,099-task DAG whose 10,100 large (128 KiB) intermediate objects live in
/// the nodes' stores runs while a node agent is SIGKILLed and replaced, twice, and a worker
/// process is SIGKILLed every 400 ms. Every round's sum must be exact. Prints the recovery time
/// of each failure: from the kill to the next round that completes (a round normally takes the
/// interval printed alongside).
#[test]
fn a_dag_stays_exact_while_nodes_and_workers_are_killed() {
    let mut c = Cluster::start("chaos", 2);
    let out = c.spawn_payload(
        "chaos_dag",
        &["--rounds", "101", "--width", "50", "--kib", "128"],
    );
    let unix_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64
    };
    let rounds_done = |out: &Path| -> Vec<u64> {
        std::fs::read_to_string(out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("round "))
            .filter_map(|l| {
                l.split_once(" done at ")?
                    .1
                    .strip_suffix(" ms")?
                    .parse()
                    .ok()
            })
            .collect()
    };
    let mut rng = XorShift(0x5eed_c4a0);
    let mut failures: Vec<(String, u64)> = Vec::new();
    let mut node_kills = 0;
    let mut last_worker_kill = Instant::now();
    let mut agents_started = 2;
    let deadline = Instant::now() + PAYLOAD;
    let finished = |c: &mut Cluster| {
        let i = c.procs.iter().position(|p| p.name == "chaos_dag");
        i.is_none_or(|i| !matches!(c.procs[i].child.try_wait(), Ok(None)))
    };
    while !finished(&mut c) {
        if Instant::now() > deadline {
            c.fail("the chaos payload did not finish in time");
        }
        let done = rounds_done(&out).len();
        // Node kills once rounds 20 and 55 are done: the newest agent dies, a new one joins.
        if (node_kills == 0 && done >= 20) || (node_kills == 1 && done >= 55) {
            let newest = c
                .procs
                .iter()
                .rfind(|p| p.name.starts_with("worker"))
                .map(|p| std::fs::read_to_string(&p.log).unwrap_or_default())
                .and_then(|l| {
                    l.lines()
                        .find_map(|x| x.strip_prefix("node ")?.split_once(" joined"))
                        .map(|(n, _)| n.to_string())
                });
            let Some(node) = newest else {
                c.fail("cannot tell which node the newest agent is")
            };
            let at = unix_ms();
            c.kill_node(&node);
            failures.push((format!("node agent {node} killed"), at));
            node_kills += 1;
            std::thread::sleep(Duration::from_secs(1));
            agents_started += 1;
            c.start_agent(&format!("worker-{agents_started}"));
        }
        if last_worker_kill.elapsed() >= Duration::from_millis(400) && done < 95 {
            last_worker_kill = Instant::now();
            let workers = c.worker_processes();
            if !workers.is_empty() {
                let pid = workers[(rng.next() % workers.len() as u64) as usize];
                let at = unix_ms();
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                failures.push((format!("worker process {pid} killed"), at));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let p = c.wait_payload("chaos_dag", &out, GRACE);
    c.check(
        p.get(&c, "mismatches") == "0",
        "some round's sum is not exact",
    );
    let tasks: u64 = p.get(&c, "tasks").parse().unwrap_or(0);
    c.check(tasks >= 20_000, &format!("only {tasks} tasks"));
    c.check(node_kills == 2, "both node kills should have happened");
    let worker_kills = failures.len() - node_kills;
    c.check(
        worker_kills >= 3,
        &format!("only {worker_kills} worker kills"),
    );

    // The head counts the runs: retries after lost workers, and runs that remade lost objects.
    let (_, status, _) = c.status();
    let counter = |name: &str| -> u64 {
        status
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let (retried, reconstructed) = (counter("retried"), counter("reconstructed"));
    c.check(
        reconstructed > 0,
        &format!("killing nodes should have made the head remake objects:\n{status}"),
    );
    let done = rounds_done(&out);
    let typical = match (done.first(), done.last()) {
        (Some(a), Some(b)) if done.len() > 1 => (b - a) / (done.len() as u64 - 1),
        _ => 0,
    };
    eprintln!(
        "chaos: {tasks} tasks in {} s, {node_kills} node kills, {worker_kills} worker kills; \
         {retried} runs retried, {reconstructed} runs remade lost objects; a round completes \
         every {typical} ms on average",
        p.get(&c, "seconds")
    );
    for (what, at) in &failures {
        match done.iter().find(|t| **t >= *at) {
            Some(t) => eprintln!("  recovery after {what}: {} ms", t - at),
            None => eprintln!("  {what}: after the last round"),
        }
    }
}

/// `job logs --follow` streams a running job's output until it ends; a launched node left idle
/// longer than the pool's `--idle-timeout` is stopped (the pool has `--min-nodes 0`).
#[test]
fn logs_follow_a_running_job_and_idle_launched_nodes_stop() {
    let c = Cluster::start("jobfollow", 0);
    let payload = c.script_payload(
        "ticks",
        "for i in 1 2 3 4 5; do echo \"tick $i\"; sleep 0.3; done",
    );
    c.cli_ok(&[
        "pool",
        "create",
        "brief",
        "--max-nodes",
        "1",
        "--num-cpus-per-node",
        "1",
        "--idle-timeout",
        "1",
    ]);
    let out = c.cli_ok(&[
        "job",
        "submit",
        "--pool",
        "brief",
        "--entrypoint",
        "run.sh",
        &payload,
    ]);
    let id = out.lines().next().unwrap_or_default().trim().to_string();
    // Started before the job ends (it runs ~1.5 s after its node is up); returns when it ends.
    let followed = c.cli_ok(&["job", "logs", &id, "--follow"]);
    let ticks: Vec<&str> = followed.lines().filter(|l| l.contains("tick ")).collect();
    c.check(
        ticks.len() == 5 && ticks[0].ends_with("tick 1") && ticks[4].ends_with("tick 5"),
        &format!("--follow should print all 5 ticks in order:\n{followed}"),
    );
    let status = c.cli_ok(&["job", "status", &id]);
    c.check(
        status.contains("DONE"),
        &format!("--follow returned before the job ended:\n{status}"),
    );
    // The node that ran it stops after 1 s idle.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pool = c.cli_ok(&["pool", "describe", "brief"]);
        if pool.lines().any(|l| l.trim() == "nodes:") {
            break;
        }
        if Instant::now() > deadline {
            c.fail(&format!("the idle launched node was not stopped:\n{pool}"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `#[starling::job]`: `estimate_pi::submit` runs the function on instance 0 of a 2-instance job
/// (the example creates its launched pool); `job.result()` returns its value, checked exactly
/// against the same draws computed in the driver, or, when it panics, its error with type,
/// message and backtrace.
#[test]
fn a_job_function_returns_its_value_or_its_error() {
    let c = Cluster::start("jobfn", 0);
    let ok = c.run(
        "job_function",
        &["--pool", "fn", "--instances", "2", "--samples", "20000"],
    );
    c.check(
        ok.get(&c, "instances") == "2",
        "the job should run on 2 instances",
    );
    c.check(
        ok.get(&c, "hits") == ok.get(&c, "expected_hits"),
        "the job's value differs from the driver's own count",
    );
    c.check(
        ok.get(&c, "instance_0_node") != ok.get(&c, "instance_1_node"),
        "each instance's task should run on its own node",
    );
    let id = ok.get(&c, "job").to_string();
    let listed = c.cli_ok(&["job", "list"]);
    c.check(
        listed
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("estimate_pi") && l.contains("DONE")),
        &format!("job {id} should be listed as estimate_pi, DONE:\n{listed}"),
    );
    let log = c.cli_ok(&["job", "logs", &id, "--instance", "1"]);
    c.check(
        log.contains("seed 1: "),
        &format!("instance 1's log lacks its task:\n{log}"),
    );

    let (status, failed, stdout) = c.run_status(
        "job_function",
        &["--pool", "fn", "--instances", "2", "--samples", "0"],
    );
    c.check(
        !status.success(),
        &format!("a failing job function should fail the driver:\n{stdout}"),
    );
    c.check(
        failed.get(&c, "error_type") == "panic"
            && failed
                .get(&c, "error_message")
                .starts_with("samples_per_instance must be positive at examples/job_function.rs:"),
        &format!("the job's error lacks its type or message:\n{stdout}"),
    );
    let frames: usize = failed.get(&c, "error_backtrace_lines").parse().unwrap_or(0);
    c.check(
        frames > 0,
        &format!("the job's error has no backtrace:\n{stdout}"),
    );
    let id = failed.get(&c, "job").to_string();
    let status = c.cli_ok(&["job", "status", &id]);
    c.check(
        status.contains("FAILED")
            && status.contains("panic: samples_per_instance must be positive")
            && status.contains("exit code: 1"),
        &format!("unexpected status of the failed job:\n{status}"),
    );
}

/// How many processes have `mark` in their command line.
fn marked(mark: &str) -> usize {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(mark))
                && !is_zombie(
                    e.file_name()
                        .to_str()
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(0),
                )
        })
        .count()
}

// ---------------------------------------------------------------------------------------------
// The harness

/// One process of the cluster.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

/// A head and its node agents, each a `starling` process logging under `dir`.
struct Cluster {
    dir: PathBuf,
    /// The head's address, as its first line of stdout gave it.
    head: String,
    /// The head's token file (`head-data/token`), passed to every process with `--token-file`
    /// or, for payloads, as `STARLING_TOKEN`.
    token_file: PathBuf,
    /// With TLS: the CA every client trusts (`--tls-ca`, `STARLING_TLS_CA`).
    tls_ca: Option<PathBuf>,
    /// Extra flags of the agents.
    worker_args: Vec<String>,
    /// The head first, then the agents.
    procs: Vec<Proc>,
}

/// A payload's `key=value` lines.
struct Payload {
    name: String,
    values: BTreeMap<String, String>,
}

impl Payload {
    #[track_caller]
    fn get(&self, c: &Cluster, key: &str) -> &str {
        match self.values.get(key) {
            Some(v) => v,
            None => c.fail(&format!("{} printed no `{key}=` line", self.name)),
        }
    }
}

impl Cluster {
    /// Starts a head on a free port and `workers` agents with 2 CPUs each, and waits until the
    /// head reports them all alive.
    fn start(name: &str, workers: usize) -> Cluster {
        Cluster::start_with(name, workers, &[], false)
    }

    /// [`start`](Self::start) with extra agent flags, and with TLS if `tls` (the test
    /// certificates under `tests/certs`).
    fn start_with(name: &str, workers: usize, worker_args: &[&str], tls: bool) -> Cluster {
        // Build the payloads first: a build failure is not a cluster failure.
        examples_dir();
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir()
            .join("starling-cli-tests")
            .join(format!(
                "{name}-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test directory");
        let data_dir = dir.join("head-data");
        let certs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/certs");
        let mut c = Cluster {
            dir,
            head: String::new(),
            token_file: data_dir.join("token"),
            tls_ca: tls.then(|| certs.join("ca.pem")),
            worker_args: worker_args.iter().map(|a| a.to_string()).collect(),
            procs: Vec::new(),
        };
        let head_out = c.dir.join("head.stdout");
        let mut cmd = c.head_command(&data_dir, 0);
        c.spawn("head", &mut cmd, Some(&head_out));
        c.head = c.read_head_address(&head_out);
        for i in 1..=workers {
            c.start_agent(&format!("worker-{i}"));
        }
        c.wait_alive(workers);
        c
    }

    /// Starts a node agent with 2 CPUs, logging to `<dir>/<name>.log`; its logs and the
    /// binaries it downloads stay under `<dir>/<name>/`.
    fn start_agent(&mut self, name: &str) {
        let node_dir = self.dir.join(name);
        let mut cmd = self.command(&["worker", "--head", &self.head, "--num-cpus", "2"]);
        cmd.arg("--log-dir")
            .arg(&node_dir)
            .arg("--cache-dir")
            .arg(node_dir.join("bin-cache"))
            .args(&self.worker_args);
        self.spawn(name, &mut cmd, None);
    }

    /// SIGKILLs the agent that joined as `node` (`N2`) and forgets it (its log stays).
    fn kill_node(&mut self, node: &str) {
        let joined = format!("node {node} joined");
        let Some(i) = self.procs.iter().position(|p| {
            p.name != "head" && std::fs::read_to_string(&p.log).is_ok_and(|l| l.contains(&joined))
        }) else {
            self.fail(&format!("no agent joined as {node}"))
        };
        let mut p = self.procs.remove(i);
        let _ = p.child.kill();
        let _ = p.child.wait();
    }

    /// The worker processes of the agents still running (their children).
    fn worker_processes(&self) -> Vec<u32> {
        let agents: Vec<u32> = self
            .procs
            .iter()
            .filter(|p| p.name != "head")
            .map(|p| p.child.id())
            .collect();
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| {
                        let (_, rest) = s.rsplit_once(')')?;
                        let mut fields = rest.split_whitespace();
                        let state = fields.next()?;
                        let ppid: u32 = fields.next()?.parse().ok()?;
                        Some(state != "Z" && agents.contains(&ppid))
                    })
                    .unwrap_or(false)
            })
            .collect()
    }

    /// Starts an example payload as a driver of this cluster without waiting for it; its stdout
    /// goes to the returned file, its stderr to a log next to it. It is killed if still running
    /// when the cluster drops.
    fn spawn_payload(&mut self, example: &str, args: &[&str]) -> PathBuf {
        let out_path = self.dir.join(format!("{example}.stdout"));
        let bin = examples_dir().join(example);
        let mut cmd = Command::new(&bin);
        cmd.args(args)
            .env("STARLING_HEAD", &self.head)
            .env("STARLING_TOKEN", self.token());
        if let Some(ca) = &self.tls_ca {
            cmd.env("STARLING_TLS_CA", ca);
        }
        self.spawn(example, &mut cmd, Some(&out_path));
        out_path
    }

    /// Waits until the payload named `name` exits; fails unless it succeeds. Returns its
    /// `key=value` lines.
    /// The rest of the first line of a running payload's `stdout` that starts with `prefix`,
    /// waiting for it up to [`PAYLOAD`] (failing with `what` then).
    fn wait_line(&self, stdout: &Path, prefix: &str, what: &str) -> String {
        let deadline = Instant::now() + PAYLOAD;
        loop {
            let text = std::fs::read_to_string(stdout).unwrap_or_default();
            if let Some(v) = text.lines().find_map(|l| l.strip_prefix(prefix)) {
                return v.trim().to_string();
            }
            if Instant::now() > deadline {
                self.fail(what);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_payload(&mut self, name: &str, stdout: &Path, within: Duration) -> Payload {
        let Some(i) = self.procs.iter().position(|p| p.name == name) else {
            self.fail(&format!("no process {name}"))
        };
        let status = wait_within(&mut self.procs[i].child, within);
        let text = std::fs::read_to_string(stdout).unwrap_or_default();
        match status {
            Some(s) if s.success() => {}
            Some(s) => self.fail(&format!("{name} exited with {s}; stdout:\n{text}")),
            None => self.fail(&format!("{name} did not finish within {within:?}")),
        }
        self.procs.remove(i);
        Payload {
            name: name.to_string(),
            values: text
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect(),
        }
    }

    /// `starling head` on `port` (0: any) with this cluster's data directory and TLS.
    fn head_command(&self, data_dir: &Path, port: u16) -> Command {
        let mut cmd = Command::new(STARLING);
        // Killed agents are noticed at once (their connection drops); a generous heartbeat
        // timeout keeps a loaded test machine from losing live nodes.
        cmd.args(["head", "--port", &port.to_string()])
            .args(["--heartbeat-timeout", "30", "--data-dir"])
            .arg(data_dir);
        if self.tls_ca.is_some() {
            let certs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/certs");
            cmd.arg("--tls-cert")
                .arg(certs.join("server.pem"))
                .arg("--tls-key")
                .arg(certs.join("server.key"));
        }
        cmd
    }

    /// `starling <args..>` with this cluster's credentials: `--token-file` and, with TLS,
    /// `--tls-ca` (after `args[0]`, the subcommand).
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(STARLING);
        cmd.args(&args[..1])
            .arg("--token-file")
            .arg(&self.token_file);
        if let Some(ca) = &self.tls_ca {
            cmd.arg("--tls-ca").arg(ca);
        }
        cmd.args(&args[1..]).env_remove("STARLING_TOKEN");
        cmd
    }

    /// The cluster token, as the head wrote it.
    fn token(&self) -> String {
        std::fs::read_to_string(&self.token_file)
            .unwrap_or_else(|e| self.fail(&format!("cannot read the token file: {e}")))
            .trim()
            .to_string()
    }

    /// Starts `cmd` with stderr (and stdout, unless `stdout` names a file of its own) in
    /// `<dir>/<name>.log`.
    fn spawn(&mut self, name: &str, cmd: &mut Command, stdout: Option<&Path>) {
        let log = self.dir.join(format!("{name}.log"));
        let err = File::create(&log).expect("create a log file");
        let out = match stdout {
            Some(path) => File::create(path).expect("create a stdout file"),
            None => err.try_clone().expect("clone a log file"),
        };
        // The test's own environment must not leak in; a head the caller set is kept.
        if !cmd.get_envs().any(|(k, _)| k == "STARLING_HEAD") {
            cmd.env_remove("STARLING_HEAD");
        }
        let child = cmd
            .env_remove("STARLING_WORKER_HEAD")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| self.fail(&format!("cannot start {name}: {e}")));
        self.procs.push(Proc {
            name: name.to_string(),
            child,
            log,
        });
    }

    /// Waits for the first line of the head's stdout: the address to connect to.
    fn read_head_address(&mut self, stdout: &Path) -> String {
        let deadline = Instant::now() + STARTUP;
        loop {
            let text = std::fs::read_to_string(stdout).unwrap_or_default();
            if let Some((line, _)) = text.split_once('\n') {
                let addr = line.trim().to_string();
                self.check(
                    addr.parse::<std::net::SocketAddr>().is_ok(),
                    &format!("the head's first stdout line is not an address: {line:?}"),
                );
                return addr;
            }
            if let Ok(Some(status)) = self.procs[0].child.try_wait() {
                self.fail(&format!("the head exited with {status} before listening"));
            }
            if Instant::now() > deadline {
                self.fail("the head printed no address");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls `starling status` until it reports `n` alive nodes.
    fn wait_alive(&self, n: usize) {
        let want = format!("nodes: {n} alive");
        let deadline = Instant::now() + STARTUP;
        let mut last = String::new();
        while Instant::now() < deadline {
            let (status, stdout, stderr) = self.status();
            if status.success() && stdout.contains(&want) {
                return;
            }
            last = format!("{stdout}{stderr}");
            self.assert_running();
            std::thread::sleep(Duration::from_millis(200));
        }
        self.fail(&format!(
            "the head did not report {n} alive nodes within {STARTUP:?}; last status:\n{last}"
        ));
    }

    /// Runs `starling status` against this cluster's head.
    fn status(&self) -> (ExitStatus, String, String) {
        output_within(
            &mut self.command(&["status", "--head", &self.head, "--timeout", "5"]),
            Duration::from_secs(15),
        )
        .unwrap_or_else(|e| self.fail(&format!("starling status: {e}")))
    }

    /// Runs an example payload as a driver of this cluster and returns its `key=value` lines.
    fn run(&self, example: &str, args: &[&str]) -> Payload {
        let (status, payload, stdout) = self.run_status(example, args);
        self.check(
            status.success(),
            &format!("{example} exited with {status}; stdout:\n{stdout}"),
        );
        payload
    }

    /// Like [`run`](Self::run), whether it succeeds or not: its exit status, its `key=value`
    /// lines and its whole stdout.
    fn run_status(&self, example: &str, args: &[&str]) -> (ExitStatus, Payload, String) {
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let k = RUNS.fetch_add(1, Ordering::Relaxed);
        let out_path = self.dir.join(format!("{example}-{k}.stdout"));
        let err_path = self.dir.join(format!("{example}-{k}.log"));
        let bin = examples_dir().join(example);
        let mut cmd = Command::new(&bin);
        cmd.args(args)
            .env("STARLING_HEAD", &self.head)
            .env("STARLING_TOKEN", self.token());
        if let Some(ca) = &self.tls_ca {
            cmd.env("STARLING_TLS_CA", ca);
        }
        let mut child = cmd
            .env_remove("STARLING_WORKER_HEAD")
            .stdin(Stdio::null())
            .stdout(File::create(&out_path).expect("create a stdout file"))
            .stderr(File::create(&err_path).expect("create a log file"))
            .spawn()
            .unwrap_or_else(|e| self.fail(&format!("cannot start {}: {e}", bin.display())));
        let status = match wait_within(&mut child, PAYLOAD) {
            Some(status) => status,
            None => self.fail(&format!("{example} did not finish within {PAYLOAD:?}")),
        };
        let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
        let values = stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let payload = Payload {
            name: example.to_string(),
            values,
        };
        (status, payload, stdout)
    }

    /// Runs `starling <args> --head <head>`: status, stdout, stderr.
    fn cli(&self, args: &[&str]) -> (ExitStatus, String, String) {
        // `--head` right after `job`/`pool`: anything after `--` belongs to the payload.
        let mut full = vec![args[0], "--head", &self.head];
        full.extend_from_slice(&args[1..]);
        output_within(&mut self.command(&full), PAYLOAD)
            .unwrap_or_else(|e| self.fail(&format!("starling {args:?}: {e}")))
    }

    /// Like [`cli`](Self::cli), failing unless it succeeds; returns stdout.
    #[track_caller]
    fn cli_ok(&self, args: &[&str]) -> String {
        let (status, stdout, stderr) = self.cli(args);
        if !status.success() {
            self.fail(&format!("starling {args:?} failed: {stdout}{stderr}"));
        }
        stdout
    }

    /// A directory payload whose `run.sh` runs `body` (sh); returns the directory.
    fn script_payload(&self, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.dir.join(format!("payload-{name}"));
        std::fs::create_dir_all(&dir).expect("create a payload directory");
        let script = dir.join("run.sh");
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).expect("write the script");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .expect("chmod the script");
        dir.to_string_lossy().into_owned()
    }

    /// Stops the head (SIGTERM) and starts a new one on the same data directory and port, so
    /// agents and drivers find it where the old one was.
    fn restart_head(&mut self) {
        signal(&self.procs[0].child, "TERM");
        if wait_within(&mut self.procs[0].child, GRACE).is_none() {
            self.fail("the head did not stop on SIGTERM");
        }
        let port: u16 = self
            .head
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| self.fail("the head address has no port"));
        static RESTARTS: AtomicU64 = AtomicU64::new(2);
        let name = format!("head{}", RESTARTS.fetch_add(1, Ordering::Relaxed));
        let old = self.procs.remove(0);
        let head_out = self.dir.join(format!("{name}.stdout"));
        let data_dir = self.dir.join("head-data");
        let mut cmd = self.head_command(&data_dir, port);
        self.spawn(&name, &mut cmd, Some(&head_out));
        // The new head goes first, as the harness expects.
        let new = self.procs.pop().expect("just spawned");
        self.procs.insert(0, new);
        drop(old);
        let addr = self.read_head_address(&head_out);
        self.check(
            addr == self.head,
            &format!("the restarted head listens on {addr}, not {}", self.head),
        );
    }

    /// Fails unless every process of the cluster is still running (nothing crashed).
    fn assert_running(&self) {
        for p in &self.procs {
            // `try_wait` needs `&mut`; a zero-signal `kill` asks the same without reaping.
            let alive = Command::new("kill")
                .args(["-0", &p.child.id().to_string()])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
                && !is_zombie(p.child.id());
            self.check(alive, &format!("{} is no longer running", p.name));
        }
    }

    /// Stops the agents, then the head, with SIGTERM, and checks that each exits with code 0.
    fn stop_cleanly(&mut self) {
        let mut order: Vec<usize> = (1..self.procs.len()).collect();
        order.push(0);
        for i in order {
            signal(&self.procs[i].child, "TERM");
            let name = self.procs[i].name.clone();
            match wait_within(&mut self.procs[i].child, GRACE) {
                Some(status) if status.success() => {}
                Some(status) => self.fail(&format!("{name} exited with {status} on SIGTERM")),
                None => self.fail(&format!("{name} did not stop within {GRACE:?} of SIGTERM")),
            }
        }
    }

    #[track_caller]
    fn check(&self, ok: bool, what: &str) {
        if !ok {
            self.fail(what);
        }
    }

    #[track_caller]
    fn fail(&self, what: &str) -> ! {
        panic!(
            "{what}\n\nhead: {}\nlogs under {}:\n{}",
            self.head,
            self.dir.display(),
            log_tails(&self.dir)
        )
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Agents first, so that they stop their worker processes and remove their stores
        // instead of reporting a lost head; then the head.
        let mut order: Vec<usize> = (1..self.procs.len()).collect();
        order.push(0);
        for i in order {
            let child = &mut self.procs[i].child;
            if matches!(child.try_wait(), Ok(None)) {
                signal(child, "TERM");
                if wait_within(child, GRACE).is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        if std::thread::panicking() {
            eprintln!(
                "keeping the logs of the failed test in {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The last lines of every non-empty file under `dir`, each under its path.
fn log_tails(dir: &Path) -> String {
    const LINES: usize = 40;
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                // Binaries, not logs.
                if !p.ends_with("head-data") && !p.ends_with("bin-cache") {
                    stack.push(p);
                }
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = String::new();
    for f in files {
        let mut text = String::new();
        if File::open(&f)
            .and_then(|mut h| h.read_to_string(&mut text))
            .is_err()
            || text.trim().is_empty()
        {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(LINES);
        let shown = f.strip_prefix(dir).unwrap_or(&f).display().to_string();
        out.push_str(&format!("---- {shown} ({} lines)\n", lines.len()));
        for l in &lines[from..] {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// Waits up to `timeout` for `child` to exit; `None` if it is still running.
fn wait_within(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

/// Runs `cmd` to completion within `timeout` (killing it otherwise): status, stdout, stderr.
fn output_within(
    cmd: &mut Command,
    timeout: Duration,
) -> Result<(ExitStatus, String, String), String> {
    let mut child = cmd
        .env_remove("STARLING_WORKER_HEAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = reader(Box::new(child.stdout.take().expect("piped stdout")));
    let err = reader(Box::new(child.stderr.take().expect("piped stderr")));
    let status = wait_within(&mut child, timeout);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    match status {
        Some(status) => Ok((status, out, err)),
        None => Err(format!(
            "{cmd:?} did not finish within {timeout:?}\nstdout:\n{out}\nstderr:\n{err}"
        )),
    }
}

fn signal(child: &Child, name: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
}

/// Whether `pid` has exited but not been reaped yet.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// A loopback port that refuses connections for as long as this lives: the socket is bound,
/// so no other test can take the port, but never listens.
struct ClosedPort {
    addr: std::net::SocketAddr,
    _socket: tokio::net::TcpSocket,
}

impl ClosedPort {
    fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
        socket
            .bind("127.0.0.1:0".parse().expect("an address"))
            .expect("bind a loopback port");
        let addr = socket.local_addr().expect("local address");
        Self {
            addr,
            _socket: socket,
        }
    }
}

/// Where the example payloads are, building them first (once per test process).
///
/// They are built into the same target directory and profile as the `starling` binary under
/// test (`<target>/<profile>/starling` → `<target>/<profile>/examples/`).
fn examples_dir() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build_examples) {
        Ok(dir) => dir,
        Err(e) => panic!("{e}"),
    }
}

fn build_examples() -> Result<PathBuf, String> {
    let bin = Path::new(STARLING);
    let profile_dir = bin.parent().ok_or("the starling binary has no directory")?;
    let target_dir = profile_dir
        .parent()
        .ok_or("the starling binary is not in a target directory")?;
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("the profile directory has no name")?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the cli package has no parent directory")?;
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(workspace)
        .args(["build", "-q", "-p", "starling-examples", "--examples"])
        .arg("--target-dir")
        .arg(target_dir);
    match profile {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let (status, _, stderr) = output_within(&mut cmd, Duration::from_secs(900))?;
    if !status.success() {
        return Err(format!(
            "building the example payloads failed ({status}):\n{stderr}"
        ));
    }
    Ok(profile_dir.join("examples"))
}

/// A small PRNG for junk bytes (no dependency needed for noise).
struct XorShift(u64);

impl XorShift {
    fn seeded() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        XorShift(t | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next() as u8;
        }
    }
}
