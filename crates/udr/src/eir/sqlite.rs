//! The EIR store over SQLite: the two lists as tables and every statement they run.

use rusqlite::{params, Connection, OptionalExtension, Transaction};
use store::{Migration, SqliteStore};

use super::{
    Binding, EirItem, EirStore, EquipmentStatus, Found, ImeiEntry, Loaded, RangeConflict,
    RangeEntry, SEP,
};
use crate::StoreFuture;

pub const MIGRATIONS: [Migration; 1] = [Migration::new(
    "udr-0100-eir",
    // status: 0 WHITELISTED, 1 BLACKLISTED, 2 GREYLISTED. supis / gpsis: the bound identities,
    // newline-separated, NULL when the entry is not bound. INTEGER PRIMARY KEY is the rowid
    // itself in SQLite (no second B-tree) and a BIGINT key elsewhere.
    "CREATE TABLE udr_eir_imei (
        imei INTEGER PRIMARY KEY,
        status INTEGER NOT NULL,
        supis TEXT,
        gpsis TEXT
    );
    CREATE TABLE udr_eir_imei_range (
        range_start INTEGER PRIMARY KEY,
        range_end INTEGER NOT NULL,
        status INTEGER NOT NULL,
        supis TEXT,
        gpsis TEXT
    );",
)];

/// The EIR lists of the UDR's SQLite store.
#[derive(Clone)]
pub struct SqliteEir {
    db: SqliteStore,
}

impl SqliteEir {
    /// Over `db`, which must have [`MIGRATIONS`] applied.
    pub fn new(db: SqliteStore) -> Self {
        SqliteEir { db }
    }
}

impl EirStore for SqliteEir {
    /// The entry deciding the status of `imei`: the single IMEI, else the range holding it.
    fn lookup(&self, imei: u64) -> StoreFuture<'_, Option<Found>> {
        Box::pin(self.db.read(move |c| lookup(c, imei)))
    }

    fn get_imei(&self, imei: u64) -> StoreFuture<'_, Option<ImeiEntry>> {
        Box::pin(self.db.read(move |c| get_imei(c, imei)))
    }

    /// Creates an IMEI entry; `false` when it exists already.
    fn create_imei(&self, e: ImeiEntry) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |tx| {
            if get_imei(tx, e.imei)?.is_some() {
                return Ok(false);
            }
            put_imei(tx, &e)?;
            Ok(true)
        }))
    }

    /// Replaces an IMEI entry; `false` when there is none.
    fn update_imei(&self, e: ImeiEntry) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |tx| {
            let n = tx
                .prepare_cached(
                    "UPDATE udr_eir_imei SET status = ?2, supis = ?3, gpsis = ?4
                         WHERE imei = ?1",
                )?
                .execute(params![
                    e.imei as i64,
                    e.status.code(),
                    join(&e.binding.supis),
                    join(&e.binding.gpsis)
                ])?;
            Ok(n == 1)
        }))
    }

    /// Removes an IMEI entry; `false` when there is none.
    fn delete_imei(&self, imei: u64) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |tx| {
            let n = tx
                .prepare_cached("DELETE FROM udr_eir_imei WHERE imei = ?1")?
                .execute([imei as i64])?;
            Ok(n == 1)
        }))
    }

    fn get_range(&self, start: u64) -> StoreFuture<'_, Option<RangeEntry>> {
        Box::pin(self.db.read(move |c| get_range(c, start)))
    }

    /// Creates a range unless one starts at the same IMEI or it overlaps another.
    fn create_range(&self, e: RangeEntry) -> StoreFuture<'_, Result<(), RangeConflict>> {
        Box::pin(self.db.write(move |tx| {
            if get_range(tx, e.start)?.is_some() {
                return Ok(Err(RangeConflict::Exists));
            }
            put_range(tx, &e)
        }))
    }

    /// Replaces the range starting at `e.start` (its end may change) unless it would overlap
    /// another.
    fn update_range(&self, e: RangeEntry) -> StoreFuture<'_, Result<(), RangeConflict>> {
        Box::pin(self.db.write(move |tx| {
            if get_range(tx, e.start)?.is_none() {
                return Ok(Err(RangeConflict::NotFound));
            }
            put_range(tx, &e)
        }))
    }

    /// Removes the range starting at `start`; `false` when there is none.
    fn delete_range(&self, start: u64) -> StoreFuture<'_, bool> {
        Box::pin(self.db.write(move |tx| {
            let n = tx
                .prepare_cached("DELETE FROM udr_eir_imei_range WHERE range_start = ?1")?
                .execute([start as i64])?;
            Ok(n == 1)
        }))
    }

    fn put(
        &self,
        rows: Vec<(u64, EirItem)>,
        stop_on_refused: bool,
    ) -> StoreFuture<'_, (Loaded, Vec<(u64, EirItem)>)> {
        Box::pin(self.db.write(move |tx| Ok((put_items(tx, &rows, stop_on_refused)?, rows))))
    }
}

/// Upserts each row; a range that would overlap another is refused (and ends the batch when
/// `stop_on_refused`).
fn put_items(
    tx: &Transaction<'_>,
    items: &[(u64, EirItem)],
    stop_on_refused: bool,
) -> store::Result<Loaded> {
    let mut w = Loaded::default();
    for (tag, item) in items {
        match item {
            EirItem::Imei(e) => {
                put_imei(tx, e)?;
                w.imeis += 1;
            }
            EirItem::Range(r) => match put_range(tx, r)? {
                Ok(()) => w.ranges += 1,
                Err(c) => {
                    w.refused.push((*tag, c));
                    if stop_on_refused {
                        break;
                    }
                }
            },
        }
    }
    Ok(w)
}

fn join(ids: &[String]) -> Option<String> {
    if ids.is_empty() {
        None
    } else {
        Some(ids.join("\n"))
    }
}

fn split(col: Option<String>) -> Vec<String> {
    col.map(|s| s.split(SEP).map(str::to_owned).collect()).unwrap_or_default()
}

fn lookup(c: &Connection, imei: u64) -> store::Result<Option<Found>> {
    let key = imei as i64;
    let single = c
        .prepare_cached("SELECT status, supis, gpsis FROM udr_eir_imei WHERE imei = ?1")?
        .query_row([key], |r| Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    if let Some((status, supis, gpsis)) = single {
        return Ok(Some(Found { status: EquipmentStatus::from_code(status)?, supis, gpsis }));
    }
    let range = c
        .prepare_cached(
            "SELECT range_end, status, supis, gpsis FROM udr_eir_imei_range
             WHERE range_start <= ?1 ORDER BY range_start DESC LIMIT 1",
        )?
        .query_row([key], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get(2)?, r.get(3)?)))
        .optional()?;
    match range {
        Some((end, status, supis, gpsis)) if end >= key => {
            Ok(Some(Found { status: EquipmentStatus::from_code(status)?, supis, gpsis }))
        }
        _ => Ok(None),
    }
}

fn get_imei(c: &Connection, imei: u64) -> store::Result<Option<ImeiEntry>> {
    let row = c
        .prepare_cached("SELECT status, supis, gpsis FROM udr_eir_imei WHERE imei = ?1")?
        .query_row([imei as i64], |r| Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let Some((status, supis, gpsis)) = row else { return Ok(None) };
    Ok(Some(ImeiEntry {
        imei,
        status: EquipmentStatus::from_code(status)?,
        binding: Binding { supis: split(supis), gpsis: split(gpsis) },
    }))
}

fn get_range(c: &Connection, start: u64) -> store::Result<Option<RangeEntry>> {
    let row = c
        .prepare_cached(
            "SELECT range_end, status, supis, gpsis FROM udr_eir_imei_range
             WHERE range_start = ?1",
        )?
        .query_row([start as i64], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    let Some((end, status, supis, gpsis)) = row else { return Ok(None) };
    Ok(Some(RangeEntry {
        start,
        end: end as u64,
        status: EquipmentStatus::from_code(status)?,
        binding: Binding { supis: split(supis), gpsis: split(gpsis) },
    }))
}

/// Creates or replaces an IMEI entry.
fn put_imei(tx: &Transaction<'_>, e: &ImeiEntry) -> store::Result<()> {
    tx.prepare_cached(
        "INSERT INTO udr_eir_imei (imei, status, supis, gpsis) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (imei) DO UPDATE SET
            status = excluded.status, supis = excluded.supis, gpsis = excluded.gpsis",
    )?
    .execute(params![
        e.imei as i64,
        e.status.code(),
        join(&e.binding.supis),
        join(&e.binding.gpsis)
    ])?;
    Ok(())
}

/// Creates or replaces the range starting at `e.start`, unless it would overlap another range:
/// `Err(Overlaps)` names the first one, nothing is written.
fn put_range(tx: &Transaction<'_>, e: &RangeEntry) -> store::Result<Result<(), RangeConflict>> {
    // Ranges are disjoint, so among those starting at or before our end only the last can reach
    // into us; the one starting exactly at our start is the one being replaced.
    let mut before = tx.prepare_cached(
        "SELECT range_start, range_end FROM udr_eir_imei_range
         WHERE range_start <= ?1 ORDER BY range_start DESC LIMIT 2",
    )?;
    let near: Vec<(i64, i64)> = before
        .query_map([e.end as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    if let Some((s, end)) =
        near.into_iter().find(|(s, end)| *s != e.start as i64 && *end >= e.start as i64)
    {
        return Ok(Err(RangeConflict::Overlaps(s as u64, end as u64)));
    }
    tx.prepare_cached(
        "INSERT INTO udr_eir_imei_range (range_start, range_end, status, supis, gpsis)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (range_start) DO UPDATE SET range_end = excluded.range_end,
            status = excluded.status, supis = excluded.supis, gpsis = excluded.gpsis",
    )?
    .execute(params![
        e.start as i64,
        e.end as i64,
        e.status.code(),
        join(&e.binding.supis),
        join(&e.binding.gpsis)
    ])?;
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lookups_prefer_single_imeis_and_ranges_never_overlap() {
        let dir = tempfile::tempdir().unwrap();
        let db =
            SqliteStore::open(store::SqliteConfig::new(dir.path().join("e.db"))).await.unwrap();
        db.migrate(MIGRATIONS).await.unwrap();
        let eir = SqliteEir::new(db);
        let range =
            |start, end, status| RangeEntry { start, end, status, binding: Binding::default() };
        use EquipmentStatus::*;
        assert_eq!(eir.create_range(range(100, 199, Greylisted)).await.unwrap(), Ok(()));
        assert_eq!(eir.create_range(range(300, 399, Whitelisted)).await.unwrap(), Ok(()));
        assert_eq!(
            eir.create_range(range(100, 150, Whitelisted)).await.unwrap(),
            Err(RangeConflict::Exists)
        );
        for (s, e, hit) in [
            (50, 100, (100, 199)),
            (199, 250, (100, 199)),
            (150, 160, (100, 199)),
            (250, 300, (300, 399)),
            (0, 1000, (300, 399)),
            (399, 400, (300, 399)),
        ] {
            assert_eq!(
                eir.create_range(range(s, e, Blacklisted)).await.unwrap(),
                Err(RangeConflict::Overlaps(hit.0, hit.1)),
                "{s}..{e}"
            );
        }
        assert_eq!(eir.create_range(range(200, 299, Blacklisted)).await.unwrap(), Ok(()));
        // Growing a range into its neighbour is refused; shrinking it is fine.
        assert_eq!(
            eir.update_range(range(100, 200, Greylisted)).await.unwrap(),
            Err(RangeConflict::Overlaps(200, 299))
        );
        assert_eq!(eir.update_range(range(100, 180, Greylisted)).await.unwrap(), Ok(()));
        assert_eq!(
            eir.update_range(range(101, 180, Greylisted)).await.unwrap(),
            Err(RangeConflict::NotFound)
        );
        let single = ImeiEntry { imei: 150, status: Blacklisted, binding: Binding::default() };
        assert!(eir.create_imei(single.clone()).await.unwrap());
        assert!(!eir.create_imei(single).await.unwrap());
        let status = |imei| {
            let eir = eir.clone();
            async move { eir.lookup(imei).await.unwrap().map(|f| f.status) }
        };
        assert_eq!(status(150).await, Some(Blacklisted));
        assert_eq!(status(151).await, Some(Greylisted));
        assert_eq!(status(100).await, Some(Greylisted));
        assert_eq!(status(181).await, None);
        assert_eq!(status(200).await, Some(Blacklisted));
        assert_eq!(status(399).await, Some(Whitelisted));
        assert_eq!(status(400).await, None);
        assert_eq!(status(99).await, None);
        assert!(eir.delete_range(100).await.unwrap());
        assert!(!eir.delete_range(100).await.unwrap());
        assert_eq!(status(151).await, None);
        assert!(eir.delete_imei(150).await.unwrap());
        assert_eq!(status(150).await, None);
    }
}
