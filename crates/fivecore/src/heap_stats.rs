//! `--features heap-stats`: the bytes the process's Rust heap holds, counted at each allocation
//! and free, logged once a minute beside what the OS counts (`RssAnon`).
//!
//! A heap profiler needs the system allocator (heaptrack hooks malloc) and slows the NFs below
//! the rates where the soak's slow growth of anonymous memory shows. This counts under mimalloc,
//! at full rate, and answers the first question about such a growth: do live allocations grow
//! (a structure keeps more), or only the memory the allocator holds for them (fragmentation)?
//! It costs an atomic add per allocation and per free: for diagnosis, not for measured figures.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

const SHARDS: usize = 32;

/// One counter per cache line, so threads on different shards do not share one.
#[repr(align(64))]
struct Shard(AtomicI64);

static LIVE: [Shard; SHARDS] = [const { Shard(AtomicI64::new(0)) }; SHARDS];
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialised and without a destructor: usable from inside the allocator.
    static MY_SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn shard() -> &'static AtomicI64 {
    let i = MY_SHARD
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS);
            }
            s.get()
        })
        .unwrap_or(0);
    &LIVE[i].0
}

/// Bytes allocated and not yet freed, every thread together.
pub fn live_bytes() -> i64 {
    LIVE.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
}

/// The global allocator `A`, counted.
pub struct Counting<A>(pub A);

// SAFETY: every call goes to `A` unchanged; the counters only observe sizes.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            shard().fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as alloc.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            shard().fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shard().fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as alloc.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as alloc.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shard().fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

fn rss_anon_kib() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Logs the live heap and the anonymous RSS on stderr every `every`, from a thread of its own.
pub fn log_every(every: Duration) {
    let spawned = std::thread::Builder::new().name("heap-stats".into()).spawn(move || loop {
        std::thread::sleep(every);
        let live = live_bytes() as f64 / 1048576.0;
        let anon = rss_anon_kib().map_or(f64::NAN, |k| k as f64 / 1024.0);
        let sqlite = store::sqlite::alloc::used_bytes().map_or(f64::NAN, |b| b as f64 / 1048576.0);
        eprintln!(
            "fivecore heap-stats: live {live:.1} MiB (of it SQLite {sqlite:.1}), RssAnon {anon:.1} MiB"
        );
    });
    if let Err(e) = spawned {
        eprintln!("fivecore heap-stats: no logging thread: {e}");
    }
}

// Not with the feature on: the global allocator then moves the same counters meanwhile.
#[cfg(all(test, not(feature = "heap-stats")))]
mod tests {
    use super::*;

    #[test]
    fn counts_what_is_live() {
        let a = Counting(std::alloc::System);
        let before = live_bytes();
        let l = Layout::from_size_align(1000, 8).unwrap();
        // SAFETY: a non-zero layout; each block freed once with its layout.
        unsafe {
            let p = a.alloc(l);
            assert_eq!(live_bytes() - before, 1000);
            let q = a.realloc(p, l, 3000);
            assert_eq!(live_bytes() - before, 3000);
            a.dealloc(q, Layout::from_size_align(3000, 8).unwrap());
        }
        assert_eq!(live_bytes(), before);
    }
}
