//! Bulk load of PDU session bindings from JSON lines, into a store no BSF is serving from
//! (`fivecore bsf preload`, docs/bsf.md).
//!
//! Each line is `{"bindingId":"<id>","pcfBinding":{<PcfBinding>}}` or a bare PcfBinding (its id
//! then a new version 4 UUID). The binding is validated and encoded exactly as
//! Nbsf_Management_Register does ([`models::validate_binding`], then `serde_json::to_vec`) and
//! handed to the store's [`BulkLoad`], which stores it as Register would (without Register's
//! existing-binding check: the load is the whole state); a later line with the same id replaces
//! the earlier one.
//!
//! Threads: one reads the input in chunks of lines, workers parse and validate the chunks, and
//! the caller's thread hands the rows to the store, chunk after chunk in input order (so "the
//! later line wins" and "the lines before a bad one are loaded" hold).

use std::io::BufRead;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::models;
use crate::store::{BulkLoad, NewBinding};

/// Lines per chunk: one store transaction each.
pub const CHUNK_LINES: usize = 20_000;
/// Longest binding id accepted (it is a URI path segment).
const MAX_ID_LEN: usize = 128;

/// What a bad line does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnBadLine {
    /// Stop there; the lines before it stay loaded.
    Stop,
    /// Report it and go on.
    Skip,
}

/// A line that is not a binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based.
    pub line: u64,
    pub reason: String,
}

/// What the caller hears while the load runs.
#[derive(Debug)]
pub enum Event<'a> {
    /// After each chunk stored.
    Progress(&'a Progress),
    BadLine(&'a BadLine),
    /// The lines are in; the store builds its indexes now.
    Indexing,
}

/// Where a load is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    pub bindings: u64,
    pub skipped: u64,
    /// Input bytes read.
    pub bytes: u64,
    pub elapsed: Duration,
}

/// What a load did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Lines stored (a line replacing an earlier one with the same id counts).
    pub bindings: u64,
    /// Bad lines skipped (or the one stopped at).
    pub skipped: u64,
    /// The bad line the load stopped at, with [`OnBadLine::Stop`].
    pub stopped_at: Option<BadLine>,
    /// Whole load, wall seconds.
    pub seconds: f64,
    /// Of which the store's index build.
    pub index_seconds: f64,
    /// The store's size on disk afterwards.
    pub db_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum PreloadError {
    #[error("store: {0}")]
    Store(#[from] store::Error),
    #[error("reading the input: {0}")]
    Read(#[from] std::io::Error),
    #[error("preload worker: {0}")]
    Worker(String),
}

/// Lines of the input, read into one buffer.
struct Chunk {
    /// Line number of the first line.
    first_line: u64,
    buf: Vec<u8>,
    /// End offset of each line in `buf`.
    ends: Vec<usize>,
}

/// A chunk parsed: its rows, and its bad lines with the number of rows before each.
struct Parsed {
    rows: Vec<NewBinding>,
    bad: Vec<(usize, BadLine)>,
    bytes: u64,
}

/// Loads every line of `input` into `load`, then finishes it (its indexes are built even when
/// the load stops at a bad line: the lines before it stay loaded and the store stays usable).
pub fn run(
    input: impl BufRead + Send + 'static,
    mut load: Box<dyn BulkLoad>,
    on_bad_line: OnBadLine,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<Report, PreloadError> {
    let t0 = Instant::now();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).saturating_sub(1);
    let workers = workers.clamp(1, 8);
    // Per-worker channels both ways: chunk k goes to worker k % workers and comes back from it,
    // so the rows reach the store in input order.
    let mut to_workers: Vec<SyncSender<Chunk>> = Vec::with_capacity(workers);
    let mut from_workers: Vec<Receiver<Parsed>> = Vec::with_capacity(workers);
    let mut threads = Vec::with_capacity(workers);
    for w in 0..workers {
        let (chunk_tx, chunk_rx) = sync_channel::<Chunk>(2);
        let (parsed_tx, parsed_rx) = sync_channel::<Parsed>(2);
        to_workers.push(chunk_tx);
        from_workers.push(parsed_rx);
        let created_ms = chrono::Utc::now().timestamp_millis();
        threads.push(
            std::thread::Builder::new()
                .name(format!("bsf-preload-{w}"))
                .spawn(move || {
                    for chunk in chunk_rx {
                        if parsed_tx.send(parse(&chunk, created_ms)).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| PreloadError::Worker(e.to_string()))?,
        );
    }
    let reader = std::thread::Builder::new()
        .name("bsf-preload-read".into())
        .spawn(move || read(input, to_workers))
        .map_err(|e| PreloadError::Worker(e.to_string()))?;

    let mut progress = Progress::default();
    let mut stopped_at = None;
    let mut stored = Ok(());
    'chunks: for k in 0.. {
        let Ok(parsed) = from_workers[k % workers].recv() else { break };
        for (at, bad) in &parsed.bad {
            on_event(Event::BadLine(bad));
            progress.skipped += 1;
            if on_bad_line == OnBadLine::Stop {
                stored = store_rows(&mut *load, &parsed.rows[..*at], &mut progress);
                stopped_at = Some(bad.clone());
                break 'chunks;
            }
        }
        stored = store_rows(&mut *load, &parsed.rows, &mut progress);
        if stored.is_err() {
            break;
        }
        progress.bytes += parsed.bytes;
        progress.elapsed = t0.elapsed();
        on_event(Event::Progress(&progress));
    }
    // Stopping early: the reader and the workers end once their channels are gone.
    drop(from_workers);
    let read = reader.join().map_err(|_| PreloadError::Worker("the reader panicked".into()))?;
    for t in threads {
        let _ = t.join();
    }
    if let Err(e) = stored {
        return Err(e.into());
    }
    // The lines read before an input error are loaded, as before a bad line: the store gets
    // its indexes back either way. A read error after a stop is of no interest.
    on_event(Event::Indexing);
    let done = load.finish()?;
    if stopped_at.is_none() {
        read?;
    }
    progress.elapsed = t0.elapsed();
    Ok(Report {
        bindings: progress.bindings,
        skipped: progress.skipped,
        stopped_at,
        seconds: t0.elapsed().as_secs_f64(),
        index_seconds: done.index_seconds,
        db_bytes: done.bytes,
    })
}

fn store_rows(
    load: &mut dyn BulkLoad,
    rows: &[NewBinding],
    progress: &mut Progress,
) -> store::Result<()> {
    if !rows.is_empty() {
        load.insert(rows)?;
        progress.bindings += rows.len() as u64;
    }
    Ok(())
}

/// Reads `input` into chunks of [`CHUNK_LINES`] lines, chunk k to worker k % workers.
fn read(mut input: impl BufRead, workers: Vec<SyncSender<Chunk>>) -> std::io::Result<()> {
    let mut line = 1u64;
    for k in 0.. {
        let mut chunk = Chunk {
            first_line: line,
            buf: Vec::with_capacity(CHUNK_LINES * 512),
            ends: Vec::with_capacity(CHUNK_LINES),
        };
        while chunk.ends.len() < CHUNK_LINES {
            if input.read_until(b'\n', &mut chunk.buf)? == 0 {
                break;
            }
            chunk.ends.push(chunk.buf.len());
        }
        if chunk.ends.is_empty() {
            return Ok(());
        }
        line += chunk.ends.len() as u64;
        if workers[k % workers.len()].send(chunk).is_err() {
            // The load stopped.
            return Ok(());
        }
    }
    Ok(())
}

fn parse(chunk: &Chunk, created_ms: i64) -> Parsed {
    let mut out = Parsed {
        rows: Vec::with_capacity(chunk.ends.len()),
        bad: Vec::new(),
        bytes: chunk.buf.len() as u64,
    };
    let mut start = 0;
    for (i, &end) in chunk.ends.iter().enumerate() {
        let text = &chunk.buf[start..end];
        start = end;
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match binding(text, created_ms) {
            Ok(b) => out.rows.push(b),
            Err(reason) => {
                let line = chunk.first_line + i as u64;
                out.bad.push((out.rows.len(), BadLine { line, reason }));
            }
        }
    }
    out
}

/// One line as the binding Register would store.
pub fn binding(line: &[u8], created_ms: i64) -> Result<NewBinding, String> {
    let v: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut obj) = v else {
        return Err("not a JSON object (a PcfBinding, or {\"bindingId\", \"pcfBinding\"})".into());
    };
    let (id, mut doc) = match obj.remove("pcfBinding") {
        None => (uuid::Uuid::new_v4().to_string(), Value::Object(obj)),
        Some(doc) => {
            let id = match obj.remove("bindingId") {
                None => uuid::Uuid::new_v4().to_string(),
                Some(Value::String(id)) if valid_id(&id) => id,
                Some(_) => {
                    return Err(format!(
                        "/bindingId: must be a string of 1 to {MAX_ID_LEN} letters, digits, \
                         '-', '.', '_' or '~'"
                    ))
                }
            };
            if let Some(k) = obj.keys().next() {
                return Err(format!("/{k}: unknown member (only bindingId and pcfBinding)"));
            }
            (id, doc)
        }
    };
    let keys = models::validate_binding(&mut doc).map_err(|p| problem_reason(&p))?;
    let json = serde_json::to_vec(&doc).map_err(|e| e.to_string())?;
    Ok(NewBinding { id, keys, created_ms, json: json.into() })
}

/// A binding id must stand as a URI path segment unescaped (`pcfBindings/{bindingId}`).
fn valid_id(id: &str) -> bool {
    (1..=MAX_ID_LEN).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// Register's 400 as one line: every invalid parameter, else the detail.
fn problem_reason(p: &sbi::ProblemDetails) -> String {
    if p.invalid_params.is_empty() {
        return p.detail.clone().unwrap_or_else(|| "not a valid PcfBinding".into());
    }
    let params: Vec<String> = p
        .invalid_params
        .iter()
        .map(|ip| match &ip.reason {
            Some(r) => format!("{}: {r}", ip.param),
            None => ip.param.clone(),
        })
        .collect();
    params.join("; ")
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::store::BulkLoaded;

    /// A store that records what it was given.
    #[derive(Default, Clone)]
    struct Recorder {
        batches: Arc<Mutex<Vec<Vec<NewBinding>>>>,
        finished: Arc<Mutex<bool>>,
    }

    impl BulkLoad for Recorder {
        fn insert(&mut self, rows: &[NewBinding]) -> store::Result<()> {
            self.batches.lock().unwrap().push(rows.to_vec());
            Ok(())
        }
        fn finish(self: Box<Self>) -> store::Result<BulkLoaded> {
            *self.finished.lock().unwrap() = true;
            Ok(BulkLoaded { index_seconds: 0.5, bytes: 42 })
        }
    }

    impl Recorder {
        fn ids(&self) -> Vec<String> {
            self.batches.lock().unwrap().iter().flatten().map(|b| b.id.clone()).collect()
        }
    }

    fn line(i: u64) -> String {
        format!(
            r#"{{"bindingId":"b-{i}","pcfBinding":{{"ipv4Addr":"10.0.{}.{}","dnn":"IMS","snssai":{{"sst":1}},"pcfFqdn":"pcf.example"}}}}"#,
            i / 256,
            i % 256
        )
    }

    fn load(
        input: String,
        on_bad: OnBadLine,
    ) -> (Result<Report, PreloadError>, Recorder, Vec<u64>) {
        let rec = Recorder::default();
        let mut bad = Vec::new();
        let r = run(std::io::Cursor::new(input), Box::new(rec.clone()), on_bad, |e| {
            if let Event::BadLine(b) = e {
                bad.push(b.line);
            }
        });
        (r, rec, bad)
    }

    #[test]
    fn lines_are_stored_in_input_order_in_chunks() {
        let n = CHUNK_LINES as u64 * 3 + 7;
        let input: String = (0..n).map(|i| line(i) + "\n").collect();
        let (r, rec, bad) = load(input, OnBadLine::Stop);
        let r = r.unwrap();
        assert_eq!((r.bindings, r.skipped, r.stopped_at, bad.len()), (n, 0, None, 0));
        assert_eq!((r.index_seconds, r.db_bytes), (0.5, 42));
        assert_eq!(rec.batches.lock().unwrap().len(), 4);
        assert_eq!(rec.ids(), (0..n).map(|i| format!("b-{i}")).collect::<Vec<_>>());
        assert!(*rec.finished.lock().unwrap());
    }

    #[test]
    fn a_row_is_what_register_stores() {
        let b = binding(line(3).as_bytes(), 7).unwrap();
        let mut doc = serde_json::from_str::<Value>(&line(3)).unwrap()["pcfBinding"].take();
        let keys = models::validate_binding(&mut doc).unwrap();
        assert_eq!(
            b,
            NewBinding {
                id: "b-3".into(),
                keys,
                created_ms: 7,
                json: serde_json::to_vec(&doc).unwrap().into()
            }
        );
        assert_eq!(b.keys.dnn, "ims", "normalised as Register does");
        // A bare PcfBinding gets a version 4 UUID.
        let bare =
            r#"{"ipv4Addr":"10.1.1.1","dnn":"ims","snssai":{"sst":1},"pcfFqdn":"p.example"}"#;
        let b = binding(bare.as_bytes(), 7).unwrap();
        assert_eq!(uuid::Uuid::parse_str(&b.id).unwrap().get_version_num(), 4);
        assert_eq!(b.keys.ipv4.as_deref(), Some("10.1.1.1"));
    }

    #[test]
    fn bad_lines_say_why() {
        let cases = [
            ("{", "not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"bindingId":"a/b","pcfBinding":{}}"#, "/bindingId"),
            (r#"{"bindingId":"a","pcfBinding":{},"x":1}"#, "/x: unknown member"),
            (
                r#"{"ipv4Addr":"10.0.0.300","dnn":"ims","snssai":{"sst":1},"pcfFqdn":"p.example"}"#,
                "ipv4Addr",
            ),
            (r#"{"dnn":"ims","snssai":{"sst":1},"pcfFqdn":"p.example"}"#, "ipv4Addr"),
        ];
        for (text, want) in cases {
            let e = binding(text.as_bytes(), 0).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn stop_keeps_the_lines_before_the_bad_one_and_finishes() {
        let mut lines: Vec<String> = (0..10).map(line).collect();
        lines[6] = "{\"dnn\":1}".into();
        lines.insert(3, String::new()); // blank lines are not bindings, nor bad
        let (r, rec, bad) = load(lines.join("\n"), OnBadLine::Stop);
        let r = r.unwrap();
        let at = r.stopped_at.expect("stopped");
        assert_eq!((at.line, bad, r.bindings, r.skipped), (8, vec![8], 6, 1));
        assert_eq!(rec.ids(), ["b-0", "b-1", "b-2", "b-3", "b-4", "b-5"]);
        assert!(*rec.finished.lock().unwrap(), "the loaded lines get their indexes");
    }

    #[test]
    fn skip_reports_every_bad_line_and_goes_on() {
        let mut lines: Vec<String> = (0..CHUNK_LINES as u64 + 10).map(line).collect();
        lines[0] = "nonsense".into();
        lines[CHUNK_LINES + 1] = "{}".into();
        let (r, rec, bad) = load(lines.join("\n") + "\n", OnBadLine::Skip);
        let r = r.unwrap();
        assert_eq!(bad, vec![1, CHUNK_LINES as u64 + 2]);
        assert_eq!((r.bindings, r.skipped, r.stopped_at), (CHUNK_LINES as u64 + 8, 2, None));
        assert_eq!(rec.ids().len(), CHUNK_LINES + 8);
    }
}
