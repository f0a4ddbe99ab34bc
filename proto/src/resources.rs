//! Resource sets with exact fractional arithmetic.
//!
//! Amounts are fixed-point with [`RESOURCE_SCALE`] units per whole resource, so `0.1 + 0.2` CPUs
//! is exactly `0.3` and accounting never drifts after millions of acquire/release pairs. CPU and
//! GPU are fields because every task names them; custom resources live in a short sorted list.

use std::fmt;
use std::sync::Arc;

/// Fixed-point units per whole resource (1/10000, as Ray does).
pub const RESOURCE_SCALE: u64 = 10_000;

/// A set of resource amounts: CPU, GPU and custom named resources.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct ResourceSet {
    cpu: u64,
    gpu: u64,
    /// Sorted by name, no zero amounts.
    custom: Vec<(Arc<str>, u64)>,
}

/// Whether `id` can name a GPU: an index or a `GPU-`/`MIG-` uuid, at most 128 bytes of
/// letters, digits, `-`, `_` and `/` (ids are joined with commas into
/// `CUDA_VISIBLE_DEVICES`, so nothing else may appear in one).
pub fn is_gpu_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'/')
}

/// Checks a node's GPU ids: each a plain name ([`is_gpu_id`]), none twice, at most 1024.
pub fn check_gpu_ids(ids: &[String]) -> Result<(), String> {
    const MAX_GPUS: usize = 1024;
    if ids.len() > MAX_GPUS {
        return Err(format!(
            "{} GPU ids given; at most {MAX_GPUS} are accepted",
            ids.len()
        ));
    }
    for (i, id) in ids.iter().enumerate() {
        if !is_gpu_id(id) {
            return Err(format!("GPU id {id:?} is not an index or a GPU-/MIG- uuid"));
        }
        if ids[..i].contains(id) {
            return Err(format!("GPU id {id:?} is given twice"));
        }
    }
    Ok(())
}

fn to_units(amount: f64) -> u64 {
    if amount.is_nan() || amount <= 0.0 {
        0
    } else {
        (amount * RESOURCE_SCALE as f64).round() as u64
    }
}

fn from_units(units: u64) -> f64 {
    units as f64 / RESOURCE_SCALE as f64
}

impl ResourceSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// `cpus` CPUs and nothing else.
    pub fn cpus(cpus: f64) -> Self {
        Self {
            cpu: to_units(cpus),
            ..Self::default()
        }
    }

    /// Sets the amount of `name` (`"CPU"` and `"GPU"` are the built-in resources).
    pub fn with(mut self, name: &str, amount: f64) -> Self {
        self.set_units(name, to_units(amount));
        self
    }

    /// Sets `name` to an amount in fixed-point units.
    pub fn set_units(&mut self, name: &str, units: u64) {
        match name {
            "CPU" | "cpu" => self.cpu = units,
            "GPU" | "gpu" => self.gpu = units,
            _ => match self.custom.binary_search_by(|(n, _)| (**n).cmp(name)) {
                Ok(i) if units == 0 => {
                    self.custom.remove(i);
                }
                Ok(i) => self.custom[i].1 = units,
                Err(_) if units == 0 => {}
                Err(i) => self.custom.insert(i, (Arc::from(name), units)),
            },
        }
    }

    /// The amount of `name`, in whole resources.
    pub fn get(&self, name: &str) -> f64 {
        from_units(self.units(name))
    }

    /// The amount of `name`, in fixed-point units.
    pub fn units(&self, name: &str) -> u64 {
        match name {
            "CPU" | "cpu" => self.cpu,
            "GPU" | "gpu" => self.gpu,
            _ => self
                .custom
                .binary_search_by(|(n, _)| (**n).cmp(name))
                .map(|i| self.custom[i].1)
                .unwrap_or(0),
        }
    }

    /// CPUs in fixed-point units.
    #[inline]
    pub fn cpu_units(&self) -> u64 {
        self.cpu
    }

    /// The GPU amount, in fixed-point units.
    pub fn gpu_units(&self) -> u64 {
        self.gpu
    }

    /// Whether every amount is zero.
    pub fn is_empty(&self) -> bool {
        self.cpu == 0 && self.gpu == 0 && self.custom.is_empty()
    }

    /// Every non-zero amount as `(name, units)`, CPU and GPU first.
    pub fn iter_units(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        [("CPU", self.cpu), ("GPU", self.gpu)]
            .into_iter()
            .filter(|(_, u)| *u > 0)
            .chain(self.custom.iter().map(|(n, u)| (&**n, *u)))
    }

    /// Whether `self` contains at least `need` of every resource.
    #[inline]
    pub fn contains(&self, need: &ResourceSet) -> bool {
        self.cpu >= need.cpu
            && self.gpu >= need.gpu
            && need.custom.iter().all(|(n, u)| self.units(n) >= *u)
    }

    /// The first resource of `need` that `self` lacks, with the amounts, or `None`.
    pub fn first_shortfall<'a>(&self, need: &'a ResourceSet) -> Option<(&'a str, u64, u64)> {
        need.iter_units().find_map(|(n, u)| {
            let have = self.units(n);
            (have < u).then_some((n, u, have))
        })
    }

    /// Subtracts `other` (saturating at zero; callers check `contains` first).
    #[inline]
    pub fn subtract(&mut self, other: &ResourceSet) {
        self.cpu = self.cpu.saturating_sub(other.cpu);
        self.gpu = self.gpu.saturating_sub(other.gpu);
        for (n, u) in &other.custom {
            let cur = self.units(n);
            self.set_units(n, cur.saturating_sub(*u));
        }
    }

    /// Adds `other`, saturating at the largest amount: a node may announce any amount, and
    /// an overflow must not take the head down.
    #[inline]
    pub fn add(&mut self, other: &ResourceSet) {
        self.cpu = self.cpu.saturating_add(other.cpu);
        self.gpu = self.gpu.saturating_add(other.gpu);
        for (n, u) in &other.custom {
            let cur = self.units(n);
            self.set_units(n, cur.saturating_add(*u));
        }
    }

    /// [`ResourceSet::utilization`] once `need` is taken from `self` (what is available), with
    /// no name lookup for CPUs and GPUs: placement asks it of every node it considers.
    pub fn utilization_after(&self, need: &ResourceSet, total: &ResourceSet) -> f64 {
        let used = |avail: u64, need: u64, total: u64| {
            1.0 - avail.saturating_sub(need) as f64 / total as f64
        };
        let mut most: f64 = 0.0;
        if total.cpu > 0 {
            most = most.max(used(self.cpu, need.cpu, total.cpu));
        }
        if total.gpu > 0 {
            most = most.max(used(self.gpu, need.gpu, total.gpu));
        }
        for (n, t) in &total.custom {
            most = most.max(used(self.units(n), need.units(n), *t));
        }
        most
    }

    /// The largest used/total fraction over the resources of `total` (0.0 = idle, 1.0 = full),
    /// where `self` is what is still available.
    pub fn utilization(&self, total: &ResourceSet) -> f64 {
        self.utilization_after(&ResourceSet::new(), total)
    }
}

impl fmt::Display for ResourceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (n, u) in self.iter_units() {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{}={}", n.to_ascii_lowercase(), from_units(u))?;
        }
        if first {
            f.write_str("nothing")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ResourceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{self}}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilization_after_a_task_is_that_of_what_is_left() {
        let total = ResourceSet::new()
            .with("CPU", 8.0)
            .with("GPU", 2.0)
            .with("disk", 4.0);
        let available = ResourceSet::new()
            .with("CPU", 6.0)
            .with("GPU", 2.0)
            .with("disk", 1.0);
        for need in [
            ResourceSet::new().with("CPU", 1.0),
            ResourceSet::new().with("CPU", 2.0).with("GPU", 1.0),
            ResourceSet::new().with("disk", 1.0),
            ResourceSet::new().with("CPU", 7.0).with("other", 1.0),
        ] {
            let mut left = available.clone();
            left.subtract(&need);
            assert_eq!(
                available.utilization_after(&need, &total),
                left.utilization(&total),
                "{need}"
            );
        }
    }

    #[test]
    fn fractional_amounts_add_up_exactly() {
        let mut avail = ResourceSet::cpus(1.0);
        let tenth = ResourceSet::cpus(0.1);
        for _ in 0..10 {
            assert!(avail.contains(&tenth));
            avail.subtract(&tenth);
        }
        assert!(avail.is_empty());
        assert!(!avail.contains(&tenth));
        for _ in 0..10 {
            avail.add(&tenth);
        }
        assert_eq!(avail, ResourceSet::cpus(1.0));
    }

    #[test]
    fn custom_resources_and_shortfall() {
        let node = ResourceSet::cpus(4.0).with("tpu", 2.0);
        let need = ResourceSet::cpus(1.0).with("tpu", 0.5).with("gpu", 1.0);
        assert_eq!(need.get("GPU"), 1.0);
        let (name, want, have) = node.first_shortfall(&need).unwrap();
        assert_eq!((name, want, have), ("GPU", RESOURCE_SCALE, 0));
        assert_eq!(need.to_string(), "cpu=1,gpu=1,tpu=0.5");
    }

    #[test]
    fn utilization_is_the_fullest_resource() {
        let total = ResourceSet::cpus(4.0).with("gpu", 2.0);
        let mut avail = total.clone();
        avail.subtract(&ResourceSet::cpus(1.0).with("gpu", 2.0));
        assert_eq!(avail.utilization(&total), 1.0);
    }
}
