//! File descriptors: the one resource an NF must never run out of. Each SBI connection, the
//! store's database and WAL files, each Diameter peer and each outgoing connection take one; when
//! accept() exhausts them, the store can no longer open a file and every request fails (issue
//! #20: "unable to open database file"). So the soft RLIMIT_NOFILE is raised to the hard limit at
//! start, and the SBI server caps its connections below it, keeping a reserve for the rest.

/// The soft and hard RLIMIT_NOFILE of this process.
// `rlim_t` is u64 on 64-bit Linux and u32 elsewhere: the casts are needed somewhere.
#[allow(clippy::unnecessary_cast)]
pub fn nofile_limit() -> std::io::Result<(u64, u64)> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((lim.rlim_cur as u64, lim.rlim_max as u64))
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (a process may always do that) and returns
/// (old soft limit, new soft limit). Idempotent: a second call changes nothing.
#[allow(clippy::unnecessary_cast)]
pub fn raise_nofile_limit() -> std::io::Result<(u64, u64)> {
    let (soft, hard) = nofile_limit()?;
    if soft >= hard {
        return Ok((soft, soft));
    }
    let lim = libc::rlimit { rlim_cur: hard as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: setrlimit reads the struct we pass.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((soft, hard))
}

/// Descriptors kept out of the SBI server's reach by default: the store (database, WAL and
/// shared-memory files, one set per connection of its pool), Diameter peers, connections to
/// other NFs, logs, and the runtime's own (epoll, eventfd, timerfd).
pub const DEFAULT_RESERVE: u64 = 256;

/// The connection cap derived from the soft limit: `limit - reserve`, at least 16 (a limit so
/// low that nothing is left after the reserve still serves a few connections).
pub fn default_max_connections(reserve: u64) -> usize {
    let soft = nofile_limit().map_or(1024, |(soft, _)| soft);
    // RLIM_INFINITY is u64::MAX: cap what is derived from it at something sane.
    soft.saturating_sub(reserve).clamp(16, 1 << 20) as usize
}
