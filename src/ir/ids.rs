//! Stable, deterministic identifiers (tool call ids for Gemini, fallback response ids).
//!
//! Gemini does not always give function calls an id. The Gemini codecs derive
//! one from where the call sits, so the same conversation always yields the
//! same ids (upstream prompt caches stay warm) and tool results can be matched
//! to their calls. Ids are hex digests of a 64-bit FNV-1a hash: short, made of
//! `[0-9a-f]`, valid in every protocol's id syntax.

/// 64-bit FNV-1a over a sequence of byte strings (each terminated by a 0xff
/// separator so `("ab","c")` and `("a","bc")` differ).
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for part in parts {
        for byte in part.iter().chain(std::iter::once(&0xff_u8)) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    hash
}

/// `prefix` followed by 16 hex digits of [`fnv1a`] over `parts`.
pub fn stable_id(prefix: &str, parts: &[&[u8]]) -> String {
    format!("{prefix}{:016x}", fnv1a(parts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_separated() {
        assert_eq!(stable_id("x_", &[b"a"]), stable_id("x_", &[b"a"]));
        assert_ne!(stable_id("", &[b"ab", b"c"]), stable_id("", &[b"a", b"bc"]));
        assert_eq!(stable_id("call_", &[b"q"]).len(), 5 + 16);
    }
}
