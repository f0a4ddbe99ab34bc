//! The head's HTTP port, against the real clients it serves: a Prometheus server scraping
//! `/metrics` (Debian's `prometheus`), and headless Chromium loading the dashboard (Debian's
//! `chromium`). Both need those programs, which `.ci/run` installs and then runs these tests
//! with `--ignored`; without them `cargo test` leaves these two out rather than fail on a
//! machine that lacks them.
//!
//! The head, its agent, the payload, Prometheus and Chromium are separate processes; every
//! wait is a bounded poll of a condition.

mod harness;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use harness::Cluster;

const LONG: Duration = Duration::from_secs(90);

/// The dashboard's address, as the head wrote it (`http://127.0.0.1:PORT`).
fn dashboard(c: &Cluster) -> String {
    let path = c.dir.join("head-data").join("dashboard");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| c.fail(&format!("no dashboard address in {}: {e}", path.display())))
        .trim()
        .to_string()
}

/// `GET path` on `base` (`http://host:port`) with extra headers: the status and the body.
fn get(base: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let host = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(host).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

/// A free port on loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Polls `f` until it gives `Some`, for at most [`LONG`].
fn eventually<T>(c: &Cluster, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + LONG;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            c.fail(&format!("gave up waiting: {what}"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
#[ignore = "needs Debian's prometheus (.ci/run installs it and runs this with --ignored)"]
fn prometheus_scrapes_the_head() {
    let mut c = Cluster::start("prometheus", 1);
    let p = c.run("state_api", &[]);
    let _ = p;
    let web = dashboard(&c);
    let token = c.token();
    // Without the token, nothing; with it, the figures.
    let (status, _) = get(&web, "/metrics", &[]);
    c.check(
        status == 401,
        &format!("/metrics without the token: {status}"),
    );
    let auth = format!("Bearer {token}");
    let (status, text) = get(&web, "/metrics", &[("Authorization", &auth)]);
    c.check(
        status == 200
            && text.contains("starling_tasks{name=\"state_api::sq\",state=\"FINISHED\"} 20")
            && text.trim_end().ends_with("# EOF"),
        &format!("/metrics with the token ({status}):\n{text}"),
    );

    // A real Prometheus scrapes it every second, with the token from the head's file.
    let port = free_port();
    let config = c.dir.join("prometheus.yml");
    let target = web.trim_start_matches("http://");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: starling\n    \
             metrics_path: /metrics\n    authorization:\n      credentials_file: {}\n    \
             static_configs:\n      - targets: ['{target}']\n",
            c.dir.join("head-data").join("token").display()
        ),
    )
    .expect("write the Prometheus config");
    let data = c.dir.join("prometheus-data");
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"));
    c.spawn("prometheus", &mut cmd, None);
    let api = format!("http://127.0.0.1:{port}");
    let query = |q: &str| -> Option<String> {
        let path = format!("/api/v1/query?query={}", encode(q));
        let (status, body) = std::panic::catch_unwind(|| get(&api, &path, &[])).ok()?;
        if status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let value = v["data"]["result"].get(0)?["value"][1]
            .as_str()?
            .to_string();
        Some(value)
    };
    let finished = eventually(&c, "Prometheus to have scraped starling_tasks", || {
        query("starling_tasks{name=\"state_api::sq\",state=\"FINISHED\"}")
    });
    c.check(
        finished == "20",
        &format!("sq FINISHED in Prometheus: {finished}"),
    );
    let failed = query("sum(starling_tasks{state=\"FAILED\",name=~\"state_api::.*\"})");
    c.check(
        failed.as_deref() == Some("6"),
        &format!("failed attempts (3 boom, 2 flaky, 1 after_boom): {failed:?}"),
    );
    let alive = query("starling_nodes{state=\"ALIVE\"}");
    c.check(
        alive.as_deref() == Some("1"),
        &format!("alive nodes: {alive:?}"),
    );
    let up = query("up{job=\"starling\"}");
    c.check(
        up.as_deref() == Some("1"),
        &format!("the scrape target is up: {up:?}"),
    );
}

/// Percent-encodes a query for a URL.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Loads `url` in headless Chromium and returns the DOM once the page's scripts have had
/// `budget_ms` of (virtual) time to fetch and draw; with `shot`, also a PNG of the page.
fn chromium(c: &Cluster, url: &str, shot: Option<&Path>) -> String {
    let profile = c.dir.join("chromium-profile");
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--virtual-time-budget=8000",
        "--window-size=1400,1000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    match shot {
        Some(path) => cmd.arg(format!("--screenshot={}", path.display())),
        None => cmd.arg("--dump-dom"),
    };
    cmd.arg(url);
    let (status, stdout, stderr) = harness::output_within(&mut cmd, LONG)
        .unwrap_or_else(|e| c.fail(&format!("chromium: {e}")));
    c.check(
        status.success(),
        &format!("chromium {url} exited with {status}: {stderr}"),
    );
    stdout
}

#[test]
#[ignore = "needs Debian's chromium (.ci/run installs it and runs this with --ignored)"]
fn the_dashboard_in_chromium() {
    let c = Cluster::start("dashboard", 1);
    // Tasks (one panics), then a job that runs to DONE and logs a line.
    let p = c.run("state_api", &[]);
    let boom = p.get(&c, "boom_task").to_string();
    let payload = c.script_payload(
        "hello",
        "echo \"hello from instance $STARLING_INSTANCE_ID\"",
    );
    c.cli_ok(&[
        "pool",
        "create",
        "web",
        "--max-nodes",
        "1",
        "--num-cpus-per-node",
        "1",
    ]);
    let out = c.cli_ok(&[
        "job",
        "submit",
        "--pool",
        "web",
        "--name",
        "greeter",
        "--entrypoint",
        "run.sh",
        "--wait",
        &payload,
    ]);
    let job = out.lines().next().unwrap_or_default().trim().to_string();
    let web = dashboard(&c);
    let token = c.token();

    // Without the token: the sign-in form, nothing of the cluster.
    let dom = chromium(&c, &format!("{web}/#/nodes"), None);
    c.check(
        dom.contains("cluster token") && !dom.contains("127.0.0.1"),
        &format!("without the token the page asks for it:\n{dom}"),
    );

    // With it (once, in the URL: it becomes a cookie), each page shows what ran.
    let open = |route: &str| chromium(&c, &format!("{web}/?token={token}#{route}"), None);
    let dom = open(&format!("/jobs/{job}"));
    c.check(
        dom.contains("greeter") && dom.contains("s-DONE") && dom.contains("hello from instance 0"),
        &format!("job {job}: DONE with its instance's log:\n{dom}"),
    );
    let dom = open("/nodes");
    c.check(
        dom.contains("N1") && dom.contains("ALIVE"),
        &format!("the nodes:\n{dom}"),
    );
    let dom = open(&format!("/tasks/{boom}"));
    c.check(
        dom.contains("s-FAILED") && dom.contains("boom 1") && dom.contains("panic"),
        &format!("task {boom}'s error:\n{dom}"),
    );
    let dom = open("/tasks");
    c.check(
        dom.contains("state_api::sq") && dom.contains("matching attempts"),
        &format!("the task table:\n{dom}"),
    );
    let dom = open("/");
    c.check(
        dom.contains("nodes alive") && dom.contains("greeter"),
        &format!("the overview:\n{dom}"),
    );

    // Screenshots, kept with the test's logs when STARLING_SCREENSHOTS names a directory.
    if let Some(dir) = std::env::var_os("STARLING_SCREENSHOTS") {
        let dir = Path::new(&dir);
        std::fs::create_dir_all(dir).expect("the screenshot directory");
        for (name, route) in [
            ("overview", "/".to_string()),
            ("job", format!("/jobs/{job}")),
            ("tasks", "/tasks".to_string()),
            ("task", format!("/tasks/{boom}")),
            ("timeline", "/timeline".to_string()),
        ] {
            let path = dir.join(format!("{name}.png"));
            chromium(&c, &format!("{web}/?token={token}#{route}"), Some(&path));
            c.check(
                path.exists(),
                &format!("a screenshot at {}", path.display()),
            );
        }
    }
}
