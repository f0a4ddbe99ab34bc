//! A shard's rows grouped by the tree node they sit at, for the level pass.
//!
//! Each class's block of words holds the row indices ordered so that the rows of one node are
//! contiguous (ascending within the group), then the number of groups, then per group
//! `(node, start, end)`. A level splits only the groups of the nodes being split (one read of
//! the split feature per row, a stable partition into left and right) and builds each
//! requested node's histogram from its own rows: rows of nodes that are not split or built are
//! not touched, and the histogram loop has no per-row test of which node a row is in.

use std::collections::HashMap;

/// The rows of one node: `order[start..end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    /// The tree node.
    pub node: u32,
    /// First index into the order.
    pub start: usize,
    /// One past the last.
    pub end: usize,
}

/// Words a class's block takes for `rows` rows whose tree has at most `leaves` leaves.
pub fn words(rows: usize, leaves: usize) -> usize {
    rows + 1 + 3 * groups_cap(rows, leaves)
}

fn groups_cap(rows: usize, leaves: usize) -> usize {
    // Empty groups are never stored, so there are at most as many as rows.
    rows.min(leaves).max(1)
}

/// One class's rows and groups, read from its block.
pub struct Partition<'a> {
    /// Row indices, grouped by node.
    pub order: &'a mut [u32],
    rest: &'a mut [u32],
    /// The groups (read on open, written back by [`Partition::store`]).
    pub groups: Vec<Group>,
}

impl<'a> Partition<'a> {
    /// The partition held in `block` (of [`words`]`(rows, ..)` words). The groups are trusted
    /// only as far as they fit: a block whose contents are not a stored partition must be
    /// [`reset`](Self::reset) or rebuilt [`group_by_position`](Self::group_by_position) first.
    pub fn open(block: &'a mut [u32], rows: usize) -> Self {
        let (order, rest) = block.split_at_mut(rows);
        let cap = (rest.len() - 1) / 3;
        let count = (rest[0] as usize).min(cap);
        let groups = (0..count)
            .map(|g| Group {
                node: rest[1 + 3 * g],
                start: (rest[2 + 3 * g] as usize).min(rows),
                end: (rest[3 + 3 * g] as usize).min(rows),
            })
            .collect();
        Partition {
            order,
            rest,
            groups,
        }
    }

    /// Every row at the root.
    pub fn reset(&mut self) {
        for (i, o) in self.order.iter_mut().enumerate() {
            *o = i as u32;
        }
        self.groups = vec![Group {
            node: 0,
            start: 0,
            end: self.order.len(),
        }];
    }

    /// Groups rows by the node `position(row)` says they are at.
    pub fn group_by_position(&mut self, position: impl Fn(usize) -> u32) {
        let mut rows: Vec<(u32, u32)> = (0..self.order.len())
            .map(|i| (position(i), i as u32))
            .collect();
        rows.sort_unstable();
        self.groups.clear();
        for (j, &(node, i)) in rows.iter().enumerate() {
            self.order[j] = i;
            match self.groups.last_mut() {
                Some(g) if g.node == node => g.end = j + 1,
                _ => self.groups.push(Group {
                    node,
                    start: j,
                    end: j + 1,
                }),
            }
        }
    }

    /// Where each node's group is in [`groups`](Self::groups).
    pub fn index(&self) -> HashMap<u32, usize> {
        self.groups
            .iter()
            .enumerate()
            .map(|(e, g)| (g.node, e))
            .collect()
    }

    /// Splits group `e` into `left` (rows for which `goes_right` is false, first) and
    /// `right`, keeping rows ascending in each; `tmp` is scratch space.
    pub fn split(
        &mut self,
        e: usize,
        (left, right): (u32, u32),
        tmp: &mut Vec<u32>,
        goes_right: impl Fn(usize) -> bool,
    ) {
        let g = self.groups[e];
        let rows = &mut self.order[g.start..g.end];
        tmp.clear();
        tmp.resize(rows.len(), 0);
        let (mut l, mut r) = (0usize, 0usize);
        // Branch-free: each row is written to both places, and only one cursor moves. `l`
        // never passes `j`, so no unread row is overwritten.
        for j in 0..rows.len() {
            let i = rows[j];
            let right = goes_right(i as usize);
            rows[l] = i;
            tmp[r] = i;
            l += usize::from(!right);
            r += usize::from(right);
        }
        rows[l..].copy_from_slice(&tmp[..r]);
        self.groups[e] = Group {
            node: left,
            start: g.start,
            end: g.start + l,
        };
        self.groups.push(Group {
            node: right,
            start: g.start + l,
            end: g.end,
        });
    }

    /// The rows of group `g`.
    pub fn rows(&self, g: &Group) -> &[u32] {
        &self.order[g.start..g.end]
    }

    /// Writes the groups back into the block (empty ones dropped).
    pub fn store(mut self) {
        self.groups.retain(|g| g.start < g.end);
        let cap = (self.rest.len() - 1) / 3;
        assert!(
            self.groups.len() <= cap,
            "{} row groups, room for {cap}",
            self.groups.len()
        );
        self.rest[0] = self.groups.len() as u32;
        for (e, g) in self.groups.iter().enumerate() {
            self.rest[1 + 3 * e] = g.node;
            self.rest[2 + 3 * e] = g.start as u32;
            self.rest[3 + 3 * e] = g.end as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups_of(block: &mut [u32], rows: usize) -> Vec<(u32, Vec<u32>)> {
        let p = Partition::open(block, rows);
        p.groups
            .iter()
            .map(|g| (g.node, p.rows(g).to_vec()))
            .collect()
    }

    #[test]
    fn splits_keep_rows_ascending_and_survive_a_store() {
        let rows = 10;
        let mut block = vec![0u32; words(rows, 8)];
        let mut tmp = Vec::new();
        {
            let mut p = Partition::open(&mut block, rows);
            p.reset();
            // Root -> 1 (even rows) and 2 (odd rows).
            p.split(0, (1, 2), &mut tmp, |i| i % 2 == 1);
            let at = p.index();
            // Node 2 -> 3 (rows < 5) and 4; node 1 stays.
            p.split(at[&2], (3, 4), &mut tmp, |i| i >= 5);
            p.store();
        }
        assert_eq!(
            groups_of(&mut block, rows),
            vec![
                (1, vec![0, 2, 4, 6, 8]),
                (3, vec![1, 3]),
                (4, vec![5, 7, 9])
            ]
        );
        // The same from positions.
        let pos = [1, 3, 1, 3, 1, 4, 1, 4, 1, 4];
        let mut other = vec![0u32; words(rows, 8)];
        let mut p = Partition::open(&mut other, rows);
        p.group_by_position(|i| pos[i]);
        p.store();
        assert_eq!(groups_of(&mut other, rows), groups_of(&mut block, rows));
    }

    #[test]
    fn empty_groups_are_dropped_and_garbage_is_clamped() {
        let rows = 4;
        let mut block = vec![u32::MAX; words(rows, 1 << 20)];
        assert_eq!(block.len(), rows + 1 + 3 * rows);
        {
            // Garbage: a count beyond the room, ranges beyond the rows; nothing panics.
            let p = Partition::open(&mut block, rows);
            assert!(p.groups.iter().all(|g| g.end <= rows));
        }
        let mut tmp = Vec::new();
        let mut p = Partition::open(&mut block, rows);
        p.reset();
        p.split(0, (1, 2), &mut tmp, |_| false);
        p.store();
        assert_eq!(groups_of(&mut block, rows), vec![(1, vec![0, 1, 2, 3])]);
    }
}
