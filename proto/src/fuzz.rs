//! Bounded mutation fuzzing, for the tests of every decoder in the workspace.
//!
//! Each target starts from valid encodings (seeds), mutates them (bit flips, inserted, deleted
//! and duplicated ranges, truncation, crossover between seeds, and length prefixes spliced in
//! with huge values) and feeds the result to a decoder, which must return an error or a value:
//! never panic, never take long. A run lasts a bounded time, so it fits in `cargo test`:
//! `STARLING_FUZZ_SECS` sets the seconds per target (default: what the target asks for, a few
//! seconds), `STARLING_FUZZ_SEED` replays a run. Every run prints its figures
//! (`fuzz codec: 183000 inputs in 3.0 s, 0 panics`).
//!
//! The generator is a self-contained SplitMix64, so the crates that use this need no extra
//! dependency. This module is test support; nothing in a running cluster calls it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// A small, fast, seedable generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence depends only on `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True with probability `1/n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }

    /// An integer biased towards the values decoders get wrong: 0, 1, the edges of each width,
    /// and sometimes anything.
    pub fn edgy_u64(&mut self) -> u64 {
        const EDGES: [u64; 12] = [
            0,
            1,
            2,
            0x7f,
            0xff,
            0xffff,
            0xffff_ffff,
            u32::MAX as u64 + 1,
            1 << 40,
            1 << 60,
            i64::MAX as u64,
            u64::MAX,
        ];
        match self.below(3) {
            0 => *self.pick(&EDGES),
            1 => self.below(16) as u64,
            _ => self.next_u64(),
        }
    }

    /// A string: empty, short printable, long, or arbitrary (valid UTF-8) characters.
    pub fn string(&mut self) -> String {
        match self.below(6) {
            0 => String::new(),
            1 => "x".repeat(self.below(5000)),
            2 => (0..self.below(12))
                .map(|_| *self.pick(&['/', '.', '\0', '=', ' ', '\n', 'é', '\\', '-']))
                .collect(),
            3 => (0..self.below(16))
                .filter_map(|_| char::from_u32(self.next_u64() as u32 % 0x11_0000))
                .collect(),
            _ => (0..self.below(12))
                .map(|_| (b'a' + self.below(26) as u8) as char)
                .collect(),
        }
    }
}

/// A protobuf varint of `v`.
fn pb_varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// A length prefix claiming a huge size, in one of the encodings the workspace's decoders
/// read: bincode's varint (`0xfb`/`0xfc`/`0xfd` + little-endian), or a protobuf varint.
fn huge_prefix(rng: &mut Rng) -> Vec<u8> {
    let v = match rng.below(4) {
        0 => u32::MAX as u64,
        1 => 1 << 60,
        2 => u64::MAX,
        _ => rng.next_u64(),
    };
    match rng.below(4) {
        0 => {
            let mut b = vec![0xfd];
            b.extend_from_slice(&v.to_le_bytes());
            b
        }
        1 => {
            let mut b = vec![0xfc];
            b.extend_from_slice(&(v as u32).to_le_bytes());
            b
        }
        2 => {
            // A length-delimited protobuf field (tag 1..=15, wire type 2) with a huge length.
            let mut b = vec![((rng.below(15) as u8 + 1) << 3) | 2];
            b.extend(pb_varint(v));
            b
        }
        _ => pb_varint(v),
    }
}

/// A mutation of one of `seeds` (or, now and then, random bytes).
pub fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if seeds.is_empty() || rng.one_in(16) {
        let n = rng.below(64);
        return rng.bytes(n);
    }
    let mut b = rng.pick(seeds).clone();
    for _ in 0..1 + rng.below(4) {
        let len = b.len();
        match rng.below(9) {
            0 | 1 if len > 0 => {
                let i = rng.below(len);
                b[i] ^= 1 << rng.below(8);
            }
            2 if len > 0 => {
                let i = rng.below(len);
                b[i] = *rng.pick(&[0x00, 0x01, 0x7f, 0x80, 0xfb, 0xfc, 0xfd, 0xfe, 0xff]);
            }
            3 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let ins = rng.bytes(n);
                b.splice(at..at, ins);
            }
            4 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(16));
                b.drain(at..at + n);
            }
            5 => b.truncate(rng.below(len + 1)),
            6 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(32));
                let copy = b[at..at + n].to_vec();
                let to = rng.below(len + 1);
                b.splice(to..to, copy);
            }
            7 => {
                let at = rng.below(len + 1);
                let p = huge_prefix(rng);
                if rng.one_in(2) && at < len {
                    // Overwrite: keeps the bytes after the prefix where they were.
                    let end = (at + p.len()).min(len);
                    b.splice(at..end, p);
                } else {
                    b.splice(at..at, p);
                }
            }
            _ => {
                let other = rng.pick(seeds);
                let from = rng.below(other.len() + 1);
                let tail = other[from..].to_vec();
                let at = rng.below(len + 1);
                b.truncate(at);
                b.extend(tail);
            }
        }
    }
    b
}

/// The seconds each target runs: `STARLING_FUZZ_SECS` if set, else `default_secs`.
pub fn budget(default_secs: f64) -> Duration {
    let secs = std::env::var("STARLING_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(default_secs);
    Duration::from_secs_f64(secs)
}

/// The figures of one run.
#[derive(Clone, Copy, Debug)]
pub struct Report {
    /// Inputs tried.
    pub inputs: u64,
    /// How long the run took.
    pub elapsed: Duration,
    /// The slowest single input.
    pub slowest: Duration,
}

/// No single input may take this long (a decoder that loops on a claimed count, say).
const SLOW_INPUT: Duration = Duration::from_secs(2);

/// Runs `one` on fresh generators for the target's time budget (at least `min_inputs` times)
/// and prints the figures. A panic in `one`, or an input that takes over 2 s, fails the run
/// with the seed that replays it (`STARLING_FUZZ_SEED`).
pub fn run(
    name: &str,
    default_secs: f64,
    min_inputs: u64,
    mut one: impl FnMut(&mut Rng),
) -> Report {
    let budget = budget(default_secs);
    let base = std::env::var("STARLING_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let start = Instant::now();
    let mut inputs = 0u64;
    let mut slowest = Duration::ZERO;
    while inputs < min_inputs || start.elapsed() < budget {
        let seed = base.wrapping_add(inputs);
        let mut rng = Rng::new(seed);
        let t = Instant::now();
        if catch_unwind(AssertUnwindSafe(|| one(&mut rng))).is_err() {
            panic!(
                "fuzz {name}: input {inputs} panicked; replay with STARLING_FUZZ_SEED={seed} \
                 STARLING_FUZZ_SECS=0"
            );
        }
        let took = t.elapsed();
        assert!(
            took < SLOW_INPUT,
            "fuzz {name}: input {inputs} took {took:?}; replay with STARLING_FUZZ_SEED={seed} \
             STARLING_FUZZ_SECS=0"
        );
        slowest = slowest.max(took);
        inputs += 1;
    }
    let report = Report {
        inputs,
        elapsed: start.elapsed(),
        slowest,
    };
    eprintln!(
        "fuzz {name}: {} inputs in {:.1} s, 0 panics, slowest input {:.1} ms (seed {base})",
        report.inputs,
        report.elapsed.as_secs_f64(),
        report.slowest.as_secs_f64() * 1e3
    );
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_near_their_seeds_and_replay() {
        let seeds = vec![vec![1, 2, 3, 4, 5, 6, 7, 8]];
        let a: Vec<Vec<u8>> = (0..50).map(|i| mutate(&mut Rng::new(i), &seeds)).collect();
        let b: Vec<Vec<u8>> = (0..50).map(|i| mutate(&mut Rng::new(i), &seeds)).collect();
        assert_eq!(a, b, "a seed replays the same inputs");
        assert!(
            a.iter().any(|m| m != &seeds[0]),
            "mutations change something"
        );
        assert!(a.iter().all(|m| m.len() < 200), "mutations stay small");
        let r = run("self-test", 0.0, 10, |rng| {
            let _ = mutate(rng, &seeds);
        });
        // At least the minimum; exactly it unless `STARLING_FUZZ_SECS` asks for a longer run.
        if budget(0.0).is_zero() {
            assert_eq!(r.inputs, 10);
        } else {
            assert!(
                r.inputs >= 10,
                "{} inputs, fewer than the minimum",
                r.inputs
            );
        }
    }
}
