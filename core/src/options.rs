//! Per-call task options: resources, retries, placement.

use starling_proto::{NodeId, ResourceSet, SchedulingStrategy};

/// Options for one call of a remote function. `#[remote(..)]` sets a function's defaults;
/// `f::options()` starts from them and changes some for one call.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskOptions {
    pub(crate) resources: ResourceSet,
    pub(crate) max_retries: u32,
    pub(crate) retry_exceptions: bool,
    pub(crate) strategy: SchedulingStrategy,
}

impl Default for TaskOptions {
    /// One CPU, three retries of lost workers, no retry of application errors, default placement.
    fn default() -> Self {
        TaskOptions {
            resources: ResourceSet::cpus(1.0),
            max_retries: 3,
            retry_exceptions: false,
            strategy: SchedulingStrategy::Default,
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

    /// Whether a panic or `Err` is retried too, not only a lost worker (default `false`).
    pub fn retry_exceptions(mut self, yes: bool) -> Self {
        self.retry_exceptions = yes;
        self
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
}
