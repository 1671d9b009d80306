//! Which thread runs an accepted connection.
//!
//! On Pingora's work-stealing runtime (`work_stealing: true`) a
//! connection's task goes to the shared scheduler and any worker may poll
//! it. With `work_stealing: false` (Switchboard's default) Pingora runs one
//! single-threaded runtime per thread, and its `current_handle()` hands out
//! a thread at random (pingora-runtime 0.9.1 `lib.rs`, `current_handle`):
//! 64 keep-alive connections on two threads land 36 and 28, or further
//! apart, about half the time, and the busier thread sets the tail. [`Placement`] sends each new
//! connection to the thread holding the fewest open connections, where it
//! stays, as its upstream connections do (the pool is per thread on such a
//! runtime: `upstream/client.rs`).
//!
//! May import: Pingora's runtime, tokio.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::TcpStream;
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

    /// Serves the accepted connection `tcp` (`serve(tcp)`) on the thread
    /// with the fewest open connections (the first such), or on the shared
    /// runtime. A socket is registered with the event loop of the runtime
    /// that accepted it; one served by another thread's runtime is taken
    /// off that loop and put on the serving thread's, so its reads and
    /// writes wake the thread that serves it (not another, which would
    /// then wake it across threads for every read).
    pub(super) fn spawn<F, Fut>(&self, tcp: TcpStream, serve: F)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some(thread) = self
            .threads
            .iter()
            .min_by_key(|t| t.open.load(Ordering::Relaxed))
        else {
            pingora_runtime::current_handle().spawn(serve(tcp));
            return;
        };
        thread.open.fetch_add(1, Ordering::Relaxed);
        let open = Open(thread.open.clone());
        if Handle::try_current().is_ok_and(|h| h.id() == thread.handle.id()) {
            thread.handle.spawn(async move {
                let _open = open;
                serve(tcp).await;
            });
            return;
        }
        let moved = match tcp.into_std() {
            Ok(s) => s,
            Err(e) => {
                log::debug!("a connection could not be moved to its thread: {e}");
                return;
            }
        };
        thread.handle.spawn(async move {
            let _open = open;
            match TcpStream::from_std(moved) {
                Ok(tcp) => serve(tcp).await,
                Err(e) => log::debug!("a connection could not be moved to its thread: {e}"),
            }
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
    fn connections_go_to_the_thread_with_fewest_are_served_there_and_counted_off_when_done() {
        let rt = pingora_runtime::Runtime::new_no_steal(3, "placement-test");
        let (ran_on, ran) = std::sync::mpsc::channel();
        let (made, placed) = std::sync::mpsc::channel();
        rt.get_handle().spawn(async move {
            let placement = Placement::new(3);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let mut clients = Vec::new();
            // Six connections held open land two on each thread.
            for i in 0..6u8 {
                let mut client = std::net::TcpStream::connect(addr).unwrap();
                std::io::Write::write_all(&mut client, &[i]).unwrap();
                clients.push(client);
                let (tcp, _) = listener.accept().await.unwrap();
                let ran_on = ran_on.clone();
                placement.spawn(tcp, move |mut tcp| async move {
                    // Served on its thread's runtime, the socket readable
                    // there: the client's byte, then its close.
                    let mut byte = [0u8; 1];
                    tokio::io::AsyncReadExt::read_exact(&mut tcp, &mut byte)
                        .await
                        .unwrap();
                    let _ = ran_on.send((Handle::current().id(), byte[0]));
                    let mut rest = Vec::new();
                    let _ = tokio::io::AsyncReadExt::read_to_end(&mut tcp, &mut rest).await;
                });
            }
            let _ = made.send((placement, clients));
        });
        let (placement, clients) = placed.recv().expect("the runtime places the connections");
        let ids: Vec<_> = placement.threads.iter().map(|t| t.handle.id()).collect();
        // Every thread was found, each once.
        assert_eq!(ids.len(), 3);
        assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
        assert_eq!(placement.open(), vec![2, 2, 2]);
        let mut seen: Vec<_> = (0..6)
            .map(|_| ran.recv().expect("each connection is served"))
            .collect();
        seen.sort_by_key(|(_, b)| *b);
        // In turn: the first thread with the fewest, so 0, 1, 2, 0, 1, 2.
        for (i, (id, byte)) in seen.iter().enumerate() {
            assert_eq!(usize::from(*byte), i);
            assert_eq!(*id, ids[i % 3], "connection {i}");
        }
        // Closed by their clients: each count falls back to zero.
        drop(clients);
        while placement.open() != vec![0, 0, 0] {
            std::thread::sleep(Duration::from_millis(5));
        }
        rt.shutdown_timeout(Duration::from_secs(1));
    }
}
