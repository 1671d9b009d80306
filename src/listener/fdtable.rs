//! The process's table of open descriptors, grown up front when the
//! listeners start instead of a doubling at a time under load.
//!
//! Linux grows a process's descriptor table by doubling it when a new
//! descriptor does not fit (64, 128, 256, … entries), and in a process of
//! more than one thread each growth first waits for an RCU grace period
//! (`expand_fdtable` in the kernel's `fs/file.c`): several milliseconds in
//! which the thread that asked for the descriptor sleeps, and with it every
//! task queued on that worker. Measured on the benchmark's 100 open streams
//! with a new request every 10 ms: a non-blocking `accept4` that found no
//! connection asleep 8.9 ms until `rcu_preempt` woke it, and one new
//! request in a hundred got its first byte 9 to 12 ms late where the median
//! was 0.5 ms (nginx's workers are single-threaded processes and never
//! wait there). The table never shrinks, so one descriptor duplicated to
//! the highest number the connection cap may need, and closed at once,
//! makes room for all of them: 8 bytes of kernel memory and two bits per
//! entry (about 0.5 MiB at [`MOST`]), none of it in the process's RSS.
//!
//! May import: the parent module (the reserve), `libc`.

use std::os::fd::RawFd;

/// Entries reserved at most; past this many open descriptors the table
/// grows as before (65,536 covers 32,000 streams and their upstreams).
pub const MOST: usize = 65_536;

/// Grows the descriptor table to hold `entries` descriptors (at most
/// [`MOST`], and at most the soft `RLIMIT_NOFILE`: none past it can be
/// opened) by duplicating `fd`, any open descriptor. Each listener asks
/// for its own cap, in whatever order they start: a smaller reserve after
/// a larger one finds the room made and changes nothing. Returns the
/// table's size afterwards, or `None` when the kernel refused (nothing is
/// lost then but the head start: the table grows as it would have).
#[allow(unsafe_code)]
pub fn reserve(fd: RawFd, entries: usize) -> Option<usize> {
    let limit = super::nofile_soft_limit().map_or(1024, |n| usize::try_from(n).unwrap_or(MOST));
    let entries = entries.min(MOST).min(limit);
    let highest = libc::c_int::try_from(entries.checked_sub(1)?).ok()?;
    // SAFETY: `fcntl(F_DUPFD_CLOEXEC)` only reads `fd` and returns a new
    // descriptor of our own (or -1), which is closed at once and never
    // used otherwise; no memory is passed.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, highest) };
    if dup < 0 {
        log::debug!(
            "descriptor table not grown to {entries}: {}",
            std::io::Error::last_os_error()
        );
        return None;
    }
    // SAFETY: `dup` was just returned to this function and nothing else holds it.
    unsafe { libc::close(dup) };
    table_size()
}

/// The process's descriptor table size (`FDSize` in `/proc/self/status`).
pub fn table_size() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("FDSize:"))?;
    line.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn the_table_holds_the_reserve_and_no_descriptor_is_left_open() {
        let file = std::fs::File::open("/proc/self/status").unwrap();
        // Past the soft limit nothing can be opened: the reserve stops there.
        let limit = super::super::nofile_soft_limit().unwrap() as usize;
        let want = 4000.min(limit);
        let size = reserve(file.as_raw_fd(), want).expect("reserved");
        assert!(size >= want, "FDSize {size} < {want}");
        assert_eq!(table_size(), Some(size));
        let highest = format!("/proc/self/fd/{}", want - 1);
        assert!(
            !std::path::Path::new(&highest).exists(),
            "the duplicate is closed"
        );
        // A reserve of nothing (or of what the table holds) changes nothing.
        assert_eq!(reserve(file.as_raw_fd(), 0), None);
        assert_eq!(reserve(file.as_raw_fd(), 16), Some(size));
    }
}
