//! Which GPUs of a node a task holds, not only how many.
//!
//! A node's `GPU` amount is a count; its GPUs are also slots with ids (`--gpu-ids`, what
//! `nvidia-smi -L` lists, else `0..n`), each with a free fraction. A task needing `g` GPUs takes
//! `floor(g)` whole free slots (lowest first) and, for a fractional rest, the fullest slot
//! that still has room for it (so fractions pack onto one GPU and leave whole ones whole, as
//! Ray does). Placement asks [`GpuSlots::fits`] as well as the count, so a node whose free GPU
//! total is enough but split across slots (two halves) does not take a task needing one
//! whole GPU.

use std::sync::Arc;

use starling_proto::RESOURCE_SCALE;

/// A node's GPUs: ids and free fixed-point units per GPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GpuSlots {
    ids: Vec<Arc<str>>,
    free: Vec<u64>,
}

/// What one task holds: `(slot, units)` pairs.
pub(crate) type GpuGrant = Vec<(u16, u64)>;

impl GpuSlots {
    /// `units` of GPU (fixed-point, rounded up to whole GPUs) named by `ids`; GPUs past the
    /// given ids get the lowest numbers none of them has, extra ids are dropped.
    pub(crate) fn new(units: u64, ids: &[String]) -> Self {
        let count = units.div_ceil(RESOURCE_SCALE) as usize;
        let mut ids: Vec<Arc<str>> = ids
            .iter()
            .take(count)
            .map(|id| Arc::from(id.as_str()))
            .collect();
        let mut n = 0usize;
        while ids.len() < count {
            let id = n.to_string();
            if !ids.iter().any(|x| **x == *id) {
                ids.push(Arc::from(id));
            }
            n += 1;
        }
        GpuSlots {
            free: vec![RESOURCE_SCALE; ids.len()],
            ids,
        }
    }

    /// The slots a task needing `units` would take now, or `None` if they are not free.
    fn plan(&self, units: u64) -> Option<GpuGrant> {
        if units == 0 {
            return Some(Vec::new());
        }
        let whole = (units / RESOURCE_SCALE) as usize;
        let rest = units % RESOURCE_SCALE;
        let mut grant: GpuGrant = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, f)| **f == RESOURCE_SCALE)
            .take(whole)
            .map(|(i, _)| (i as u16, RESOURCE_SCALE))
            .collect();
        if grant.len() < whole {
            return None;
        }
        if rest > 0 {
            let taken = |i: usize| grant.iter().any(|(s, _)| *s as usize == i);
            let best = (0..self.free.len())
                .filter(|&i| !taken(i) && self.free[i] >= rest)
                .min_by_key(|&i| (self.free[i], i))?;
            grant.push((best as u16, rest));
        }
        Some(grant)
    }

    /// Whether a task needing `units` can take its GPUs now.
    pub(crate) fn fits(&self, units: u64) -> bool {
        units == 0 || self.plan(units).is_some()
    }

    /// Takes the GPUs for a task needing `units` (`None`: they are not free; nothing taken).
    pub(crate) fn take(&mut self, units: u64) -> Option<GpuGrant> {
        let grant = self.plan(units)?;
        for (slot, u) in &grant {
            self.free[*slot as usize] -= u;
        }
        Some(grant)
    }

    /// Gives back what [`GpuSlots::take`] granted (slots the node no longer has are skipped).
    pub(crate) fn give(&mut self, grant: &GpuGrant) {
        for (slot, u) in grant {
            if let Some(f) = self.free.get_mut(*slot as usize) {
                *f = (*f + u).min(RESOURCE_SCALE);
            }
        }
    }

    /// The ids of the GPUs in `grant`, in slot order.
    pub(crate) fn ids(&self, grant: &GpuGrant) -> Vec<Arc<str>> {
        grant
            .iter()
            .filter_map(|(slot, _)| self.ids.get(*slot as usize).cloned())
            .collect()
    }

    /// The same GPUs again (a node that registers again), with what running tasks hold still
    /// taken.
    pub(crate) fn renew<'a>(
        units: u64,
        ids: &[String],
        held: impl Iterator<Item = &'a GpuGrant>,
    ) -> Self {
        let mut slots = GpuSlots::new(units, ids);
        for grant in held {
            for (slot, u) in grant {
                if let Some(f) = slots.free.get_mut(*slot as usize) {
                    *f = f.saturating_sub(*u);
                }
            }
        }
        slots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = RESOURCE_SCALE;

    impl GpuSlots {
        fn take_all_ids(&self) -> Vec<String> {
            self.ids.iter().map(|s| s.to_string()).collect()
        }
    }

    #[test]
    fn whole_gpus_are_distinct_and_come_back() {
        let mut g = GpuSlots::new(2 * S, &[]);
        let a = g.take(S).unwrap();
        let b = g.take(S).unwrap();
        assert_eq!(g.ids(&a), [Arc::from("0")]);
        assert_eq!(g.ids(&b), [Arc::from("1")]);
        assert!(g.take(S).is_none(), "both are taken");
        g.give(&a);
        let again = g.take(S).unwrap();
        assert_eq!(g.ids(&again), [Arc::from("0")]);
    }

    #[test]
    fn fractions_pack_onto_one_gpu_and_never_make_a_whole_one() {
        let mut g = GpuSlots::new(2 * S, &["3".into(), "5".into()]);
        let a = g.take(S / 2).unwrap();
        let b = g.take(S / 4).unwrap();
        assert_eq!(g.ids(&a), g.ids(&b), "fractions share the fullest GPU");
        assert_eq!(g.ids(&a), [Arc::from("3")]);
        let whole = g.take(S).unwrap();
        assert_eq!(g.ids(&whole), [Arc::from("5")]);
        // A quarter of GPU 3 is left: not a whole GPU, though a quarter more fits.
        assert!(!g.fits(S));
        assert!(g.fits(S / 4));
        assert!(!g.fits(S / 2));
    }

    #[test]
    fn gpus_past_the_given_ids_get_numbers_none_has() {
        let g = GpuSlots::new(3 * S, &["1".into()]);
        let all = g.take_all_ids();
        assert_eq!(all, ["1", "0", "2"]);
    }

    #[test]
    fn one_and_a_half_takes_a_whole_gpu_and_half_of_another() {
        let mut g = GpuSlots::new(2 * S, &[]);
        let grant = g.take(S + S / 2).unwrap();
        assert_eq!(grant, [(0, S), (1, S / 2)]);
        assert!(g.fits(S / 2));
        assert!(!g.fits(S / 2 + 1));
    }

    #[test]
    fn a_node_that_registers_again_keeps_what_its_tasks_hold() {
        let mut g = GpuSlots::new(2 * S, &[]);
        let held = g.take(S).unwrap();
        let again = GpuSlots::renew(2 * S, &[], [&held].into_iter());
        assert_eq!(again, g);
    }
}
