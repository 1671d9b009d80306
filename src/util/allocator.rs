//! The global allocator: mimalloc, asked for alignment only when an
//! allocation needs more than mimalloc gives every block.
//!
//! The `mimalloc` crate's allocator passes every layout to
//! `mi_malloc_aligned`. In the bundled mimalloc v3 that call is quick only
//! while its size class has a free block at hand that happens to be aligned
//! (and only up to 1 KiB); otherwise it takes the generic aligned path, which
//! for a block whose size class is not a power of two allocates a larger
//! block and aligns inside it (`mi_theap_malloc_zero_aligned_at_overalloc`),
//! even for an alignment of 8. Counted on the load benchmark's S1 (`bash
//! benches/load/instructions.sh`): 26 of a request's 89 allocations took
//! that path, at about 190 instructions each. mimalloc aligns every block of
//! 16 bytes or more to 16 (and every smaller one to its size, a multiple of
//! 8), so a layout asking for no more than that, and no more than its size,
//! gets plain `mi_malloc`, whose slow path is the size class's own.
//!
//! May import: nothing of ours.

#![allow(unsafe_code)]

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// The largest alignment every mimalloc block of at least that size has
/// (`MI_MAX_ALIGN_SIZE`).
const NATURAL: usize = 16;

/// mimalloc as the global allocator (see the module's docs).
pub struct Mimalloc;

/// Whether plain `mi_malloc` of `size` bytes is aligned to `align`.
#[inline(always)]
fn natural(align: usize, size: usize) -> bool {
    align <= NATURAL && align <= size
}

// SAFETY: mimalloc's functions uphold GlobalAlloc's contract (a block of at
// least the size asked for, or null); a layout is given to the aligned ones
// unless mimalloc's own alignment of a block of its size covers it (the
// module's docs), and `mi_free` takes a block from either.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if natural(layout.align(), layout.size()) {
            mi::mi_malloc(layout.size()) as *mut u8
        } else {
            mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if natural(layout.align(), layout.size()) {
            mi::mi_zalloc(layout.size()) as *mut u8
        } else {
            mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi::mi_free(ptr as *mut c_void)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // The block keeps the layout's alignment, for its new size.
        if natural(layout.align(), new_size) {
            mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8
        } else {
            mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every layout comes back aligned as asked, zeroed when asked, and keeps
    /// its bytes through a realloc that grows it out of its size class.
    #[test]
    fn blocks_are_aligned_as_asked_and_keep_their_bytes() {
        let heap = Mimalloc;
        for align in [1usize, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for size in [
                1usize, 3, 8, 12, 16, 24, 40, 48, 100, 1000, 1025, 4100, 70_000,
            ] {
                let layout = Layout::from_size_align(size, align).unwrap();
                unsafe {
                    let p = heap.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    std::ptr::write_bytes(p, 0xA5, size);
                    let q = heap.realloc(p, layout, size * 3 + 1);
                    assert_eq!(q as usize % align, 0, "realloc size {size} align {align}");
                    assert!((0..size).all(|i| *q.add(i) == 0xA5));
                    heap.dealloc(q, Layout::from_size_align(size * 3 + 1, align).unwrap());
                    let z = heap.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    heap.dealloc(z, layout);
                }
            }
        }
    }
}
