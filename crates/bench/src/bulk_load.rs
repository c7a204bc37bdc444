//! The NFs' own bulk-load commands (`fivecore bsf preload`, `fivecore udr import`), run as
//! child processes of the executable the kit starts the NFs with, on the NF's data directory
//! before the NF starts. The kit never opens a store: it generates the rows and streams them
//! into the command's standard input, then reads the command's exit status and summary.
//!
//! The child is spawned from the calling thread, whose CPU affinity it inherits (as
//! [`crate::nfproc::spawn`]): call it from the unpinned main thread, not from a runtime thread
//! pinned with `--gen-cpus`. The rows are written by a thread of their own through a large
//! buffer, so generating them overlaps the child's parsing and writing.

use std::ffi::OsString;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

/// Buffer between the row generator and the child's standard input.
const FEED_BUFFER: usize = 1 << 20;
/// How much of the child's standard error is kept for an error message.
const STDERR_TAIL: usize = 8 << 10;

/// How a bulk-load command ended.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    /// The end of its standard error (progress, bad rows, summary, errors).
    pub stderr_tail: String,
    /// Wall seconds from spawn to exit.
    pub seconds: f64,
}

impl Finished {
    /// The exit code, or -1 when a signal ended the command.
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }
}

/// Runs `exe args...` with `feed` writing its standard input; with `progress`, its standard error
/// is passed through to ours as it comes (its progress bar), otherwise only kept for errors.
/// Fails when the command cannot be started or the rows could not all be written although it
/// exited 0; any exit status is returned for the caller to judge.
pub async fn run<F>(exe: &Path, args: &[OsString], progress: bool, feed: F) -> Result<Finished>
where
    F: FnOnce(&mut dyn Write) -> std::io::Result<()> + Send + 'static,
{
    let shown = command_line(exe, args);
    let t0 = Instant::now();
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting `{shown}`"))?;
    let stdin = child.stdin.take().context("the child's stdin")?;
    let mut stdout = child.stdout.take().context("the child's stdout")?;
    let mut stderr = child.stderr.take().context("the child's stderr")?;
    let writer = std::thread::Builder::new().name("bulk-load-feed".into()).spawn(move || {
        let mut w = BufWriter::with_capacity(FEED_BUFFER, stdin);
        feed(&mut w)?;
        // Dropping the writer closes the pipe: the child sees the end of its input.
        w.flush()
    })?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let errors = std::thread::spawn(move || {
        let mut tail = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match stderr.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if progress {
                        let mut e = std::io::stderr().lock();
                        let _ = e.write_all(&buf[..n]);
                        let _ = e.flush();
                    }
                    tail.extend_from_slice(&buf[..n]);
                    if tail.len() > 2 * STDERR_TAIL {
                        tail.drain(..tail.len() - STDERR_TAIL);
                    }
                }
            }
        }
        if tail.len() > STDERR_TAIL {
            tail.drain(..tail.len() - STDERR_TAIL);
        }
        String::from_utf8_lossy(&tail).into_owned()
    });
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let fed = writer.join().unwrap_or_else(|_| Err(std::io::Error::other("feed panicked")));
        let status = child.wait();
        let stdout = reader.join().unwrap_or_default();
        let stderr_tail = errors.join().unwrap_or_default();
        let _ = tx.send((fed, status, stdout, stderr_tail));
    });
    let (fed, status, stdout, stderr_tail) =
        rx.await.context("the bulk-load waiter thread stopped")?;
    let status = status.with_context(|| format!("waiting for `{shown}`"))?;
    let done = Finished { status, stdout, stderr_tail, seconds: t0.elapsed().as_secs_f64() };
    // A child that failed stops reading: its own error explains the broken pipe.
    if let (Err(e), true) = (fed, done.status.success()) {
        bail!("`{shown}` exited 0 but its input could not all be written: {e}");
    }
    Ok(done)
}

/// `exe args...` for messages.
pub fn command_line(exe: &Path, args: &[OsString]) -> String {
    std::iter::once(exe.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why a finished command is refused: its exit code and the end of what it said.
pub fn failure(what: &str, done: &Finished) -> anyhow::Error {
    let tail: Vec<&str> = done.stderr_tail.lines().rev().take(8).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    anyhow::anyhow!(
        "{what} exited {} after {:.1} s; its last output:\n{}",
        done.code(),
        done.seconds,
        tail.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sh -c` stands in for the NF command: it reads what the kit feeds it and answers.
    #[tokio::test]
    async fn feeds_stdin_and_collects_stdout_and_status() {
        let args: Vec<OsString> =
            ["-c", "wc -l; echo 'bad row' >&2; exit 3"].iter().map(OsString::from).collect();
        let done = run(Path::new("/bin/sh"), &args, false, |w| {
            for i in 0..100_000 {
                writeln!(w, "row {i}")?;
            }
            Ok(())
        })
        .await
        .unwrap();
        assert_eq!(done.stdout.trim(), "100000");
        assert_eq!(done.code(), 3);
        assert!(done.stderr_tail.contains("bad row"));
        let e = failure("the import", &done).to_string();
        assert!(e.contains("exited 3") && e.contains("bad row"), "{e}");
    }

    #[tokio::test]
    async fn a_child_that_stops_reading_is_its_own_failure_not_a_broken_pipe() {
        let args: Vec<OsString> = ["-c", "exit 1"].iter().map(OsString::from).collect();
        let done = run(Path::new("/bin/sh"), &args, false, |w| {
            for _ in 0..1_000_000 {
                w.write_all(b"0123456789012345678901234567890123456789\n")?;
            }
            Ok(())
        })
        .await
        .unwrap();
        assert_eq!(done.code(), 1);
    }
}
