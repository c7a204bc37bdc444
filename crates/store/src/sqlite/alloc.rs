//! SQLite's own memory (page caches, statements, schema) from Rust's global allocator, counted.
//!
//! Linked as C, SQLite allocates with glibc's malloc, whose per-thread arenas fragment under its
//! pattern here: every store has a writer and four readers on threads of their own, and a
//! reader's page cache is emptied and refilled after each commit. In the soak of issue #27
//! (session s29, 20 minutes at 5,600/s) the process's anonymous memory rose 2-5 MB a minute,
//! ~60 % of it in glibc's arenas (SQLite's) and the rest in mimalloc's. Routed through the
//! global allocator (mimalloc in `fivecore`), SQLite's frees go back to size-class pages that are
//! reused, and the bytes it holds are known: `store_sqlite_memory_bytes`.
//!
//! [`install`] must run before SQLite is first used in the process and while no other thread
//! uses it (`sqlite3_config` is not thread-safe): `fivecore` calls it first thing in `main`.

use std::alloc::{alloc, dealloc, realloc, Layout};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use rusqlite::ffi;

/// Each block starts with its size; the block SQLite sees begins after it, keeping the 8-byte
/// alignment SQLite requires (16, as malloc gives).
const HEADER: usize = 16;
const ALIGN: usize = 16;

static USED: AtomicI64 = AtomicI64::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, ALIGN).ok()
}

/// # Safety
/// `base` is the start of a block this module allocated.
unsafe fn user(base: *mut u8, size: usize) -> *mut c_void {
    // SAFETY: the block is at least HEADER bytes and ALIGN-aligned, so the size fits at its start.
    unsafe {
        base.cast::<usize>().write(size);
        base.add(HEADER).cast()
    }
}

/// # Safety
/// `p` came from [`x_malloc`] or [`x_realloc`] and was not freed.
unsafe fn base_and_size(p: *mut c_void) -> (*mut u8, usize) {
    // SAFETY: per the contract, HEADER bytes before `p` hold the block's size.
    unsafe {
        let base = p.cast::<u8>().sub(HEADER);
        (base, base.cast::<usize>().read())
    }
}

unsafe extern "C" fn x_malloc(n: c_int) -> *mut c_void {
    let Some(l) = usize::try_from(n).ok().and_then(layout) else { return std::ptr::null_mut() };
    // SAFETY: the layout has a non-zero size (HEADER at least).
    let base = unsafe { alloc(l) };
    if base.is_null() {
        return std::ptr::null_mut();
    }
    USED.fetch_add(l.size() as i64, Ordering::Relaxed);
    // SAFETY: a fresh block of this layout.
    unsafe { user(base, l.size() - HEADER) }
}

unsafe extern "C" fn x_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: SQLite frees only what it got from x_malloc / x_realloc.
    let (base, size) = unsafe { base_and_size(p) };
    let l = layout(size).expect("a size this module allocated");
    USED.fetch_sub(l.size() as i64, Ordering::Relaxed);
    // SAFETY: allocated with this layout.
    unsafe { dealloc(base, l) }
}

unsafe extern "C" fn x_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    if p.is_null() {
        // SAFETY: as malloc.
        return unsafe { x_malloc(n) };
    }
    let Some(new) = usize::try_from(n).ok().and_then(layout) else { return std::ptr::null_mut() };
    // SAFETY: SQLite reallocates only what it got from this module.
    let (base, size) = unsafe { base_and_size(p) };
    let old = layout(size).expect("a size this module allocated");
    // SAFETY: `base` was allocated with `old`; the new size is non-zero and fits a Layout.
    let moved = unsafe { realloc(base, old, new.size()) };
    if moved.is_null() {
        return std::ptr::null_mut();
    }
    USED.fetch_add(new.size() as i64 - old.size() as i64, Ordering::Relaxed);
    // SAFETY: a live block of the new layout.
    unsafe { user(moved, new.size() - HEADER) }
}

unsafe extern "C" fn x_size(p: *mut c_void) -> c_int {
    if p.is_null() {
        return 0;
    }
    // SAFETY: SQLite asks only about its live allocations.
    let (_, size) = unsafe { base_and_size(p) };
    c_int::try_from(size).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn x_roundup(n: c_int) -> c_int {
    n.saturating_add(7) & !7
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {}

/// Makes SQLite allocate from the global allocator. Call it before SQLite is first used and
/// while no other thread can use it; later calls do nothing. Fails (SQLite keeps its own
/// allocator) when SQLite was already initialised.
pub fn install() -> Result<(), String> {
    if INSTALLED.load(Ordering::Acquire) {
        return Ok(());
    }
    let methods = ffi::sqlite3_mem_methods {
        xMalloc: Some(x_malloc),
        xFree: Some(x_free),
        xRealloc: Some(x_realloc),
        xSize: Some(x_size),
        xRoundup: Some(x_roundup),
        xInit: Some(x_init),
        xShutdown: Some(x_shutdown),
        pAppData: std::ptr::null_mut(),
    };
    // SAFETY: per this function's contract no other thread uses SQLite now; SQLite copies the
    // structure before returning.
    let rc = unsafe {
        ffi::sqlite3_config(ffi::SQLITE_CONFIG_MALLOC, &methods as *const ffi::sqlite3_mem_methods)
    };
    if rc != ffi::SQLITE_OK {
        return Err(format!(
            "sqlite3_config(SQLITE_CONFIG_MALLOC) answered {rc}: SQLite was already in use"
        ));
    }
    INSTALLED.store(true, Ordering::Release);
    Ok(())
}

/// Bytes SQLite holds (headers included) when [`install`] succeeded; None otherwise.
pub fn used_bytes() -> Option<u64> {
    INSTALLED.load(Ordering::Acquire).then(|| USED.load(Ordering::Relaxed).max(0) as u64)
}

/// Sets SQLite's soft heap limit for the whole process (0: none): past it, page caches recycle
/// their least recently used pages instead of allocating. Any thread, any time.
pub fn set_soft_limit(bytes: i64) {
    // SAFETY: thread-safe in SQLite; a non-negative argument sets the limit.
    unsafe { ffi::sqlite3_soft_heap_limit64(bytes.max(0)) };
}

/// SQLite's soft heap limit in bytes (0: none).
pub fn soft_limit() -> u64 {
    // SAFETY: a negative argument only reads the limit.
    u64::try_from(unsafe { ffi::sqlite3_soft_heap_limit64(-1) }).unwrap_or(0)
}
