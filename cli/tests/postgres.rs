//! `DataConnector::postgres` against a real PostgreSQL server: the test makes a database
//! cluster with `initdb` in a temporary directory and runs `postgres` on a Unix socket only (no
//! TCP), password-protected (SCRAM); it loads the rows with `psql`.
//!
//! - The shards of a query, for 1 to 4 ranks, concatenated, are its rows in order, read by
//!   type (real, double, numeric, integer, boolean, text; `NULL` and `NA` missing).
//! - Bad input is a typed error: an unknown column, a value that is not a number, an empty
//!   shard, a refused connection, a wrong password (never shown), a type that is no number.
//! - `examples/gbdt --db` trains from the server with 2 workers (each reading its shard from
//!   the server, not through the driver) on the in-process runtime, a local cluster and a head
//!   with two node agents as processes, and gets the model the same rows give from CSV files.
//!
//! Needs PostgreSQL's server programs (Debian's `postgresql`; found on `PATH` or under
//! `/usr/lib/postgresql/*/bin`), so it is `#[ignore]`d in `cargo test --workspace`; `.ci/run`
//! installs them and runs it with `--ignored`. As root, the server runs as the `postgres` user
//! (PostgreSQL refuses to run as root).

mod harness;

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use harness::{output_within, run_example_alone, Cluster};
use starling_ml::{DataConnector, MlError};

/// How long the server may take to start or a `psql` run to finish.
const STARTUP: Duration = Duration::from_secs(60);
const PASSWORD: &str = "pg-secret-7f3a";
const TRAIN_ROWS: usize = 3000;
const TEST_ROWS: usize = 800;

/// A PostgreSQL server of the test's own, stopped and removed on drop.
struct Server {
    dir: PathBuf,
    bin: PathBuf,
    child: Child,
    port: u16,
    /// The uid and gid the server runs as when the test runs as root.
    owner: Option<(u32, u32)>,
}

impl Server {
    fn start() -> Server {
        let bin = server_bin_dir();
        static SERVERS: AtomicU16 = AtomicU16::new(0);
        let n = SERVERS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("starling-pg-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("server directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        // SAFETY: geteuid has no preconditions.
        let owner = (unsafe { libc::geteuid() } == 0).then(|| {
            let (uid, gid) = user_ids("postgres")
                .expect("running as root: PostgreSQL needs the `postgres` user to run as");
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).expect("chown");
            (uid, gid)
        });
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, PASSWORD).expect("password file");
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid)).expect("chown");
        }
        let data = dir.join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "starling",
                "--auth-local=scram-sha-256",
                "--auth-host=reject",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["--no-sync", "-E", "UTF8", "--locale=C"]);
        as_owner(&mut initdb, owner);
        let (status, out, err) = output_within(&mut initdb, STARTUP).expect("initdb runs");
        assert!(status.success(), "initdb: {status}\n{out}\n{err}");
        // A port number only names the socket file: TCP is off (`listen_addresses=''`).
        let port = 20000 + (std::process::id() % 20000) as u16 + n;
        let log = File::create(dir.join("server.log")).expect("server log");
        let mut cmd = Command::new(bin.join("postgres"));
        cmd.arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(&dir)
            .args([
                "-p",
                &port.to_string(),
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        as_owner(&mut cmd, owner);
        let child = cmd.spawn().expect("postgres starts");
        let server = Server {
            dir,
            bin,
            child,
            port,
            owner,
        };
        let began = Instant::now();
        while !server.dir.join(format!(".s.PGSQL.{port}")).exists() || !server.psql_ok("SELECT 1") {
            assert!(
                began.elapsed() < STARTUP,
                "PostgreSQL did not accept connections within {STARTUP:?}:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// The connection string (key-value form, with the password).
    fn url(&self) -> String {
        format!(
            "host={} port={} user=starling password={PASSWORD} dbname=postgres",
            self.dir.display(),
            self.port
        )
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn psql_cmd(&self) -> Command {
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.arg("-h")
            .arg(&self.dir)
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "starling",
                "-d",
                "postgres",
            ])
            .args(["-v", "ON_ERROR_STOP=1", "-q", "-X"])
            .env("PGPASSWORD", PASSWORD);
        cmd
    }

    fn psql_ok(&self, sql: &str) -> bool {
        let mut cmd = self.psql_cmd();
        cmd.args(["-c", sql]);
        matches!(output_within(&mut cmd, STARTUP), Ok((s, _, _)) if s.success())
    }

    /// Runs the statements in `sql`, failing the test if any fails.
    fn psql(&self, sql: &str) {
        let script = self.dir.join("script.sql");
        std::fs::write(&script, sql).expect("script");
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::chown(&script, Some(uid), Some(gid)).expect("chown");
        }
        let mut cmd = self.psql_cmd();
        cmd.arg("-f").arg(&script);
        let (status, out, err) = output_within(&mut cmd, STARTUP).expect("psql runs");
        assert!(
            status.success(),
            "psql: {status}\n{out}\n{err}\nserver log:\n{}",
            self.log()
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGINT: PostgreSQL's fast shutdown; then make sure.
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let began = Instant::now();
        while began.elapsed() < Duration::from_secs(10) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn as_owner(cmd: &mut Command, owner: Option<(u32, u32)>) {
    if let Some((uid, gid)) = owner {
        cmd.uid(uid).gid(gid).env("HOME", "/");
    }
}

/// The uid and gid of `user`, from /etc/passwd.
fn user_ids(user: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.len() > 3 && f[0] == user).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

/// The directory holding `initdb`, `postgres` and `psql`: on `PATH`, else the newest
/// `/usr/lib/postgresql/N/bin`.
fn server_bin_dir() -> PathBuf {
    let has_all = |d: &Path| {
        ["initdb", "postgres", "psql"]
            .iter()
            .all(|p| d.join(p).exists())
    };
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| has_all(d))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return dir;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .find(|d| has_all(d))
        .expect(
            "PostgreSQL's server programs (initdb, postgres, psql) are not installed: \
             apt-get install postgresql",
        )
}

/// A deterministic generator of values exactly representable in `f32` and in decimal.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// `k / 1024` for `k` in `0..max * 1024`.
    fn dyadic(&mut self, max: u64) -> f64 {
        (self.next() % (max * 1024)) as f64 / 1024.0
    }
}

/// One row: id, x_real, x_double, x_numeric, x_int, x_bool, x_text, y; `None` is NULL.
type Row = (usize, Option<f64>, f64, f64, i64, bool, Option<f64>, f64);

fn rows(n: usize, seed: u64) -> Vec<Row> {
    let mut g = Gen(seed);
    (0..n)
        .map(|id| {
            let a = g.dyadic(4);
            let b = g.dyadic(4);
            let c = g.dyadic(2);
            let k = (g.next() % 50) as i64;
            let flag = g.next().is_multiple_of(3);
            let t = g.dyadic(8);
            let y = 3.0 * a - 2.0 * b + c * c + k as f64 / 25.0 + if flag { 1.5 } else { 0.0 }
                - 0.25 * t
                + (g.next() % 64) as f64 / 1024.0;
            let a = (id % 17 != 3).then_some(a);
            let t = (id % 23 != 5).then_some(t);
            (id, a, b, c, k, flag, t, y)
        })
        .collect()
}

const FEATURES: &str = "x_real,x_double,x_numeric,x_int,x_bool,x_text";

/// The rows as CSV (features and label, no id): what the CSV connector reads.
fn write_csv(path: &Path, rows: &[Row]) {
    let mut s = format!("{FEATURES},y\n");
    for &(_, a, b, c, k, flag, t, y) in rows {
        let opt = |v: Option<f64>| v.map_or("NA".to_string(), |v| v.to_string());
        s.push_str(&format!(
            "{},{b},{c},{k},{},{},{y}\n",
            opt(a),
            u8::from(flag),
            opt(t)
        ));
    }
    std::fs::write(path, s).expect("csv");
}

/// The rows as `INSERT` statements into `table`.
fn insert_sql(table: &str, rows: &[Row]) -> String {
    let mut s = format!(
        "CREATE TABLE {table} (id integer PRIMARY KEY, x_real real, x_double double precision, \
         x_numeric numeric, x_int integer, x_bool boolean, x_text text, y real);\n"
    );
    for chunk in rows.chunks(500) {
        s.push_str(&format!("INSERT INTO {table} VALUES "));
        let values: Vec<String> = chunk
            .iter()
            .map(|&(id, a, b, c, k, flag, t, y)| {
                format!(
                    "({id}, {}, {b}, {c}, {k}, {flag}, '{}', {y})",
                    a.map_or("NULL".to_string(), |v| v.to_string()),
                    t.map_or("NA".to_string(), |v| v.to_string())
                )
            })
            .collect();
        s.push_str(&values.join(", "));
        s.push_str(";\n");
    }
    s
}

fn features() -> Vec<String> {
    FEATURES.split(',').map(String::from).collect()
}

/// The server, loaded with `train` and `test` tables and the bad ones.
fn loaded() -> (Server, Vec<Row>, Vec<Row>) {
    let server = Server::start();
    let train = rows(TRAIN_ROWS, 1);
    let test = rows(TEST_ROWS, 2);
    let mut sql = insert_sql("train", &train);
    sql.push_str(&insert_sql("test", &test));
    sql.push_str(
        "CREATE TABLE bad (x text, y real); INSERT INTO bad VALUES ('1.5', 1), ('abc', 2);\n\
         CREATE TABLE stamped (t timestamp, y real); INSERT INTO stamped VALUES (now(), 1);\n",
    );
    server.psql(&sql);
    (server, train, test)
}

fn train_query() -> String {
    format!("SELECT {FEATURES}, y FROM train ORDER BY id")
}

fn same(a: f32, b: f32) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

#[test]
#[ignore = "needs PostgreSQL's server programs; .ci/run installs them and runs it"]
fn shards_are_the_querys_rows_in_order_and_bad_input_is_typed() {
    let (server, train, _) = loaded();
    let url = server.url();
    let db = DataConnector::postgres(&url, &train_query()).expect("connector");
    assert!(
        !format!("{db:?}").contains(PASSWORD),
        "the connector's Debug shows the password: {db:?}"
    );
    let mut cols = db.columns().expect("columns");
    assert_eq!(cols.pop().as_deref(), Some("y"));
    assert_eq!(cols, features());

    // Every shard count: the shards concatenated are the rows, in the query's order.
    let whole = db
        .load_shard(0, 1, &features(), Some("y"))
        .expect("one shard");
    assert_eq!(whole.n_rows, TRAIN_ROWS);
    let expect = |j: usize, i: usize| -> f32 {
        let (_, a, b, c, k, flag, t, _) = train[i];
        match j {
            0 => a.map_or(f32::NAN, |v| v as f32),
            1 => b as f32,
            2 => c as f32,
            3 => k as f32,
            4 => f32::from(u8::from(flag)),
            _ => t.map_or(f32::NAN, |v| v as f32),
        }
    };
    for (j, column) in whole.columns.iter().enumerate() {
        for (i, &v) in column.iter().enumerate() {
            assert!(
                same(v, expect(j, i)),
                "column {j} row {i}: {v} vs {}",
                expect(j, i)
            );
        }
    }
    let labels = whole.labels.as_ref().expect("labels");
    for (i, &y) in labels.iter().enumerate() {
        assert_eq!(y, train[i].7 as f32, "label of row {i}");
    }
    for world in 2..=4 {
        let mut rows = 0;
        let mut cat = vec![Vec::new(); features().len()];
        let mut cat_labels = Vec::new();
        for rank in 0..world {
            let shard = db
                .load_shard(rank, world, &features(), Some("y"))
                .expect("a shard");
            assert!(
                shard.n_rows >= TRAIN_ROWS / world - 1,
                "shard {rank}/{world} is short"
            );
            rows += shard.n_rows;
            for (c, col) in cat.iter_mut().zip(shard.columns) {
                c.extend(col);
            }
            cat_labels.extend(shard.labels.expect("labels"));
        }
        assert_eq!(rows, TRAIN_ROWS, "{world} shards");
        assert_eq!(&cat_labels, labels, "{world} shards' labels");
        for (a, b) in cat.iter().zip(&whole.columns) {
            assert!(
                a.iter().zip(b).all(|(x, y)| same(*x, *y)),
                "{world} shards' features"
            );
        }
    }

    // Typed errors.
    match db.load_shard(0, 1, &["nope".to_string()], Some("y")) {
        Err(MlError::MissingColumn { column, available }) => {
            assert_eq!(column, "nope");
            assert!(available.contains("x_numeric"), "{available}");
        }
        other => panic!("unknown column: {other:?}"),
    }
    let bad = DataConnector::postgres(&url, "SELECT x, y FROM bad").expect("connector");
    match bad.load_shard(0, 1, &["x".to_string()], Some("y")) {
        Err(MlError::NotNumeric {
            location,
            column,
            value,
        }) => {
            assert_eq!((column.as_str(), value.as_str()), ("x", "abc"));
            assert!(location.contains("row 2"), "{location}");
            assert!(!location.contains(PASSWORD), "{location}");
        }
        other => panic!("text that is no number: {other:?}"),
    }
    let one = DataConnector::postgres(&url, "SELECT 1.5 AS x, 2 AS y").expect("connector");
    match one.load_shard(0, 2, &["x".to_string()], Some("y")) {
        Err(MlError::EmptyShard {
            rank,
            world,
            detail,
        }) => {
            assert_eq!((rank, world), (0, 2));
            assert!(
                detail.contains("1 rows") && !detail.contains(PASSWORD),
                "{detail}"
            );
        }
        other => panic!("an empty shard: {other:?}"),
    }
    assert_eq!(
        one.load_shard(1, 2, &["x".to_string()], Some("y"))
            .expect("the other shard has the row")
            .n_rows,
        1
    );
    let stamped = DataConnector::postgres(&url, "SELECT t, y FROM stamped").expect("connector");
    match stamped.load_shard(0, 1, &["t".to_string()], Some("y")) {
        Err(MlError::Format { message, .. }) => assert!(message.contains("timestamp"), "{message}"),
        other => panic!("a timestamp column: {other:?}"),
    }
    let syntax = DataConnector::postgres(&url, "SELEC nothing").expect("connector");
    match syntax.columns() {
        Err(e @ MlError::Database { .. }) => {
            let shown = e.to_string();
            assert!(
                shown.contains("syntax error") && !shown.contains(PASSWORD),
                "{shown}"
            );
        }
        other => panic!("a query error: {other:?}"),
    }
    let wrong = url.replace(PASSWORD, "not-the-password");
    let denied = DataConnector::postgres(&wrong, &train_query()).expect("connector");
    match denied.columns() {
        Err(e @ MlError::Database { .. }) => {
            let shown = e.to_string();
            assert!(shown.contains("password authentication failed"), "{shown}");
            assert!(!shown.contains("not-the-password"), "{shown}");
        }
        other => panic!("a wrong password: {other:?}"),
    }
    // A port with nothing listening (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let refused = DataConnector::postgres(
        &format!("postgresql://starling:{PASSWORD}@127.0.0.1:{port}/postgres"),
        &train_query(),
    )
    .expect("connector");
    match refused.load_shard(0, 1, &features(), Some("y")) {
        Err(MlError::Io { path, source }) => {
            assert_eq!(
                source.kind(),
                std::io::ErrorKind::ConnectionRefused,
                "{source}"
            );
            assert!(path.contains("***") && !path.contains(PASSWORD), "{path}");
        }
        other => panic!("a refused connection: {other:?}"),
    }
}

/// The `key=value` line `key` of a payload's output.
fn value<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in:\n{out}"))
}

#[test]
#[ignore = "needs PostgreSQL's server programs; .ci/run installs them and runs it"]
fn gbdt_trains_from_the_database_in_every_mode_as_from_files() {
    let (server, train, test) = loaded();
    let url = server.url();
    let csv_dir = server.dir.join("csv");
    std::fs::create_dir_all(&csv_dir).expect("csv dir");
    let (train_csv, test_csv) = (csv_dir.join("train.csv"), csv_dir.join("test.csv"));
    write_csv(&train_csv, &train);
    write_csv(&test_csv, &test);
    let common = [
        "--label",
        "y",
        "--features",
        FEATURES,
        "--n-estimators",
        "30",
        "--max-depth",
        "4",
        "--workers",
        "2",
        "--min-rows-per-worker",
        "100",
    ];
    let train_q = train_query();
    let test_q = format!("SELECT {FEATURES}, y FROM test ORDER BY id");
    let from_db = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["--db", &url, "--train", &train_q, "--test", &test_q];
        args.extend(common);
        args.extend(extra);
        args.into_iter().map(String::from).collect()
    };

    let spread = {
        let n = test.len() as f64;
        let mean = test.iter().map(|r| r.7).sum::<f64>() / n;
        (test.iter().map(|r| (r.7 - mean).powi(2)).sum::<f64>() / n).sqrt()
    };
    let (files_out, _) = run_example_alone(
        "gbdt",
        &[
            &[
                "--train",
                train_csv.to_str().unwrap(),
                "--test",
                test_csv.to_str().unwrap(),
            ][..],
            &common[..],
            &["--in-process"][..],
        ]
        .concat(),
    );
    let rmse_files: f64 = value(&files_out, "rmse").parse().expect("rmse");
    assert_eq!(value(&files_out, "workers_used"), "2", "{files_out}");

    let args = from_db(&["--in-process"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (inproc, _) = run_example_alone("gbdt", &args);
    let args = from_db(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (local, _) = run_example_alone("gbdt", &args);
    let cluster = Cluster::start("postgres", 2);
    let (status, _, processes) = cluster.run_status("gbdt", &args);
    cluster.check(
        status.success(),
        &format!("gbdt --db exited with {status}:\n{processes}"),
    );

    for (mode, out) in [
        ("in-process", &inproc),
        ("local cluster", &local),
        ("head and agents as processes", &processes),
    ] {
        assert_eq!(value(out, "workers_used"), "2", "{mode}: {out}");
        let rmse: f64 = value(out, "rmse").parse().expect("rmse");
        // The same rows, cut into two shards at the same row (the CSV cut is by bytes, so it
        // may fall a row or two away): the same bins, so the same model up to the order of
        // sums.
        assert!(
            (rmse - rmse_files).abs() <= 1e-4 * rmse_files.max(1e-3),
            "{mode}: rmse {rmse} from the database, {rmse_files} from files\n{out}\n{files_out}"
        );
        // It learned: the error is a fraction of the label's spread (what is left is mostly
        // the rows whose `x_real`, the strongest feature, is missing).
        assert!(
            rmse < 0.35 * spread,
            "{mode}: rmse {rmse}, the test label's standard deviation {spread}"
        );
    }
}
