//! Waiting for a request's intended send time, precisely and without burning the generator's CPU.
//!
//! tokio's timer wheel has a 1 ms resolution: sleeping to the due time makes sends up to 1 ms
//! late, and since latency is measured from the due time, that lateness would be reported as NF
//! latency. The kit's first fix spun on `yield_now` for the last stretch, which kept the
//! generator's core at ~100 % whatever the rate (so "generator saturated" meant nothing) and
//! took CPU from the tasks reading answers. A `timerfd` armed for the remaining time is a kernel
//! high-resolution timer: the runtime sleeps in epoll like any other wait and wakes within the
//! machine's wake-up latency (tens of µs), the same wake-up an external tool such as h2load pays.
//!
//! A wait shorter than [`EARLY_BY`] is not waited: arming the timer and waking costs more than
//! that, and a spin to fill it is CPU taken from the tasks reading answers. Such a request
//! leaves up to `EARLY_BY` before its due time; the engine then times its latency from the
//! actual send, so it is never reported shorter than it was.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// Below this, a wait is not waited (see the module comment).
pub const EARLY_BY: Duration = Duration::from_micros(20);

/// A one-shot high-resolution timer for the dispatcher (one per dispatcher: `until` needs
/// `&mut self`).
pub struct Pacer {
    fd: AsyncFd<OwnedFd>,
    /// Waits that slept on the timer (the rest were already due, or spun briefly).
    pub sleeps: u64,
}

impl Pacer {
    /// Must be called inside a tokio runtime with I/O enabled.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the returned descriptor is checked and then owned.
        let raw = unsafe {
            libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC)
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an OwnedFd keeps its descriptor open and unchanged until it drops with the
        // AsyncFd.
        let fd = unsafe { AsyncFd::register(fd) }.map_err(io::Error::from)?;
        Ok(Self { fd, sleeps: 0 })
    }

    /// Returns at `due`, or up to [`EARLY_BY`] before it, or at once when it has passed,
    /// having slept in the runtime meanwhile.
    pub async fn until(&mut self, due: Instant) -> io::Result<()> {
        loop {
            let now = Instant::now();
            if now + EARLY_BY > due {
                return Ok(());
            }
            let left = due - now;
            self.arm(left)?;
            self.sleeps += 1;
            let mut ready = self.fd.readable().await?;
            // Consume the expiration, then forget the readiness: the next expiration is a new
            // edge. A stale readiness reads nothing (WouldBlock) and the loop re-arms.
            let read = ready.try_io(|fd| {
                let mut expirations = 0u64;
                // SAFETY: reads 8 bytes into a local u64, as timerfd(2) defines.
                let n =
                    unsafe { libc::read(fd.as_raw_fd(), (&mut expirations as *mut u64).cast(), 8) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            if let Ok(result) = read {
                result?;
                ready.clear_ready();
            }
        }
    }

    fn arm(&self, after: Duration) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a fully initialised itimerspec; no old value wanted.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn waits_until_the_instant_without_spinning_the_whole_time() {
        let mut p = Pacer::new().unwrap();
        // Already due: returns at once, no sleep.
        p.until(Instant::now() - Duration::from_millis(1)).await.unwrap();
        assert_eq!(p.sleeps, 0);
        let t0 = Instant::now();
        let cpu0 = thread_cpu();
        for i in 1..=20u64 {
            let due = t0 + Duration::from_micros(2_500 * i);
            p.until(due).await.unwrap();
            assert!(Instant::now() + EARLY_BY >= due, "returned too early at step {i}");
        }
        let wall = t0.elapsed();
        let cpu = thread_cpu() - cpu0;
        assert!(wall >= Duration::from_millis(50), "{wall:?}");
        // Each 2.5 ms wait sleeps on the timer, unless a late wake-up on a busy machine left
        // less than EARLY_BY for the next one.
        assert!(p.sleeps >= 15, "{} sleeps", p.sleeps);
        // 50 ms of waiting must not be 50 ms of CPU (a spin would be).
        assert!(cpu < wall / 2, "cpu {cpu:?} over {wall:?}");
    }

    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: valid pointer to a local timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
}
