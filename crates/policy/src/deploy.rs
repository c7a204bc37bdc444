//! The project an NF runs, swapped atomically: an evaluation takes the project in force when it
//! starts and finishes on it, whatever is deployed meanwhile; a new version that fails its
//! check is refused and the one in force stays.
//!
//! A new version comes from [`Deployed::deploy`] (the NF's admin endpoint) or from a change of
//! the project's files ([`Deployed::watch`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

use crate::{CheckError, Input, Outcome, Project, Service};

pub struct Deployed {
    current: ArcSwap<Project>,
    /// Deploys that put a version in force, and those refused (the project failed its check),
    /// whether through [`Deployed::deploy`] or [`Deployed::watch`].
    deploys_ok: AtomicU64,
    deploys_refused: AtomicU64,
}

impl Deployed {
    pub fn new(p: Project) -> Self {
        Deployed {
            current: ArcSwap::from_pointee(p),
            deploys_ok: AtomicU64::new(0),
            deploys_refused: AtomicU64::new(0),
        }
    }

    /// Deploys since start: (put in force, refused).
    pub fn deploys(&self) -> (u64, u64) {
        (self.deploys_ok.load(Ordering::Relaxed), self.deploys_refused.load(Ordering::Relaxed))
    }

    /// Loads the project in `dir` as the first version.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, Vec<CheckError>> {
        Project::load(dir).map(Deployed::new)
    }

    /// The project in force (held by the caller as long as it needs it).
    pub fn current(&self) -> Arc<Project> {
        self.current.load_full()
    }

    /// Evaluates on the project in force; the outcome and that project's version.
    pub fn evaluate(&self, service: Service, input: Input<'_>) -> (Outcome, Arc<Project>) {
        let p = self.current.load_full();
        (p.evaluate(service, input), p)
    }

    /// Loads and checks the project in `dir` and puts it in force; on a failed check nothing
    /// changes and the errors are returned.
    pub fn deploy(&self, dir: impl AsRef<Path>) -> Result<Arc<Project>, Vec<CheckError>> {
        match Project::load(dir) {
            Ok(p) => {
                let p = Arc::new(p);
                self.put(p.clone());
                Ok(p)
            }
            Err(e) => {
                self.refused();
                Err(e)
            }
        }
    }

    /// Puts a project the caller loaded and checked in force (an NF that keeps versions
    /// loads them from their stored files); the one it replaces.
    pub fn put(&self, p: Arc<Project>) -> Arc<Project> {
        self.deploys_ok.fetch_add(1, Ordering::Relaxed);
        let old = self.current.swap(p.clone());
        tracing::info!(project = %p.name, version = %p.version, was = %old.version, "policy project in force");
        old
    }

    /// Counts a version refused by its check that the caller loaded itself.
    pub fn refused(&self) {
        self.deploys_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Watches the files of the project in force's directory every `every`; when one changes,
    /// deploys the directory again (a failed check is logged and the old version stays). Ends
    /// when `stop` is set.
    pub fn watch(
        self: &Arc<Self>,
        every: Duration,
        stop: Arc<AtomicBool>,
    ) -> std::thread::JoinHandle<()> {
        let me = self.clone();
        let dir = me.current().dir.clone();
        watch_dir(dir.clone(), every, stop, move || {
            if let Err(errors) = me.deploy(&dir) {
                let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
                tracing::warn!(dir = %dir.display(), errors = %list.join("; "), "policy project refused; the version in force stays");
            }
        })
    }
}

/// Calls `changed` on a thread of its own each time a file below `dir` changes (looked at
/// every `every`), until `stop` is set: [`Deployed::watch`], or an NF that records each
/// change as a version before it deploys it.
pub fn watch_dir(
    dir: PathBuf,
    every: Duration,
    stop: Arc<AtomicBool>,
    mut changed: impl FnMut() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    // The baseline is taken before this returns: a change made right after (while the
    // thread is not yet scheduled) is a change, not the baseline.
    let mut seen = stamp(&dir);
    std::thread::Builder::new()
        .name("policy-watch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(every);
                let now = stamp(&dir);
                if now != seen {
                    seen = now;
                    changed();
                }
            }
        })
        .expect("a thread can be spawned")
}

/// The newest modification time and the number of files below `dir`: a change to any file,
/// a file added or removed, changes it.
fn stamp(dir: &Path) -> (Option<SystemTime>, usize) {
    let mut newest = None;
    let mut count = 0;
    let mut todo: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                todo.push(e.path());
            } else {
                count += 1;
                if let Ok(t) = m.modified() {
                    newest = newest.max(Some(t));
                }
            }
        }
    }
    (newest, count)
}
