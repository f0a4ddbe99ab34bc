//! Multi-process cluster tests: a `starling head`, two `starling worker`s and the example
//! payloads (`examples/cluster_*.rs`), each a separate process with its own log file (the
//! harness: `harness/mod.rs`).

mod harness;

use harness::*;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

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

/// Ctrl-C on a driver with 10,000 queued tasks: the head drops all of them (none queued, none
/// running), and another driver's nested graph, which needs workers of its own, completes.
#[test]
fn a_driver_that_is_stopped_takes_its_queued_work_with_it() {
    let mut c = Cluster::start("flood", 1);
    let out = c.spawn_payload("cluster_flood", &["10000", "1000"]);
    c.wait_line(&out, "submitted=", "the flood was never submitted");
    // The driver's submissions reach the head in batches, after `remote` returned.
    c.wait_status("the flood's tasks never reached the head", |s| {
        s.contains("submitted=10000 ") && !s.contains("queued=0 ")
    });
    c.interrupt("cluster_flood");
    c.wait_status("the stopped driver's tasks stayed at the head", |s| {
        s.contains("queued=0 running=0")
    });
    let out = c.run("cluster_nested", &["256"]);
    c.check(
        out.get(&c, "sum") == (0..256u64).sum::<u64>().to_string(),
        "the nested sum is wrong",
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
    // Nor does a node whose object service would take the token in clear.
    let (st, _, err) = output_within(
        &mut c.command(&["worker", "--head", &c.head, "--connect-timeout", "5"]),
        Duration::from_secs(15),
    )
    .unwrap_or_else(|e| c.fail(&e));
    c.check(
        !st.success() && err.contains("object service must serve TLS too"),
        &format!("a node without an object certificate joined a TLS head: {st}: {err}"),
    );
    // The node that joined serves its objects over TLS: it advertises https.
    let (_, status, _) = c.status();
    c.check(
        status.contains("https://127.0.0.1:"),
        &format!("the node does not advertise TLS objects:\n{status}"),
    );
    c.assert_running();
}

// ---------------------------------------------------------------------------------------------
// Multi-node jobs

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
    let p = finish_lineage(&mut c, &go, &out, &node);
    eprintln!(
        "recovery after losing {node}: {} ms (node lost, 2 tasks run again, 1 MiB read)",
        p.get(&c, "recovery_ms")
    );
    // The node comes back as a new agent and the cluster is whole again.
    c.start_agent("worker-again");
    c.wait_alive(2);
}

/// Lets a `cluster_lineage` payload read its object after `node` was lost; fails unless the
/// object came back exact and was made again off `node`.
fn finish_lineage(c: &mut Cluster, go: &Path, out: &Path, node: &str) -> Payload {
    std::fs::write(go, b"").expect("write the go file");
    let p = c.wait_payload("cluster_lineage", out, PAYLOAD);
    c.check(
        p.get(c, "checksum_ok") == "true",
        "the object made again has other bytes",
    );
    c.check(
        p.get(c, "remade_on") != node && p.get(c, "checked_on") != node,
        &format!("the object should have been made again off {node}"),
    );
    p
}

/// A node agent that stops answering without closing its connection (SIGSTOP: a hung host, a
/// partition) is declared lost within the heartbeat timeout, and the object only it held is made
/// again off it; resumed, it finds itself dropped and joins again as a new node.
#[test]
fn a_stopped_node_is_lost_within_the_heartbeat_timeout() {
    let mut c = Cluster::start_with_head("sigstop", 2, &["--heartbeat-timeout", "3"]);
    let go = c.dir.join("go");
    let out = c.spawn_payload(
        "cluster_lineage",
        &["--go", go.to_str().expect("utf-8 path")],
    );
    let node = c.wait_line(&out, "stored_on=", "the payload never stored its object");
    let agent = c.agent_of(&node);
    signal(&c.procs[agent].child, "STOP");
    let stopped = Instant::now();
    c.wait_status(&format!("{node} was never declared lost"), |s| {
        s.contains("nodes: 1 alive")
    });
    let took = stopped.elapsed();
    // The timeout, the head's once-a-second check and a `starling status` poll.
    c.check(
        took < Duration::from_secs(6),
        &format!("{node} was declared lost after {took:?}, with a 3 s heartbeat timeout"),
    );
    finish_lineage(&mut c, &go, &out, &node);
    eprintln!("{node} stopped: declared lost after {took:?}");
    signal(&c.procs[agent].child, "CONT");
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

/// A head that stops answering without closing anything (SIGSTOP: a hung host, a partition)
/// is noticed: the driver's wait for its task in flight fails with `HeadLost` within
/// `SILENCE_LIMIT` (15 s: a live head tells quiet sessions it is alive; HTTP/2 keepalive fails
/// the connection in the same time), not at its own 30 s timeout or never, and once the head
/// answers again the driver's next task runs over a new session.
#[test]
fn a_driver_notices_a_head_that_stopped_answering() {
    let mut c = Cluster::start("headstop", 1);
    let go = c.dir.join("go");
    let out = c.spawn_payload(
        "cluster_reconnect",
        &["--go", go.to_str().expect("utf-8 path")],
    );
    let first = c.wait_line(&out, "first=", "the payload's first task never finished");
    c.check(first == "3", &format!("the first task gave {first}, not 3"));
    signal(&c.procs[0].child, "STOP");
    std::fs::write(&go, b"").expect("write the go file");
    let waited = c.wait_line(&out, "in_flight_ms=", "the wait in flight never ended");
    signal(&c.procs[0].child, "CONT");
    let p = c.wait_payload("cluster_reconnect", &out, PAYLOAD);
    c.check(
        p.get(&c, "in_flight") == "HeadLost",
        "the task in flight should fail with HeadLost",
    );
    let ms: u64 = waited.parse().unwrap_or(u64::MAX);
    c.check(
        ms < 25_000,
        &format!("the driver noticed the stopped head after {ms} ms (keepalive: 5 s + 10 s)"),
    );
    c.check(
        p.get(&c, "second") == "5",
        "a task after the head answers again should run",
    );
    eprintln!("a stopped head was noticed after {ms} ms");
}

/// The chaos test: a 20,099-task DAG whose 10,100 large (128 KiB) intermediate objects live in
/// the nodes' stores runs while a node agent is SIGKILLed and replaced, twice, and a worker
/// process is SIGKILLed every 400 ms. Every round's sum must be exact. Prints the recovery time
/// of each failure: from the kill to the next round that completes (a round normally takes the
/// interval printed alongside).
#[test]
fn a_dag_stays_exact_while_nodes_and_workers_are_killed() {
    let mut c = Cluster::start("chaos", 2);
    // Round 20 pauses once its blocks are all on one node: that node is the first one killed,
    // so objects the DAG needs are certainly lost and must be remade from their lineage.
    let go = c.dir.join("chaos-go");
    let go_arg = go.to_str().expect("utf-8 path").to_string();
    let out = c.spawn_payload(
        "chaos_dag",
        &[
            "--rounds",
            "101",
            "--width",
            "50",
            "--kib",
            "128",
            "--hold-round",
            "20",
            "--hold-file",
            &go_arg,
        ],
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
        // The first node kill: the node holding round 20's blocks, while the driver waits.
        let held = std::fs::read_to_string(&out).ok().and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("held round 20 on node "))
                .map(str::to_string)
        });
        if let (0, Some(node)) = (node_kills, held) {
            let at = unix_ms();
            c.kill_node(&node);
            failures.push((format!("node agent {node} killed (holding round 20)"), at));
            node_kills += 1;
            agents_started += 1;
            c.start_agent(&format!("worker-{agents_started}"));
            std::fs::write(&go, b"").expect("write the go file");
        }
        // The second once round 55 is done: the newest agent dies, a new one joins.
        if node_kills == 1 && done >= 55 {
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

/// The head keeps values in memory only up to `--value-budget`: past it they go to its disk,
/// and drivers and tasks get them from there, byte for byte; freed, the files go too.
#[test]
fn values_past_the_head_s_budget_go_to_its_disk() {
    let mut c = Cluster::start_with_head("values", 1, &["--value-budget", "1M"]);
    let go = c.dir.join("go");
    let out = c.spawn_payload("head_values", &["--go", go.to_str().expect("utf-8 path")]);
    c.wait_line(&out, "made=", "the payload never made its values");
    let on_disk = |s: &str| -> Option<String> {
        let line = s.lines().find(|l| l.starts_with("objects:"))?;
        let (_, rest) = line.split_once(", ")?;
        Some(
            rest.trim_end_matches(')')
                .trim_end_matches(" on its disk")
                .to_string(),
        )
    };
    let (_, status, _) = c.status();
    let (memory, disk) = (
        status
            .lines()
            .find(|l| l.starts_with("objects:"))
            .unwrap_or_default()
            .to_string(),
        on_disk(&status).unwrap_or_default(),
    );
    // At most the budget in memory: KiB, or exactly 1.0 MiB.
    let in_memory = memory
        .split("head store ")
        .nth(1)
        .and_then(|m| m.split(',').next())
        .unwrap_or_default();
    c.check(
        !disk.is_empty()
            && disk != "0 B"
            && (in_memory.ends_with(" KiB") || in_memory == "1.0 MiB"),
        &format!("48 values of 64 KiB with a 1 MiB budget are not mostly on disk:\n{status}"),
    );
    std::fs::write(&go, b"").expect("write the go file");
    let p = c.wait_payload("head_values", &out, PAYLOAD);
    c.check(
        p.get(&c, "driver_ok") == "true",
        "the driver read a value wrong",
    );
    c.check(
        p.get(&c, "tasks_ok") == "true",
        "a task was given a value wrong",
    );
    c.wait_status("the spilled values were never freed", |s| {
        on_disk(s).as_deref() == Some("0 B")
    });
}

/// Agents on the head's host given `--link` run their worker processes' sessions on the head's
/// Unix socket: the DAG runs across two such nodes, and no worker fell back to TCP. An agent
/// given a path that is no link falls back, says so in its workers' logs, and still serves.
#[test]
fn agents_on_the_head_s_host_use_its_session_link() {
    let mut c = Cluster::start("link", 0);
    let link = c.dir.join("head-data").join("link.sock");
    c.check(link.exists(), "the head serves its session link");
    c.worker_args = vec!["--link".into(), link.display().to_string()];
    c.start_agent("linked-1");
    c.start_agent("linked-2");
    c.wait_alive(2);
    let out = c.run("cluster_dag", &["40"]);
    let nodes: Vec<&str> = out.get(&c, "nodes").split(',').collect();
    c.check(nodes.len() == 2, &format!("the DAG ran on nodes {nodes:?}"));
    c.check(
        out.get(&c, "sum") == (0..40u64).sum::<u64>().to_string(),
        "the DAG's sum is wrong",
    );
    let fell_back = |c: &Cluster, node: &str| {
        let dir = c.dir.join(node);
        std::fs::read_dir(&dir)
            .map(|entries| {
                entries.flatten().any(|e| {
                    std::fs::read_to_string(e.path())
                        .is_ok_and(|t| t.contains("session link is not usable"))
                })
            })
            .unwrap_or(false)
    };
    c.check(
        !fell_back(&c, "linked-1") && !fell_back(&c, "linked-2"),
        "a worker process did not use the link",
    );
    c.assert_running();
    c.stop_cleanly();

    // A path that is not a link: the workers use TCP and say why.
    let bogus = std::env::temp_dir().join("starling-no-such-link.sock");
    let bogus = bogus.display().to_string();
    let mut c = Cluster::start_with("nolink", 1, &["--link", &bogus], false);
    let out = c.run("cluster_dag", &["40"]);
    c.check(
        out.get(&c, "sum") == (0..40u64).sum::<u64>().to_string(),
        "the DAG's sum is wrong",
    );
    // Its log lines reach the file through the agent's log reader: wait for them.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !fell_back(&c, "worker-1") {
        c.check(
            Instant::now() < deadline,
            "no worker process said it fell back to TCP",
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    c.assert_running();
    c.stop_cleanly();
}
