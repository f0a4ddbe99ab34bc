//! Per-call task options: resources, retries, placement.

use starling_proto::{ActorRole, NodeId, ResourceSet, SchedulingStrategy, TaskEnv};

/// Options for one call of a remote function. `#[remote(..)]` sets a function's defaults;
/// `f::options()` starts from them and changes some for one call.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskOptions {
    pub(crate) resources: ResourceSet,
    pub(crate) max_retries: u32,
    pub(crate) retry_exceptions: bool,
    /// With `retry_exceptions`, the error types retried (empty: every one).
    pub(crate) retry_on: Vec<std::sync::Arc<str>>,
    pub(crate) strategy: SchedulingStrategy,
    /// How many objects the call returns (0 or 1: one); set by `#[remote(num_returns = N)]`.
    pub(crate) returns: u32,
    /// A streaming call; set by the stub of a `#[remote]` function that returns an iterator.
    pub(crate) streaming: bool,
    /// For a streaming call: items the task may yield ahead of the caller (0: no limit).
    pub(crate) backpressure: u32,
    /// For an `async` function: how many of its tasks one worker may run at once (0 or 1: one).
    pub(crate) max_concurrency: u32,
    /// Environment variables of the worker process that runs the task (default: none).
    pub(crate) env: TaskEnv,
    /// Whether the call creates or calls an actor (set by the actor API).
    pub(crate) actor: ActorRole,
}

impl Default for TaskOptions {
    /// One CPU, three retries of lost workers, no retry of application errors, default placement.
    fn default() -> Self {
        TaskOptions {
            resources: ResourceSet::cpus(1.0),
            max_retries: 3,
            retry_exceptions: false,
            retry_on: Vec::new(),
            strategy: SchedulingStrategy::Default,
            returns: 0,
            streaming: false,
            backpressure: 0,
            max_concurrency: 1,
            env: TaskEnv::default(),
            actor: ActorRole::None,
        }
    }
}

impl TaskOptions {
    /// CPUs the task holds while it runs (fractions allowed; 0 for none).
    pub fn num_cpus(mut self, n: f64) -> Self {
        self.resources
            .set_units("CPU", ResourceSet::cpus(n).cpu_units());
        self
    }

    /// GPUs the task holds while it runs (fractions allowed).
    pub fn num_gpus(mut self, n: f64) -> Self {
        self.resources = self.resources.with("GPU", n);
        self
    }

    /// An amount of a custom resource (`"CPU"` and `"GPU"` name the built-in ones).
    pub fn resources(mut self, name: &str, amount: f64) -> Self {
        self.resources = self.resources.with(name, amount);
        self
    }

    /// How many times the task is retried after a failure (default 3).
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// Whether a panic or `Err` is retried too, not only a lost worker (default `false`); every
    /// error is, unless [`retry_on`](Self::retry_on) or [`retry_on_panic`](Self::retry_on_panic)
    /// named which.
    pub fn retry_exceptions(mut self, yes: bool) -> Self {
        self.retry_exceptions = yes;
        self
    }

    /// Retries application errors of type `E` only (Ray's `retry_exceptions=[..]` filter): an
    /// `Err(e)` with `e: E` runs the task again while retries are left; other errors and panics
    /// do not, unless also named (`retry_on_panic`, another `retry_on`). Turns
    /// `retry_exceptions` on. The error's type is matched by `std::any::type_name`, as
    /// [`RemoteError::type_name`](crate::RemoteError) records it.
    pub fn retry_on<E: ?Sized + 'static>(mut self) -> Self {
        self.retry_exceptions = true;
        self.push_retry_on(std::any::type_name::<E>());
        self
    }

    /// Retries panics (with `retry_on`, panics and those types only). Turns `retry_exceptions`
    /// on.
    pub fn retry_on_panic(mut self) -> Self {
        self.retry_exceptions = true;
        self.push_retry_on("panic");
        self
    }

    fn push_retry_on(&mut self, name: &str) {
        if !self.retry_on.iter().any(|t| **t == *name) {
            self.retry_on.push(std::sync::Arc::from(name));
        }
    }

    /// Where the task may run.
    pub fn scheduling_strategy(mut self, s: SchedulingStrategy) -> Self {
        self.strategy = s;
        self
    }

    /// Shorthand for `scheduling_strategy(SchedulingStrategy::Spread)`.
    pub fn spread(self) -> Self {
        self.scheduling_strategy(SchedulingStrategy::Spread)
    }

    /// Shorthand for node affinity: run on `node`; if `soft`, elsewhere when it cannot.
    pub fn node_affinity(self, node: NodeId, soft: bool) -> Self {
        self.scheduling_strategy(SchedulingStrategy::NodeAffinity { node, soft })
    }

    /// For a function that returns an iterator (a streaming task): pause the task while it has
    /// yielded `n` items more than the caller took from its
    /// [`ObjectRefGenerator`](crate::ObjectRefGenerator) (Ray's
    /// `_generator_backpressure_num_objects`). 0, the default, is no limit, as in Ray. A paused
    /// task keeps its resources; dropping the generator lets it go on. Ignored by other tasks.
    pub fn backpressure(mut self, n: u32) -> Self {
        self.backpressure = n;
        self
    }

    /// For an `async` function: one worker runs up to `n` of its tasks at once, interleaved on
    /// one thread (each `.await` lets another run), each holding its own resources, so a node
    /// with 2 CPUs runs 8 tasks of `num_cpus(0.25)` in one worker process instead of 8.
    /// A worker runs tasks together only while each of them allows that many; other tasks wait
    /// for a worker of their own. Default 1: one task at a time, as for every other function
    /// (whose `options()` has no such setting). A blocking `starling::get` inside such a task
    /// holds up the others on its worker: `.await` the ref instead.
    pub fn max_concurrency(mut self, n: u32) -> Self {
        self.max_concurrency = n.max(1);
        self
    }

    /// Runs the task in a worker process with the environment variable `name` set to `value`
    /// (Ray's `runtime_env={"env_vars": ..}`); call it again for more variables, and a name
    /// given twice keeps its last value. Tasks with different variables never share a worker
    /// process: each set is a worker pool of its own, which node agents start on demand with
    /// the variables set on top of their own environment, and keep for later tasks with the
    /// same set (in any order). A multi-node job's `env_vars` apply to its tasks too, under
    /// their own.
    ///
    /// A task whose variables no process could be started with (a name that is empty or holds
    /// `=` or a NUL byte, a value with a NUL byte, or a name starting with `STARLING_`, which
    /// Starling sets itself) fails with [`Error::Unschedulable`](crate::Error::Unschedulable),
    /// as does any task with variables on the in-process runtime, whose tasks all run on
    /// threads of one process and so share one environment.
    pub fn env_var(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env_vars([(name.into(), value.into())])
    }

    /// [`env_var`](Self::env_var) for each `(name, value)` of `vars`.
    pub fn env_vars<K, V>(mut self, vars: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        let old = self.env.vars().iter().cloned();
        let new = vars.into_iter().map(|(k, v)| (k.into(), v.into()));
        self.env = TaskEnv::new(old.chain(new).collect::<Vec<_>>());
        self
    }

    /// The resources one run holds.
    pub fn resource_set(&self) -> &ResourceSet {
        &self.resources
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_set_fields() {
        let o = TaskOptions::default()
            .num_cpus(0.5)
            .num_gpus(1.0)
            .resources("tpu", 2.0)
            .max_retries(5)
            .retry_exceptions(true)
            .spread();
        assert_eq!(o.resources.get("CPU"), 0.5);
        assert_eq!(o.resources.get("GPU"), 1.0);
        assert_eq!(o.resources.get("tpu"), 2.0);
        assert_eq!((o.max_retries, o.retry_exceptions), (5, true));
        assert_eq!(o.strategy, SchedulingStrategy::Spread);
        assert_eq!(
            TaskOptions::default().num_cpus(0.0).resources.cpu_units(),
            0
        );
    }

    #[test]
    fn env_vars_accumulate_and_the_last_value_of_a_name_wins() {
        let o = TaskOptions::default()
            .env_var("A", "1")
            .env_vars([("B", "2"), ("A", "3")]);
        assert_eq!(
            o.env.vars(),
            [
                ("A".to_string(), "3".to_string()),
                ("B".to_string(), "2".to_string())
            ]
        );
        assert!(TaskOptions::default().env.is_empty());
    }
}
