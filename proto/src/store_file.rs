//! The header every node store file starts with, so a file is never taken for another object.
//!
//! A store file is `header ++ value`. The header names the object, the head incarnation
//! (`epoch`, random per head start, sent in `Welcome`) whose ids it is numbered in, the value's
//! length and the job it belongs to (a node's object service serves a job's credential only
//! that job's objects), and ends with a checksum of itself. Readers (same-host mappings, a node's
//! object service) check all four against what they expect before they use a byte of the value:
//! a file left by an earlier head, planted under a matching name, truncated or overwritten is
//! refused, not read as the object.
//!
//! Layout (little-endian, [`HEADER_LEN`] bytes, so the value starts 64-byte aligned):
//! `magic[8] object[8] epoch[8] size[8] job[8] checksum[8] reserved[16]`; the checksum is
//! FNV-1a 64 over the first 40 bytes.

/// Bytes before the value.
pub const HEADER_LEN: usize = 64;

/// Store files at least this long are reused when their object is freed: the node renames
/// such a file to [`free_name`] instead of deleting it, and the process that wrote it may
/// write its next object of up to that size into the same pages (already allocated, and
/// still mapped in the writer), once no process maps the freed object any more. A store
/// file's readers hold a shared `flock` on it for as long as they map it; a writer takes a
/// freed file back only while no such lock is held (see `starling_worker::store`).
pub const REUSE_MIN: u64 = 512 << 10;

/// The name prefix of freed store files waiting to be reused (`.free.<object>`).
pub const FREE_PREFIX: &str = ".free.";

/// The name a freed store file of `object` waits under, in the store directory, until its
/// writer reuses it or the node deletes it.
pub fn free_name(object: u64) -> String {
    format!("{FREE_PREFIX}{object}")
}

const MAGIC: &[u8; 8] = b"STRLOBJ2";

/// What a store file claims to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreHeader {
    /// The object id.
    pub object: u64,
    /// The epoch of the head that numbered it.
    pub epoch: u64,
    /// The value's length in bytes.
    pub size: u64,
    /// The job whose process made it.
    pub job: u64,
}

/// Why a store file was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HeaderError {
    /// Shorter than a header, or not starting with one.
    #[error("not a store file (no header)")]
    NoHeader,
    /// The header does not match its checksum.
    #[error("its header is corrupt")]
    Corrupt,
    /// It holds another object.
    #[error("it holds object {found}, not {expected}")]
    WrongObject {
        /// Wanted.
        expected: u64,
        /// Found.
        found: u64,
    },
    /// It was written under another head (an earlier start of it, whose ids repeat).
    #[error("it was written under head epoch {found:x}, not {expected:x}")]
    StaleEpoch {
        /// This head's.
        expected: u64,
        /// The file's.
        found: u64,
    },
    /// Its length is not what the header says.
    #[error("it has {found} value bytes, its header says {expected}")]
    WrongSize {
        /// The header's.
        expected: u64,
        /// The file's.
        found: u64,
    },
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl StoreHeader {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(MAGIC);
        out[8..16].copy_from_slice(&self.object.to_le_bytes());
        out[16..24].copy_from_slice(&self.epoch.to_le_bytes());
        out[24..32].copy_from_slice(&self.size.to_le_bytes());
        out[32..40].copy_from_slice(&self.job.to_le_bytes());
        let sum = fnv1a(&out[..40]);
        out[40..48].copy_from_slice(&sum.to_le_bytes());
        out
    }

    /// Reads a header from the start of `file` (at least its first [`HEADER_LEN`] bytes).
    pub fn decode(file: &[u8]) -> Result<StoreHeader, HeaderError> {
        let Some(h) = file.get(..HEADER_LEN) else {
            return Err(HeaderError::NoHeader);
        };
        if &h[..8] != MAGIC {
            return Err(HeaderError::NoHeader);
        }
        let word = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        if word(40) != fnv1a(&h[..40]) {
            return Err(HeaderError::Corrupt);
        }
        Ok(StoreHeader {
            object: word(8),
            epoch: word(16),
            size: word(24),
            job: word(32),
        })
    }

    /// Checks that a file of `file_len` bytes with this header is `object` of head `epoch`
    /// (`0`: any epoch, for a reader that does not know it).
    pub fn check(&self, object: u64, epoch: u64, file_len: u64) -> Result<(), HeaderError> {
        if self.object != object {
            return Err(HeaderError::WrongObject {
                expected: object,
                found: self.object,
            });
        }
        if epoch != 0 && self.epoch != epoch {
            return Err(HeaderError::StaleEpoch {
                expected: epoch,
                found: self.epoch,
            });
        }
        let found = file_len.saturating_sub(HEADER_LEN as u64);
        if found != self.size || file_len < HEADER_LEN as u64 {
            return Err(HeaderError::WrongSize {
                expected: self.size,
                found,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_and_refuses_what_does_not_match() {
        let h = StoreHeader {
            object: 7,
            epoch: 0xabc,
            size: 100,
            job: 3,
        };
        let bytes = h.encode();
        assert_eq!(StoreHeader::decode(&bytes), Ok(h));
        assert_eq!(h.check(7, 0xabc, 164), Ok(()));
        assert_eq!(h.check(7, 0, 164), Ok(()), "an epoch-blind reader");
        assert!(matches!(
            h.check(8, 0xabc, 164),
            Err(HeaderError::WrongObject { .. })
        ));
        assert!(matches!(
            h.check(7, 0xabd, 164),
            Err(HeaderError::StaleEpoch { .. })
        ));
        assert!(matches!(
            h.check(7, 0xabc, 163),
            Err(HeaderError::WrongSize { .. })
        ));
        let mut flipped = bytes;
        flipped[9] ^= 1;
        assert_eq!(StoreHeader::decode(&flipped), Err(HeaderError::Corrupt));
        // The job is covered too: a file cannot be moved to another job by editing it.
        let mut moved = bytes;
        moved[32] ^= 1;
        assert_eq!(StoreHeader::decode(&moved), Err(HeaderError::Corrupt));
        assert_eq!(
            StoreHeader::decode(
                b"hello, plain bytes of a value, no header here at all......................"
            ),
            Err(HeaderError::NoHeader)
        );
        assert_eq!(
            StoreHeader::decode(&bytes[..10]),
            Err(HeaderError::NoHeader)
        );
    }
}
