//! One fast hasher for the engine's hot maps: the `u64` ids (dense counters, spread by one
//! multiply) of the scheduler's tables and the object store, and the function names every
//! task looks up (eight bytes per multiply). Several times cheaper than SipHash on the
//! per-task path. Keys come from the engine itself (ids it counts, names compiled into the
//! binary), so they need no defence against chosen collisions.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The hasher; see the module docs.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl IdHasher {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().expect("eight bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(last));
        }
    }

    #[inline]
    fn write_u8(&mut self, b: u8) {
        self.mix(u64::from(b));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: the high bits, which hashbrown uses for its control bytes, depend on
        // every bit of the id.
        self.0 = (self.0 ^ n).wrapping_mul(Self::K);
    }
}

/// A `HashMap` on [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn names_that_differ_anywhere_hash_apart() {
        let h = BuildHasherDefault::<IdHasher>::default();
        let names = [
            "app::tasks::square#0123456789abcdef",
            "app::tasks::square#0123456789abcdee",
            "bpp::tasks::square#0123456789abcdef",
            "app::tasks::squar#0123456789abcdef",
            "app::tasks",
            "app::task",
        ];
        let hashes: Vec<u64> = names.iter().map(|n| h.hash_one(n)).collect();
        for i in 0..hashes.len() {
            for j in i + 1..hashes.len() {
                assert_ne!(hashes[i], hashes[j], "{} and {}", names[i], names[j]);
            }
        }
    }
}
