//! `starling._native`: the Python client of Starling's jobs API, a thin PyO3 layer over
//! [`starling::jobs::JobClient`]. The `starling` Python package (`python/starling/`) re-exports
//! it with the module-level verbs of the docs (`submit_file`, `list_jobs`, `get_job`, ..).
//!
//! Every call that waits on the head (all of them: each is a gRPC call) releases the GIL, so a
//! Python thread waiting on a job never blocks the others. Errors are `starling.StarlingError`
//! with the head's words.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use starling::jobs::{InstanceState, Job, JobClient, JobInfo, JobOptions, JobStatus};

pyo3::create_exception!(
    _native,
    StarlingError,
    PyException,
    "A request to the Starling head failed, or a job ended otherwise than it was asked to."
);

fn err(e: starling::Error) -> PyErr {
    StarlingError::new_err(e.to_string())
}

fn secs(t: Option<SystemTime>) -> Option<f64> {
    t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
}

/// The job's state and record as a dict (what `list_jobs()` and `Job.info()` return).
fn info_dict<'py>(py: Python<'py>, i: &JobInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", i.id)?;
    d.set_item("name", &i.name)?;
    d.set_item("status", i.status.to_string())?;
    d.set_item("message", &i.message)?;
    d.set_item("pool", &i.pool)?;
    d.set_item("target_instances", i.target_instances)?;
    d.set_item("min_instances", i.min_instances)?;
    d.set_item("exit_code", i.exit_code)?;
    d.set_item("created", secs(Some(i.created)))?;
    d.set_item("started", secs(i.started))?;
    d.set_item("completed", secs(i.completed))?;
    let instances = PyList::empty(py);
    for k in &i.instances {
        let e = PyDict::new(py);
        e.set_item("index", k.index)?;
        e.set_item("node", k.node.0)?;
        e.set_item(
            "state",
            match k.state {
                InstanceState::Up => "UP",
                InstanceState::Lost => "LOST",
                InstanceState::Stopped => "STOPPED",
            },
        )?;
        e.set_item("lost_at", k.lost.as_ref().and_then(|(t, _)| secs(Some(*t))))?;
        e.set_item("lost_why", k.lost.as_ref().map(|(_, w)| w.clone()))?;
        instances.append(e)?;
    }
    d.set_item("instances", instances)?;
    Ok(d)
}

/// What `submit_file` and `submit_directory` take beyond the payload and the pool.
#[allow(clippy::too_many_arguments)]
fn options(
    target_instances: u32,
    min_instances: Option<u32>,
    args: Option<Vec<String>>,
    env_vars: Option<BTreeMap<String, String>>,
    name: Option<String>,
    instance_timeout: Option<f64>,
    max_instance_failures: Option<u32>,
    interpreter: Option<Vec<String>>,
) -> PyResult<JobOptions> {
    let mut o = JobOptions::new().target_instances(target_instances);
    if let Some(m) = min_instances {
        o = o.min_instances(m);
    }
    if let Some(a) = args {
        o = o.args(a);
    }
    for (k, v) in env_vars.unwrap_or_default() {
        o = o.env(k, v);
    }
    if let Some(n) = name {
        o = o.name(n);
    }
    if let Some(t) = instance_timeout {
        if !(t.is_finite() && t > 0.0) {
            return Err(StarlingError::new_err(format!(
                "instance_timeout must be a positive number of seconds, not {t}"
            )));
        }
        o = o.instance_timeout(Duration::from_secs_f64(t));
    }
    if let Some(n) = max_instance_failures {
        o = o.max_instance_failures(n);
    }
    if let Some(i) = interpreter {
        o = o.interpreter(i);
    }
    Ok(o)
}

/// An entrypoint given as a string (`"python3 -m pkg.main"`, split at spaces) or a list of
/// words (`["python3", "main.py"]`).
#[derive(FromPyObject)]
enum Entrypoint {
    Line(String),
    Words(Vec<String>),
}

/// A connection to a Starling head.
#[pyclass(module = "starling._native", name = "JobClient", frozen)]
struct PyJobClient {
    inner: JobClient,
}

#[pymethods]
impl PyJobClient {
    /// Connects to the head at `addr` (`host:port`), or at `STARLING_HEAD` when `addr` is
    /// None; the token comes from `STARLING_TOKEN`.
    #[new]
    #[pyo3(signature = (addr=None))]
    fn new(py: Python<'_>, addr: Option<String>) -> PyResult<Self> {
        let inner = py
            .allow_threads(|| match addr {
                Some(a) => JobClient::connect(&a),
                None => JobClient::from_env(),
            })
            .map_err(err)?;
        Ok(PyJobClient { inner })
    }

    /// The head's address.
    #[getter]
    fn addr(&self) -> String {
        self.inner.addr().to_string()
    }

    /// Submits the file at `path` (an executable, or a `.py` file, which runs with `python3`).
    #[pyo3(signature = (path, pool, *, target_instances=1, min_instances=None, args=None,
        env_vars=None, name=None, instance_timeout=None, max_instance_failures=None,
        interpreter=None))]
    #[allow(clippy::too_many_arguments)]
    fn submit_file(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        pool: String,
        target_instances: u32,
        min_instances: Option<u32>,
        args: Option<Vec<String>>,
        env_vars: Option<BTreeMap<String, String>>,
        name: Option<String>,
        instance_timeout: Option<f64>,
        max_instance_failures: Option<u32>,
        interpreter: Option<Vec<String>>,
    ) -> PyResult<PyJob> {
        let o = options(
            target_instances,
            min_instances,
            args,
            env_vars,
            name,
            instance_timeout,
            max_instance_failures,
            interpreter,
        )?;
        let job = py
            .allow_threads(|| self.inner.submit_file(&path, &pool, o))
            .map_err(err)?;
        Ok(PyJob { inner: job })
    }

    /// Submits the directory `dir`; `entrypoint` runs from its root: a file of it (with its
    /// first arguments) or a program of the nodes' (`"python3 -m pkg.main"`, or a list).
    #[pyo3(signature = (dir, pool, *, entrypoint, target_instances=1, min_instances=None,
        args=None, env_vars=None, name=None, instance_timeout=None, max_instance_failures=None,
        interpreter=None))]
    #[allow(clippy::too_many_arguments)]
    fn submit_directory(
        &self,
        py: Python<'_>,
        dir: std::path::PathBuf,
        pool: String,
        entrypoint: Entrypoint,
        target_instances: u32,
        min_instances: Option<u32>,
        args: Option<Vec<String>>,
        env_vars: Option<BTreeMap<String, String>>,
        name: Option<String>,
        instance_timeout: Option<f64>,
        max_instance_failures: Option<u32>,
        interpreter: Option<Vec<String>>,
    ) -> PyResult<PyJob> {
        let o = options(
            target_instances,
            min_instances,
            args,
            env_vars,
            name,
            instance_timeout,
            max_instance_failures,
            interpreter,
        )?;
        let words = match entrypoint {
            Entrypoint::Line(l) => l.split_whitespace().map(String::from).collect(),
            Entrypoint::Words(w) => w,
        };
        let job = py
            .allow_threads(|| self.inner.submit_directory_argv(&dir, &pool, &words, o))
            .map_err(err)?;
        Ok(PyJob { inner: job })
    }

    /// Every job the head knows, oldest first, as dicts (`id`, `name`, `status`, `message`,
    /// `pool`, `instances`, ..).
    fn list_jobs<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let jobs = py.allow_threads(|| self.inner.list_jobs()).map_err(err)?;
        jobs.iter().map(|j| info_dict(py, j)).collect()
    }

    /// The job with id `id`.
    fn get_job(&self, py: Python<'_>, id: u64) -> PyResult<PyJob> {
        let job = py.allow_threads(|| self.inner.get_job(id)).map_err(err)?;
        Ok(PyJob { inner: job })
    }

    /// Deletes an ended job and its logs.
    fn delete_job(&self, py: Python<'_>, id: u64) -> PyResult<()> {
        py.allow_threads(|| self.inner.delete_job(id)).map_err(err)
    }

    /// The nodes of job `job` (its instances), or of the whole cluster, as dicts (`id`,
    /// `address`, `alive`, `resources`).
    #[pyo3(signature = (job=None))]
    fn nodes<'py>(&self, py: Python<'py>, job: Option<u64>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let nodes = py.allow_threads(|| self.inner.nodes(job)).map_err(err)?;
        nodes
            .iter()
            .map(|n| {
                let d = PyDict::new(py);
                d.set_item("id", n.id.0)?;
                d.set_item("address", &n.address)?;
                d.set_item("alive", n.alive)?;
                d.set_item("resources", n.resources.to_string())?;
                Ok(d)
            })
            .collect()
    }
}

/// A submitted job.
#[pyclass(module = "starling._native", name = "Job", frozen)]
struct PyJob {
    inner: Job,
}

#[pymethods]
impl PyJob {
    /// Its id.
    #[getter]
    fn id(&self) -> u64 {
        self.inner.id()
    }

    /// Its state now: PENDING, RUNNING, DONE, FAILED, CANCELLING or CANCELLED.
    #[getter]
    fn status(&self, py: Python<'_>) -> PyResult<String> {
        let s = py.allow_threads(|| self.inner.status()).map_err(err)?;
        Ok(s.to_string())
    }

    /// Its whole record, as `list_jobs()` gives it.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let i = py.allow_threads(|| self.inner.info()).map_err(err)?;
        info_dict(py, &i)
    }

    /// Waits until it ends (at most `timeout` seconds) and returns its final state.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<String> {
        let t = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        let s = py.allow_threads(|| self.inner.wait(t)).map_err(err)?;
        Ok(s.to_string())
    }

    /// The log of instance `instance_id` (default 0, the entrypoint's), tagged with the
    /// task that printed each line (`[T42] out|...`).
    #[pyo3(signature = (instance_id=None))]
    fn get_logs(&self, py: Python<'_>, instance_id: Option<u32>) -> PyResult<String> {
        py.allow_threads(|| self.inner.logs(instance_id.unwrap_or(0)))
            .map_err(err)
    }

    /// Prints the log of instance `instance_id` (default 0) to `sys.stdout`.
    #[pyo3(signature = (instance_id=None))]
    fn show_logs(&self, py: Python<'_>, instance_id: Option<u32>) -> PyResult<()> {
        let logs = self.get_logs(py, instance_id)?;
        py.import("sys")?
            .getattr("stdout")?
            .call_method1("write", (logs,))?;
        Ok(())
    }

    /// The value a `#[starling::job]` function returned, as the bytes it was encoded to
    /// (bincode); None for a job that is no function. Raises StarlingError if the job failed.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let r = py
            .allow_threads(|| self.inner.result_bytes())
            .map_err(err)?;
        Ok(r.map(|b| PyBytes::new(py, &b)))
    }

    /// Cancels it; returns its state after the request.
    fn cancel(&self, py: Python<'_>) -> PyResult<String> {
        let s = py.allow_threads(|| self.inner.cancel()).map_err(err)?;
        Ok(s.to_string())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let status = py
            .allow_threads(|| self.inner.status())
            .map_or_else(|e| format!("unknown: {e}"), |s: JobStatus| s.to_string());
        format!("Job(id={}, status={status})", self.inner.id())
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyJobClient>()?;
    m.add_class::<PyJob>()?;
    m.add("StarlingError", m.py().get_type::<StarlingError>())?;
    Ok(())
}
