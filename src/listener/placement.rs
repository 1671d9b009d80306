//! Which thread runs an accepted connection.
//!
//! On Pingora's work-stealing runtime (`work_stealing: true`) a
//! connection's task goes to the shared scheduler and any worker may poll
//! it. With `work_stealing: false` (Switchboard's default) Pingora runs one
//! single-threaded runtime per thread, and its `current_handle()` hands out
//! a thread at random (pingora-runtime 0.9.1 `lib.rs`, `current_handle`):
//! 64 keep-alive connections on two threads land 38 and 26 as often as not,
//! and the busier thread sets the tail. [`Placement`] sends each new
//! connection to the thread holding the fewest open connections, where it
//! stays, as its upstream connections do (the pool is per thread on such a
//! runtime: `upstream/client.rs`).
//!
//! May import: Pingora's runtime, tokio.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::runtime::{Handle, RuntimeFlavor};

/// Where a listener's connections run.
pub(super) struct Placement {
    /// Each thread of a runtime without work stealing, with its open
    /// connections; empty on a shared (work-stealing) runtime.
    threads: Box<[Thread]>,
}

struct Thread {
    handle: Handle,
    open: Arc<AtomicUsize>,
}

/// A connection counted on its thread until its task ends.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Placement {
    /// The placement for the runtime this is called on, which has `threads`
    /// threads (Pingora's `threads`).
    pub(super) fn new(threads: usize) -> Placement {
        if Handle::current().runtime_flavor() != RuntimeFlavor::CurrentThread || threads <= 1 {
            return Placement {
                threads: Box::new([]),
            };
        }
        // Pingora keeps its threads' handles to itself and gives one out at
        // random: draw until each thread has been seen (a few draws each;
        // the bound is never reached in practice, and a thread missed
        // only goes without new connections).
        let mut found: Vec<Handle> = Vec::with_capacity(threads);
        for _ in 0..threads.saturating_mul(64).max(1024) {
            let h = pingora_runtime::current_handle();
            if !found.iter().any(|f| f.id() == h.id()) {
                found.push(h);
                if found.len() == threads {
                    break;
                }
            }
        }
        if found.len() < threads {
            log::warn!(
                "connections spread over {} of {threads} threads",
                found.len()
            );
        }
        Placement {
            threads: found
                .into_iter()
                .map(|handle| Thread {
                    handle,
                    open: Arc::default(),
                })
                .collect(),
        }
    }

    /// Runs a connection's task on the thread with the fewest open
    /// connections (the first such), or on the shared runtime.
    pub(super) fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Some(thread) = self
            .threads
            .iter()
            .min_by_key(|t| t.open.load(Ordering::Relaxed))
        else {
            pingora_runtime::current_handle().spawn(task);
            return;
        };
        thread.open.fetch_add(1, Ordering::Relaxed);
        let open = Open(thread.open.clone());
        thread.handle.spawn(async move {
            let _open = open;
            task.await;
        });
    }

    /// Open connections on each thread (empty on a shared runtime).
    #[cfg(test)]
    fn open(&self) -> Vec<usize> {
        self.threads
            .iter()
            .map(|t| t.open.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `Placement::new(threads)` made on one of `rt`'s threads, as the
    /// accept loop makes it.
    fn placement_on(rt: &pingora_runtime::Runtime, threads: usize) -> Placement {
        let (made, placement) = std::sync::mpsc::channel();
        rt.get_handle().spawn(async move {
            let _ = made.send(Placement::new(threads));
        });
        placement.recv().expect("the runtime makes the placement")
    }

    #[test]
    fn a_work_stealing_runtime_is_left_to_share() {
        let rt = pingora_runtime::Runtime::new_steal(2, "placement-steal");
        assert!(placement_on(&rt, 2).threads.is_empty());
        rt.shutdown_timeout(Duration::from_secs(1));
    }

    #[test]
    fn connections_go_to_the_thread_with_fewest_and_are_counted_off_when_done() {
        let rt = pingora_runtime::Runtime::new_no_steal(3, "placement-test");
        let placement = placement_on(&rt, 3);
        let ids: Vec<_> = placement.threads.iter().map(|t| t.handle.id()).collect();
        // Every thread was found, each once.
        assert_eq!(ids.len(), 3);
        assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
        // Six connections held open land two on each thread, each on the
        // runtime it was counted on.
        let (release, held) = tokio::sync::watch::channel(false);
        let (ran_on, mut ran) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..6 {
            let mut held = held.clone();
            let ran_on = ran_on.clone();
            placement.spawn(async move {
                let _ = ran_on.send(Handle::current().id());
                let _ = held.wait_for(|r| *r).await;
            });
        }
        assert_eq!(placement.open(), vec![2, 2, 2]);
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push(ran.blocking_recv().expect("each task reports its thread"));
        }
        for id in &ids {
            assert_eq!(seen.iter().filter(|s| *s == id).count(), 2);
        }
        // Done: each count falls back to zero.
        release.send(true).unwrap();
        while placement.open() != vec![0, 0, 0] {
            std::thread::sleep(Duration::from_millis(5));
        }
        rt.shutdown_timeout(Duration::from_secs(1));
    }
}
