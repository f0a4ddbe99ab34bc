//! The web dashboard the head serves on its HTTP port ([`crate::http`]): one page
//! (`dashboard.html`, compiled into the binary: no CDN, nothing fetched at run time) that
//! draws the overview, jobs with their instances and live logs, nodes, tasks, actors, pools and
//! a job's timeline from the JSON routes below, polling them every two seconds.
//!
//! | route | answer |
//! |---|---|
//! | `/api/overview` | nodes, task counts by state, counters, jobs, actor counts |
//! | `/api/nodes`, `/api/actors`, `/api/jobs`, `/api/pools` | the lists, as `starling list` |
//! | `/api/jobs/ID` | one job with its instances |
//! | `/api/jobs/ID/logs?instance=K&offset=N` | an instance's log from byte N (at most 1 MiB) |
//! | `/api/tasks?filter=K=V&limit=N&job=J` | task records (newest `limit`), `total`, `dropped` |
//! | `/api/tasks/ID` | every attempt of one task |
//! | `/api/summary` | attempts by function and state |
//! | `/api/timeline?job=J` | the Chrome trace of the attempts that ran |
//!
//! Every route reads state the head keeps anyway; a task listing walks the task event store
//! once (about 30 ms for 100,000 records here).

use std::fmt::Write as _;

use starling_proto::state::{json_array, json_string, Filter, TaskQuery, TaskStatus};
use starling_proto::JobId;

use crate::http::{Request, Response};
use crate::state::Head;

/// The page every path outside `/api/` gets.
const APP: &str = include_str!("dashboard.html");

/// What a browser without the token is shown: a form that posts it to `/login`.
pub(crate) const LOGIN_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Starling: sign in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f4f6f8;
color:#1d2733;display:flex;align-items:center;justify-content:center;height:100vh;margin:0}
form{background:#fff;padding:2em 2.5em;border-radius:10px;box-shadow:0 2px 12px #0002;width:24em}
h1{font-size:1.3em;margin:0 0 .2em}p{color:#5b6877;margin:.2em 0 1.2em}
input{width:100%;box-sizing:border-box;padding:.55em;border:1px solid #c5ced8;border-radius:6px;
font:inherit}button{margin-top:1em;padding:.55em 1.4em;border:0;border-radius:6px;
background:#2f6fdf;color:#fff;font:inherit;cursor:pointer}
</style></head><body>
<form method="post" action="/login">
<h1>Starling</h1><p>Paste the cluster token (the head writes it to DATA_DIR/token).</p>
<input type="password" name="token" id="token" autofocus placeholder="cluster token">
<button type="submit">Sign in</button>
</form></body></html>
"#;

fn json(body: String) -> Response {
    Response::new(200, "application/json", body)
}

fn bad(why: &str) -> Response {
    Response::new(
        400,
        "application/json",
        format!("{{\"error\":{}}}", json_string(why)),
    )
}

/// The page or JSON answer for `path` (`None`: no such page).
pub(crate) fn page(head: &Head, path: &str, request: &Request) -> Option<Response> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    Some(match parts.as_slice() {
        [""] | ["index.html"] => Response::new(200, "text/html; charset=utf-8", APP),
        ["api", "overview"] => json(overview(head)),
        ["api", "nodes"] => json(json_array(
            head.status(JobId(0)).nodes.iter().map(|n| n.to_json()),
        )),
        ["api", "actors"] => json(json_array(
            head.status(JobId(0)).actors.iter().map(|a| a.to_json()),
        )),
        ["api", "jobs"] => json(json_array(
            head.state.lock().jobs.list().iter().map(|j| j.to_json()),
        )),
        ["api", "jobs", id] => {
            let Ok(id) = id.parse::<u64>() else {
                return Some(bad("a job id is a number"));
            };
            match head.state.lock().jobs.info(id) {
                Some(j) => json(j.to_json()),
                None => return None,
            }
        }
        ["api", "jobs", id, "logs"] => {
            let Ok(id) = id.parse::<u64>() else {
                return Some(bad("a job id is a number"));
            };
            job_log(head, id, request)?
        }
        ["api", "pools"] => json(json_array(
            head.state.lock().jobs.pools().iter().map(|p| p.to_json()),
        )),
        ["api", "tasks"] => match tasks(head, request) {
            Ok(body) => json(body),
            Err(why) => bad(&why),
        },
        ["api", "tasks", id] => {
            let id = id.trim_start_matches(|c: char| c.is_ascii_alphabetic());
            let Ok(id) = id.parse::<u64>() else {
                return Some(bad("a task id is a number (or T and a number)"));
            };
            let q = TaskQuery {
                filters: vec![Filter::parse(&format!("task_id={id}")).expect("well-formed")],
                ..Default::default()
            };
            let list = head.state.lock().core.task_events().query(&q);
            json(format!(
                "{{\"attempts\":{},\"dropped\":{}}}",
                json_array(list.tasks.iter().map(|e| e.to_json())),
                list.dropped
            ))
        }
        ["api", "summary"] => {
            let q = TaskQuery {
                summary: true,
                ..Default::default()
            };
            let list = head.state.lock().core.task_events().query(&q);
            json(json_array(list.summary.iter().map(|c| {
                format!(
                    "{{\"name\":{},\"state\":{},\"count\":{}}}",
                    json_string(&c.name),
                    json_string(c.state.as_str()),
                    c.count
                )
            })))
        }
        ["api", "timeline"] => {
            let job = match request.param("job").filter(|j| !j.is_empty()) {
                Some(j) => match j.trim_start_matches('J').parse::<u64>() {
                    Ok(j) => Some(JobId(j)),
                    Err(_) => return Some(bad("a job id is a number")),
                },
                None => None,
            };
            let q = TaskQuery {
                job,
                ..Default::default()
            };
            let list = head.state.lock().core.task_events().query(&q);
            json(starling_proto::state::chrome_trace(
                &list.tasks,
                starling_proto::state::now_us(),
            ))
        }
        _ => return None,
    })
}

/// `/api/tasks`: the newest `limit` (default 100) records passing the `filter`s.
fn tasks(head: &Head, request: &Request) -> Result<String, String> {
    let mut q = TaskQuery {
        limit: 100,
        ..Default::default()
    };
    for (k, v) in &request.query {
        match k.as_str() {
            "filter" if !v.trim().is_empty() => q.filters.push(Filter::parse(v)?),
            "limit" => {
                q.limit = v
                    .parse()
                    .map_err(|_| format!("limit `{v}` is not a number"))?
            }
            "job" if !v.is_empty() => {
                q.job = Some(JobId(
                    v.trim_start_matches('J')
                        .parse()
                        .map_err(|_| format!("job `{v}` is not a job id"))?,
                ))
            }
            _ => {}
        }
    }
    q.check()?;
    let list = head.state.lock().core.task_events().query(&q);
    Ok(format!(
        "{{\"total\":{},\"dropped\":{},\"tasks\":{}}}",
        list.total,
        list.dropped,
        json_array(list.tasks.iter().rev().map(|e| e.to_json()))
    ))
}

/// `/api/overview`: what the first page shows.
fn overview(head: &Head) -> String {
    let status = head.status(JobId(0));
    let (by_state, held, dropped, jobs) = {
        let g = head.state.lock();
        let mut by_state = [0u64; 5];
        for (_, state, n) in g.core.live_tasks_by_state() {
            by_state[state as usize] += n;
        }
        for (_, n) in &g.core.task_events().figures().ended {
            by_state[TaskStatus::Finished as usize] += n[0];
            by_state[TaskStatus::Failed as usize] += n[1];
        }
        let events = g.core.task_events();
        (by_state, events.len(), events.dropped(), g.jobs.list())
    };
    let mut tasks = String::new();
    for (i, s) in TaskStatus::ALL.iter().enumerate() {
        if i > 0 {
            tasks.push(',');
        }
        let _ = write!(tasks, "{}:{}", json_string(s.as_str()), by_state[i]);
    }
    let mut actors: std::collections::BTreeMap<&str, u64> = Default::default();
    for a in &status.actors {
        *actors.entry(&a.state).or_default() += 1;
    }
    let actors: Vec<String> = actors
        .iter()
        .map(|(s, n)| format!("{}:{n}", json_string(s)))
        .collect();
    format!(
        "{{\"nodes\":{},\"tasks\":{{{tasks}}},\"counters\":{{\"submitted\":{},\"succeeded\":{},\
         \"failed\":{},\"retried\":{},\"reconstructed\":{},\"live\":{},\"objects\":{},\
         \"head_store_bytes\":{},\"records\":{held},\"records_dropped\":{dropped}}},\
         \"actors\":{{{}}},\"jobs\":{}}}",
        json_array(status.nodes.iter().map(|n| n.to_json())),
        status.submitted,
        status.succeeded,
        status.failed,
        status.retried,
        status.reconstructed,
        status.live,
        status.objects,
        status.head_store_bytes,
        actors.join(","),
        json_array(jobs.iter().rev().take(20).map(|j| j.to_json())),
    )
}

/// `/api/jobs/ID/logs`: up to 1 MiB of an instance's log from `offset`, with where to go on
/// from and whether the job has ended.
fn job_log(head: &Head, id: u64, request: &Request) -> Option<Response> {
    let instance: u32 = request
        .param("instance")
        .and_then(|i| i.parse().ok())
        .unwrap_or(0);
    let offset: u64 = request
        .param("offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    let (path, ended) = {
        let g = head.state.lock();
        g.jobs.info(id)?;
        (
            g.out.job_files.as_ref().map(|f| f.log_path(id, instance)),
            g.jobs.has_ended(id).unwrap_or(true),
        )
    };
    let mut data = Vec::new();
    if let Some(path) = path {
        if let Ok(mut f) = std::fs::File::open(path) {
            use std::io::{Read, Seek};
            let _ = f.seek(std::io::SeekFrom::Start(offset));
            let _ = f.take(1 << 20).read_to_end(&mut data);
        }
    }
    let next = offset + data.len() as u64;
    Some(json(format!(
        "{{\"data\":{},\"next\":{next},\"ended\":{ended}}}",
        json_string(&String::from_utf8_lossy(&data))
    )))
}
