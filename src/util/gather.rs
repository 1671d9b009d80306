//! Body pieces gathered into one `Bytes`: a body that arrives in one piece
//! (most do) is kept as it came, without a copy; later pieces are joined
//! into one buffer. Used for request bodies, whole upstream answers and a
//! stream's held-back preamble.

use bytes::{Bytes, BytesMut};

/// Pieces read so far.
#[derive(Default)]
pub struct Gathered {
    /// The only piece, while there is one.
    first: Option<Bytes>,
    /// Every piece, once there are two.
    joined: BytesMut,
    /// The whole length, when known: the joined buffer is sized for it.
    expect: usize,
}

impl Gathered {
    /// Gathers a body expected to be `expect` bytes long (0: unknown).
    pub fn expecting(expect: usize) -> Gathered {
        Gathered {
            expect,
            ..Gathered::default()
        }
    }

    /// Adds the next piece.
    pub fn push(&mut self, piece: Bytes) {
        if self.first.is_none() && self.joined.is_empty() {
            self.first = Some(piece);
            return;
        }
        if let Some(first) = self.first.take() {
            self.joined
                .reserve(self.expect.max(first.len() + piece.len()));
            self.joined.extend_from_slice(&first);
        }
        self.joined.extend_from_slice(&piece);
    }

    /// Everything gathered so far.
    pub fn as_slice(&self) -> &[u8] {
        self.first.as_deref().unwrap_or(&self.joined)
    }

    /// Bytes gathered so far.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Whether nothing was gathered.
    pub fn is_empty(&self) -> bool {
        self.first.is_none() && self.joined.is_empty()
    }

    /// The whole body.
    pub fn finish(self) -> Bytes {
        self.first.unwrap_or_else(|| self.joined.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_piece_is_kept_and_pieces_are_joined() {
        let one = Bytes::from_static(b"whole");
        let mut g = Gathered::default();
        assert!(g.is_empty());
        g.push(one.clone());
        assert_eq!(g.len(), 5);
        let kept = g.finish();
        assert_eq!(kept.as_ptr(), one.as_ptr(), "a single piece is not copied");
        let mut g = Gathered::expecting(64);
        for p in ["ab", "", "cd", "e"] {
            g.push(Bytes::from(p));
        }
        assert_eq!(g.as_slice(), b"abcde");
        assert!(g.joined.capacity() >= 64);
        assert_eq!(&g.finish()[..], b"abcde");
    }
}
