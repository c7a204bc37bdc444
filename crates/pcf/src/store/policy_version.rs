//! The policy project versions the PCF keeps (`crate::policy_versions`), behind their own
//! trait: each version's files as one JSON document, and the history of which version was put
//! in force when, which a rollback walks back.

use std::collections::BTreeMap;

use super::StoreFuture;

/// A stored version, without its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyVersion {
    /// 1, 2, ...: one more than the largest stored.
    pub id: i64,
    /// The project's name and version (its manifest's).
    pub name: String,
    pub project_version: String,
    pub description: String,
    /// The directory it was read from; None for an upload.
    pub dir: Option<String>,
    pub created_ms: i64,
}

/// A version to store: [`PolicyVersion`] less its id, with its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewVersion {
    pub name: String,
    pub project_version: String,
    pub description: String,
    pub dir: Option<String>,
    pub created_ms: i64,
    /// path → text.
    pub files: BTreeMap<String, String>,
}

/// Which version is in force, and the one a rollback would put back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activation {
    pub active: i64,
    pub previous: Option<i64>,
}

pub trait PolicyVersionStore: Send + Sync {
    /// Stores `v` under the next id and, with `activate`, puts it in force, in one commit.
    fn add_version(&self, v: NewVersion, activate: bool) -> StoreFuture<'_, PolicyVersion>;

    /// Every version, newest first.
    fn versions(&self) -> StoreFuture<'_, Vec<PolicyVersion>>;

    /// A version with its files; None when there is none of that id.
    fn version(
        &self,
        id: i64,
    ) -> StoreFuture<'_, Option<(PolicyVersion, BTreeMap<String, String>)>>;

    /// The newest version read from `dir`, with its files.
    fn newest_from_dir(
        &self,
        dir: &str,
    ) -> StoreFuture<'_, Option<(PolicyVersion, BTreeMap<String, String>)>>;

    /// The version in force and the one before it; None before any was put in force.
    fn activation(&self) -> StoreFuture<'_, Option<Activation>>;

    /// Puts version `id` in force at `at_ms`; the activation it makes, None when there is no
    /// version `id` (nothing changed).
    fn activate(&self, id: i64, at_ms: i64) -> StoreFuture<'_, Option<Activation>>;

    /// Takes back the last activation, so the version in force before it is again; the
    /// activation that leaves, None when there is no earlier one (nothing changed).
    fn rollback(&self, at_ms: i64) -> StoreFuture<'_, Option<Activation>>;

    /// When each version was last put in force: version id → ms.
    fn activated_at(&self) -> StoreFuture<'_, BTreeMap<i64, i64>>;
}
