//! The BSF's store on SQLite (the embedded store's writer and reader threads): the schema, one
//! row per PCF binding, the binding document kept whole next to the columns it is looked up by,
//! with the indexes of the reference product's `pcf_binding` table (binding id; UE IPv4 with IP
//! domain; IPv6 prefix; MAC-48; SUPI; GPSI; creation time), and the bulk load.
//!
//! The statements are plain SQL without engine-specific features (no `IS` for equality:
//! absent IP domain and SD are stored as `''`), so the same statements serve a MySQL-protocol
//! backend; only the schema's partial indexes of the sparse keys are SQLite's (a MySQL backend
//! indexes those columns whole). A lookup by UE address is one indexed read; a Register is one write
//! job (the duplicate check and the INSERT inside the writer's group commit, so two concurrent
//! Registers for the same UE cannot both win).

use std::sync::Arc;

use rusqlite::{
    params, params_from_iter, types::Value as SqlValue, Connection, OptionalExtension, Transaction,
};
use store::{Migration, SqliteConfig, SqliteStore};

use super::{
    BindingStore, Created, Keyed, KeyedPatch, Lookup, NewBinding, Patch, StoreFuture, Stored,
    Updated,
};
use crate::models::Keys;
use crate::ue_address_index::{Indexed, UeAddressIndex};

mod bulk;

pub use bulk::SqliteBulkLoad;

pub const MIGRATIONS: [Migration; 6] = [
    Migration::new(
        "bsf-0001-pcf-binding",
        "CREATE TABLE bsf_pcf_binding (
            binding_id TEXT PRIMARY KEY NOT NULL,
            ipv4_addr TEXT,
            ip_domain TEXT NOT NULL DEFAULT '',
            ipv6_prefix TEXT,
            mac_addr_48 TEXT,
            dnn TEXT NOT NULL,
            snssai_sst INTEGER NOT NULL,
            snssai_sd TEXT NOT NULL DEFAULT '',
            supi TEXT,
            gpsi TEXT,
            created_ms INTEGER NOT NULL,
            json_content BLOB NOT NULL
        );
        CREATE INDEX bsf_idx_ipv4 ON bsf_pcf_binding (ipv4_addr, ip_domain, created_ms);
        CREATE INDEX bsf_idx_ipv6 ON bsf_pcf_binding (ipv6_prefix, created_ms);
        CREATE INDEX bsf_idx_mac ON bsf_pcf_binding (mac_addr_48, created_ms);
        CREATE INDEX bsf_idx_supi ON bsf_pcf_binding (supi, created_ms);
        CREATE INDEX bsf_idx_gpsi ON bsf_pcf_binding (gpsi, created_ms);
        CREATE INDEX bsf_idx_created ON bsf_pcf_binding (created_ms);",
    ),
    Migration::new(
        "bsf-0002-subscription",
        "CREATE TABLE bsf_subscription (
            sub_id TEXT PRIMARY KEY NOT NULL,
            json_content BLOB NOT NULL
        );",
    ),
    Migration::new(
        "bsf-0003-ue-and-mbs-binding",
        "CREATE TABLE bsf_pcf_ue_binding (
            binding_id TEXT PRIMARY KEY NOT NULL,
            key1 TEXT NOT NULL,
            key2 TEXT,
            created_ms INTEGER NOT NULL,
            json_content BLOB NOT NULL
        );
        CREATE INDEX bsf_idx_ue_supi ON bsf_pcf_ue_binding (key1, created_ms);
        CREATE INDEX bsf_idx_ue_gpsi ON bsf_pcf_ue_binding (key2, created_ms);
        CREATE TABLE bsf_pcf_mbs_binding (
            binding_id TEXT PRIMARY KEY NOT NULL,
            key1 TEXT NOT NULL,
            key2 TEXT,
            created_ms INTEGER NOT NULL,
            json_content BLOB NOT NULL
        );
        CREATE INDEX bsf_idx_mbs_session ON bsf_pcf_mbs_binding (key1, created_ms);",
    ),
    // Rel-17 addIpv6Prefixes / addMacAddrs: a binding holds any number of them, so they get a
    // row each (kind 'ipv6' or 'mac'); most bindings have none.
    Migration::new(
        "bsf-0004-additional-keys",
        "CREATE TABLE bsf_pcf_binding_key (
            kind TEXT NOT NULL,
            value TEXT NOT NULL,
            binding_id TEXT NOT NULL,
            PRIMARY KEY (kind, value, binding_id)
        );
        CREATE INDEX bsf_idx_key_binding ON bsf_pcf_binding_key (binding_id);",
    ),
    // A binding without an IPv6 prefix, MAC address, SUPI or GPSI (most have no MAC address,
    // IPv4-only UEs no prefix) has no entry in that column's index: an absent key sorted its
    // entry among all other absent ones by creation time, a random page of a long index that
    // each Deregister had to read and write again. Lookups are by value (`=`, `IN`), which
    // SQLite knows implies NOT NULL, so they use these indexes as before.
    Migration::new(
        "bsf-0005-sparse-indexes",
        "DROP INDEX bsf_idx_ipv6;
        CREATE INDEX bsf_idx_ipv6 ON bsf_pcf_binding (ipv6_prefix, created_ms)
            WHERE ipv6_prefix IS NOT NULL;
        DROP INDEX bsf_idx_mac;
        CREATE INDEX bsf_idx_mac ON bsf_pcf_binding (mac_addr_48, created_ms)
            WHERE mac_addr_48 IS NOT NULL;
        DROP INDEX bsf_idx_supi;
        CREATE INDEX bsf_idx_supi ON bsf_pcf_binding (supi, created_ms) WHERE supi IS NOT NULL;
        DROP INDEX bsf_idx_gpsi;
        CREATE INDEX bsf_idx_gpsi ON bsf_pcf_binding (gpsi, created_ms) WHERE gpsi IS NOT NULL;",
    ),
    // No statement reads bindings by SUPI or GPSI alone: Discovery always names a UE address
    // (its own index is the selective one), SUPI and GPSI only filter what it finds. Their two
    // indexes were two more B-tree inserts per Register and two deletes per Deregister and per
    // replacement (issue #28; docs/BENCHMARKS.md, s27).
    Migration::new(
        "bsf-0006-no-supi-gpsi-indexes",
        "DROP INDEX bsf_idx_supi;
        DROP INDEX bsf_idx_gpsi;",
    ),
];

const KEY_IPV6: &str = "ipv6";
const KEY_MAC: &str = "mac";

/// The Rel-17 PCF for a UE bindings: `key1` the SUPI, `key2` the GPSI.
const UE_BINDINGS: &str = "bsf_pcf_ue_binding";
/// The Rel-17 PCF for an MBS session bindings: `key1` the normalised MBS session id.
const MBS_BINDINGS: &str = "bsf_pcf_mbs_binding";

fn table(kind: Keyed) -> &'static str {
    match kind {
        Keyed::PcfForUe => UE_BINDINGS,
        Keyed::PcfForMbs => MBS_BINDINGS,
    }
}

/// The BSF's persistence over the embedded store's threads.
#[derive(Clone)]
pub struct SqliteBindingStore {
    db: SqliteStore,
    /// The Rx proxy's index of bindings by UE address, kept by every write job below.
    index: Option<Arc<UeAddressIndex>>,
}

/// Index changes of one write job, applied last in it (after its SQL succeeded).
fn index_removed(index: &Option<Arc<UeAddressIndex>>, gone: &[Stored]) {
    if let Some(ix) = index {
        for s in gone {
            if let Some(b) = Indexed::from_json(&s.id, &s.json) {
                ix.remove(&b);
            }
        }
    }
}

const SELECT_DOC: &str = "SELECT binding_id, json_content FROM bsf_pcf_binding";

fn stored(row: &rusqlite::Row<'_>) -> rusqlite::Result<Stored> {
    Ok(Stored { id: row.get(0)?, json: row.get(1)? })
}

/// Register's duplicate check by each UE address (constant text: the statement cache finds it
/// without a string built per call).
const CONFLICT_V4: &str = "SELECT binding_id, json_content FROM bsf_pcf_binding \
    WHERE ipv4_addr = ?1 AND ip_domain = ?2 AND dnn = ?3 AND snssai_sst = ?4 AND snssai_sd = ?5";
const CONFLICT_V6: &str = "SELECT binding_id, json_content FROM bsf_pcf_binding \
    WHERE ipv6_prefix = ?1 AND ?2 = ?2 AND dnn = ?3 AND snssai_sst = ?4 AND snssai_sd = ?5";
const CONFLICT_MAC: &str = "SELECT binding_id, json_content FROM bsf_pcf_binding \
    WHERE mac_addr_48 = ?1 AND ?2 = ?2 AND dnn = ?3 AND snssai_sst = ?4 AND snssai_sd = ?5";

/// The bindings already holding one of `keys`' UE addresses for the same DNN and S-NSSAI.
fn conflicts(tx: &Connection, keys: &Keys) -> rusqlite::Result<Vec<Stored>> {
    let mut out: Vec<Stored> = Vec::new();
    let mut run = |sql: &str, a: &str, b: &str| -> rusqlite::Result<()> {
        let mut st = tx.prepare_cached(sql)?;
        for r in st.query_map(params![a, b, keys.dnn, keys.sst, keys.sd], stored)? {
            let r = r?;
            if !out.iter().any(|o| o.id == r.id) {
                out.push(r);
            }
        }
        Ok(())
    };
    if let Some(ip) = &keys.ipv4 {
        run(CONFLICT_V4, ip, &keys.ip_domain)?;
    }
    if let Some(p) = &keys.ipv6 {
        run(CONFLICT_V6, p, "")?;
    }
    if let Some(m) = &keys.mac {
        run(CONFLICT_MAC, m, "")?;
    }
    Ok(out)
}

fn insert(
    tx: &Connection,
    id: &str,
    keys: &Keys,
    created_ms: i64,
    json: &[u8],
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO bsf_pcf_binding (binding_id, ipv4_addr, ip_domain, ipv6_prefix, mac_addr_48,
            dnn, snssai_sst, snssai_sd, supi, gpsi, created_ms, json_content)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?
    .execute(params![
        id,
        keys.ipv4,
        keys.ip_domain,
        keys.ipv6,
        keys.mac,
        keys.dnn,
        keys.sst,
        keys.sd,
        keys.supi,
        keys.gpsi,
        created_ms,
        json
    ])?;
    insert_additional_keys(tx, id, keys)
}

fn insert_additional_keys(tx: &Connection, id: &str, keys: &Keys) -> rusqlite::Result<()> {
    if keys.add_ipv6.is_empty() && keys.add_macs.is_empty() {
        return Ok(());
    }
    let mut st = tx.prepare_cached(
        "INSERT OR IGNORE INTO bsf_pcf_binding_key (kind, value, binding_id) VALUES (?1, ?2, ?3)",
    )?;
    for p in &keys.add_ipv6 {
        st.execute(params![KEY_IPV6, p, id])?;
    }
    for m in &keys.add_macs {
        st.execute(params![KEY_MAC, m, id])?;
    }
    Ok(())
}

/// Removes binding `id` and its additional-key rows, whatever it held.
fn delete_id(tx: &Connection, id: &str) -> rusqlite::Result<usize> {
    tx.prepare_cached("DELETE FROM bsf_pcf_binding_key WHERE binding_id = ?1")?.execute([id])?;
    tx.prepare_cached("DELETE FROM bsf_pcf_binding WHERE binding_id = ?1")?.execute([id])
}

/// Removes a stored binding and its additional-key rows, which only a document naming
/// `addIpv6Prefixes` or `addMacAddrs` has (most have none: their DELETE would be one more
/// index probe per Deregister and per replacing Register, finding nothing).
fn delete_stored(tx: &Connection, s: &Stored) -> rusqlite::Result<usize> {
    let finder = |k: &str| memchr::memmem::find(&s.json, k.as_bytes()).is_some();
    if finder("\"addIpv6Prefixes\"") || finder("\"addMacAddrs\"") {
        tx.prepare_cached("DELETE FROM bsf_pcf_binding_key WHERE binding_id = ?1")?
            .execute([&s.id])?;
    }
    tx.prepare_cached("DELETE FROM bsf_pcf_binding WHERE binding_id = ?1")?.execute([&s.id])
}

fn get_id(c: &Connection, id: &str) -> rusqlite::Result<Option<Stored>> {
    c.prepare_cached(&format!("{SELECT_DOC} WHERE binding_id = ?1"))?
        .query_row([id], stored)
        .optional()
}

impl SqliteBindingStore {
    /// Opens the store file (created when absent) and applies the BSF's migrations.
    pub async fn open(config: SqliteConfig) -> store::Result<Self> {
        let db = SqliteStore::open(config).await?;
        match Self::on(db.clone()).await {
            Ok(s) => Ok(s),
            Err(e) => {
                let _ = db.close().await;
                Err(e)
            }
        }
    }

    /// The binding store on an open SQLite store (the NF skeleton's), applying the BSF's
    /// migrations.
    pub async fn on(db: SqliteStore) -> store::Result<Self> {
        db.migrate(MIGRATIONS).await?;
        Ok(SqliteBindingStore { db, index: None })
    }

    /// Keeps `index` up to date from now on (every write job changes it); [`Self::load_index`]
    /// fills it with what is stored.
    pub fn with_index(mut self, index: Arc<UeAddressIndex>) -> Self {
        self.index = Some(index);
        self
    }

    /// Reads every stored binding into the index (one pass over the table on a reader, from
    /// one snapshot; writes meanwhile go to the index themselves) and makes it answer.
    /// Returns the bindings loaded.
    async fn load_index(&self) -> store::Result<u64> {
        let Some(ix) = self.index.clone() else { return Ok(0) };
        let loading = ix.clone();
        let n = self
            .db
            .read(move |c| {
                let mut st =
                    c.prepare("SELECT binding_id, created_ms, json_content FROM bsf_pcf_binding")?;
                let mut rows = st.query([])?;
                let mut n = 0u64;
                while let Some(r) = rows.next()? {
                    if n & 0xFFFF == 0 && loading.is_off() {
                        break;
                    }
                    let id = r.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?;
                    let created: i64 = r.get(1)?;
                    let json = r.get_ref(2)?.as_bytes().map_err(rusqlite::Error::from)?;
                    if let Some(b) = loading.indexed(id, json) {
                        loading.load_one(&b, created);
                        n += 1;
                    }
                }
                Ok(n)
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

    /// A write job's outcome; a failed one may have changed the index without the store.
    fn checked<T>(&self, r: store::Result<T>) -> store::Result<T> {
        if r.is_err() {
            if let Some(ix) = &self.index {
                ix.turn_off();
            }
        }
        r
    }

    /// The embedded store underneath, for this module's tests and tools.
    pub fn db(&self) -> &SqliteStore {
        &self.db
    }

    /// Registers a binding: one write job checking for a binding of the same UE address, DNN
    /// and S-NSSAI and, unless `reject` finds one, removing it and inserting the new one.
    async fn create(&self, binding: NewBinding, reject: bool) -> store::Result<Created> {
        let NewBinding { id, keys, created_ms, json } = binding;
        let index = self.index.clone();
        let indexed = index.as_ref().map(|ix| ix.indexed_new(&id, &keys, &json));
        let r = self
            .db
            .write(move |tx: &Transaction<'_>| {
                let existing = conflicts(tx, &keys)?;
                if reject {
                    if let Some(first) = existing.first() {
                        return Ok(Created::Exists(first.clone()));
                    }
                    insert(tx, &id, &keys, created_ms, &json)?;
                } else {
                    for old in &existing {
                        delete_stored(tx, old)?;
                    }
                    insert(tx, &id, &keys, created_ms, &json)?;
                }
                // The new binding first: a Discovery from the index meanwhile finds the old one
                // or the new one, never neither.
                if let (Some(ix), Some(b)) = (&index, &indexed) {
                    ix.insert(b, created_ms);
                }
                if !reject {
                    index_removed(&index, &existing);
                }
                let replaced = if reject { Vec::new() } else { existing };
                Ok(Created::Inserted { replaced })
            })
            .await;
        self.checked(r)
    }

    /// Inserts bindings without the duplicate check, in one write job: bulk loading (a
    /// migration from another BSF, a benchmark's preload). Ids must be new.
    async fn insert_many(&self, rows: Vec<NewBinding>) -> store::Result<usize> {
        let index = self.index.clone();
        let r = self
            .db
            .write(move |tx| {
                for b in &rows {
                    insert(tx, &b.id, &b.keys, b.created_ms, &b.json)?;
                }
                if let Some(ix) = &index {
                    for b in &rows {
                        ix.insert(&ix.indexed_new(&b.id, &b.keys, &b.json), b.created_ms);
                    }
                }
                Ok(rows.len())
            })
            .await;
        self.checked(r)
    }

    /// The newest binding matching `q` (one indexed read).
    async fn find(&self, q: Lookup) -> store::Result<Option<Stored>> {
        self.db
            .read(move |c| {
                let mut sql = String::from(SELECT_DOC);
                let mut args: Vec<SqlValue> = Vec::new();
                let arg = |v: SqlValue, args: &mut Vec<SqlValue>| {
                    args.push(v);
                    format!("?{}", args.len())
                };
                if q.ipv4.is_none() && q.ipv6.is_empty() && q.mac.is_none() {
                    return Ok(None);
                }
                sql.push_str(" WHERE 1 = 1");
                if let Some(ip) = q.ipv4 {
                    sql.push_str(&format!(
                        " AND ipv4_addr = {}",
                        arg(SqlValue::Text(ip), &mut args)
                    ));
                    if let Some(d) = q.ip_domain {
                        sql.push_str(&format!(
                            " AND ip_domain = {}",
                            arg(SqlValue::Text(d), &mut args)
                        ));
                    }
                }
                // An IPv6 prefix or MAC address is the binding's own or one of its additional
                // ones (both sides of the OR are indexed).
                if !q.ipv6.is_empty() {
                    let list: Vec<String> =
                        q.ipv6.into_iter().map(|p| arg(SqlValue::Text(p), &mut args)).collect();
                    let list = list.join(", ");
                    sql.push_str(&format!(
                        " AND (ipv6_prefix IN ({list}) OR binding_id IN (SELECT binding_id FROM \
                         bsf_pcf_binding_key WHERE kind = '{KEY_IPV6}' AND value IN ({list})))"
                    ));
                }
                if let Some(m) = q.mac {
                    let m = arg(SqlValue::Text(m), &mut args);
                    sql.push_str(&format!(
                        " AND (mac_addr_48 = {m} OR binding_id IN (SELECT binding_id FROM \
                         bsf_pcf_binding_key WHERE kind = '{KEY_MAC}' AND value = {m}))"
                    ));
                }
                if let Some(d) = q.dnn {
                    sql.push_str(&format!(" AND dnn = {}", arg(SqlValue::Text(d), &mut args)));
                }
                if let Some((sst, sd)) = q.snssai {
                    sql.push_str(&format!(
                        " AND snssai_sst = {}",
                        arg(SqlValue::Integer(sst.into()), &mut args)
                    ));
                    sql.push_str(&format!(
                        " AND snssai_sd = {}",
                        arg(SqlValue::Text(sd), &mut args)
                    ));
                }
                if let Some(s) = q.supi {
                    sql.push_str(&format!(" AND supi = {}", arg(SqlValue::Text(s), &mut args)));
                }
                if let Some(g) = q.gpsi {
                    sql.push_str(&format!(" AND gpsi = {}", arg(SqlValue::Text(g), &mut args)));
                }
                sql.push_str(" ORDER BY created_ms DESC LIMIT 1");
                let mut st = c.prepare_cached(&sql)?;
                Ok(st.query_row(params_from_iter(args), stored).optional()?)
            })
            .await
    }

    async fn get(&self, id: String) -> store::Result<Option<Stored>> {
        self.db.read(move |c| Ok(get_id(c, &id)?)).await
    }

    /// Removes a binding; returns it, or `None` when it was not stored.
    async fn delete(&self, id: String) -> store::Result<Option<Stored>> {
        let index = self.index.clone();
        let r = self
            .db
            .write(move |tx| {
                let found = get_id(tx, &id)?;
                if let Some(f) = &found {
                    delete_stored(tx, f)?;
                    index_removed(&index, std::slice::from_ref(f));
                }
                Ok(found)
            })
            .await;
        self.checked(r)
    }

    /// Read-modify-write of one binding inside one write job: `f` gets the stored document and
    /// returns the new one with its keys, or refuses.
    async fn update(&self, id: String, f: Patch) -> store::Result<Updated> {
        let index = self.index.clone();
        let r = self
            .db
            .write(move |tx| {
                let Some((old, created_ms)) = tx
                    .prepare_cached(
                        "SELECT json_content, created_ms FROM bsf_pcf_binding WHERE binding_id = ?1",
                    )?
                    .query_row([&id], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?)))
                    .optional()?
                else {
                    return Ok(Updated::NotFound);
                };
                let old_indexed = index.as_ref().and_then(|_| Indexed::from_json(&id, &old));
                let (keys, json) = match f(old) {
                    Ok(x) => x,
                    Err(e) => return Ok(Updated::Refused(e)),
                };
                tx.prepare_cached(
                    "UPDATE bsf_pcf_binding SET ipv4_addr = ?2, ip_domain = ?3, ipv6_prefix = ?4,
                        mac_addr_48 = ?5, json_content = ?6 WHERE binding_id = ?1",
                )?
                .execute(params![
                    id,
                    keys.ipv4,
                    keys.ip_domain,
                    keys.ipv6,
                    keys.mac,
                    json
                ])?;
                tx.prepare_cached("DELETE FROM bsf_pcf_binding_key WHERE binding_id = ?1")?
                    .execute([&id])?;
                insert_additional_keys(tx, &id, &keys)?;
                if let Some(ix) = &index {
                    match (&old_indexed, ix.indexed(&id, &json)) {
                        (Some(o), Some(n)) => ix.replace(o, &n, created_ms),
                        (None, Some(n)) => ix.insert(&n, created_ms),
                        (Some(o), None) => {
                            ix.remove(o);
                        }
                        (None, None) => {}
                    }
                }
                Ok(Updated::Done(json))
            })
            .await;
        self.checked(r)
    }

    /// Removes up to `limit` bindings created before `before_ms`, oldest first (index on the
    /// creation time); returns them.
    async fn remove_older_than(&self, before_ms: i64, limit: u32) -> store::Result<Vec<Stored>> {
        let index = self.index.clone();
        let r = self
            .db
            .write(move |tx| {
                let old: Vec<Stored> = tx
                    .prepare_cached(&format!(
                        "{SELECT_DOC} WHERE created_ms < ?1 ORDER BY created_ms LIMIT ?2"
                    ))?
                    .query_map(params![before_ms, limit], stored)?
                    .collect::<rusqlite::Result<_>>()?;
                for s in &old {
                    delete_stored(tx, s)?;
                }
                index_removed(&index, &old);
                Ok(old)
            })
            .await;
        self.checked(r)
    }

    async fn count(&self) -> store::Result<u64> {
        self.db
            .read(|c| {
                Ok(c.query_row("SELECT COUNT(*) FROM bsf_pcf_binding", [], |r| r.get::<_, i64>(0))?
                    as u64)
            })
            .await
    }

    // ---- subscriptions ------------------------------------------------------------------

    async fn put_subscription(&self, id: String, json: Vec<u8>) -> store::Result<()> {
        self.db
            .write(move |tx| {
                tx.prepare_cached("DELETE FROM bsf_subscription WHERE sub_id = ?1")?
                    .execute([&id])?;
                tx.prepare_cached(
                    "INSERT INTO bsf_subscription (sub_id, json_content) VALUES (?1, ?2)",
                )?
                .execute(params![id, json])?;
                Ok(())
            })
            .await
    }

    async fn delete_subscription(&self, id: String) -> store::Result<bool> {
        self.db
            .write(move |tx| {
                Ok(tx
                    .prepare_cached("DELETE FROM bsf_subscription WHERE sub_id = ?1")?
                    .execute([id])?
                    > 0)
            })
            .await
    }

    async fn load_subscriptions(&self) -> store::Result<Vec<(String, Vec<u8>)>> {
        self.db
            .read(|c| {
                let mut st = c.prepare("SELECT sub_id, json_content FROM bsf_subscription")?;
                let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            })
            .await
    }
}

/// The Rel-17 binding tables: one unique-per-policy key (`key1`) and an optional second lookup
/// key (`key2`). Small next to the PDU session bindings, same SQL discipline.
impl SqliteBindingStore {
    /// Inserts, unless `reject` finds a binding with the same `key1` (then returns it); without
    /// `reject`, bindings with the same `key1` are replaced.
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
        self.db
            .write(move |tx| {
                let existing: Vec<Stored> = tx
                    .prepare_cached(&format!(
                        "SELECT binding_id, json_content FROM {t} WHERE key1 = ?1"
                    ))?
                    .query_map([&key1], stored)?
                    .collect::<rusqlite::Result<_>>()?;
                if reject {
                    if let Some(first) = existing.into_iter().next() {
                        return Ok(Created::Exists(first));
                    }
                    return insert_keyed(tx, t, &id, &key1, key2.as_deref(), now, &json)
                        .map(|()| Created::Inserted { replaced: Vec::new() });
                }
                for old in &existing {
                    tx.prepare_cached(&format!("DELETE FROM {t} WHERE binding_id = ?1"))?
                        .execute([&old.id])?;
                }
                insert_keyed(tx, t, &id, &key1, key2.as_deref(), now, &json)?;
                Ok(Created::Inserted { replaced: existing })
            })
            .await
    }

    /// Bindings whose `key1` and/or `key2` match, newest first.
    async fn find_keyed(
        &self,
        t: &'static str,
        key1: Option<String>,
        key2: Option<String>,
    ) -> store::Result<Vec<Stored>> {
        self.db
            .read(move |c| {
                let (sql, args) = match (key1, key2) {
                    (Some(a), Some(b)) => ("key1 = ?1 AND key2 = ?2", vec![a, b]),
                    (Some(a), None) => ("key1 = ?1", vec![a]),
                    (None, Some(b)) => ("key2 = ?1", vec![b]),
                    (None, None) => return Ok(Vec::new()),
                };
                let mut st = c.prepare_cached(&format!(
                    "SELECT binding_id, json_content FROM {t} WHERE {sql} ORDER BY created_ms DESC"
                ))?;
                let rows = st.query_map(params_from_iter(args), stored)?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            })
            .await
    }

    /// Read-modify-write of one binding's document (its keys do not change).
    async fn update_keyed(
        &self,
        t: &'static str,
        id: String,
        f: KeyedPatch,
    ) -> store::Result<Updated> {
        self.db
            .write(move |tx| {
                let old: Option<Vec<u8>> = tx
                    .prepare_cached(&format!("SELECT json_content FROM {t} WHERE binding_id = ?1"))?
                    .query_row([&id], |r| r.get(0))
                    .optional()?;
                let Some(old) = old else { return Ok(Updated::NotFound) };
                let json = match f(old) {
                    Ok(j) => j,
                    Err(e) => return Ok(Updated::Refused(e)),
                };
                tx.prepare_cached(&format!(
                    "UPDATE {t} SET json_content = ?2 WHERE binding_id = ?1"
                ))?
                .execute(params![id, json])?;
                Ok(Updated::Done(json))
            })
            .await
    }

    /// Removes a binding; returns it, or `None` when it was not stored.
    async fn delete_keyed(&self, t: &'static str, id: String) -> store::Result<Option<Stored>> {
        self.db
            .write(move |tx| {
                let found = tx
                    .prepare_cached(&format!(
                        "SELECT binding_id, json_content FROM {t} WHERE binding_id = ?1"
                    ))?
                    .query_row([&id], stored)
                    .optional()?;
                if found.is_some() {
                    tx.prepare_cached(&format!("DELETE FROM {t} WHERE binding_id = ?1"))?
                        .execute([&id])?;
                }
                Ok(found)
            })
            .await
    }
}

impl BindingStore for SqliteBindingStore {
    fn create(&self, binding: NewBinding, reject: bool) -> StoreFuture<'_, Created> {
        Box::pin(SqliteBindingStore::create(self, binding, reject))
    }
    fn find(&self, q: Lookup) -> StoreFuture<'_, Option<Stored>> {
        Box::pin(SqliteBindingStore::find(self, q))
    }
    fn get(&self, id: String) -> StoreFuture<'_, Option<Stored>> {
        Box::pin(SqliteBindingStore::get(self, id))
    }
    fn update(&self, id: String, patch: Patch) -> StoreFuture<'_, Updated> {
        Box::pin(SqliteBindingStore::update(self, id, patch))
    }
    fn delete(&self, id: String) -> StoreFuture<'_, Option<Stored>> {
        Box::pin(SqliteBindingStore::delete(self, id))
    }
    fn remove_older_than(&self, before_ms: i64, limit: u32) -> StoreFuture<'_, Vec<Stored>> {
        Box::pin(SqliteBindingStore::remove_older_than(self, before_ms, limit))
    }
    fn count(&self) -> StoreFuture<'_, u64> {
        Box::pin(SqliteBindingStore::count(self))
    }
    fn insert_many(&self, rows: Vec<NewBinding>) -> StoreFuture<'_, usize> {
        Box::pin(SqliteBindingStore::insert_many(self, rows))
    }
    fn index(&self) -> Option<&Arc<UeAddressIndex>> {
        self.index.as_ref()
    }
    fn load_index(&self) -> StoreFuture<'_, u64> {
        Box::pin(SqliteBindingStore::load_index(self))
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
        Box::pin(self.create_keyed(table(kind), id, key1, key2, json, reject))
    }
    fn find_keyed(
        &self,
        kind: Keyed,
        key1: Option<String>,
        key2: Option<String>,
    ) -> StoreFuture<'_, Vec<Stored>> {
        Box::pin(self.find_keyed(table(kind), key1, key2))
    }
    fn update_keyed(&self, kind: Keyed, id: String, patch: KeyedPatch) -> StoreFuture<'_, Updated> {
        Box::pin(self.update_keyed(table(kind), id, patch))
    }
    fn delete_keyed(&self, kind: Keyed, id: String) -> StoreFuture<'_, Option<Stored>> {
        Box::pin(self.delete_keyed(table(kind), id))
    }
    fn put_subscription(&self, id: String, json: Vec<u8>) -> StoreFuture<'_, ()> {
        Box::pin(SqliteBindingStore::put_subscription(self, id, json))
    }
    fn delete_subscription(&self, id: String) -> StoreFuture<'_, bool> {
        Box::pin(SqliteBindingStore::delete_subscription(self, id))
    }
    fn load_subscriptions(&self) -> StoreFuture<'_, Vec<(String, Vec<u8>)>> {
        Box::pin(SqliteBindingStore::load_subscriptions(self))
    }
    fn close(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.db.close())
    }
}

fn insert_keyed(
    tx: &Connection,
    table: &str,
    id: &str,
    key1: &str,
    key2: Option<&str>,
    created_ms: i64,
    json: &[u8],
) -> store::Result<()> {
    tx.prepare_cached(&format!(
        "INSERT INTO {table} (binding_id, key1, key2, created_ms, json_content) VALUES (?1, ?2, ?3, ?4, ?5)"
    ))?
    .execute(params![id, key1, key2, created_ms, json])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(c: &Connection, sql: &str) -> String {
        let mut st = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).expect("plan");
        let nulls = vec![SqlValue::Null; st.parameter_count()];
        let rows = st.query_map(params_from_iter(nulls), |r| r.get::<_, String>(3)).expect("rows");
        rows.map(|r| r.expect("row")).collect::<Vec<_>>().join("; ")
    }

    #[test]
    fn lookups_by_a_sparse_key_use_its_partial_index() {
        let c = Connection::open_in_memory().expect("db");
        for m in MIGRATIONS {
            c.execute_batch(m.sql).expect(m.id);
        }
        let cases = [
            // Register's duplicate check.
            (CONFLICT_V6.to_owned(), "bsf_idx_ipv6"),
            (CONFLICT_MAC.to_owned(), "bsf_idx_mac"),
            (CONFLICT_V4.to_owned(), "bsf_idx_ipv4"),
            // Discovery (`find`), the binding's own key or an additional one.
            (
                format!(
                    "{SELECT_DOC} WHERE 1 = 1 AND (ipv6_prefix IN (?1, ?2) OR binding_id IN \
                     (SELECT binding_id FROM bsf_pcf_binding_key WHERE kind = 'ipv6' AND \
                     value IN (?1, ?2))) ORDER BY created_ms DESC LIMIT 1"
                ),
                "bsf_idx_ipv6",
            ),
            (
                format!(
                    "{SELECT_DOC} WHERE 1 = 1 AND (mac_addr_48 = ?1 OR binding_id IN \
                     (SELECT binding_id FROM bsf_pcf_binding_key WHERE kind = 'mac' AND \
                     value = ?1)) ORDER BY created_ms DESC LIMIT 1"
                ),
                "bsf_idx_mac",
            ),
            // SUPI and GPSI filter a UE address's bindings (they have no index of their own).
            (
                format!("{SELECT_DOC} WHERE 1 = 1 AND ipv4_addr = ?1 AND supi = ?2 AND gpsi = ?3"),
                "bsf_idx_ipv4",
            ),
        ];
        for (sql, index) in cases {
            let p = plan(&c, &sql);
            assert!(p.contains(index) && !p.contains("SCAN bsf_pcf_binding"), "{sql}: {p}");
        }
    }

    /// The columns a binding row holds besides its id and creation time.
    type Columns = (
        Option<String>,
        String,
        Option<String>,
        Option<String>,
        String,
        i64,
        String,
        Option<String>,
        Option<String>,
        Vec<u8>,
    );

    const COLUMNS: &str = "ipv4_addr, ip_domain, ipv6_prefix, mac_addr_48, dnn, snssai_sst, \
                           snssai_sd, supi, gpsi, json_content";

    fn columns(r: &rusqlite::Row<'_>) -> rusqlite::Result<Columns> {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
            r.get(9)?,
        ))
    }

    /// PcfBinding `i` as a PCF registers it (dual stack, an S-NSSAI with SD, Diameter identity).
    fn document(i: u64) -> serde_json::Value {
        serde_json::json!({
            "supi": format!("imsi-00101{:010}", 7 + i),
            "gpsi": format!("msisdn-33{:010}", 7 + i),
            "ipv4Addr": format!("10.0.{}.{}", i / 250, 1 + i % 250),
            "ipv6Prefix": format!("2001:db8:0:{i:x}::/64"),
            "dnn": "IMS",
            "snssai": {"sst": 1, "sd": "00000A"},
            "pcfFqdn": format!("pcf{}.pcf.example", i % 2),
            "pcfIpEndPoints": [{"ipv4Address": "192.0.2.1", "port": 7003}],
            "pcfDiamHost": format!("pcf{}.pcf.example", i % 2),
            "pcfDiamRealm": "pcf.example",
        })
    }

    fn line(i: u64) -> String {
        format!(r#"{{"bindingId":"b-{i}","pcfBinding":{}}}"#, document(i)) + "\n"
    }

    async fn bulk_load(path: &std::path::Path, input: String) -> crate::preload::Report {
        let load = SqliteBulkLoad::open(SqliteConfig::new(path)).await.unwrap();
        let on_bad = crate::preload::OnBadLine::Stop;
        tokio::task::spawn_blocking(move || {
            crate::preload::run(std::io::Cursor::new(input), Box::new(load), on_bad, |_| {})
        })
        .await
        .unwrap()
        .unwrap()
    }

    /// The same PcfBinding registered over HTTP and bulk-loaded gives the same row.
    #[tokio::test]
    async fn bulk_loaded_rows_are_what_register_stores() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let run = crate::RunConfig {
            bsf: crate::BsfConfig::default(),
            sbi: sbi::ServerConfig::default(),
            client: sbi::client::ClientConfig::default(),
            store: SqliteConfig { readers: 1, ..SqliteConfig::new(a.path().join("bsf.db")) },
            instance_id: None,
        };
        let bound = crate::bind(run).await.unwrap();
        let url = format!("http://{}/nbsf-management/v1/pcfBindings", bound.local_addr());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(bound.serve(async {
            let _ = stopped.await;
        }));
        let client = sbi::client::SbiClient::new(&Default::default()).unwrap();
        for i in 0..3 {
            let r = client
                .post(&url)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&document(i)).unwrap())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201, "{}", String::from_utf8_lossy(r.body()));
        }
        let _ = stop.send(());
        serving.await.unwrap().unwrap();
        let sql = format!("SELECT {COLUMNS} FROM bsf_pcf_binding ORDER BY ipv4_addr");
        let read = |path: std::path::PathBuf| -> Vec<Columns> {
            let c = Connection::open(path).unwrap();
            let mut st = c.prepare(&sql).unwrap();
            let rows = st.query_map([], columns).unwrap().map(Result::unwrap).collect();
            rows
        };
        let registered = read(a.path().join("bsf.db"));

        let path = b.path().join("bsf.db");
        let done = bulk_load(&path, (0..3).map(line).collect()).await;
        assert_eq!(done.bindings, 3);
        assert_eq!(registered.len(), 3);
        assert_eq!(read(path.clone()), registered);
        let c = Connection::open(&path).unwrap();
        let ids: Vec<String> = c
            .prepare("SELECT binding_id FROM bsf_pcf_binding ORDER BY ipv4_addr")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(ids, ["b-0", "b-1", "b-2"]);
    }

    /// Several transactions, the BSF's own indexes rebuilt, a later line replacing an earlier
    /// one, and the store finds what was written.
    #[tokio::test]
    async fn bulk_load_keeps_the_schema_and_the_store_finds_the_bindings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bsf.db");
        let n = crate::preload::CHUNK_LINES as u64 * 2 + 17;
        let mut input: String = (0..n).map(line).collect();
        // Binding 5 again, with an additional prefix: it replaces the first one, keys and all.
        let mut again = document(5);
        again["addIpv6Prefixes"] = serde_json::json!(["2001:db8:ffff::/48"]);
        input.push_str(&format!(r#"{{"bindingId":"b-5","pcfBinding":{again}}}"#));
        input.push('\n');
        let done = bulk_load(&path, input).await;
        assert_eq!((done.bindings, done.skipped), (n + 1, 0));
        assert!(done.db_bytes > 0 && done.db_bytes == bulk::db_bytes(&path));
        // More bindings later go on top, and replace by id again.
        let more: String = (n..n + 5).map(line).chain(std::iter::once(line(5))).collect();
        bulk_load(&path, more).await;

        let fresh = tempfile::tempdir().unwrap();
        let fresh =
            SqliteBindingStore::open(SqliteConfig::new(fresh.path().join("bsf.db"))).await.unwrap();
        let want = fresh.db().read(|c| Ok(bulk::secondary_indexes(c)?)).await.unwrap();
        fresh.db().close().await.unwrap();

        let bindings = SqliteBindingStore::open(SqliteConfig::new(&path)).await.unwrap();
        let db = bindings.db().clone();
        assert_eq!(db.read(|c| Ok(bulk::secondary_indexes(c)?)).await.unwrap(), want);
        let mode: String =
            db.read(|c| Ok(c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?)).await.unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(bindings.count().await.unwrap(), n + 5);
        let keys: i64 = db
            .read(
                |c| Ok(c.query_row("SELECT COUNT(*) FROM bsf_pcf_binding_key", [], |r| r.get(0))?),
            )
            .await
            .unwrap();
        assert_eq!(keys, 0, "the replaced binding 5 took its additional prefix with it");
        for i in [0, 5, crate::preload::CHUNK_LINES as u64, n - 1, n + 4] {
            let ip = document(i)["ipv4Addr"].as_str().unwrap().to_owned();
            let found = bindings.find(Lookup { ipv4: Some(ip), ..Default::default() }).await;
            let found = found.unwrap().expect("found by UE address");
            assert_eq!(found.id, format!("b-{i}"));
            let mut doc = document(i);
            crate::models::validate_binding(&mut doc).unwrap();
            assert_eq!(found.json, serde_json::to_vec(&doc).unwrap());
        }
        let by_prefix = Lookup { ipv6: vec!["2001:db8:0:7::/64".into()], ..Default::default() };
        assert_eq!(bindings.find(by_prefix).await.unwrap().unwrap().id, "b-7");
        db.close().await.unwrap();
    }

    /// A bulk load refuses a file a BSF is serving from.
    #[tokio::test]
    async fn bulk_load_needs_the_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let config = SqliteConfig::new(dir.path().join("bsf.db"));
        let serving = SqliteBindingStore::open(config.clone()).await.unwrap();
        serving.put_subscription("s".into(), b"{}".to_vec()).await.unwrap();
        let e = SqliteBulkLoad::open(config).await.err().expect("refused");
        assert!(e.to_string().contains("in use"), "{e}");
        serving.db().close().await.unwrap();
    }

    /// Update and Deregister leave no additional-key row behind.
    #[tokio::test]
    async fn additional_keys_follow_their_binding() {
        let dir = tempfile::tempdir().unwrap();
        let s =
            SqliteBindingStore::open(SqliteConfig::new(dir.path().join("bsf.db"))).await.unwrap();
        let key_rows = || async {
            s.db()
                .read(|c| {
                    Ok(c.query_row("SELECT COUNT(*) FROM bsf_pcf_binding_key", [], |r| {
                        r.get::<_, i64>(0)
                    })?)
                })
                .await
                .unwrap()
        };
        let mut doc = document(1);
        doc["addIpv6Prefixes"] = serde_json::json!(["2001:db8:1::/64", "2001:db8:2::/64"]);
        doc["addMacAddrs"] = serde_json::json!(["aa-bb-cc-dd-ee-ff"]);
        let keys = crate::models::validate_binding(&mut doc).unwrap();
        let json = serde_json::to_vec(&doc).unwrap();
        let b = NewBinding { id: "x".into(), keys, created_ms: 1, json: json.into() };
        s.create(b, false).await.unwrap();
        assert_eq!(key_rows().await, 3);
        let patched = s
            .update(
                "x".into(),
                Box::new(|old| {
                    let mut d: serde_json::Value = serde_json::from_slice(&old).unwrap();
                    d["addIpv6Prefixes"] = serde_json::json!(["2001:db8:9::/64"]);
                    let keys = crate::models::validate_binding(&mut d)?;
                    Ok((keys, serde_json::to_vec(&d)?))
                }),
            )
            .await
            .unwrap();
        assert!(matches!(patched, Updated::Done(_)));
        assert_eq!(key_rows().await, 2);
        assert!(s.delete("x".into()).await.unwrap().is_some());
        assert_eq!(key_rows().await, 0);
        s.db().close().await.unwrap();
    }
}
