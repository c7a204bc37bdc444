//! The store's lock file, `<database>.lock`: who may replace the database under whom.
//!
//! SQLite's own locks say nothing once no transaction is open, and a process killed with
//! SIGKILL leaves `-wal` and `-shm` files behind that look the same as a live one's. So every
//! process that opens a store (the NF, a bulk load, `fivecore backup`) holds a shared `flock`
//! on this file for as long as it has the store open, and `fivecore restore` takes it
//! exclusively: it cannot while anything has the store open, and nothing can open the store
//! while a restore holds it. The kernel drops an `flock` with its process, so a killed NF does
//! not leave the store locked.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A held lock on a store's lock file; released when dropped.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
    path: PathBuf,
}

/// The lock file of the database at `db`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl StoreLock {
    /// Shares the lock with every other user of the store; fails at once, naming the store,
    /// while a restore holds it.
    pub fn shared(db: &Path) -> Result<StoreLock> {
        Self::take(db, libc::LOCK_SH)?.ok_or_else(|| {
            Error::backend_msg(format!(
                "{} is being restored (`fivecore restore` holds {}); start once it has finished",
                db.display(),
                lock_path(db).display()
            ))
        })
    }

    /// Takes the lock alone, or `None` while any process has the store open.
    pub fn exclusive(db: &Path) -> Result<Option<StoreLock>> {
        Self::take(db, libc::LOCK_EX)
    }

    fn take(db: &Path, kind: libc::c_int) -> Result<Option<StoreLock>> {
        let path = lock_path(db);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::backend_msg(format!("cannot open {}: {e}", path.display())))?;
        // SAFETY: flock on a descriptor owned by `file`; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), kind | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(Error::backend_msg(format!("cannot lock {}: {e}", path.display())));
        }
        Ok(Some(StoreLock { _file: file, path }))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_holders_keep_the_exclusive_lock_out_and_the_other_way_round() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        assert_eq!(lock_path(&db), dir.path().join("x.db.lock"));
        let a = StoreLock::shared(&db).unwrap();
        let b = StoreLock::shared(&db).unwrap();
        assert!(StoreLock::exclusive(&db).unwrap().is_none());
        drop((a, b));
        let alone = StoreLock::exclusive(&db).unwrap().expect("nobody holds it");
        let refused = StoreLock::shared(&db).unwrap_err().to_string();
        assert!(refused.contains("is being restored"), "{refused}");
        drop(alone);
        StoreLock::shared(&db).unwrap();
    }
}
