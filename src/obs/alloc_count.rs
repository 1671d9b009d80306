//! Heap allocation counting for the load benchmark (cargo feature
//! `alloc-count`): a global allocator that wraps the release one
//! (`util::allocator`, mimalloc) and counts every
//! allocation (a `realloc` counts as one), the bytes asked for and the bytes
//! given back. The counters are read by the metrics endpoint
//! (`switchboard_heap_allocations_total`, `switchboard_heap_allocated_bytes_total`,
//! `switchboard_heap_live_bytes`), so `benches/load/run.sh` can divide their
//! growth by the requests served, and the heap held by open streams by their
//! number.
//!
//! Each thread adds to its own cache-line-sized slot (claimed on its first
//! allocation), so counting costs a thread-local read and two uncontended
//! atomic adds; threads beyond the slots share the last one. The release
//! binary is built without the feature and pays nothing.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

const SLOTS: usize = 256;

#[repr(align(64))]
struct Slot {
    allocations: AtomicU64,
    bytes: AtomicU64,
    /// Bytes freed by this thread (an allocation may be freed on another).
    freed: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    allocations: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    freed: AtomicU64::new(0),
};
static COUNTS: [Slot; SLOTS] = [EMPTY; SLOTS];

/// Size classes of live bytes: class k holds allocations of 2^(k-1)+1 to
/// 2^k bytes (class 0: empty ones), the last class everything larger.
pub const CLASSES: usize = 24;
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicI64 = AtomicI64::new(0);
static LIVE_BY_CLASS: [AtomicI64; CLASSES] = [ZERO; CLASSES];

fn class(size: usize) -> usize {
    ((usize::BITS - size.saturating_sub(1).leading_zeros()) as usize).min(CLASSES - 1)
}

/// Live bytes per size class (see [`CLASSES`]): which allocations hold the heap.
pub fn live_by_class() -> [i64; CLASSES] {
    std::array::from_fn(|k| LIVE_BY_CLASS[k].load(Ordering::Relaxed))
}
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // usize::MAX: not claimed yet. A const initialiser and no destructor, so
    // reading it never allocates (the allocator is calling).
    static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn slot() -> &'static Slot {
    let i = MINE
        .try_with(|m| {
            let mut i = m.get();
            if i == usize::MAX {
                i = NEXT_SLOT.fetch_add(1, Ordering::Relaxed).min(SLOTS - 1);
                m.set(i);
            }
            i
        })
        .unwrap_or(SLOTS - 1);
    &COUNTS[i]
}

fn count(bytes: usize) {
    LIVE_BY_CLASS[class(bytes)].fetch_add(bytes as i64, Ordering::Relaxed);
    let s = slot();
    s.allocations.fetch_add(1, Ordering::Relaxed);
    s.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
}

fn count_free(bytes: usize) {
    LIVE_BY_CLASS[class(bytes)].fetch_sub(bytes as i64, Ordering::Relaxed);
    slot().freed.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// Allocations, bytes allocated and bytes freed since the process started,
/// over all threads (allocated less freed is the heap in use).
pub fn totals() -> (u64, u64, u64) {
    COUNTS.iter().fold((0, 0, 0), |(a, b, f), s| {
        (
            a + s.allocations.load(Ordering::Relaxed),
            b + s.bytes.load(Ordering::Relaxed),
            f + s.freed.load(Ordering::Relaxed),
        )
    })
}

/// mimalloc, counted.
pub struct Counting;

// SAFETY: every call is forwarded unchanged to mimalloc, which upholds the
// GlobalAlloc contract; counting touches only atomics and a const thread-local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        crate::util::allocator::Mimalloc.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        crate::util::allocator::Mimalloc.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count_free(layout.size());
        crate::util::allocator::Mimalloc.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        count_free(layout.size());
        crate::util::allocator::Mimalloc.realloc(ptr, layout, new_size)
    }
}
