//! The BSF's store on the MySQL-protocol backend (MariaDB / Galera, InnoDB or NDB): the same
//! tables and indexes as on SQLite (one row per PCF binding, the document kept whole next to the
//! columns it is looked up by), with `VARBINARY` keys (byte comparison, as SQLite's), a primary
//! key on every table and no foreign keys.
//!
//! Each trait call is one transaction of [`MysqlStore::write`] / [`MysqlStore::read`], tried
//! again from the start after a deadlock or a Galera certification failure. A Register reads the
//! bindings it conflicts with `FOR UPDATE`: InnoDB locks the index range of that UE address, so
//! two concurrent Registers for one UE take turns (or deadlock, and one is tried again) and
//! cannot both win; through two Galera nodes the second to commit fails certification and, tried
//! again, finds the first.
//!
//! The UE-address index is changed inside the transaction, after its SQL and before `COMMIT`,
//! while the rows' locks are held, so changes to one UE address reach the index in commit
//! order; a call that fails after changing it turns the index off (lookups then read the store),
//! as on SQLite. Several instances on one database: each write also records its changes to PCF
//! bindings and subscriptions in the store's change feed (as the transaction's last
//! statements, with what another instance's index needs: the binding's document), and
//! [`crate::coherence`] applies the other instances' changes to this one's index and
//! subscriptions (docs/store.md, "Several instances on one database").

use std::sync::{Arc, Mutex};

use store::mysql::feed::{self, Op};
use store::mysql::mysql_async::prelude::Queryable;
use store::mysql::mysql_async::{Conn, Params, Value};
use store::mysql::TxError;
use store::{MysqlConfig, MysqlMigration, MysqlStore};

use super::{
    BindingStore, Created, Keyed, KeyedPatch, Lookup, NewBinding, Patch, StoreFuture, Stored,
    Updated,
};
use crate::models::Keys;
use crate::ue_address_index::{Indexed, UeAddressIndex};

pub const MIGRATIONS: &[MysqlMigration] = &[MysqlMigration::new(
    "bsf-0001-tables",
    &[
        "CREATE TABLE IF NOT EXISTS bsf_pcf_binding (
            binding_id VARBINARY(255) NOT NULL PRIMARY KEY,
            ipv4_addr VARBINARY(64) NULL,
            ip_domain VARBINARY(255) NOT NULL DEFAULT '',
            ipv6_prefix VARBINARY(64) NULL,
            mac_addr_48 VARBINARY(32) NULL,
            dnn VARBINARY(255) NOT NULL,
            snssai_sst SMALLINT UNSIGNED NOT NULL,
            snssai_sd VARBINARY(16) NOT NULL DEFAULT '',
            supi VARBINARY(255) NULL,
            gpsi VARBINARY(255) NULL,
            created_ms BIGINT NOT NULL,
            json_content LONGBLOB NOT NULL,
            KEY bsf_idx_ipv4 (ipv4_addr, ip_domain, created_ms),
            KEY bsf_idx_ipv6 (ipv6_prefix, created_ms),
            KEY bsf_idx_mac (mac_addr_48, created_ms),
            KEY bsf_idx_supi (supi, created_ms),
            KEY bsf_idx_gpsi (gpsi, created_ms),
            KEY bsf_idx_created (created_ms)
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS bsf_subscription (
            sub_id VARBINARY(255) NOT NULL PRIMARY KEY,
            json_content LONGBLOB NOT NULL
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS bsf_pcf_ue_binding (
            binding_id VARBINARY(255) NOT NULL PRIMARY KEY,
            key1 VARBINARY(255) NOT NULL,
            key2 VARBINARY(255) NULL,
            created_ms BIGINT NOT NULL,
            json_content LONGBLOB NOT NULL,
            KEY bsf_idx_ue_supi (key1, created_ms),
            KEY bsf_idx_ue_gpsi (key2, created_ms)
        ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS bsf_pcf_mbs_binding (
            binding_id VARBINARY(255) NOT NULL PRIMARY KEY,
            key1 VARBINARY(255) NOT NULL,
            key2 VARBINARY(255) NULL,
            created_ms BIGINT NOT NULL,
            json_content LONGBLOB NOT NULL,
            KEY bsf_idx_mbs_session (key1, created_ms)
        ) ENGINE=InnoDB",
        // Rel-17 addIpv6Prefixes / addMacAddrs, a row each (kind 'ipv6' or 'mac').
        "CREATE TABLE IF NOT EXISTS bsf_pcf_binding_key (
            kind VARBINARY(8) NOT NULL,
            value VARBINARY(255) NOT NULL,
            binding_id VARBINARY(255) NOT NULL,
            PRIMARY KEY (kind, value, binding_id),
            KEY bsf_idx_key_binding (binding_id)
        ) ENGINE=InnoDB",
    ],
)];

const KEY_IPV6: &str = "ipv6";
const KEY_MAC: &str = "mac";

fn table(kind: Keyed) -> &'static str {
    match kind {
        Keyed::PcfForUe => "bsf_pcf_ue_binding",
        Keyed::PcfForMbs => "bsf_pcf_mbs_binding",
    }
}

const SELECT_DOC: &str = "SELECT binding_id, json_content FROM bsf_pcf_binding";

const INSERT_COLUMNS: &str = "INSERT INTO bsf_pcf_binding (binding_id, ipv4_addr, ip_domain, \
     ipv6_prefix, mac_addr_48, dnn, snssai_sst, snssai_sd, supi, gpsi, created_ms, json_content) \
     VALUES ";
const ROW: &str = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
/// Rows per multi-row INSERT of `insert_many` (12 parameters each, far below the protocol's
/// 65,535, and a few MB of documents per statement).
const ROWS_PER_INSERT: usize = 500;

/// The feed's entity for PCF (PDU session) bindings: a `Put` carries the creation time (8 bytes,
/// big-endian) and the document, a `Delete` the removed document.
pub const FEED_BINDINGS: &str = "bsf_pcf_binding";
/// The feed's entity for binding event subscriptions (re-read by key).
pub const FEED_SUBSCRIPTIONS: &str = "bsf_subscription";

/// A `Put`'s payload.
pub fn put_payload(created_ms: i64, json: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + json.len());
    p.extend_from_slice(&created_ms.to_be_bytes());
    p.extend_from_slice(json);
    p
}

/// A `Put` payload's creation time and document.
pub fn split_put_payload(p: &[u8]) -> Option<(i64, &[u8])> {
    let (at, json) = p.split_first_chunk::<8>()?;
    Some((i64::from_be_bytes(*at), json))
}

/// Records the removal of `gone` and the insert of `put` (id, creation, document) in the feed,
/// when this store records changes.
async fn record_bindings(
    c: &mut Conn,
    writer: Option<&str>,
    gone: &[Stored],
    put: &[(&str, i64, &[u8])],
) -> Result<(), TxError> {
    let Some(w) = writer else { return Ok(()) };
    let puts: Vec<Vec<u8>> = put.iter().map(|(_, at, json)| put_payload(*at, json)).collect();
    let mut rows: Vec<(&str, &str, Op, Option<&[u8]>)> = Vec::with_capacity(gone.len() + put.len());
    for g in gone {
        rows.push((FEED_BINDINGS, g.id.as_str(), Op::Delete, Some(g.json.as_slice())));
    }
    for ((id, _, _), payload) in put.iter().zip(&puts) {
        rows.push((FEED_BINDINGS, id, Op::Put, Some(payload.as_slice())));
    }
    feed::record_many(c, w, &rows).await
}

/// The BSF's persistence over a MySQL-protocol database.
#[derive(Clone)]
pub struct MysqlBindingStore {
    db: MysqlStore,
    index: Option<Arc<UeAddressIndex>>,
}

fn stored(row: (String, Vec<u8>)) -> Stored {
    Stored { id: row.0, json: row.1 }
}

fn opt(v: &Option<String>) -> Value {
    v.as_deref().map_or(Value::NULL, Value::from)
}

fn binding_params(id: &str, keys: &Keys, created_ms: i64, json: &[u8], out: &mut Vec<Value>) {
    out.extend([
        Value::from(id),
        opt(&keys.ipv4),
        Value::from(keys.ip_domain.as_str()),
        opt(&keys.ipv6),
        opt(&keys.mac),
        Value::from(keys.dnn.as_str()),
        Value::from(keys.sst),
        Value::from(keys.sd.as_str()),
        opt(&keys.supi),
        opt(&keys.gpsi),
        Value::from(created_ms),
        Value::from(json),
    ]);
}

/// The bindings already holding one of `keys`' UE addresses for the same DNN and S-NSSAI,
/// locked until the transaction ends.
async fn conflicts(c: &mut Conn, keys: &Keys) -> Result<Vec<Stored>, TxError> {
    let mut out: Vec<Stored> = Vec::new();
    let tail = "AND dnn = ? AND snssai_sst = ? AND snssai_sd = ? FOR UPDATE";
    let mut queries: Vec<(String, Vec<Value>)> = Vec::new();
    let rest =
        || [Value::from(keys.dnn.as_str()), Value::from(keys.sst), Value::from(keys.sd.as_str())];
    if let Some(ip) = &keys.ipv4 {
        let mut p = vec![Value::from(ip.as_str()), Value::from(keys.ip_domain.as_str())];
        p.extend(rest());
        queries.push((format!("{SELECT_DOC} WHERE ipv4_addr = ? AND ip_domain = ? {tail}"), p));
    }
    if let Some(prefix) = &keys.ipv6 {
        let mut p = vec![Value::from(prefix.as_str())];
        p.extend(rest());
        queries.push((format!("{SELECT_DOC} WHERE ipv6_prefix = ? {tail}"), p));
    }
    if let Some(m) = &keys.mac {
        let mut p = vec![Value::from(m.as_str())];
        p.extend(rest());
        queries.push((format!("{SELECT_DOC} WHERE mac_addr_48 = ? {tail}"), p));
    }
    for (sql, p) in queries {
        let rows: Vec<(String, Vec<u8>)> = c.exec(sql, Params::Positional(p)).await?;
        for r in rows.into_iter().map(stored) {
            if !out.iter().any(|o| o.id == r.id) {
                out.push(r);
            }
        }
    }
    Ok(out)
}

async fn insert(
    c: &mut Conn,
    id: &str,
    keys: &Keys,
    created_ms: i64,
    json: &[u8],
) -> Result<(), TxError> {
    let mut p = Vec::with_capacity(12);
    binding_params(id, keys, created_ms, json, &mut p);
    c.exec_drop(format!("{INSERT_COLUMNS}{ROW}"), Params::Positional(p)).await?;
    insert_additional_keys(c, id, keys).await
}

async fn insert_additional_keys(c: &mut Conn, id: &str, keys: &Keys) -> Result<(), TxError> {
    if keys.add_ipv6.is_empty() && keys.add_macs.is_empty() {
        return Ok(());
    }
    let params = keys
        .add_ipv6
        .iter()
        .map(|p| (KEY_IPV6, p))
        .chain(keys.add_macs.iter().map(|m| (KEY_MAC, m)))
        .map(|(kind, v)| {
            Params::Positional(vec![Value::from(kind), Value::from(v.as_str()), Value::from(id)])
        });
    c.exec_batch(
        "INSERT IGNORE INTO bsf_pcf_binding_key (kind, value, binding_id) VALUES (?, ?, ?)",
        params,
    )
    .await?;
    Ok(())
}

async fn delete_id(c: &mut Conn, id: &str) -> Result<(), TxError> {
    c.exec_drop("DELETE FROM bsf_pcf_binding_key WHERE binding_id = ?", (id,)).await?;
    c.exec_drop("DELETE FROM bsf_pcf_binding WHERE binding_id = ?", (id,)).await?;
    Ok(())
}

async fn get_id(c: &mut Conn, id: &str, lock: bool) -> Result<Option<Stored>, TxError> {
    let sql = if lock {
        format!("{SELECT_DOC} WHERE binding_id = ? FOR UPDATE")
    } else {
        format!("{SELECT_DOC} WHERE binding_id = ?")
    };
    let row: Option<(String, Vec<u8>)> = c.exec_first(sql, (id,)).await?;
    Ok(row.map(stored))
}

fn index_removed(index: &Option<Arc<UeAddressIndex>>, gone: &[Stored]) {
    if let Some(ix) = index {
        for s in gone {
            if let Some(b) = Indexed::from_json(&s.id, &s.json) {
                ix.remove(&b);
            }
        }
    }
}

/// A patch (an `FnOnce`) in a transaction that may run more than once: the first run calls
/// it; a run after a retry reuses its result when the stored document it read is the same, and
/// gives up otherwise (the patch cannot be applied to a document it did not see).
struct OncePatch<P, O> {
    patch: Mutex<Option<P>>,
    done: Mutex<Option<(Vec<u8>, O)>>,
}

enum Patched<O> {
    Done(O),
    Refused(nf::NfError),
}

impl<P, O: Clone> OncePatch<P, O> {
    fn new(patch: P) -> Self {
        Self { patch: Mutex::new(Some(patch)), done: Mutex::new(None) }
    }

    fn apply(
        &self,
        old: Vec<u8>,
        call: impl FnOnce(P, Vec<u8>) -> Result<O, nf::NfError>,
    ) -> Result<Patched<O>, TxError> {
        let first = self.patch.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = first {
            return Ok(match call(p, old.clone()) {
                Ok(o) => {
                    *self.done.lock().unwrap_or_else(|e| e.into_inner()) = Some((old, o.clone()));
                    Patched::Done(o)
                }
                Err(e) => Patched::Refused(e),
            });
        }
        match &*self.done.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((seen, o)) if *seen == old => Ok(Patched::Done(o.clone())),
            _ => Err(TxError::Contract(store::Error::backend_msg(
                "the binding changed while its update was tried again: not applied",
            ))),
        }
    }
}

impl MysqlBindingStore {
    /// Connects to the database (see [`MysqlStore::open`]) and applies the BSF's migrations.
    pub async fn open(config: MysqlConfig) -> store::Result<Self> {
        let db = MysqlStore::open(config).await?;
        match Self::on(db.clone()).await {
            Ok(s) => Ok(s),
            Err(e) => {
                db.close().await;
                Err(e)
            }
        }
    }

    /// The binding store on an open MySQL store, applying the BSF's migrations.
    pub async fn on(db: MysqlStore) -> store::Result<Self> {
        db.migrate(MIGRATIONS).await?;
        Ok(MysqlBindingStore { db, index: None })
    }

    /// Keeps `index` up to date from now on; [`BindingStore::load_index`] fills it.
    pub fn with_index(mut self, index: Arc<UeAddressIndex>) -> Self {
        self.index = Some(index);
        self
    }

    /// The database underneath.
    pub fn db(&self) -> &MysqlStore {
        &self.db
    }

    fn checked<T>(&self, r: store::Result<T>) -> store::Result<T> {
        if r.is_err() {
            if let Some(ix) = &self.index {
                ix.turn_off();
            }
        }
        r
    }

    async fn create(&self, binding: NewBinding, reject: bool) -> store::Result<Created> {
        let index = self.index.clone();
        let writer = self.db.feed_writer().cloned();
        let indexed = index.as_ref().and_then(|_| Indexed::from_json(&binding.id, &binding.json));
        let binding = Arc::new((binding, indexed));
        let r = self
            .db
            .write(move |c| {
                let (binding, index, writer) = (binding.clone(), index.clone(), writer.clone());
                Box::pin(async move {
                    let (b, indexed) = &*binding;
                    let existing = conflicts(c, &b.keys).await?;
                    if reject {
                        if let Some(first) = existing.first() {
                            return Ok(Created::Exists(first.clone()));
                        }
                    } else {
                        for old in &existing {
                            delete_id(c, &old.id).await?;
                        }
                    }
                    insert(c, &b.id, &b.keys, b.created_ms, &b.json).await?;
                    let gone: &[Stored] = if reject { &[] } else { &existing };
                    let put = [(b.id.as_str(), b.created_ms, &b.json[..])];
                    record_bindings(c, writer.as_deref(), gone, &put).await?;
                    if !reject {
                        index_removed(&index, &existing);
                    }
                    if let (Some(ix), Some(x)) = (&index, indexed) {
                        ix.insert(x, b.created_ms);
                    }
                    let replaced = if reject { Vec::new() } else { existing };
                    Ok(Created::Inserted { replaced })
                })
            })
            .await;
        self.checked(r)
    }

    async fn insert_many(&self, rows: Vec<NewBinding>) -> store::Result<usize> {
        let index = self.index.clone();
        let writer = self.db.feed_writer().cloned();
        let rows = Arc::new(rows);
        let r = self
            .db
            .write(move |c| {
                let (rows, index, writer) = (rows.clone(), index.clone(), writer.clone());
                Box::pin(async move {
                    for chunk in rows.chunks(ROWS_PER_INSERT) {
                        let mut sql = String::from(INSERT_COLUMNS);
                        let mut p = Vec::with_capacity(chunk.len() * 12);
                        for (i, b) in chunk.iter().enumerate() {
                            if i > 0 {
                                sql.push_str(", ");
                            }
                            sql.push_str(ROW);
                            binding_params(&b.id, &b.keys, b.created_ms, &b.json, &mut p);
                        }
                        c.exec_drop(sql, Params::Positional(p)).await?;
                        for b in chunk {
                            insert_additional_keys(c, &b.id, &b.keys).await?;
                        }
                    }
                    let put: Vec<(&str, i64, &[u8])> =
                        rows.iter().map(|b| (b.id.as_str(), b.created_ms, &b.json[..])).collect();
                    record_bindings(c, writer.as_deref(), &[], &put).await?;
                    if let Some(ix) = &index {
                        for b in rows.iter() {
                            if let Some(x) = Indexed::from_json(&b.id, &b.json) {
                                ix.insert(&x, b.created_ms);
                            }
                        }
                    }
                    Ok(rows.len())
                })
            })
            .await;
        self.checked(r)
    }

    async fn find(&self, q: Lookup) -> store::Result<Option<Stored>> {
        if q.ipv4.is_none() && q.ipv6.is_empty() && q.mac.is_none() {
            return Ok(None);
        }
        let mut sql = format!("{SELECT_DOC} WHERE 1 = 1");
        let mut args: Vec<Value> = Vec::new();
        if let Some(ip) = q.ipv4 {
            sql.push_str(" AND ipv4_addr = ?");
            args.push(Value::from(ip));
            if let Some(d) = q.ip_domain {
                sql.push_str(" AND ip_domain = ?");
                args.push(Value::from(d));
            }
        }
        if !q.ipv6.is_empty() {
            let marks = vec!["?"; q.ipv6.len()].join(", ");
            sql.push_str(&format!(
                " AND (ipv6_prefix IN ({marks}) OR binding_id IN (SELECT binding_id FROM \
                 bsf_pcf_binding_key WHERE kind = '{KEY_IPV6}' AND value IN ({marks})))"
            ));
            for _ in 0..2 {
                args.extend(q.ipv6.iter().map(|p| Value::from(p.as_str())));
            }
        }
        if let Some(m) = q.mac {
            sql.push_str(&format!(
                " AND (mac_addr_48 = ? OR binding_id IN (SELECT binding_id FROM \
                 bsf_pcf_binding_key WHERE kind = '{KEY_MAC}' AND value = ?))"
            ));
            args.push(Value::from(m.as_str()));
            args.push(Value::from(m));
        }
        if let Some(d) = q.dnn {
            sql.push_str(" AND dnn = ?");
            args.push(Value::from(d));
        }
        if let Some((sst, sd)) = q.snssai {
            sql.push_str(" AND snssai_sst = ? AND snssai_sd = ?");
            args.push(Value::from(sst));
            args.push(Value::from(sd));
        }
        if let Some(s) = q.supi {
            sql.push_str(" AND supi = ?");
            args.push(Value::from(s));
        }
        if let Some(g) = q.gpsi {
            sql.push_str(" AND gpsi = ?");
            args.push(Value::from(g));
        }
        sql.push_str(" ORDER BY created_ms DESC LIMIT 1");
        let q = Arc::new((sql, args));
        self.db
            .read(move |c| {
                let q = q.clone();
                Box::pin(async move {
                    let row: Option<(String, Vec<u8>)> =
                        c.exec_first(q.0.as_str(), Params::Positional(q.1.clone())).await?;
                    Ok(row.map(stored))
                })
            })
            .await
    }

    async fn get(&self, id: String) -> store::Result<Option<Stored>> {
        let id = Arc::new(id);
        self.db
            .read(move |c| {
                let id = id.clone();
                Box::pin(async move { get_id(c, &id, false).await })
            })
            .await
    }

    async fn delete(&self, id: String) -> store::Result<Option<Stored>> {
        let index = self.index.clone();
        let writer = self.db.feed_writer().cloned();
        let id = Arc::new(id);
        let r = self
            .db
            .write(move |c| {
                let (id, index, writer) = (id.clone(), index.clone(), writer.clone());
                Box::pin(async move {
                    let found = get_id(c, &id, true).await?;
                    if let Some(f) = &found {
                        delete_id(c, &id).await?;
                        record_bindings(c, writer.as_deref(), std::slice::from_ref(f), &[]).await?;
                        index_removed(&index, std::slice::from_ref(f));
                    }
                    Ok(found)
                })
            })
            .await;
        self.checked(r)
    }

    async fn update(&self, id: String, f: Patch) -> store::Result<Updated> {
        let index = self.index.clone();
        let writer = self.db.feed_writer().cloned();
        let id = Arc::new(id);
        let patch = Arc::new(OncePatch::new(f));
        let r = self
            .db
            .write(move |c| {
                let (id, index, patch, writer) =
                    (id.clone(), index.clone(), patch.clone(), writer.clone());
                Box::pin(async move {
                    let old: Option<(Vec<u8>, i64)> = c
                        .exec_first(
                            "SELECT json_content, created_ms FROM bsf_pcf_binding \
                             WHERE binding_id = ? FOR UPDATE",
                            (id.as_str(),),
                        )
                        .await?;
                    let Some((old, created_ms)) = old else { return Ok(Updated::NotFound) };
                    let old_indexed = index.as_ref().and_then(|_| Indexed::from_json(&id, &old));
                    let before =
                        writer.is_some().then(|| Stored { id: id.to_string(), json: old.clone() });
                    let (keys, json) = match patch.apply(old, |p, old| p(old))? {
                        Patched::Done(x) => x,
                        Patched::Refused(e) => return Ok(Updated::Refused(e)),
                    };
                    c.exec_drop(
                        "UPDATE bsf_pcf_binding SET ipv4_addr = ?, ip_domain = ?, \
                         ipv6_prefix = ?, mac_addr_48 = ?, json_content = ? WHERE binding_id = ?",
                        Params::Positional(vec![
                            opt(&keys.ipv4),
                            Value::from(keys.ip_domain.as_str()),
                            opt(&keys.ipv6),
                            opt(&keys.mac),
                            Value::from(json.as_slice()),
                            Value::from(id.as_str()),
                        ]),
                    )
                    .await?;
                    c.exec_drop(
                        "DELETE FROM bsf_pcf_binding_key WHERE binding_id = ?",
                        (id.as_str(),),
                    )
                    .await?;
                    insert_additional_keys(c, &id, &keys).await?;
                    if let Some(before) = &before {
                        let put = [(id.as_str(), created_ms, json.as_slice())];
                        record_bindings(c, writer.as_deref(), std::slice::from_ref(before), &put)
                            .await?;
                    }
                    if let Some(ix) = &index {
                        if let Some(b) = &old_indexed {
                            ix.remove(b);
                        }
                        if let Some(b) = Indexed::from_json(&id, &json) {
                            ix.insert(&b, created_ms);
                        }
                    }
                    Ok(Updated::Done(json))
                })
            })
            .await;
        self.checked(r)
    }

    async fn remove_older_than(&self, before_ms: i64, limit: u32) -> store::Result<Vec<Stored>> {
        let index = self.index.clone();
        let writer = self.db.feed_writer().cloned();
        let r = self
            .db
            .write(move |c| {
                let (index, writer) = (index.clone(), writer.clone());
                Box::pin(async move {
                    let rows: Vec<(String, Vec<u8>)> = c
                        .exec(
                            format!(
                                "{SELECT_DOC} WHERE created_ms < ? ORDER BY created_ms LIMIT ? \
                                 FOR UPDATE"
                            ),
                            (before_ms, limit),
                        )
                        .await?;
                    let old: Vec<Stored> = rows.into_iter().map(stored).collect();
                    for s in &old {
                        delete_id(c, &s.id).await?;
                    }
                    record_bindings(c, writer.as_deref(), &old, &[]).await?;
                    index_removed(&index, &old);
                    Ok(old)
                })
            })
            .await;
        self.checked(r)
    }

    async fn count(&self) -> store::Result<u64> {
        self.db
            .read(|c| {
                Box::pin(async move {
                    let n: Option<u64> =
                        c.query_first("SELECT COUNT(*) FROM bsf_pcf_binding").await?;
                    Ok(n.unwrap_or(0))
                })
            })
            .await
    }

    /// Reads every stored binding into the index (one pass over the table in one snapshot,
    /// rows streamed, not collected) and makes it answer.
    async fn load_index(&self) -> store::Result<u64> {
        let Some(ix) = self.index.clone() else { return Ok(0) };
        let loading = ix.clone();
        let n = self
            .db
            .scan(move |c| {
                let loading = loading.clone();
                Box::pin(async move {
                    let mut rows = c
                        .query_iter(
                            "SELECT binding_id, created_ms, json_content FROM bsf_pcf_binding",
                        )
                        .await?;
                    let mut n = 0u64;
                    while let Some(row) = rows.next().await? {
                        if n & 0xFFFF == 0 && loading.is_off() {
                            break;
                        }
                        let (id, created, json): (String, i64, Vec<u8>) =
                            store::mysql::mysql_async::from_row_opt(row).map_err(|e| {
                                TxError::Contract(store::Error::backend_msg(format!(
                                    "bsf_pcf_binding row: {e}"
                                )))
                            })?;
                        if let Some(b) = Indexed::from_json(&id, &json) {
                            loading.load_one(&b, created);
                            n += 1;
                        }
                    }
                    Ok(n)
                })
            })
            .await;
        match n {
            Ok(n) => {
                ix.set_ready();
                Ok(n)
            }
            Err(e) => {
                ix.turn_off();
                Err(e)
            }
        }
    }

    async fn put_subscription(&self, id: String, json: Vec<u8>) -> store::Result<()> {
        let row = Arc::new((id, json));
        let writer = self.db.feed_writer().cloned();
        self.db
            .write(move |c| {
                let (row, writer) = (row.clone(), writer.clone());
                Box::pin(async move {
                    c.exec_drop(
                        "INSERT INTO bsf_subscription (sub_id, json_content) VALUES (?, ?) \
                         ON DUPLICATE KEY UPDATE json_content = VALUES(json_content)",
                        (row.0.as_str(), row.1.as_slice()),
                    )
                    .await?;
                    if let Some(w) = &writer {
                        feed::record(c, w, FEED_SUBSCRIPTIONS, &row.0, Op::Put, None).await?;
                    }
                    Ok(())
                })
            })
            .await
    }

    async fn delete_subscription(&self, id: String) -> store::Result<bool> {
        let id = Arc::new(id);
        let writer = self.db.feed_writer().cloned();
        self.db
            .write(move |c| {
                let (id, writer) = (id.clone(), writer.clone());
                Box::pin(async move {
                    c.exec_drop("DELETE FROM bsf_subscription WHERE sub_id = ?", (id.as_str(),))
                        .await?;
                    let gone = c.affected_rows() > 0;
                    if let (true, Some(w)) = (gone, &writer) {
                        feed::record(c, w, FEED_SUBSCRIPTIONS, &id, Op::Delete, None).await?;
                    }
                    Ok(gone)
                })
            })
            .await
    }

    async fn load_subscriptions(&self) -> store::Result<Vec<(String, Vec<u8>)>> {
        self.db
            .read(|c| {
                Box::pin(async move {
                    Ok(c.query("SELECT sub_id, json_content FROM bsf_subscription").await?)
                })
            })
            .await
    }

    async fn create_keyed(
        &self,
        t: &'static str,
        id: String,
        key1: String,
        key2: Option<String>,
        json: Vec<u8>,
        reject: bool,
    ) -> store::Result<Created> {
        let now = chrono::Utc::now().timestamp_millis();
        let b = Arc::new((id, key1, key2, json));
        self.db
            .write(move |c| {
                let b = b.clone();
                Box::pin(async move {
                    let (id, key1, key2, json) = &*b;
                    let existing: Vec<(String, Vec<u8>)> = c
                        .exec(
                            format!(
                                "SELECT binding_id, json_content FROM {t} WHERE key1 = ? \
                                 FOR UPDATE"
                            ),
                            (key1.as_str(),),
                        )
                        .await?;
                    let existing: Vec<Stored> = existing.into_iter().map(stored).collect();
                    if reject {
                        if let Some(first) = existing.into_iter().next() {
                            return Ok(Created::Exists(first));
                        }
                        insert_keyed(c, t, id, key1, key2.as_deref(), now, json).await?;
                        return Ok(Created::Inserted { replaced: Vec::new() });
                    }
                    for old in &existing {
                        c.exec_drop(format!("DELETE FROM {t} WHERE binding_id = ?"), (&old.id,))
                            .await?;
                    }
                    insert_keyed(c, t, id, key1, key2.as_deref(), now, json).await?;
                    Ok(Created::Inserted { replaced: existing })
                })
            })
            .await
    }

    async fn find_keyed(
        &self,
        t: &'static str,
        key1: Option<String>,
        key2: Option<String>,
    ) -> store::Result<Vec<Stored>> {
        let (cond, args) = match (key1, key2) {
            (Some(a), Some(b)) => ("key1 = ? AND key2 = ?", vec![Value::from(a), Value::from(b)]),
            (Some(a), None) => ("key1 = ?", vec![Value::from(a)]),
            (None, Some(b)) => ("key2 = ?", vec![Value::from(b)]),
            (None, None) => return Ok(Vec::new()),
        };
        let sql = Arc::new(format!(
            "SELECT binding_id, json_content FROM {t} WHERE {cond} ORDER BY created_ms DESC"
        ));
        let args = Arc::new(args);
        self.db
            .read(move |c| {
                let (sql, args) = (sql.clone(), args.clone());
                Box::pin(async move {
                    let rows: Vec<(String, Vec<u8>)> =
                        c.exec(sql.as_str(), Params::Positional((*args).clone())).await?;
                    Ok(rows.into_iter().map(stored).collect())
                })
            })
            .await
    }

    async fn update_keyed(
        &self,
        t: &'static str,
        id: String,
        f: KeyedPatch,
    ) -> store::Result<Updated> {
        let id = Arc::new(id);
        let patch = Arc::new(OncePatch::new(f));
        self.db
            .write(move |c| {
                let (id, patch) = (id.clone(), patch.clone());
                Box::pin(async move {
                    let old: Option<Vec<u8>> = c
                        .exec_first(
                            format!("SELECT json_content FROM {t} WHERE binding_id = ? FOR UPDATE"),
                            (id.as_str(),),
                        )
                        .await?;
                    let Some(old) = old else { return Ok(Updated::NotFound) };
                    let json = match patch.apply(old, |p, old| p(old))? {
                        Patched::Done(j) => j,
                        Patched::Refused(e) => return Ok(Updated::Refused(e)),
                    };
                    c.exec_drop(
                        format!("UPDATE {t} SET json_content = ? WHERE binding_id = ?"),
                        (json.as_slice(), id.as_str()),
                    )
                    .await?;
                    Ok(Updated::Done(json))
                })
            })
            .await
    }

    async fn delete_keyed(&self, t: &'static str, id: String) -> store::Result<Option<Stored>> {
        let id = Arc::new(id);
        self.db
            .write(move |c| {
                let id = id.clone();
                Box::pin(async move {
                    let found: Option<(String, Vec<u8>)> = c
                        .exec_first(
                            format!(
                                "SELECT binding_id, json_content FROM {t} WHERE binding_id = ? \
                                 FOR UPDATE"
                            ),
                            (id.as_str(),),
                        )
                        .await?;
                    if found.is_some() {
                        c.exec_drop(
                            format!("DELETE FROM {t} WHERE binding_id = ?"),
                            (id.as_str(),),
                        )
                        .await?;
                    }
                    Ok(found.map(stored))
                })
            })
            .await
    }
}

async fn insert_keyed(
    c: &mut Conn,
    table: &str,
    id: &str,
    key1: &str,
    key2: Option<&str>,
    created_ms: i64,
    json: &[u8],
) -> Result<(), TxError> {
    c.exec_drop(
        format!(
            "INSERT INTO {table} (binding_id, key1, key2, created_ms, json_content) \
             VALUES (?, ?, ?, ?, ?)"
        ),
        (id, key1, key2, created_ms, json),
    )
    .await?;
    Ok(())
}

impl BindingStore for MysqlBindingStore {
    fn create(&self, binding: NewBinding, reject: bool) -> StoreFuture<'_, Created> {
        Box::pin(MysqlBindingStore::create(self, binding, reject))
    }
    fn find(&self, q: Lookup) -> StoreFuture<'_, Option<Stored>> {
        Box::pin(MysqlBindingStore::find(self, q))
    }
    fn get(&self, id: String) -> StoreFuture<'_, Option<Stored>> {
        Box::pin(MysqlBindingStore::get(self, id))
    }
    fn update(&self, id: String, patch: Patch) -> StoreFuture<'_, Updated> {
        Box::pin(MysqlBindingStore::update(self, id, patch))
    }
    fn delete(&self, id: String) -> StoreFuture<'_, Option<Stored>> {
        Box::pin(MysqlBindingStore::delete(self, id))
    }
    fn remove_older_than(&self, before_ms: i64, limit: u32) -> StoreFuture<'_, Vec<Stored>> {
        Box::pin(MysqlBindingStore::remove_older_than(self, before_ms, limit))
    }
    fn count(&self) -> StoreFuture<'_, u64> {
        Box::pin(MysqlBindingStore::count(self))
    }
    fn insert_many(&self, rows: Vec<NewBinding>) -> StoreFuture<'_, usize> {
        Box::pin(MysqlBindingStore::insert_many(self, rows))
    }
    fn index(&self) -> Option<&Arc<UeAddressIndex>> {
        self.index.as_ref()
    }
    fn load_index(&self) -> StoreFuture<'_, u64> {
        Box::pin(MysqlBindingStore::load_index(self))
    }
    fn create_keyed(
        &self,
        kind: Keyed,
        id: String,
        key1: String,
        key2: Option<String>,
        json: Vec<u8>,
        reject: bool,
    ) -> StoreFuture<'_, Created> {
        Box::pin(MysqlBindingStore::create_keyed(self, table(kind), id, key1, key2, json, reject))
    }
    fn find_keyed(
        &self,
        kind: Keyed,
        key1: Option<String>,
        key2: Option<String>,
    ) -> StoreFuture<'_, Vec<Stored>> {
        Box::pin(MysqlBindingStore::find_keyed(self, table(kind), key1, key2))
    }
    fn update_keyed(&self, kind: Keyed, id: String, patch: KeyedPatch) -> StoreFuture<'_, Updated> {
        Box::pin(MysqlBindingStore::update_keyed(self, table(kind), id, patch))
    }
    fn delete_keyed(&self, kind: Keyed, id: String) -> StoreFuture<'_, Option<Stored>> {
        Box::pin(MysqlBindingStore::delete_keyed(self, table(kind), id))
    }
    fn put_subscription(&self, id: String, json: Vec<u8>) -> StoreFuture<'_, ()> {
        Box::pin(MysqlBindingStore::put_subscription(self, id, json))
    }
    fn delete_subscription(&self, id: String) -> StoreFuture<'_, bool> {
        Box::pin(MysqlBindingStore::delete_subscription(self, id))
    }
    fn load_subscriptions(&self) -> StoreFuture<'_, Vec<(String, Vec<u8>)>> {
        Box::pin(MysqlBindingStore::load_subscriptions(self))
    }
    fn close(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.db.close().await;
            Ok(())
        })
    }
}
