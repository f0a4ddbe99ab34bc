//! [`IdTable`]: a map from ids to entries for ids that are handed out in runs, as task and
//! object ids are (a session counts its ids up, see [`crate::SESSION_SHIFT`]).
//!
//! Entries live in pages of [`PAGE`] consecutive ids, and a hash map finds a page by the id's
//! high bits. A hash map of entries costs each entry's size about twice over at its usual load
//! (a table doubles when it is seven-eighths full, so it is between 44 % and 88 % full), plus a
//! control byte; a page of consecutive ids is full while its ids are live, so a million queued
//! tasks take about half the memory, and lookups of ids made one after another touch the same
//! few cache lines. A page is freed when its last entry goes (the last one emptied is kept for
//! the next page needed).
//!
//! The cost is for ids that are not in runs: a page holds room for [`PAGE`] entries however
//! few of its ids are live (a session that keeps one object of each run of [`PAGE`] alive pays
//! [`PAGE`] times its entry size for it).

use std::fmt;

use crate::hash::IdMap;

/// Consecutive ids per page.
pub const PAGE: usize = 32;

/// An id an [`IdTable`] can hold: a `u64` number (every id type of this crate is one).
pub trait TableId: Copy {
    /// The number.
    fn number(self) -> u64;
    /// The id of a number.
    fn of(number: u64) -> Self;
}

struct Page<V> {
    live: u32,
    slots: [Option<V>; PAGE],
}

impl<V> Page<V> {
    fn new() -> Box<Self> {
        Box::new(Page {
            live: 0,
            slots: std::array::from_fn(|_| None),
        })
    }
}

/// A map from ids to `V`, paged by runs of ids; see the module docs.
pub struct IdTable<K, V> {
    pages: IdMap<u64, Box<Page<V>>>,
    /// The last page emptied (all its slots `None`), reused by the next page made: a table
    /// that holds one entry at a time (a driver's round trips) allocates no page per entry.
    spare: Option<Box<Page<V>>>,
    len: usize,
    _key: std::marker::PhantomData<K>,
}

impl<K, V> Default for IdTable<K, V> {
    fn default() -> Self {
        IdTable {
            pages: IdMap::default(),
            spare: None,
            len: 0,
            _key: std::marker::PhantomData,
        }
    }
}

#[inline]
fn split(n: u64) -> (u64, usize) {
    (n / PAGE as u64, (n % PAGE as u64) as usize)
}

/// Page number `page` of `pages`, made (or the kept `spare` used) if it has none.
fn page_for<'a, V>(
    pages: &'a mut IdMap<u64, Box<Page<V>>>,
    spare: &mut Option<Box<Page<V>>>,
    page: u64,
) -> &'a mut Page<V> {
    pages
        .entry(page)
        .or_insert_with(|| spare.take().unwrap_or_else(Page::new))
}

impl<K: TableId, V> IdTable<K, V> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entry of `id`.
    #[inline]
    pub fn get(&self, id: &K) -> Option<&V> {
        let (page, at) = split(id.number());
        self.pages.get(&page)?.slots[at].as_ref()
    }

    /// The entry of `id`, to change.
    #[inline]
    pub fn get_mut(&mut self, id: &K) -> Option<&mut V> {
        let (page, at) = split(id.number());
        self.pages.get_mut(&page)?.slots[at].as_mut()
    }

    /// Whether `id` has an entry.
    #[inline]
    pub fn contains_key(&self, id: &K) -> bool {
        self.get(id).is_some()
    }

    /// Sets the entry of `id`; returns the one it replaced.
    pub fn insert(&mut self, id: K, value: V) -> Option<V> {
        let (page, at) = split(id.number());
        let p = page_for(&mut self.pages, &mut self.spare, page);
        let old = p.slots[at].replace(value);
        if old.is_none() {
            p.live += 1;
            self.len += 1;
        }
        old
    }

    /// The entry of `id`, made with `make` if it has none.
    pub fn get_or_insert_with(&mut self, id: K, make: impl FnOnce() -> V) -> &mut V {
        let (page, at) = split(id.number());
        let p = page_for(&mut self.pages, &mut self.spare, page);
        let slot = &mut p.slots[at];
        if slot.is_none() {
            p.live += 1;
            self.len += 1;
        }
        slot.get_or_insert_with(make)
    }

    /// Takes the entry of `id` out; its page goes with its last entry.
    pub fn remove(&mut self, id: &K) -> Option<V> {
        let (page, at) = split(id.number());
        let p = self.pages.get_mut(&page)?;
        let old = p.slots[at].take()?;
        p.live -= 1;
        self.len -= 1;
        if p.live == 0 {
            let emptied = self.pages.remove(&page);
            if self.spare.is_none() {
                self.spare = emptied;
            }
        }
        Some(old)
    }

    /// Every entry with its id, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> + '_ {
        self.pages.iter().flat_map(|(page, p)| {
            p.slots.iter().enumerate().filter_map(move |(at, v)| {
                Some((K::of(page * PAGE as u64 + at as u64), v.as_ref()?))
            })
        })
    }

    /// Every entry, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.pages.values().flat_map(|p| p.slots.iter().flatten())
    }
}

impl<K: TableId + 'static, V: 'static> IntoIterator for IdTable<K, V> {
    type Item = (K, V);
    type IntoIter = Box<dyn Iterator<Item = (K, V)>>;

    /// Every entry with its id, in no particular order.
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.pages.into_iter().flat_map(|(page, p)| {
            p.slots
                .into_iter()
                .enumerate()
                .filter_map(move |(at, v)| Some((K::of(page * PAGE as u64 + at as u64), v?)))
        }))
    }
}

impl<K: TableId, V> std::ops::Index<&K> for IdTable<K, V> {
    type Output = V;

    /// The entry of `id`; panics if it has none.
    #[inline]
    fn index(&self, id: &K) -> &V {
        self.get(id).expect("an id with an entry")
    }
}

impl<K: TableId + fmt::Debug, V: fmt::Debug> fmt::Debug for IdTable<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ObjectId, TaskId};

    #[test]
    fn entries_come_and_go_and_pages_with_them() {
        let mut t: IdTable<TaskId, u64> = IdTable::new();
        let ids = [0u64, 1, 31, 32, 33, 1 << 40, (1 << 40) + 5, u64::MAX];
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(t.insert(TaskId(*id), i as u64), None);
        }
        assert_eq!(t.len(), ids.len());
        assert_eq!(t.insert(TaskId(31), 100), Some(2), "replaced");
        assert_eq!(t.len(), ids.len());
        assert_eq!(t[&TaskId(31)], 100);
        assert_eq!(t.get(&TaskId(2)), None);
        assert!(t.contains_key(&TaskId(u64::MAX)));
        *t.get_mut(&TaskId(33)).unwrap() += 1;
        assert_eq!(t.get(&TaskId(33)), Some(&5));
        let mut seen: Vec<(u64, u64)> = t.iter().map(|(k, v)| (k.0, *v)).collect();
        seen.sort_unstable();
        assert_eq!(
            seen,
            vec![
                (0, 0),
                (1, 1),
                (31, 100),
                (32, 3),
                (33, 5),
                (1 << 40, 5),
                ((1 << 40) + 5, 6),
                (u64::MAX, 7)
            ]
        );
        assert_eq!(t.values().count(), ids.len());
        for id in ids {
            *t.get_mut(&TaskId(id)).unwrap() = 0;
        }
        assert!(t.values().all(|v| *v == 0));
        *t.get_or_insert_with(TaskId(64), || 7) += 1;
        *t.get_or_insert_with(TaskId(64), || 100) += 1;
        assert_eq!(t.remove(&TaskId(64)), Some(9));
        for id in ids {
            assert_eq!(t.remove(&TaskId(id)), Some(0));
            assert_eq!(t.remove(&TaskId(id)), None, "removed once");
        }
        assert!(t.is_empty());
        assert!(t.pages.is_empty(), "a page goes with its last entry");
        assert!(t.spare.is_some(), "and one is kept for the next");
        t.insert(TaskId(1000), 1);
        assert!(t.spare.is_none(), "the kept page is used again");
        assert_eq!(
            t.iter().map(|(k, v)| (k.0, *v)).collect::<Vec<_>>(),
            vec![(1000, 1)]
        );
    }

    #[test]
    fn a_million_ids_in_runs_fill_their_pages() {
        let mut t: IdTable<ObjectId, [u64; 4]> = IdTable::new();
        for n in 0..1_000_000u64 {
            t.insert(ObjectId((3 << 40) + n), [n; 4]);
        }
        assert_eq!(t.pages.len(), 1_000_000usize.div_ceil(PAGE));
        assert_eq!(t.get(&ObjectId((3 << 40) + 777)), Some(&[777; 4]));
        for n in (0..1_000_000u64).step_by(2) {
            t.remove(&ObjectId((3 << 40) + n));
        }
        assert_eq!(t.len(), 500_000);
        assert_eq!(
            t.pages.len(),
            1_000_000usize.div_ceil(PAGE),
            "half-full pages stay"
        );
        let mut left: Vec<u64> = t.into_iter().map(|(k, v)| k.0 - v[0]).collect();
        left.dedup();
        assert_eq!(left, vec![3 << 40], "each entry under its own id");
    }
}
