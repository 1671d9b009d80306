//! The sliding minute of rpm and tpm, kept in one-second buckets: a request
//! (or token) counts from its second until 61 seconds later, so no 60-second
//! span ever holds more than the limit, and `retry-after` is the number of
//! seconds until enough buckets have left the window.

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds a bucket stays in the window after its own second (see the module doc).
pub const WINDOW_SECS: u64 = 60;

/// The current unix time in seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A sliding minute of one-second buckets (the embedded backend's window;
/// the Redis scripts keep the same buckets in a hash).
#[derive(Debug, Default, Clone)]
pub struct Window {
    buckets: VecDeque<(u64, u64)>,
    total: u64,
}

impl Window {
    fn prune(&mut self, now: u64) {
        while let Some(&(s, n)) = self.buckets.front() {
            if s + WINDOW_SECS >= now {
                break;
            }
            self.total -= n;
            self.buckets.pop_front();
        }
    }

    /// What the window holds at `now`.
    pub fn used(&mut self, now: u64) -> u64 {
        self.prune(now);
        self.total
    }

    /// Whether `asked` more fits under `limit` at `now`: `Err(Some(secs))`
    /// until it would, `Err(None)` when it never can (`asked > limit`).
    pub fn room(&mut self, now: u64, limit: u64, asked: u64) -> Result<(), Option<u64>> {
        self.prune(now);
        if self.total + asked <= limit {
            return Ok(());
        }
        if asked > limit {
            return Err(None);
        }
        let excess = self.total + asked - limit;
        let mut freed = 0;
        for &(s, n) in &self.buckets {
            freed += n;
            if freed >= excess {
                return Err(Some((s + WINDOW_SECS + 1).saturating_sub(now).max(1)));
            }
        }
        Err(Some(WINDOW_SECS + 1))
    }

    /// Counts `n` at `now` (seconds).
    pub fn add(&mut self, now: u64, n: u64) {
        match self.buckets.back_mut() {
            Some((s, m)) if *s == now => *m += n,
            _ => self.buckets.push_back((now, n)),
        }
        self.total += n;
    }

    /// Moves the bucket of second `sec` by `delta` (settling a reservation);
    /// nothing when that bucket has left the window.
    pub fn adjust(&mut self, sec: u64, delta: i64) {
        if let Some((_, n)) = self.buckets.iter_mut().find(|(s, _)| *s == sec) {
            let new = (*n as i64 + delta).max(0) as u64;
            self.total = self.total - *n + new;
            *n = new;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_slides_by_the_second() {
        let mut w = Window::default();
        w.add(1000, 1);
        w.add(1030, 1);
        assert_eq!(w.room(1030, 2, 1), Err(Some(31)));
        // Crossing a calendar minute changes nothing: 1000 still counts at 1060.
        assert_eq!(w.room(1060, 2, 1), Err(Some(1)));
        assert_eq!(w.room(1061, 2, 1), Ok(()));
        assert_eq!(w.used(1061), 1);
        assert_eq!(w.room(1061, 2, 3), Err(None));
        w.add(1061, 5);
        w.adjust(1061, -3);
        assert_eq!(w.used(1061), 3);
        w.adjust(999, 100);
        assert_eq!(w.used(1091), 2);
        assert_eq!(w.used(1200), 0);
    }
}
