//! The backend-neutral document primitive.
//!
//! A document is an opaque body (by convention JSON) stored under a
//! collection name and an id, with a version for optimistic concurrency, an
//! optional expiry for background audits and secondary index keys for exact
//! lookups. NF schemas that need more (joins, ranges over body fields) use
//! their own tables; this is the common denominator every backend can serve
//! with plain primary-key and secondary-index access, so it maps one to one
//! onto SQLite, InnoDB (Galera) and NDB.

use std::future::Future;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};

/// Milliseconds since the Unix epoch (UTC).
pub type UnixMillis = u64;

/// Longest collection name, in bytes.
pub const MAX_COLLECTION_LEN: usize = 64;
/// Longest document id, in bytes.
pub const MAX_ID_LEN: usize = 255;
/// Longest index name, in bytes.
pub const MAX_INDEX_NAME_LEN: usize = 64;
/// Longest index value, in bytes.
pub const MAX_INDEX_VALUE_LEN: usize = 255;
/// Largest body, in bytes. Chosen below MariaDB's default
/// `max_allowed_packet` (16 MiB) so a MySQL backend needs no server tuning.
pub const MAX_BODY_LEN: usize = 8 * 1024 * 1024;

/// One secondary index entry: the document is found by `find(name, value)`.
///
/// A document may carry several values for the same index name (an NF
/// profile serving several S-NSSAIs, for instance).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexKey {
    /// Index name, e.g. `supi`.
    pub name: String,
    /// Exact value looked up.
    pub value: String,
}

impl IndexKey {
    /// An index entry `name = value`.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self { name: name.into(), value: value.into() }
    }
}

/// What a caller writes; the store adds the version and timestamps.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DocumentData {
    /// Opaque body, by convention UTF-8 JSON.
    pub body: Vec<u8>,
    /// When the document should be considered expired. The store never hides
    /// or deletes expired documents itself: the NF decides, using
    /// [`DocumentStore::scan_expired`] from a background audit.
    pub expires_at: Option<UnixMillis>,
    /// Secondary index entries. Order and duplicates do not matter: the
    /// store keeps them sorted and deduplicated.
    pub index: Vec<IndexKey>,
}

impl DocumentData {
    /// A document with this body, no expiry and no index entries.
    pub fn new(body: impl Into<Vec<u8>>) -> Self {
        Self { body: body.into(), ..Self::default() }
    }

    /// A document whose body is `value` serialized as JSON.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Self> {
        serde_json::to_vec(value).map(Self::new)
    }

    /// Sets the expiry.
    #[must_use]
    pub fn expires_at(mut self, at: UnixMillis) -> Self {
        self.expires_at = Some(at);
        self
    }

    /// Adds an index entry.
    #[must_use]
    pub fn index(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.index.push(IndexKey::new(name, value));
        self
    }
}

/// A stored document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Id within its collection.
    pub id: String,
    /// 1 when created, incremented by every write.
    pub version: u64,
    /// When the document was first created.
    pub created_at: UnixMillis,
    /// When the document was last written.
    pub updated_at: UnixMillis,
    /// See [`DocumentData::expires_at`].
    pub expires_at: Option<UnixMillis>,
    /// Sorted, deduplicated index entries.
    pub index: Vec<IndexKey>,
    /// The body as written.
    pub body: Vec<u8>,
}

impl Document {
    /// The HTTP entity tag of this version, e.g. `"7"` (quotes included).
    pub fn etag(&self) -> String {
        etag(self.version)
    }

    /// Deserializes the body as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_slice(&self.body)
    }
}

/// The strong entity tag for `version`: the decimal version in quotes.
pub fn etag(version: u64) -> String {
    format!("\"{version}\"")
}

/// The version named by an entity tag made by [`etag`]; `None` for anything
/// else (a weak tag, `*`, garbage), which callers treat as a mismatch.
pub fn parse_etag(tag: &str) -> Option<u64> {
    tag.trim().strip_prefix('"')?.strip_suffix('"')?.parse().ok()
}

/// Result of [`DocumentStore::upsert`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upserted {
    /// The document as stored now.
    pub document: Document,
    /// `true` if the document did not exist before.
    pub created: bool,
}

/// Versioned document storage, implemented by every backend.
///
/// Contract, identical for every backend:
/// - each call is atomic: a document and its index entries change together;
///   a call that returns `Ok` is durable (committed) before it returns;
/// - versions start at 1 and grow by 1 on each successful write;
/// - timestamps come from the clock of the node doing the write;
/// - ids are ordered by their UTF-8 bytes (SQLite `BINARY`, MySQL
///   `VARBINARY`/`utf8mb4_bin`), which is the order of [`list`](Self::list)
///   and [`find`](Self::find);
/// - keys are checked against the `MAX_*_LEN` limits and must not be empty
///   or contain NUL, so a key accepted by one backend is accepted by all;
/// - a `limit` of 0 returns nothing.
///
/// Dropping a returned future does not cancel a write that has already been
/// handed to the backend: its outcome is then unknown, as with a network
/// timeout, and a retry should be conditional on the version.
pub trait DocumentStore: Send + Sync {
    /// Stores a new document at version 1.
    ///
    /// Fails with [`Error::AlreadyExists`] if the id is taken.
    fn create(
        &self,
        collection: &str,
        id: &str,
        data: DocumentData,
    ) -> impl Future<Output = Result<Document>> + Send;

    /// Creates the document or replaces it whatever its version.
    fn upsert(
        &self,
        collection: &str,
        id: &str,
        data: DocumentData,
    ) -> impl Future<Output = Result<Upserted>> + Send;

    /// The document, or `None`.
    fn get(
        &self,
        collection: &str,
        id: &str,
    ) -> impl Future<Output = Result<Option<Document>>> + Send;

    /// Replaces an existing document, keeping its `created_at`.
    ///
    /// With `expected_version`, the write happens only if the stored version
    /// is that one, otherwise it fails with [`Error::VersionMismatch`].
    /// Fails with [`Error::NotFound`] if the document does not exist.
    fn replace(
        &self,
        collection: &str,
        id: &str,
        data: DocumentData,
        expected_version: Option<u64>,
    ) -> impl Future<Output = Result<Document>> + Send;

    /// Deletes a document and its index entries, optionally only at
    /// `expected_version`. Fails with [`Error::NotFound`] if it does not
    /// exist, [`Error::VersionMismatch`] if the version differs.
    fn delete(
        &self,
        collection: &str,
        id: &str,
        expected_version: Option<u64>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Documents having the index entry `index = value`, by id, at most
    /// `limit`.
    fn find(
        &self,
        collection: &str,
        index: &str,
        value: &str,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Document>>> + Send;

    /// Number of documents in the collection.
    fn count(&self, collection: &str) -> impl Future<Output = Result<u64>> + Send;

    /// Documents whose `expires_at <= at`, oldest expiry first (ties by id),
    /// at most `limit`. Documents without expiry are never returned.
    fn scan_expired(
        &self,
        collection: &str,
        at: UnixMillis,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Document>>> + Send;

    /// One page of the collection in id order: the first `limit` documents
    /// whose id is greater than `after` (from the start when `None`). Pass
    /// the last id of a page as `after` to get the next one.
    fn list(
        &self,
        collection: &str,
        after: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Document>>> + Send;
}

/// Checks a collection name and, if given, an id against the contract.
pub(crate) fn check_key(collection: &str, id: Option<&str>) -> Result<()> {
    check_name("collection", collection, MAX_COLLECTION_LEN)?;
    if let Some(id) = id {
        check_name("id", id, MAX_ID_LEN)?;
    }
    Ok(())
}

/// Checks what a write supplies and puts its index entries in canonical
/// order, so every backend stores and returns the same list.
pub(crate) fn check_data(data: &mut DocumentData) -> Result<()> {
    if data.body.len() > MAX_BODY_LEN {
        return Err(invalid(format!(
            "body is {} bytes, more than {MAX_BODY_LEN}",
            data.body.len()
        )));
    }
    if let Some(at) = data.expires_at {
        // Every backend stores timestamps as signed 64-bit integers.
        if i64::try_from(at).is_err() {
            return Err(invalid(format!("expires_at {at} is out of range")));
        }
    }
    for key in &data.index {
        check_index(&key.name, &key.value)?;
    }
    data.index.sort_unstable();
    data.index.dedup();
    Ok(())
}

/// Checks an index name and value against the contract.
pub(crate) fn check_index(name: &str, value: &str) -> Result<()> {
    check_name("index name", name, MAX_INDEX_NAME_LEN)?;
    if value.len() > MAX_INDEX_VALUE_LEN {
        return Err(invalid(format!(
            "index value is {} bytes, more than {MAX_INDEX_VALUE_LEN}",
            value.len()
        )));
    }
    if value.contains('\0') {
        return Err(invalid("index value contains NUL".to_owned()));
    }
    Ok(())
}

fn check_name(what: &str, name: &str, max: usize) -> Result<()> {
    if name.is_empty() {
        return Err(invalid(format!("{what} is empty")));
    }
    if name.len() > max {
        return Err(invalid(format!("{what} is {} bytes, more than {max}", name.len())));
    }
    // NUL terminates strings in C APIs and some wire protocols.
    if name.contains('\0') {
        return Err(invalid(format!("{what} contains NUL")));
    }
    Ok(())
}

fn invalid(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_round_trips() {
        assert_eq!(etag(7), "\"7\"");
        assert_eq!(parse_etag(&etag(42)), Some(42));
        assert_eq!(parse_etag(" \"3\" "), Some(3));
        for bad in ["3", "W/\"3\"", "*", "\"x\"", "\"\"", ""] {
            assert_eq!(parse_etag(bad), None, "{bad}");
        }
    }

    #[test]
    fn data_builder_and_json() {
        #[derive(Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Body {
            supi: String,
        }
        let data = DocumentData::json(&Body { supi: "imsi-1".into() })
            .expect("serializes")
            .expires_at(10)
            .index("supi", "imsi-1");
        assert_eq!(data.expires_at, Some(10));
        assert_eq!(data.index, vec![IndexKey::new("supi", "imsi-1")]);
        let doc = Document {
            id: "a".into(),
            version: 2,
            created_at: 1,
            updated_at: 2,
            expires_at: None,
            index: vec![],
            body: data.body,
        };
        assert_eq!(doc.etag(), "\"2\"");
        let body: Body = doc.json().expect("deserializes");
        assert_eq!(body.supi, "imsi-1");
    }

    #[test]
    fn index_entries_are_sorted_and_deduplicated() {
        let mut data =
            DocumentData::new("{}").index("b", "2").index("a", "9").index("b", "1").index("a", "9");
        check_data(&mut data).expect("valid");
        assert_eq!(
            data.index,
            vec![IndexKey::new("a", "9"), IndexKey::new("b", "1"), IndexKey::new("b", "2")]
        );
    }

    #[test]
    fn keys_are_checked() {
        assert!(check_key("c", Some("id")).is_ok());
        assert!(check_key("c", None).is_ok());
        let long_id = "x".repeat(MAX_ID_LEN + 1);
        let long_collection = "c".repeat(MAX_COLLECTION_LEN + 1);
        for (collection, id) in [
            ("", "id"),
            ("c", ""),
            ("c", long_id.as_str()),
            (long_collection.as_str(), "id"),
            ("c\0", "id"),
            ("c", "i\0d"),
        ] {
            assert!(
                matches!(check_key(collection, Some(id)), Err(Error::InvalidArgument(_))),
                "{collection:?} {id:?}"
            );
        }
        assert!(check_key(&"c".repeat(MAX_COLLECTION_LEN), Some(&"x".repeat(MAX_ID_LEN))).is_ok());
    }

    #[test]
    fn data_is_checked() {
        let too_late = DocumentData::new("{}").expires_at(u64::MAX);
        let long_value = DocumentData::new("{}").index("n", "v".repeat(MAX_INDEX_VALUE_LEN + 1));
        let empty_name = DocumentData::new("{}").index("", "v");
        let big = DocumentData::new(vec![b' '; MAX_BODY_LEN + 1]);
        for mut bad in [too_late, long_value, empty_name, big] {
            assert!(matches!(check_data(&mut bad), Err(Error::InvalidArgument(_))));
        }
        // An empty value is a legitimate value ("no DNN", say).
        assert!(check_data(&mut DocumentData::new("{}").index("n", "")).is_ok());
    }
}
