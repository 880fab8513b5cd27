//! The file → shard assignment.
//!
//! `shard = fnv1a64(file_path bytes) % shards`. FNV-1a is fixed forever (it is not
//! `std`'s randomized `DefaultHasher`), so the same path lands in the same shard on
//! every worker, every run and every release: parts written by an old worker stay
//! valid for `--resume` with a new one.

use crate::ShardId;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The shard of `file_path` among `shards` shards (`shards` ≥ 1).
pub fn shard_of(file_path: &[u8], shards: u32) -> ShardId {
    debug_assert!(shards > 0);
    ShardId((fnv1a64(file_path) % shards.max(1) as u64) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_the_published_function() {
        // Test vectors of FNV-1a 64 (Fowler/Noll/Vo reference).
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn shard_is_stable_and_in_range() {
        for n in [1u32, 2, 7, 64] {
            let s = shard_of(b"fs/ext4/inode.c", n);
            assert!(s.0 < n);
            assert_eq!(s, shard_of(b"fs/ext4/inode.c", n));
        }
    }
}
