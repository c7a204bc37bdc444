//! Bulk preload of PDU session bindings straight into the BSF's database file, before the BSF
//! starts: the benchmark kit's preloaded state (tens of millions of bindings, which Register over
//! HTTP would take hours to create), or seeding a lab.
//!
//! Every row is what Nbsf_Management_Register stores for the same PcfBinding: the document
//! goes through [`models::validate_binding`] and `serde_json::to_vec` as in
//! `nbsf_management::register`, the indexed columns are the [`Keys`] it returns, and the row
//! is written by the store's own INSERT. Only the binding id differs in origin: it is a
//! version 4 UUID derived from a seed and the binding's index, so a caller can name any
//! preloaded binding without reading the database back.
//!
//! Speed comes from how the file is written, not from skipping work: the file is opened alone
//! (no journal, no fsync until one at the end, a large page cache), the secondary indexes are
//! dropped and built again afterwards from their own DDL (sorting once is far cheaper than
//! millions of random B-tree inserts), rows go in large transactions through one prepared
//! statement, and the JSON documents are built on other threads while the writer inserts.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::Instant;

use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};
use store::{SqliteConfig, SqliteStore};

use crate::models::{self, Keys};
use crate::store::{self as schema, BindingStore};

/// Rows per transaction and per batch handed from the builders to the writer.
const BATCH: u64 = 20_000;
/// Page cache of the loading connection: the primary key index of ten million bindings fits.
const CACHE_KIB: i64 = 1024 * 1024;

/// A PCF the bindings name.
#[derive(Debug, Clone)]
pub struct PcfIdentity {
    /// `pcfDiamHost`: where the Rx proxy sends the AAR of this PCF's UEs.
    pub diam_host: String,
    pub diam_realm: String,
    pub fqdn: String,
    /// `pcfId` (an NfInstanceId).
    pub instance_id: String,
    /// `pcfIpEndPoints`.
    pub sbi_addr: Ipv4Addr,
    pub sbi_port: u16,
}

/// How binding number `i` looks: every binding differs by its UE addresses, SUPI, GPSI and id,
/// and names PCF `i % pcfs.len()`.
#[derive(Debug, Clone)]
pub struct BindingFactory {
    /// MCC + MNC of the SUPIs: binding `i` has `imsi-<prefix><msin_first + i, 10 digits>`.
    pub supi_prefix: String,
    pub msin_first: u64,
    /// GPSI `msisdn-<prefix><msin_first + i, 10 digits>`.
    pub msisdn_prefix: String,
    /// UE IPv4 address of binding 0; binding `i` has this address + `i` (modulo 2^32).
    pub ipv4_first: Ipv4Addr,
    /// With an IPv6 prefix too (dual stack): `<ipv6_base + i>::/64`.
    pub ipv6: bool,
    /// The first /64 (its high 64 bits count up).
    pub ipv6_base: Ipv6Addr,
    pub dnn: String,
    pub sst: u8,
    pub sd: Option<String>,
    pub pcfs: Vec<PcfIdentity>,
    /// Seed of the binding ids.
    pub seed: u64,
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl BindingFactory {
    /// The UE's IPv4 address in binding `i`.
    pub fn ue_ipv4(&self, i: u64) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.ipv4_first).wrapping_add(i as u32))
    }

    /// The PCF (index into `pcfs`) binding `i` names.
    pub fn pcf_index(&self, i: u64) -> usize {
        (i % self.pcfs.len().max(1) as u64) as usize
    }

    /// The id of preloaded binding `i`: a version 4 UUID, random-looking, fixed by the seed.
    pub fn binding_id(&self, i: u64) -> String {
        let a = splitmix(self.seed ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        let b = splitmix(a ^ i);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&a.to_be_bytes());
        bytes[8..].copy_from_slice(&b.to_be_bytes());
        uuid::Builder::from_random_bytes(bytes).into_uuid().to_string()
    }

    /// The PcfBinding a PCF would register for binding `i` (TS 29.521 §5.6.2.2).
    pub fn document(&self, i: u64) -> Value {
        let msin = self.msin_first + i;
        let mut v = json!({
            "supi": format!("imsi-{}{msin:010}", self.supi_prefix),
            "gpsi": format!("msisdn-{}{msin:010}", self.msisdn_prefix),
            "ipv4Addr": self.ue_ipv4(i).to_string(),
            "dnn": self.dnn,
            "snssai": {"sst": self.sst},
        });
        if let Some(sd) = &self.sd {
            v["snssai"]["sd"] = json!(sd);
        }
        if self.ipv6 {
            let net = u128::from(self.ipv6_base).wrapping_add(u128::from(i) << 64);
            v["ipv6Prefix"] = json!(format!("{}/64", Ipv6Addr::from(net)));
        }
        if let Some(p) = self.pcfs.get(self.pcf_index(i)) {
            v["pcfFqdn"] = json!(p.fqdn);
            v["pcfIpEndPoints"] =
                json!([{"ipv4Address": p.sbi_addr.to_string(), "port": p.sbi_port}]);
            v["pcfDiamHost"] = json!(p.diam_host);
            v["pcfDiamRealm"] = json!(p.diam_realm);
            v["pcfId"] = json!(p.instance_id);
        }
        v
    }

    /// What Register stores for binding `i`: its keys and its document bytes.
    pub fn row(&self, i: u64) -> Result<(Keys, Vec<u8>), PreloadError> {
        let mut doc = self.document(i);
        let keys = models::validate_binding(&mut doc)
            .map_err(|p| PreloadError::Invalid(i, serde_json::to_string(&p).unwrap_or_default()))?;
        let json = serde_json::to_vec(&doc).map_err(|e| PreloadError::Invalid(i, e.to_string()))?;
        Ok((keys, json))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PreloadError {
    #[error("store: {0}")]
    Store(#[from] store::Error),
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("binding {0} is not a valid PcfBinding: {1}")]
    Invalid(u64, String),
    #[error("preload worker: {0}")]
    Worker(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Where a running preload is, for a progress bar.
#[derive(Debug, Default)]
pub struct Progress {
    /// Bindings inserted so far.
    pub rows: AtomicU64,
    /// The rows are in; the secondary indexes are being built.
    pub indexing: AtomicBool,
}

/// What a preload did.
#[derive(Debug, Clone, PartialEq)]
pub struct Preloaded {
    pub bindings: u64,
    /// Whole preload, wall seconds.
    pub seconds: f64,
    /// Of which building the secondary indexes.
    pub index_seconds: f64,
    /// The database file (and its WAL, if any) afterwards.
    pub db_bytes: u64,
}

/// Writes bindings `range` of `factory` into the BSF database at `path` (created with the
/// BSF's schema when absent). Nothing else may have the file open.
pub async fn preload(
    path: &Path,
    factory: Arc<BindingFactory>,
    range: Range<u64>,
    progress: Arc<Progress>,
) -> Result<Preloaded, PreloadError> {
    let t0 = Instant::now();
    // The schema exactly as the BSF creates it: its migrations through the store engine.
    let db = SqliteStore::open(SqliteConfig { readers: 1, ..SqliteConfig::new(path) }).await?;
    let opened = BindingStore::open(db.clone()).await;
    db.close().await?;
    opened?;
    let bindings = range.end.saturating_sub(range.start);
    let file = path.to_owned();
    // A thread of its own (minutes of work), started from the caller's thread so it runs on the
    // caller's CPUs, not on those a runtime pins its blocking pool to.
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("bsf-preload".into())
        .spawn(move || {
            let _ = tx.send(bulk(&file, &factory, range, &progress));
        })
        .map_err(|e| PreloadError::Worker(e.to_string()))?;
    let index_seconds =
        rx.await.map_err(|_| PreloadError::Worker("the preload thread stopped".into()))??;
    Ok(Preloaded {
        bindings,
        seconds: t0.elapsed().as_secs_f64(),
        index_seconds,
        db_bytes: db_bytes(path),
    })
}

/// The database file's size with its `-wal` and `-shm` companions.
pub fn db_bytes(path: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|s| {
            let mut p = path.as_os_str().to_owned();
            p.push(s);
            std::fs::metadata(p).ok()
        })
        .map(|m| m.len())
        .sum()
}

type Batch = Vec<(String, Keys, Vec<u8>)>;

/// Inserts the rows with the secondary indexes dropped, then builds them again; returns the
/// seconds spent building them.
fn bulk(
    path: &Path,
    factory: &Arc<BindingFactory>,
    range: Range<u64>,
    progress: &Progress,
) -> Result<f64, PreloadError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags)?;
    // Alone on a file that is thrown away if this fails: no journal, no fsync.
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
    conn.pragma_update(None, "journal_mode", "OFF")?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
    conn.pragma_update(None, "threads", 2)?;
    let indexes = secondary_indexes(&conn)?;
    for (name, _) in &indexes {
        conn.execute_batch(&format!("DROP INDEX {name}"))?;
    }

    let builders = std::thread::available_parallelism().map_or(1, |n| n.get()).saturating_sub(1);
    let builders = builders.clamp(1, 8) as u64;
    let (tx, rx) = sync_channel::<Result<Batch, PreloadError>>(2 * builders as usize);
    let workers: Vec<_> = (0..builders)
        .map(|w| {
            let (tx, factory, range) = (tx.clone(), factory.clone(), range.clone());
            std::thread::Builder::new()
                .name(format!("bsf-preload-{w}"))
                .spawn(move || {
                    // Builder w makes batches w, w + builders, ...
                    let mut start = range.start + w * BATCH;
                    while start < range.end {
                        let end = (start + BATCH).min(range.end);
                        let batch: Result<Batch, PreloadError> = (start..end)
                            .map(|i| factory.row(i).map(|(k, j)| (factory.binding_id(i), k, j)))
                            .collect();
                        let failed = batch.is_err();
                        if tx.send(batch).is_err() || failed {
                            return;
                        }
                        start += builders * BATCH;
                    }
                })
                .map_err(|e| PreloadError::Worker(e.to_string()))
        })
        .collect::<Result<_, _>>()?;
    drop(tx);
    let mut result = Ok(());
    for batch in rx {
        let inserted = batch.and_then(|rows| {
            let created_ms = chrono::Utc::now().timestamp_millis();
            let t = conn.transaction()?;
            for (id, keys, json) in &rows {
                schema::insert(&t, id, keys, created_ms, json)?;
            }
            t.commit()?;
            Ok(rows.len() as u64)
        });
        match inserted {
            Ok(n) => {
                progress.rows.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    for w in workers {
        let _ = w.join();
    }
    result?;

    progress.indexing.store(true, Ordering::Relaxed);
    let t = Instant::now();
    for (_, sql) in &indexes {
        conn.execute_batch(sql)?;
    }
    let index_seconds = t.elapsed().as_secs_f64();
    // Back to the mode the store runs in, so the BSF opens the file as it left it.
    conn.pragma_update(None, "locking_mode", "NORMAL")?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    drop(conn);
    // Gigabytes written without fsync would otherwise be flushed by the kernel while the BSF
    // runs, stalling its own commits: flush them now, as part of the preload.
    std::fs::File::open(path)?.sync_all()?;
    Ok(index_seconds)
}

/// Name and DDL of each index of the binding table except its primary key.
fn secondary_indexes(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut st = conn.prepare(
        "SELECT name, sql FROM sqlite_master
         WHERE type = 'index' AND tbl_name = 'bsf_pcf_binding' AND sql IS NOT NULL
         ORDER BY name",
    )?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn factory() -> BindingFactory {
        BindingFactory {
            supi_prefix: "00101".into(),
            msin_first: 7,
            msisdn_prefix: "33".into(),
            ipv4_first: Ipv4Addr::new(10, 0, 0, 1),
            ipv6: true,
            ipv6_base: "2001:db8::".parse().unwrap(),
            dnn: "IMS".into(),
            sst: 1,
            sd: Some("00000A".into()),
            pcfs: ["pcf1", "pcf2"]
                .iter()
                .map(|h| PcfIdentity {
                    diam_host: format!("{h}.pcf.example"),
                    diam_realm: "pcf.example".into(),
                    fqdn: format!("{h}.pcf.example"),
                    instance_id: uuid::Uuid::new_v4().to_string(),
                    sbi_addr: Ipv4Addr::new(192, 0, 2, 1),
                    sbi_port: 7003,
                })
                .collect(),
            seed: 42,
        }
    }

    #[test]
    fn documents_differ_by_ue_and_name_their_pcf() {
        let f = factory();
        let (k0, _) = f.row(0).unwrap();
        let (k1, j1) = f.row(1).unwrap();
        assert_eq!(k0.ipv4.as_deref(), Some("10.0.0.1"));
        assert_eq!(k1.ipv4.as_deref(), Some("10.0.0.2"));
        assert_eq!(k1.ipv6.as_deref(), Some("2001:db8:0:1::/64"));
        assert_eq!(k1.supi.as_deref(), Some("imsi-001010000000008"));
        assert_eq!(k1.gpsi.as_deref(), Some("msisdn-330000000008"));
        assert_eq!((k1.dnn.as_str(), k1.sst, k1.sd.as_str()), ("ims", 1, "00000a"));
        let doc: Value = serde_json::from_slice(&j1).unwrap();
        assert_eq!(doc["pcfDiamHost"], "pcf2.pcf.example");
        assert_eq!(f.pcf_index(1), 1);
        assert_eq!(f.binding_id(5), f.binding_id(5));
        assert_ne!(f.binding_id(5), f.binding_id(6));
        let id = uuid::Uuid::parse_str(&f.binding_id(5)).unwrap();
        assert_eq!(id.get_version_num(), 4);
        assert_eq!(f.ue_ipv4(u64::from(u32::MAX)), Ipv4Addr::new(10, 0, 0, 0), "wraps");
    }

    /// The same PcfBinding registered over HTTP and preloaded gives the same row.
    #[tokio::test]
    async fn preloaded_rows_are_what_register_stores() {
        let f = Arc::new(factory());
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
        let bsf = bound.bsf().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(bound.serve(async {
            let _ = stopped.await;
        }));
        let client = sbi::client::SbiClient::new(&Default::default()).unwrap();
        for i in 0..3 {
            let r = client
                .post(&url)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&f.document(i)).unwrap())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 201, "{}", String::from_utf8_lossy(r.body()));
        }
        let sql = format!("SELECT {COLUMNS} FROM bsf_pcf_binding ORDER BY ipv4_addr");
        let q = sql.clone();
        let registered: Vec<Columns> = bsf
            .store
            .db()
            .read(move |c| Ok(c.prepare(&q)?.query_map([], columns)?.collect::<Result<_, _>>()?))
            .await
            .unwrap();
        let _ = stop.send(());
        serving.await.unwrap().unwrap();
        let path = b.path().join("bsf.db");
        let p = Arc::new(Progress::default());
        let done = preload(&path, f.clone(), 0..3, p.clone()).await.unwrap();
        assert_eq!(done.bindings, 3);
        assert_eq!(p.rows.load(Ordering::Relaxed), 3);
        let c = Connection::open(&path).unwrap();
        let preloaded: Vec<Columns> =
            c.prepare(&sql).unwrap().query_map([], columns).unwrap().map(Result::unwrap).collect();
        assert_eq!(registered.len(), 3);
        assert_eq!(preloaded, registered);
        let ids: Vec<String> = c
            .prepare("SELECT binding_id FROM bsf_pcf_binding ORDER BY ipv4_addr")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(ids, (0..3).map(|i| f.binding_id(i)).collect::<Vec<_>>());
    }

    /// Several batches, the BSF's own indexes rebuilt, and the store finds what was written.
    #[tokio::test]
    async fn preload_keeps_the_schema_and_the_store_finds_the_bindings() {
        let f = Arc::new(factory());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bsf.db");
        let n = BATCH * 2 + 17;
        let p = Arc::new(Progress::default());
        let done = preload(&path, f.clone(), 0..n, p.clone()).await.unwrap();
        assert_eq!((done.bindings, p.rows.load(Ordering::Relaxed)), (n, n));
        assert!(p.indexing.load(Ordering::Relaxed));
        assert!(done.db_bytes > 0 && done.db_bytes == db_bytes(&path));
        // More bindings later go on top.
        preload(&path, f.clone(), n..n + 5, Arc::new(Progress::default())).await.unwrap();

        let fresh = tempfile::tempdir().unwrap();
        let fresh_db =
            SqliteStore::open(SqliteConfig::new(fresh.path().join("bsf.db"))).await.unwrap();
        BindingStore::open(fresh_db.clone()).await.unwrap();
        let want: Vec<(String, String)> =
            fresh_db.read(|c| Ok(secondary_indexes(c)?)).await.unwrap();
        fresh_db.close().await.unwrap();

        let db = SqliteStore::open(SqliteConfig::new(&path)).await.unwrap();
        let bindings = BindingStore::open(db.clone()).await.unwrap();
        assert_eq!(db.read(|c| Ok(secondary_indexes(c)?)).await.unwrap(), want);
        let mode: String =
            db.read(|c| Ok(c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?)).await.unwrap();
        assert_eq!(mode, "wal");
        assert_eq!(bindings.count().await.unwrap(), n + 5);
        for i in [0, BATCH, n - 1, n + 4] {
            let q = schema::Lookup { ipv4: Some(f.ue_ipv4(i).to_string()), ..Default::default() };
            let found = bindings.find(q).await.unwrap().expect("found by UE address");
            assert_eq!(found.id, f.binding_id(i));
            assert_eq!(found.json, f.row(i).unwrap().1);
        }
        let by_prefix =
            schema::Lookup { ipv6: vec!["2001:db8:0:5::/64".into()], ..Default::default() };
        assert_eq!(bindings.find(by_prefix).await.unwrap().unwrap().id, f.binding_id(5));
        db.close().await.unwrap();
    }
}
