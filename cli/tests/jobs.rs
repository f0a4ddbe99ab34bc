//! Multi-process tests of multi-node jobs and compute pools: every way a job ends gives its
//! nodes back and leaves nothing running; lost instances are survived and named; logs, job
//! functions, `min_instances`, launched pools. Each test runs a `starling head` and node agents
//! as separate processes (the harness: `harness/mod.rs`).

mod harness;

use harness::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Tests

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
    let raw = c.cli_ok(&["job", "logs", &id, "--raw"]);
    c.check(
        raw.lines().collect::<Vec<_>>() == ["tick 1", "tick 2", "tick 3", "tick 4", "tick 5"],
        &format!("--raw should print the program's lines alone:\n{raw}"),
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
/// message and backtrace. The job's actors run on its instances only, though the cluster has a
/// node of its own besides.
#[test]
fn a_job_function_returns_its_value_or_its_error() {
    let c = Cluster::start("jobfn", 1);
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
    c.check(
        ok.get(&c, "actors_on_instances") == "true",
        &format!(
            "the job's actors ran on {}, not only on its instances",
            ok.get(&c, "actor_nodes")
        ),
    );
    // The job's `env_vars` are its tasks' environment too.
    for k in 0..2 {
        c.check(
            ok.get(&c, &format!("instance_{k}_task_label")) == "estimate",
            "a task of the job did not see the job's PI_LABEL",
        );
    }
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
    // The panic gave both nodes back: the pool shows none busy, and the job name resolves.
    let pool = c.cli_ok(&["pool", "describe", "fn"]);
    c.check(
        pool.contains("(0 busy"),
        &format!("the failed job kept its nodes:\n{pool}"),
    );
    let by_name = c.cli(&["job", "status", "estimate_pi"]);
    c.check(
        !by_name.0.success() && by_name.2.contains("are all named `estimate_pi`"),
        &format!(
            "two jobs share the name; status by name should say so: {}",
            by_name.2
        ),
    );
    let failed = c.cli_ok(&["job", "list", "--status", "failed", "--limit", "1"]);
    c.check(
        failed.lines().count() == 2 && failed.contains(&format!("\n{id} ")),
        &format!("`job list --status failed --limit 1` should list job {id} alone:\n{failed}"),
    );
}

/// A pool `p` of three agents (two CPUs each) that joined it by name.
fn pool_of_three(name: &str) -> Cluster {
    Cluster::start_with(name, 3, &["--pool", "p"], false)
}

/// Fails unless pool `p` has `nodes` nodes and none of them serves a job.
fn assert_pool_free(c: &Cluster, nodes: usize, after: &str) {
    let d = c.cli_ok(&["pool", "describe", "p"]);
    c.check(
        d.contains(&format!("{nodes} node(s) (0 busy")),
        &format!("after {after}, pool p should have {nodes} free nodes:\n{d}"),
    );
    let left = c.worker_processes();
    c.check(
        left.is_empty(),
        &format!("after {after}, processes of the ended job still run: {left:?}"),
    );
    // Its objects are freed once its processes' sessions have closed (they are gone already;
    // the head sees their connections drop a moment later).
    c.wait_status(
        &format!("after {after}, the ended job's objects were not freed"),
        |s| s.contains("objects: 0 "),
    );
}

/// Submits `job_ending DIR END` to pool p on `instances` instances: its id and `DIR`.
fn submit_ending(c: &Cluster, end: &str, instances: u32, extra: &[&str]) -> (String, PathBuf) {
    // A directory of its own per job: a job waits for its own tasks' marks, never another's.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = c.dir.join(format!("marks-{end}-{k}"));
    std::fs::create_dir_all(&dir).expect("create the marks directory");
    let bin = examples_dir().join("job_ending");
    let n = instances.to_string();
    let mut args = vec!["job", "submit", "--pool", "p", "--target-instances", &n];
    args.extend(extra);
    args.push(bin.to_str().expect("utf-8 path"));
    let dir_s = dir.to_str().expect("utf-8 path").to_string();
    args.extend(["--", dir_s.as_str(), end]);
    let out = c.cli_ok(&args);
    (
        out.lines().next().unwrap_or_default().trim().to_string(),
        dir,
    )
}

/// How many `hold` tasks have started (`started-*` marks in `dir`).
fn marks(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("started-"))
            .count()
    })
}

/// Waits until `n` tasks of a `job_ending` job have started.
fn wait_marks(c: &Cluster, dir: &Path, n: usize) {
    let deadline = Instant::now() + PAYLOAD;
    while marks(dir) < n {
        c.check(
            Instant::now() < deadline,
            &format!("only {} of {n} tasks started", marks(dir)),
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until job `id` has ended; its state and `job status` output.
fn wait_end(c: &Cluster, id: &str) -> (String, String) {
    let (_, stdout, stderr) = c.cli(&["job", "wait", id, "--timeout", "120"]);
    let state = stdout.lines().last().unwrap_or_default().trim().to_string();
    c.check(
        ["DONE", "FAILED", "CANCELLED"].contains(&state.as_str()),
        &format!("job {id} did not end: {stdout}{stderr}"),
    );
    (state, c.cli_ok(&["job", "status", id]))
}

/// The node (`N3`) of instance `k` of job `id`, from `job status`.
fn instance_node(c: &Cluster, id: &str, k: u32) -> String {
    let status = c.cli_ok(&["job", "status", id]);
    let prefix = format!("instance {k}: node ");
    status
        .lines()
        .find_map(|l| l.trim().strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map(str::to_string)
        .unwrap_or_else(|| c.fail(&format!("no instance {k} in:\n{status}")))
}

/// Every way a job can end (exit 0, a non-zero exit, a panic, a task whose worker was killed,
/// cancel, the instance timeout, the loss of instance 0) gives all of its nodes back at once,
/// leaves no process of it running, never runs its tasks again, and says why it failed; the
/// pool then runs a 3-instance job to DONE.
#[test]
fn every_way_a_job_ends_gives_its_nodes_back() {
    let mut c = pool_of_three("jobend");
    let mut ended = Vec::new();
    for (end, state, says) in [
        ("exit0", "DONE", vec![]),
        ("exit1", "FAILED", vec!["the entrypoint exited with code 1"]),
        (
            "panic",
            "FAILED",
            vec![
                "the entrypoint exited with code 101",
                "last lines of stderr",
                "the entrypoint gives up",
            ],
        ),
        (
            "task-killed",
            "FAILED",
            vec![
                "the entrypoint exited with code 1",
                "the job's last task failure",
                "killed by signal 9",
            ],
        ),
    ] {
        let (id, dir) = submit_ending(&c, end, 3, &[]);
        let (got, status) = wait_end(&c, &id);
        c.check(
            got == state && says.iter().all(|s| status.contains(s)),
            &format!("`{end}` should end {state} saying {says:?}:\n{status}"),
        );
        c.check(
            marks(&dir) == 3,
            &format!("`{end}`: the held tasks ran {} times, not 3", marks(&dir)),
        );
        assert_pool_free(&c, 3, end);
        ended.push((id, dir));
    }

    let (id, dir) = submit_ending(&c, "wait", 3, &[]);
    wait_marks(&c, &dir, 3);
    c.cli_ok(&["job", "cancel", &id]);
    let (got, status) = wait_end(&c, &id);
    c.check(got == "CANCELLED", &format!("not cancelled:\n{status}"));
    assert_pool_free(&c, 3, "cancel");
    ended.push((id, dir));

    // Four instances never fit in a pool of three: the job times out and holds nothing.
    let (id, _) = submit_ending(&c, "exit0", 4, &["--instance-timeout", "2"]);
    let (got, status) = wait_end(&c, &id);
    c.check(
        got == "FAILED" && status.contains("Timed out after 2s waiting for 4 instances"),
        &format!("expected the instance timeout:\n{status}"),
    );
    assert_pool_free(&c, 3, "the instance timeout");

    // Instance 0's node is lost: the job fails naming it, the other two nodes are free at once.
    let (id, dir) = submit_ending(&c, "wait", 3, &[]);
    wait_marks(&c, &dir, 3);
    let node = instance_node(&c, &id, 0);
    c.kill_node(&node);
    let (got, status) = wait_end(&c, &id);
    c.check(
        got == "FAILED"
            && status.contains(&format!("instance 0 (node {node}) lost at"))
            && status.contains("agent connection dropped"),
        &format!("the loss of instance 0 should fail the job, naming it:\n{status}"),
    );
    assert_pool_free(&c, 2, "the loss of instance 0");
    ended.push((id, dir));

    c.start_agent("worker-4");
    c.wait_alive(3);
    let (id, _) = submit_ending(&c, "exit0", 3, &[]);
    let (got, status) = wait_end(&c, &id);
    c.check(
        got == "DONE",
        &format!("the pool cannot run a 3-instance job:\n{status}"),
    );
    assert_pool_free(&c, 3, "the last job");

    // Nothing of an ended job ran again afterwards: no task, no worker process.
    for (id, dir) in &ended {
        c.check(
            marks(dir) == 3,
            &format!("job {id}'s tasks ran again after it ended"),
        );
    }
    for agent in ["worker-1", "worker-2", "worker-3", "worker-4"] {
        for log in agent_logs(&c, agent) {
            for (id, _) in &ended {
                let stop = format!("J{id}: stopping");
                let start = format!("J{id}: started worker");
                if let Some(at) = log.find(&stop) {
                    c.check(
                        !log[at..].contains(&start),
                        &format!("{agent} started a worker of job {id} after stopping it"),
                    );
                }
            }
        }
    }
}

/// The agent logs (`agent-N*.log`) under `<dir>/<agent>/`.
fn agent_logs(c: &Cluster, agent: &str) -> Vec<String> {
    std::fs::read_dir(c.dir.join(agent))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("agent-"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect()
}

/// SIGKILL of instance 2's node agent while its task runs: the job goes on, the task runs
/// again on another instance, a new node joins as instance 3, and the job ends DONE with the
/// right model and the loss named in its record. With `--max-instance-failures 0` the same
/// loss fails the job instead.
#[test]
fn a_job_survives_losing_a_worker_instance() {
    let mut c = pool_of_three("jobloss");
    let go = c.dir.join("go");
    let bin = examples_dir().join("distributed_training");
    let out = c.cli_ok(&[
        "job",
        "submit",
        "--pool",
        "p",
        "--target-instances",
        "3",
        bin.to_str().expect("utf-8 path"),
        "--",
        "--hold",
        "50",
        go.to_str().expect("utf-8 path"),
    ]);
    let id = out.lines().next().unwrap_or_default().trim().to_string();
    let deadline = Instant::now() + PAYLOAD;
    while !c
        .cli_ok(&["job", "logs", &id, "--instance", "2"])
        .contains("shard 2 holds")
    {
        c.check(Instant::now() < deadline, "shard 2 never held");
        std::thread::sleep(Duration::from_millis(100));
    }
    let node = instance_node(&c, &id, 2);
    c.kill_node(&node);
    let lost = format!("instance 2 (node {node}) lost at");
    let deadline = Instant::now() + PAYLOAD;
    loop {
        let status = c.cli_ok(&["job", "status", &id]);
        if status.contains(&lost) && status.contains("agent connection dropped") {
            c.check(
                status.contains("RUNNING"),
                &format!("losing instance 2 should not end the job:\n{status}"),
            );
            break;
        }
        c.check(
            Instant::now() < deadline,
            &format!("the loss is not named:\n{status}"),
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A node that joins the pool replaces the lost instance.
    c.start_agent("worker-4");
    let deadline = Instant::now() + PAYLOAD;
    while !c
        .cli_ok(&["job", "status", &id])
        .contains("joined as instance 3")
    {
        c.check(Instant::now() < deadline, "no node replaced instance 2");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::write(&go, b"").expect("write the go file");
    let (state, status) = wait_end(&c, &id);
    c.check(
        state == "DONE"
            && status.contains(&lost)
            && status.contains(&format!("instance 2: node {node}, lost")),
        &format!("the job should end DONE with the loss in its record:\n{status}"),
    );
    let log = c.cli_ok(&["job", "logs", &id]);
    let err: f64 = log
        .lines()
        .find_map(|l| l.split_once("max_weight_error=").map(|(_, v)| v.trim()))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::MAX);
    c.check(err < 0.01, &format!("wrong model after the loss:\n{log}"));
    assert_pool_free(&c, 3, "the job");

    // With --max-instance-failures 0, losing instance 1 fails the job instead, naming it.
    let (id, dir) = submit_ending(&c, "wait", 3, &["--max-instance-failures", "0"]);
    wait_marks(&c, &dir, 3);
    let node = instance_node(&c, &id, 1);
    c.kill_node(&node);
    let (state, status) = wait_end(&c, &id);
    c.check(
        state == "FAILED"
            && status.contains(&format!("instance 1 (node {node}) lost at"))
            && status.contains("more than max_instance_failures (0)"),
        &format!("--max-instance-failures 0 should fail the job:\n{status}"),
    );
    assert_pool_free(&c, 2, "the job that lost an instance");
}

/// Python payloads run as the docs' users expect: a `.py` file with no shebang and no execute
/// bit runs with `python3`, `--interpreter` runs a file with another program, and a directory's
/// entrypoint may be a command (`python3 -m pkg.main`) or a file with its first arguments.
#[test]
fn python_payloads_need_no_shebang_nor_execute_bit() {
    let c = Cluster::start("jobpy", 0);
    c.cli_ok(&[
        "pool",
        "create",
        "py",
        "--max-nodes",
        "1",
        "--num-cpus-per-node",
        "1",
    ]);
    let file = c.dir.join("hello.py");
    std::fs::write(
        &file,
        "import os, sys\nprint('hello from', os.environ['STARLING_INSTANCE_ID'], sys.argv[1:])\n",
    )
    .expect("write hello.py");
    let run = |args: &[&str]| {
        let mut all = vec!["job", "submit", "--pool", "py", "--wait"];
        all.extend(args);
        let out = c.cli_ok(&all);
        let id = out.lines().next().unwrap_or_default().trim().to_string();
        c.cli_ok(&["job", "logs", &id, "--raw"])
    };
    let log = run(&[file.to_str().expect("utf-8 path"), "--", "a", "b"]);
    c.check(
        log.trim() == "hello from 0 ['a', 'b']",
        &format!("the .py file did not run with python3:\n{log}"),
    );
    let script = c.dir.join("plain.txt");
    std::fs::write(&script, "echo \"run by sh: $1\"\n").expect("write the script");
    let log = run(&[
        "--interpreter",
        "sh",
        script.to_str().expect("utf-8 path"),
        "--",
        "x",
    ]);
    c.check(
        log.trim() == "run by sh: x",
        &format!("--interpreter sh did not run the file:\n{log}"),
    );
    let dir = c.dir.join("pydir");
    std::fs::create_dir_all(dir.join("pkg")).expect("create pkg");
    std::fs::write(dir.join("pkg/__init__.py"), "").expect("write __init__.py");
    std::fs::write(
        dir.join("pkg/main.py"),
        "import sys\nprint('module', sys.argv[1:])\n",
    )
    .expect("write main.py");
    std::fs::write(
        dir.join("main.py"),
        "import sys\nprint('file', sys.argv[1:])\n",
    )
    .expect("write main.py");
    let d = dir.to_str().expect("utf-8 path");
    let log = run(&["--entrypoint", "python3 -m pkg.main", d, "--", "m"]);
    c.check(
        log.trim() == "module ['m']",
        &format!("`python3 -m pkg.main` did not run:\n{log}"),
    );
    let log = run(&["--entrypoint", "main.py --fast", d, "--", "f"]);
    c.check(
        log.trim() == "file ['--fast', 'f']",
        &format!("`main.py --fast` did not run with python3:\n{log}"),
    );
}

/// `job submit --wait` shows the upload of a large payload and the wait: as a bar and a
/// spinner on a terminal (a pseudo-terminal made by `script`), as plain lines otherwise.
#[test]
fn progress_is_a_bar_on_a_terminal_and_lines_otherwise() {
    use std::os::unix::fs::PermissionsExt;
    let c = Cluster::start("progress", 0);
    c.cli_ok(&[
        "pool",
        "create",
        "bar",
        "--max-nodes",
        "1",
        "--num-cpus-per-node",
        "1",
    ]);
    // A script of 2 MiB: past the size whose upload shows its progress.
    let big = c.dir.join("big.sh");
    let padding = "#".repeat(2 << 20);
    std::fs::write(&big, format!("#!/bin/sh\necho ran\n{padding}\n")).expect("write big.sh");
    std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let big = big.to_str().expect("utf-8 path");

    let (status, stdout, stderr) = c.cli(&["job", "submit", "--pool", "bar", "--wait", big]);
    c.check(status.success(), &format!("submit --wait: {stderr}"));
    let id = stdout.lines().next().unwrap_or_default().trim().to_string();
    c.check(
        stderr.contains("uploading the payload: 2.00 MiB of 2.00 MiB (100%)")
            && stderr.contains(&format!("job {id}: DONE"))
            && !stderr.contains('\x1b'),
        &format!("plain lines off a terminal:\n{stderr}"),
    );

    let line = c
        .command(&[
            "job", "--head", &c.head, "submit", "--pool", "bar", "--wait", big,
        ])
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let (status, out, err) = output_within(
        std::process::Command::new("script")
            .args(["-qec", &format!("{STARLING} {line}"), "/dev/null"])
            .env_remove("STARLING_TOKEN"),
        PAYLOAD,
    )
    .unwrap_or_else(|e| c.fail(&format!("script: {e}")));
    c.check(
        status.success(),
        &format!("submit --wait on a terminal: {out}{err}"),
    );
    // A bar redrawn in place (erase-line codes), the spinner's state, the final state.
    c.check(
        out.contains("uploading the payload [")
            && out.contains("\x1b[2K")
            && out.contains("RUNNING")
            && out.trim_end().ends_with("DONE"),
        &format!("a bar and a spinner on a terminal:\n{out:?}"),
    );
}

/// A job's processes hold a credential of their job, not the cluster token: with it a job acts
/// on itself (its status) but cannot cancel, read the logs of, or submit another job, nor change
/// pools. Ray gives every worker full cluster rights; here a payload has only its own.
#[test]
fn a_job_s_credential_reaches_its_own_job_and_nothing_else() {
    let c = Cluster::start("scoped", 0);
    c.cli_ok(&[
        "pool",
        "create",
        "p",
        "--max-nodes",
        "2",
        "--num-cpus-per-node",
        "1",
    ]);
    let holder = c.script_payload("holder", "echo holding\nsleep 300");
    let out = c.cli_ok(&[
        "job",
        "submit",
        "--pool",
        "p",
        "--entrypoint",
        "run.sh",
        &holder,
    ]);
    let a = out.lines().next().unwrap_or_default().trim().to_string();
    let deadline = Instant::now() + PAYLOAD;
    while !c.cli_ok(&["job", "logs", &a]).contains("holding") {
        c.check(Instant::now() < deadline, "the holding job never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    let probe = c.script_payload(
        "probe",
        r#"case "$STARLING_TOKEN" in job*) echo scoped=yes;; *) echo scoped=no;; esac
"$1" job cancel "$2" 2>&1; echo "cancel_other=$?"
"$1" job logs "$2" 2>&1; echo "logs_other=$?"
"$1" job submit --pool p --entrypoint run.sh "$3" 2>&1; echo "submit=$?"
"$1" pool delete p 2>&1; echo "pool_delete=$?"
"$1" job status "$STARLING_JOB_ID" 2>&1; echo "status_own=$?""#,
    );
    let out = c.cli_ok(&[
        "job",
        "submit",
        "--pool",
        "p",
        "--entrypoint",
        "run.sh",
        "--wait",
        &probe,
        "--",
        STARLING,
        &a,
        &holder,
    ]);
    let b = out.lines().next().unwrap_or_default().trim().to_string();
    let log = c.cli_ok(&["job", "logs", &b]);
    for (line, what) in [
        ("scoped=yes", "the entrypoint holds a job credential"),
        ("cancel_other=1", "cancelling another job is refused"),
        ("logs_other=1", "reading another job's logs is refused"),
        ("submit=1", "submitting a job is refused"),
        ("pool_delete=1", "deleting a pool is refused"),
        ("status_own=0", "the job reads its own status"),
    ] {
        c.check(log.contains(line), &format!("{what}: no {line} in:\n{log}"));
    }
    c.check(
        log.contains(&format!("cannot act on job {a}")) && log.contains("needs the cluster token"),
        &format!("the refusals do not say why:\n{log}"),
    );
    c.check(
        !log.contains("holding"),
        &format!("job {b} read job {a}'s log:\n{log}"),
    );
    let status = c.cli_ok(&["job", "status", &a]);
    c.check(
        status.contains("RUNNING"),
        &format!("job {a} was touched by job {b}:\n{status}"),
    );
    let out = c.cli_ok(&["job", "cancel", &a]);
    c.check(out.contains("CANCEL"), &out);
}
