//! The hash behind session affinity (docs/resilience.md "Session affinity"):
//! XXH3 with its fixed default seed, so that the same key gives the same
//! value in every process and every version of the gateway, and a pool of
//! instances sends one session to one upstream. Never used where an
//! attacker choosing keys could hurt (a key only steers its own requests).

use xxhash_rust::xxh3::Xxh3Default;

/// A hasher over pieces of bytes (no allocation: its buffer is inline).
#[derive(Clone, Default)]
pub struct Hasher {
    xxh: Xxh3Default,
    /// Bytes of the piece being written.
    len: u64,
}

impl Hasher {
    pub fn new() -> Hasher {
        Hasher::default()
    }

    /// Adds bytes to the piece being written.
    pub fn write(&mut self, bytes: &[u8]) {
        self.xxh.update(bytes);
        self.len += bytes.len() as u64;
    }

    /// Ends the piece being written with its length, so that pieces `ab`,
    /// `c` and `a`, `bc` hash differently.
    pub fn end_piece(&mut self) {
        self.xxh.update(&self.len.to_le_bytes());
        self.len = 0;
    }

    /// Adds one whole piece.
    pub fn piece(&mut self, bytes: &[u8]) {
        self.write(bytes);
        self.end_piece();
    }

    pub fn finish(&self) -> u64 {
        self.xxh.digest()
    }
}

/// The hash of one key.
pub fn key(bytes: &[u8]) -> u64 {
    let mut h = Hasher::new();
    h.piece(bytes);
    h.finish()
}

/// Mixes two hashes into a third with every bit depending on both
/// (splitmix64's finaliser over their xor): a session's score at one
/// upstream, from the session's key and the upstream's own hash.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.rotate_left(32);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_delimited_and_the_value_is_fixed() {
        let mut a = Hasher::new();
        a.piece(b"ab");
        a.piece(b"c");
        let mut b = Hasher::new();
        b.piece(b"a");
        b.piece(b"bc");
        assert_ne!(a.finish(), b.finish());
        // The same in every process and version: the seed is fixed (a
        // change here moves every session of every pool at an upgrade).
        assert_eq!(key(b"session-1"), 0x0f72_6de6_ba4b_0828);
        assert_ne!(key(b"session-1"), key(b"session-2"));
        assert_eq!(mix(1, 2), mix(1, 2));
        assert_ne!(mix(1, 2), mix(2, 1));
    }
}
