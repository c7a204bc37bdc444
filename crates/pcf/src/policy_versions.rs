//! Policy project versions (issue #21's "projects as versioned text, tested before deploy";
//! the console of issue #27 shows them): every project the PCF is given, from a directory or
//! uploaded, is checked and kept in its store as a version, and any version can be put in
//! force, tested or diffed; a rollback puts the one before back.
//!
//! What is stored as in force and what [`Deployed`] holds change together: each change is
//! checked (compiled) first, then committed, then swapped in, one change at a time. At start
//! the PCF puts the stored version in force again, unless the configured directory changed
//! since the PCF last read it: then that is a new version, as a deploy would make.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{SecondsFormat, Utc};
use nf::NfError;
use policy::testcase::{load_cases_from, CaseResult};
use policy::{CheckError, Deployed, Project, ProjectFiles};

use crate::store::{Activation, NewVersion, PolicyVersion, PolicyVersionStore};

/// The cause of a version refused by its check.
pub const POLICY_CHECK_FAILED: &str = "POLICY_CHECK_FAILED";
/// The cause of a rollback with no earlier version to go back to.
pub const NO_PREVIOUS_VERSION: &str = "NO_PREVIOUS_VERSION";

/// Why a change of versions did not happen.
#[derive(Debug)]
pub enum Refusal {
    /// The project failed its check: each error with its file and line.
    Check(Vec<CheckError>),
    /// No version of that id.
    Unknown(i64),
    /// A rollback with nothing before the version in force.
    NoPrevious,
    Fault(NfError),
}

impl From<store::Error> for Refusal {
    fn from(e: store::Error) -> Self {
        Refusal::Fault(e.into())
    }
}

/// A version ready to go in force: its stored description and its compiled project.
struct Checked {
    files: ProjectFiles,
    project: Project,
}

/// The version store and the project in force, kept in step.
pub struct PolicyVersions {
    store: Arc<dyn PolicyVersionStore>,
    policy: Arc<Deployed>,
    /// One change at a time: held from the commit to the swap, so two activations cannot
    /// commit in one order and swap in the other. Only the admin endpoint and the file watch
    /// take it, never a decision.
    change: tokio::sync::Mutex<()>,
    /// The version in force.
    active: Mutex<PolicyVersion>,
}

fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// Milliseconds as RFC 3339 (UTC, ms).
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// What [`Project::dir`] says of a version: its directory, or none for an upload.
fn label(dir: Option<&str>) -> PathBuf {
    dir.map(PathBuf::from).unwrap_or_default()
}

/// Compiles `files` and loads their test cases: the check `fivecore policy check` makes.
/// Tables of thousands of rows take a while: called off the async threads.
fn check(files: ProjectFiles, dir: Option<&str>) -> Result<Checked, Vec<CheckError>> {
    let project = Project::from_files(&files, label(dir))?;
    load_cases_from(&files)?;
    Ok(Checked { files, project })
}

async fn check_off_thread(files: ProjectFiles, dir: Option<String>) -> Result<Checked, Refusal> {
    tokio::task::spawn_blocking(move || check(files, dir.as_deref()))
        .await
        .map_err(|e| Refusal::Fault(NfError::internal(format!("policy check task: {e}"))))?
        .map_err(Refusal::Check)
}

fn new_version(c: &Checked, dir: Option<String>, description: Option<String>) -> NewVersion {
    NewVersion {
        name: c.project.name.clone(),
        project_version: c.project.version.clone(),
        description: description.unwrap_or_else(|| c.project.description.clone()),
        dir,
        created_ms: now_ms(),
        files: c.files.map().clone(),
    }
}

fn errors_text(errors: &[CheckError]) -> String {
    errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")
}

impl PolicyVersions {
    /// At start: the version to put in force and the versions kept. The configured
    /// directory (`dir`) is read; when no version was ever put in force, or its files differ
    /// from the newest version read from it (the operator changed it while the PCF was
    /// down), it is stored as a new version and put in force; otherwise the stored version
    /// in force is again. A project that fails its check stops the start.
    pub async fn start(
        store: Arc<dyn PolicyVersionStore>,
        dir: &Path,
    ) -> Result<(Arc<Deployed>, PolicyVersions), String> {
        let dir_text = dir.display().to_string();
        let read = dir.to_path_buf();
        let files = tokio::task::spawn_blocking(move || ProjectFiles::read_dir(&read))
            .await
            .map_err(|e| format!("policy project read: {e}"))?
            .map_err(|e| format!("policy project {dir_text}: {}", errors_text(&e)))?;
        let fault = |e: store::Error| format!("policy versions in the store: {e}");
        let activation = store.activation().await.map_err(fault)?;
        let newest = store.newest_from_dir(&dir_text).await.map_err(fault)?;
        let changed = newest.as_ref().is_none_or(|(_, f)| f != files.map());
        let (version, checked) = match activation {
            Some(a) if !changed => {
                let (v, stored) =
                    store.version(a.active).await.map_err(fault)?.ok_or_else(|| {
                        format!("policy version {} in force is not stored", a.active)
                    })?;
                let files = ProjectFiles::new(stored).map_err(|e| {
                    format!("policy version {} in the store: {}", v.id, errors_text(&e))
                })?;
                let checked =
                    check_off_thread(files, v.dir.clone()).await.map_err(|r| match r {
                        Refusal::Check(e) => format!(
                            "policy version {} ({} {}) in force fails its check: {}",
                            v.id,
                            v.name,
                            v.project_version,
                            errors_text(&e)
                        ),
                        other => format!("policy version {}: {other:?}", v.id),
                    })?;
                (v, checked)
            }
            _ => {
                let checked =
                    check_off_thread(files, Some(dir_text.clone())).await.map_err(|r| match r {
                        Refusal::Check(e) => {
                            format!(
                                "policy project {dir_text} fails its check: {}",
                                errors_text(&e)
                            )
                        }
                        other => format!("policy project {dir_text}: {other:?}"),
                    })?;
                let v = store
                    .add_version(new_version(&checked, Some(dir_text.clone()), None), true)
                    .await
                    .map_err(fault)?;
                tracing::info!(id = v.id, dir = %dir_text, "policy project recorded as a version");
                (v, checked)
            }
        };
        tracing::info!(id = version.id, project = %version.name, version = %version.project_version, "policy version in force");
        let policy = Arc::new(Deployed::new(checked.project));
        let versions = PolicyVersions {
            store,
            policy: policy.clone(),
            change: tokio::sync::Mutex::new(()),
            active: Mutex::new(version),
        };
        Ok((policy, versions))
    }

    /// The version in force.
    pub fn active(&self) -> PolicyVersion {
        self.active.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Checks `files` and stores them as a new version; with `activate`, puts it in force
    /// too (a deploy), and the version it replaced is returned with it. A deploy refused by
    /// its check is counted in `policy_deploys_total{outcome="refused"}`.
    pub async fn add(
        &self,
        files: ProjectFiles,
        dir: Option<String>,
        description: Option<String>,
        activate: bool,
    ) -> Result<(PolicyVersion, Option<PolicyVersion>), Refusal> {
        let checked = match check_off_thread(files, dir.clone()).await {
            Ok(c) => c,
            Err(r) => {
                if activate && matches!(r, Refusal::Check(_)) {
                    self.policy.refused();
                }
                return Err(r);
            }
        };
        let _one = self.change.lock().await;
        let v = self.store.add_version(new_version(&checked, dir, description), activate).await?;
        if !activate {
            return Ok((v, None));
        }
        self.policy.put(Arc::new(checked.project));
        let was = std::mem::replace(
            &mut *self.active.lock().unwrap_or_else(PoisonError::into_inner),
            v.clone(),
        );
        Ok((v, Some(was)))
    }

    /// Reads `dir` and deploys it ([`PolicyVersions::add`] with `activate`).
    pub async fn deploy_dir(
        &self,
        dir: &Path,
    ) -> Result<(PolicyVersion, Option<PolicyVersion>), Refusal> {
        let read = dir.to_path_buf();
        let files = tokio::task::spawn_blocking(move || ProjectFiles::read_dir(&read))
            .await
            .map_err(|e| Refusal::Fault(NfError::internal(format!("policy read task: {e}"))))?;
        let files = match files {
            Ok(f) => f,
            Err(e) => {
                self.policy.refused();
                return Err(Refusal::Check(e));
            }
        };
        self.add(files, Some(dir.display().to_string()), None, true).await
    }

    /// Every version, newest first, with when each was last put in force.
    pub async fn list(&self) -> Result<Vec<(PolicyVersion, Option<i64>)>, Refusal> {
        let at = self.store.activated_at().await?;
        let versions = self.store.versions().await?;
        Ok(versions
            .into_iter()
            .map(|v| {
                let a = at.get(&v.id).copied();
                (v, a)
            })
            .collect())
    }

    /// A version and its files.
    pub async fn get(&self, id: i64) -> Result<(PolicyVersion, ProjectFiles), Refusal> {
        let (v, files) = self.store.version(id).await?.ok_or(Refusal::Unknown(id))?;
        // Stored files passed ProjectFiles::new when they came in.
        let files = ProjectFiles::new(files)
            .map_err(|e| Refusal::Fault(NfError::internal(errors_text(&e))))?;
        Ok((v, files))
    }

    /// The version's project, compiled anew even when it is in force: a dry run or a test
    /// must not count among the decisions of the version in force (its metrics).
    pub async fn project(
        &self,
        id: i64,
    ) -> Result<(PolicyVersion, Project, ProjectFiles), Refusal> {
        let (v, files) = self.get(id).await?;
        let checked = check_off_thread(files, v.dir.clone()).await?;
        Ok((v, checked.project, checked.files))
    }

    /// Puts version `id` in force; the activation (the version in force and the one before).
    pub async fn activate(&self, id: i64) -> Result<Activation, Refusal> {
        let (v, files) = self.get(id).await?;
        let checked = check_off_thread(files, v.dir.clone()).await?;
        let _one = self.change.lock().await;
        if self.active().id == id {
            // Already in force: no new activation, so a rollback still goes where it went.
            return Ok(self
                .store
                .activation()
                .await?
                .unwrap_or(Activation { active: id, previous: None }));
        }
        let a = self.store.activate(id, now_ms()).await?.ok_or(Refusal::Unknown(id))?;
        self.policy.put(Arc::new(checked.project));
        *self.active.lock().unwrap_or_else(PoisonError::into_inner) = v;
        Ok(a)
    }

    /// Puts the version in force before the current one back; what was in force and what is
    /// now.
    pub async fn rollback(&self) -> Result<(PolicyVersion, PolicyVersion), Refusal> {
        let _one = self.change.lock().await;
        let a = self.store.activation().await?.ok_or(Refusal::NoPrevious)?;
        let back = a.previous.ok_or(Refusal::NoPrevious)?;
        let (v, files) = self.get(back).await?;
        let checked = check_off_thread(files, v.dir.clone()).await?;
        self.store.rollback(now_ms()).await?.ok_or(Refusal::NoPrevious)?;
        self.policy.put(Arc::new(checked.project));
        let was = std::mem::replace(
            &mut *self.active.lock().unwrap_or_else(PoisonError::into_inner),
            v.clone(),
        );
        Ok((was, v))
    }

    /// Runs the version's own test cases (`tests/*.toml`).
    pub async fn test(&self, id: i64) -> Result<Vec<CaseResult>, Refusal> {
        let (_, project, files) = self.project(id).await?;
        tokio::task::spawn_blocking(move || {
            let cases = load_cases_from(&files)?;
            Ok::<Vec<CaseResult>, Vec<CheckError>>(cases.iter().map(|c| c.run(&project)).collect())
        })
        .await
        .map_err(|e| Refusal::Fault(NfError::internal(format!("policy test task: {e}"))))?
        .map_err(Refusal::Check)
    }

    /// The file watch (`policy_watch_ms`): `dir` changed, so it is read, checked, stored and
    /// put in force; a refused version is logged and the one in force stays. Runs on the
    /// watch's own thread, so it may wait for the runtime.
    pub fn watched_change(&self, runtime: &tokio::runtime::Handle, dir: &Path) {
        match runtime.block_on(self.deploy_dir(dir)) {
            Ok((v, _)) => {
                tracing::info!(id = v.id, dir = %dir.display(), "changed policy project recorded and in force")
            }
            Err(Refusal::Check(errors)) => {
                tracing::warn!(dir = %dir.display(), errors = %errors_text(&errors), "policy project refused; the version in force stays")
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = ?e, "policy project not deployed")
            }
        }
    }
}
