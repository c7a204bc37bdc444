//! Correlation into xDRs, their storage, and the admin API's query and export over a real socket.
//!
//! Copies are built as the NFs' taps encode them (envelope v1) and pushed in MAIN order with
//! their offsets; time is the copies' own (event time), so every window below is exact. The
//! store and the admin API's tests run on both store backends (`sqlite::` and `mariadb::`).

mod common;

use std::sync::{Arc, LazyLock};

use bytes::BytesMut;
use dd::admin::xdrs::{self, XdrAdmin};
use dd::sinks::xdr_store::{
    retention_pass, run_retention, Cursor, MysqlXdrStore, OutcomeFilter, SqliteXdrStore, XdrQuery,
    XdrStore, XdrStoreConfig,
};
use dd::transforms::correlate::{
    CloseReason, CorrelationConfig, CorrelationKey, Correlator, CorrelatorStats, Outcome, Xdr,
};
use dd_client::envelope::{encode, Copy, CopyMeta, Protocol, TriggerPoint};
use sbi::client::{ClientConfig, SbiClient};
use serde_json::{json, Value};
use testkit::specs::Specs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use TriggerPoint::{EgressRequest, EgressResponse, IngressRequest, IngressResponse};

const T0: u64 = 1_790_000_000_000_000_000;
const S1: &str = "imsi-001010000000001";
const S2: &str = "imsi-001010000000002";

/// Nanoseconds `us` microseconds after T0.
fn at(us: u64) -> u64 {
    T0 + us * 1_000
}

/// One copy. The NF type is the instance's name up to its `-` (`pcf-1`: PCF); the service and
/// protocol follow from the operation.
// One positional argument per column keeps each test's message table one line per message.
#[allow(clippy::too_many_arguments)]
fn msg(
    trigger: TriggerPoint,
    us: u64,
    instance: &str,
    txn: u64,
    operation: &str,
    status: u32,
    supi: &str,
    session: &str,
) -> Copy {
    let nf_type = instance.split('-').next().unwrap().to_ascii_uppercase();
    let (service, protocol) = match operation {
        op if op.starts_with("CCR") => ("Gx", Protocol::Diameter),
        op if op.starts_with("Npcf_SMPolicyControl") => ("npcf-smpolicycontrol", Protocol::Http2),
        op if op.starts_with("Nsmf") => ("nsmf-callback", Protocol::Http2),
        op if op.starts_with("Nudr") => ("nudr-dr", Protocol::Http2),
        op if op.starts_with("Nbsf") => ("nbsf-management", Protocol::Http2),
        _ => ("other", Protocol::Http2),
    };
    let meta = CopyMeta {
        trigger,
        protocol,
        timestamp_ns: at(us),
        sequence: us,
        transaction: txn,
        stream_id: 1,
        status,
        nf_type: &nf_type,
        nf_instance: instance,
        service,
        operation,
        method: if protocol == Protocol::Diameter { "CCR" } else { "POST" },
        path: "",
        peer: "127.0.0.1:40000",
        supi,
        gpsi: "",
        session_id: session,
    };
    let mut out = BytesMut::new();
    encode(&meta, [], b"{}", &mut out).unwrap();
    Copy::decode(out.freeze()).unwrap()
}

fn correlator(config: Value) -> Correlator {
    let config: CorrelationConfig = serde_json::from_value(config).unwrap();
    Correlator::new("test", &config).unwrap()
}

/// Pushes the copies at offsets 0.. and returns the xDRs closed, in closing order.
fn run(c: &mut Correlator, copies: &[Copy]) -> Vec<Xdr> {
    let base = c.stats().copies;
    for (i, copy) in copies.iter().enumerate() {
        c.push(base + i as u64, copy);
    }
    c.drain()
}

fn ops(x: &Xdr) -> Vec<(&str, &str, Option<u32>, Option<u64>)> {
    x.procedures
        .iter()
        .map(|p| (p.operation.as_str(), p.trigger_point.as_str(), p.status, p.latency_us))
        .collect()
}

// === correlation ===

#[test]
fn an_sbi_create_its_answer_and_the_udr_read_made_while_serving_it_are_one_xdr() {
    let mut c = correlator(json!({"key": "transaction"}));
    let create = "Npcf_SMPolicyControl_Create";
    let query = "Nudr_DataRepository_Query";
    let xdrs = run(
        &mut c,
        &[
            msg(IngressRequest, 0, "pcf-1", 1, create, 0, S1, ""),
            // A second subscriber's create, served at the same time by the same PCF.
            msg(IngressRequest, 100, "pcf-1", 2, create, 0, S2, ""),
            msg(EgressRequest, 1_000, "pcf-1", 900, query, 0, S1, ""),
            msg(EgressRequest, 1_100, "pcf-1", 901, query, 0, S2, ""),
            // The UDR serving the read: its own transaction.
            msg(IngressRequest, 1_200, "udr-1", 5, query, 0, S1, ""),
            msg(IngressResponse, 2_800, "udr-1", 5, query, 200, S1, ""),
            msg(EgressResponse, 3_000, "pcf-1", 900, query, 200, S1, ""),
            msg(IngressResponse, 5_000, "pcf-1", 1, create, 201, S1, "sm-1"),
            msg(EgressResponse, 5_100, "pcf-1", 901, query, 404, S2, ""),
            msg(IngressResponse, 6_000, "pcf-1", 2, create, 201, S2, "sm-2"),
        ],
    );
    assert_eq!(xdrs.len(), 3, "{xdrs:#?}");
    let udr = &xdrs[0];
    assert_eq!(udr.nf_types, ["UDR"]);
    assert_eq!(ops(udr), [(query, "ingress_request", Some(200), Some(1_600))]);
    let one = &xdrs[1];
    assert_eq!(one.key, CorrelationKey::Transaction);
    assert_eq!(one.supi.as_deref(), Some(S1));
    assert_eq!(one.session_id.as_deref(), Some("sm-1"), "learnt from the answer");
    assert_eq!(
        ops(one),
        [
            (create, "ingress_request", Some(201), Some(5_000)),
            (query, "egress_request", Some(200), Some(2_000)),
        ]
    );
    assert_eq!((one.start, one.end, one.duration_us), (at(0), at(5_000), 5_000));
    assert_eq!(
        (one.message_count, one.outcome, one.close_reason),
        (4, Outcome::Success, CloseReason::Completed)
    );
    assert_eq!(
        (one.nf_types.as_slice(), one.nf_instances.as_slice()),
        (&["PCF".to_owned()][..], &["pcf-1".to_owned()][..])
    );
    let two = &xdrs[2];
    assert_eq!(two.supi.as_deref(), Some(S2));
    assert_eq!(ops(two)[1], (query, "egress_request", Some(404), Some(4_000)));
    // The first failure decides the outcome, though the create itself succeeded.
    assert_eq!(
        (two.outcome, two.outcome_status, two.outcome_operation.as_deref()),
        (Outcome::Failure, Some(404), Some(query))
    );
    assert_eq!(c.stats().open, 0);
}

#[test]
fn with_key_session_an_association_from_create_to_delete_is_one_xdr() {
    let mut c = correlator(json!({"key": "session"}));
    let xdrs = run(
        &mut c,
        &[
            msg(IngressRequest, 0, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 0, S1, ""),
            msg(EgressRequest, 500, "pcf-1", 900, "Nudr_DataRepository_Query", 0, S1, ""),
            msg(EgressResponse, 1_500, "pcf-1", 900, "Nudr_DataRepository_Query", 200, S1, ""),
            msg(IngressResponse, 2_000, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 201, S1, "sm-1"),
            msg(IngressRequest, 10_000, "pcf-1", 2, "Npcf_SMPolicyControl_Update", 0, S1, "sm-1"),
            msg(
                IngressResponse,
                11_000,
                "pcf-1",
                2,
                "Npcf_SMPolicyControl_Update",
                200,
                S1,
                "sm-1",
            ),
            // The PCF's own UpdateNotify to the SMF, for the same association.
            msg(EgressRequest, 20_000, "pcf-1", 902, "Nsmf_UpdateNotify", 0, "", "sm-1"),
            msg(EgressResponse, 20_700, "pcf-1", 902, "Nsmf_UpdateNotify", 204, "", "sm-1"),
            msg(IngressRequest, 30_000, "pcf-1", 3, "Npcf_SMPolicyControl_Delete", 0, S1, "sm-1"),
        ],
    );
    assert!(xdrs.is_empty(), "open until the delete is answered: {xdrs:#?}");
    let xdrs = run(
        &mut c,
        &[msg(IngressResponse, 30_400, "pcf-1", 3, "Npcf_SMPolicyControl_Delete", 204, S1, "sm-1")],
    );
    assert_eq!(xdrs.len(), 1);
    let x = &xdrs[0];
    assert_eq!(
        (x.key, x.close_reason, x.outcome),
        (CorrelationKey::Session, CloseReason::Terminated, Outcome::Success)
    );
    assert_eq!(
        x.procedures.iter().map(|p| p.operation.as_str()).collect::<Vec<_>>(),
        [
            "Npcf_SMPolicyControl_Create",
            "Nudr_DataRepository_Query",
            "Npcf_SMPolicyControl_Update",
            "Nsmf_UpdateNotify",
            "Npcf_SMPolicyControl_Delete"
        ]
    );
    assert_eq!((x.message_count, x.duration_us), (10, 30_400));
    assert_eq!(c.stats().terminated, 1);
}

#[test]
fn a_gx_session_from_ccr_i_to_ccr_t_is_one_xdr_and_a_failed_ccr_u_is_its_outcome() {
    let mut c = correlator(json!({"key": "session", "nf_types": ["pcf"]}));
    let (imsi, other) = ("001010000000003", "001010000000004");
    let (sa, sb) = ("pcef.example;1;1", "pcef.example;1;2");
    let xdrs = run(
        &mut c,
        &[
            msg(IngressRequest, 0, "pcf-1", 10, "CCR-I", 0, imsi, sa),
            msg(IngressRequest, 10, "pcf-1", 20, "CCR-I", 0, other, sb),
            msg(IngressResponse, 800, "pcf-1", 10, "CCR-I", 2001, imsi, sa),
            msg(IngressResponse, 900, "pcf-1", 20, "CCR-I", 2001, other, sb),
            msg(IngressRequest, 60_000, "pcf-1", 11, "CCR-U", 0, imsi, sa),
            msg(IngressResponse, 60_500, "pcf-1", 11, "CCR-U", 5030, imsi, sa),
            msg(IngressRequest, 120_000, "pcf-1", 12, "CCR-T", 0, imsi, sa),
            msg(IngressRequest, 120_100, "pcf-1", 21, "CCR-T", 0, other, sb),
            msg(IngressResponse, 120_600, "pcf-1", 12, "CCR-T", 2001, imsi, sa),
            msg(IngressResponse, 120_700, "pcf-1", 21, "CCR-T", 2001, other, sb),
            // Another NF type: not this correlation's.
            msg(IngressRequest, 120_800, "bsf-1", 1, "Nbsf_Management_Register", 0, S1, ""),
        ],
    );
    assert_eq!(xdrs.len(), 2);
    let a = &xdrs[0];
    assert_eq!((a.session_id.as_deref(), a.supi.as_deref()), (Some(sa), Some(imsi)));
    assert_eq!(
        ops(a),
        [
            ("CCR-I", "ingress_request", Some(2001), Some(800)),
            ("CCR-U", "ingress_request", Some(5030), Some(500)),
            ("CCR-T", "ingress_request", Some(2001), Some(600)),
        ]
    );
    assert_eq!(
        (a.outcome, a.outcome_status, a.outcome_operation.as_deref(), a.close_reason),
        (Outcome::Failure, Some(5030), Some("CCR-U"), CloseReason::Terminated)
    );
    let b = &xdrs[1];
    assert_eq!(
        (b.session_id.as_deref(), b.outcome, b.procedures.len()),
        (Some(sb), Outcome::Success, 2)
    );
    assert_eq!(c.stats().ignored, 1);
}

#[test]
fn a_request_with_no_answer_within_the_window_times_out() {
    let mut c = correlator(json!({"key": "transaction", "window_secs": 30}));
    let s = 1_000_000; // one second in microseconds
    let xdrs = run(
        &mut c,
        &[
            msg(IngressRequest, 0, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 0, S1, ""),
            msg(EgressRequest, 10, "pcf-1", 900, "Nudr_DataRepository_Query", 0, S1, ""),
            msg(EgressResponse, 20 * s, "pcf-1", 900, "Nudr_DataRepository_Query", 200, S1, ""),
            msg(IngressRequest, 25 * s, "pcf-1", 2, "Npcf_SMPolicyControl_Create", 0, S2, ""),
        ],
    );
    assert!(xdrs.is_empty(), "the window runs from the last message: 20 s + 30 s");
    let xdrs = run(
        &mut c,
        &[msg(IngressRequest, 50 * s + 1, "pcf-1", 3, "Npcf_SMPolicyControl_Create", 0, S1, "")],
    );
    assert_eq!(xdrs.len(), 1, "{xdrs:#?}");
    let x = &xdrs[0];
    assert_eq!(
        (x.outcome, x.outcome_operation.as_deref(), x.outcome_status, x.close_reason),
        (Outcome::Timeout, Some("Npcf_SMPolicyControl_Create"), None, CloseReason::Expired)
    );
    assert_eq!(ops(x)[0], ("Npcf_SMPolicyControl_Create", "ingress_request", None, None));
    assert_eq!(ops(x)[1].2, Some(200));
    // Its late answer finds nothing to join.
    run(
        &mut c,
        &[msg(IngressResponse, 51 * s, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 201, S1, "")],
    );
    assert_eq!(c.stats().unmatched_responses, 1);
    // With no more traffic, time moved by the consumer closes the rest.
    c.advance(at(55 * s + 1));
    assert_eq!(c.drain().len(), 1, "transaction 2: 25 s + 30 s");
    c.advance(at(81 * s + 2));
    let last = c.drain();
    assert_eq!((last.len(), last[0].outcome), (1, Outcome::Timeout));
    assert_eq!(
        c.stats(),
        CorrelatorStats {
            copies: 6,
            unmatched_responses: 1,
            expired: 3,
            ..CorrelatorStats::default()
        }
    );
}

#[test]
fn beyond_max_open_the_oldest_record_closes_first_and_is_counted() {
    let mut c = correlator(json!({"key": "transaction", "max_open": 2}));
    let xdrs = run(
        &mut c,
        &[
            msg(IngressRequest, 0, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 0, S1, ""),
            msg(IngressRequest, 10, "pcf-1", 2, "Npcf_SMPolicyControl_Create", 0, S2, ""),
            msg(IngressResponse, 20, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 201, S1, ""),
            msg(IngressRequest, 30, "pcf-1", 3, "Npcf_SMPolicyControl_Create", 0, S1, ""),
            msg(IngressRequest, 40, "pcf-1", 4, "Npcf_SMPolicyControl_Create", 0, S1, ""),
        ],
    );
    assert_eq!(xdrs.len(), 2);
    assert_eq!(xdrs[0].close_reason, CloseReason::Completed);
    let evicted = &xdrs[1];
    assert_eq!(
        (evicted.supi.as_deref(), evicted.close_reason, evicted.outcome),
        (Some(S2), CloseReason::Evicted, Outcome::Incomplete)
    );
    assert_eq!((c.stats().evicted, c.stats().open), (1, 2));
}

#[test]
fn with_key_supi_a_subscriber_across_nfs_is_one_xdr_until_max_procedures() {
    let mut c = correlator(json!({"key": "supi", "max_procedures": 3}));
    let xdrs = run(
        &mut c,
        &[
            msg(IngressRequest, 0, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 0, S1, ""),
            msg(IngressResponse, 100, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 201, S1, "sm-1"),
            msg(IngressRequest, 200, "bsf-1", 7, "Nbsf_Management_Register", 0, S1, ""),
            msg(IngressResponse, 300, "bsf-1", 7, "Nbsf_Management_Register", 201, S1, "b-1"),
            msg(
                IngressRequest,
                400,
                "udr-1",
                3,
                "Nudr_DataRepository_Query",
                0,
                "001010000000001",
                "",
            ),
            msg(IngressRequest, 500, "udr-1", 4, "Nudr_DataRepository_Query", 0, S1, ""),
            msg(IngressResponse, 600, "udr-1", 4, "Nudr_DataRepository_Query", 200, S1, ""),
            // A transaction without a SUPI is a record of its own, closed by its answer.
            msg(IngressRequest, 700, "nrf-1", 8, "Nnrf_NFDiscovery_Request", 0, "", ""),
            msg(IngressResponse, 800, "nrf-1", 8, "Nnrf_NFDiscovery_Request", 200, "", ""),
        ],
    );
    assert_eq!(xdrs.len(), 2, "{xdrs:#?}");
    let first = &xdrs[0];
    assert_eq!(
        (first.key, first.close_reason, first.procedures.len()),
        (CorrelationKey::Supi, CloseReason::MaxProcedures, 3)
    );
    assert_eq!(first.nf_types, ["PCF", "BSF", "UDR"]);
    assert_eq!(first.outcome, Outcome::Incomplete, "the bare IMSI's read was open when it closed");
    assert_eq!(
        (xdrs[1].key, xdrs[1].close_reason),
        (CorrelationKey::Transaction, CloseReason::Completed)
    );
    c.advance(at(31_000_000));
    let rest = c.drain();
    assert_eq!(
        (rest.len(), rest[0].procedures.len(), rest[0].close_reason),
        (1, 1, CloseReason::Expired)
    );
    assert_eq!(rest[0].outcome, Outcome::Success);
}

#[test]
fn the_resume_offset_holds_back_open_records_and_a_replay_gives_the_same_ids() {
    let copies = [
        msg(IngressRequest, 0, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 0, S1, ""),
        msg(IngressRequest, 10, "pcf-1", 2, "Npcf_SMPolicyControl_Create", 0, S2, ""),
        msg(IngressResponse, 20, "pcf-1", 2, "Npcf_SMPolicyControl_Create", 201, S2, ""),
        msg(IngressResponse, 30, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 201, S1, ""),
    ];
    let config = json!({"key": "transaction"});
    let mut c = correlator(config.clone());
    assert_eq!(c.resume_offset(), 0);
    for (i, copy) in copies[..3].iter().enumerate() {
        c.push(100 + i as u64, copy);
    }
    let closed = c.drain();
    assert_eq!(closed.len(), 1);
    assert_eq!(c.resume_offset(), 100, "transaction 1, opened at offset 100, is not finished");
    // A restart re-reads from there: the records come out again, with the same ids.
    let mut again = correlator(config);
    for (i, copy) in copies.iter().enumerate() {
        again.push(100 + i as u64, copy);
    }
    let replayed = again.drain();
    assert_eq!(again.resume_offset(), 104);
    assert_eq!(replayed.len(), 2);
    assert_eq!(replayed[0], closed[0]);
    assert_eq!(replayed[1].id.len(), 32);
    assert_ne!(replayed[0].id, replayed[1].id);
}

#[test]
fn a_batch_of_main_records_is_decoded_and_a_broken_one_counted() {
    let mut c = correlator(json!({"key": "transaction"}));
    let good = msg(IngressRequest, 0, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 0, S1, "");
    let answer = msg(IngressResponse, 1, "pcf-1", 1, "Npcf_SMPolicyControl_Create", 201, S1, "");
    let batch = [
        good.record().clone(),
        bytes::Bytes::from_static(b"\x09nonsense"),
        answer.record().clone(),
    ];
    c.push_batch(7, &batch);
    assert_eq!(c.drain().len(), 1);
    assert_eq!((c.stats().undecodable, c.stats().copies, c.resume_offset()), (1, 2, 10));
    assert!(Correlator::new(
        "x",
        &CorrelationConfig { window_secs: 0, ..CorrelationConfig::default() }
    )
    .is_err());
}

// === storage ===

/// A synthetic xDR: subscriber `n`, starting `start_s` seconds after T0, lasting one second.
fn xdr(n: u64, start_s: u64, outcome: Outcome, nf: &str) -> Xdr {
    let status =
        (outcome == Outcome::Failure).then_some(if n.is_multiple_of(2) { 404 } else { 5030 });
    Xdr {
        id: format!("{n:032x}"),
        correlation: "test".into(),
        key: CorrelationKey::Session,
        start: T0 + start_s * 1_000_000_000,
        end: T0 + (start_s + 1) * 1_000_000_000,
        duration_us: 1_000_000,
        supi: Some(format!("imsi-00101{:010}", n % 10)),
        gpsi: Some(format!("msisdn-3361{n:07}")),
        session_id: Some(format!("sm-{n}, \"quoted\"\r\nline")),
        nf_types: vec![nf.to_owned(), "UDR".into()],
        nf_instances: vec!["pcf-1".into(), "udr-1".into()],
        procedures: vec![dd::transforms::correlate::Procedure {
            nf_type: nf.to_owned(),
            nf_instance: "pcf-1".into(),
            service: "npcf-smpolicycontrol".into(),
            operation: "Npcf_SMPolicyControl_Create".into(),
            trigger_point: "ingress_request".into(),
            request_time: T0 + start_s * 1_000_000_000,
            response_time: Some(T0 + start_s * 1_000_000_000 + 1_500_000),
            status: Some(status.unwrap_or(201)),
            latency_us: Some(1_500),
        }],
        outcome,
        outcome_status: status,
        outcome_operation: status.map(|_| "Npcf_SMPolicyControl_Create".to_owned()),
        message_count: 2,
        close_reason: CloseReason::Terminated,
    }
}

fn outcome_of(n: u64) -> Outcome {
    match n % 4 {
        0 | 1 => Outcome::Success,
        2 => Outcome::Failure,
        _ => Outcome::Timeout,
    }
}

/// The xDR store of the backend `dir` names (see `common::store_config`).
async fn open_store(dir: &std::path::Path) -> Arc<dyn XdrStore> {
    match store::AnyStore::open(common::store_config(dir)).await.unwrap() {
        store::AnyStore::Sqlite(db) => Arc::new(SqliteXdrStore::on(db).await.unwrap()),
        store::AnyStore::Mysql(db) => Arc::new(MysqlXdrStore::on(db).await.unwrap()),
    }
}

fn ids(xs: &[Xdr]) -> Vec<u64> {
    xs.iter().map(|x| u64::from_str_radix(&x.id, 16).unwrap()).collect()
}

async fn xdrs_are_queried_by_supi_time_outcome_and_nf_and_paged_by_cursor() {
    let dir = testkit::backends::state_dir("dd_xdrs");
    let s = open_store(dir.path()).await;
    // Inserted out of start order: a query orders by start time.
    let all: Vec<Xdr> = (0..100)
        .rev()
        .map(|n| xdr(n, n, outcome_of(n), if n < 50 { "PCF" } else { "BSF" }))
        .collect();
    assert_eq!(s.insert(all.clone()).await.unwrap(), 100);
    let q = |f: fn(&mut XdrQuery)| {
        let mut q = XdrQuery { limit: 1000, ..XdrQuery::default() };
        f(&mut q);
        q
    };
    let page = s.query(q(|_| {})).await.unwrap();
    assert_eq!(ids(&page.xdrs), (0..100).collect::<Vec<_>>());
    assert_eq!(page.next, None);
    assert_eq!(page.xdrs[7], all[92], "a stored xDR reads back field for field");

    let by_supi = s.query(q(|q| q.supi = Some("imsi-001010000000003".into()))).await.unwrap();
    assert_eq!(ids(&by_supi.xdrs), (0..10).map(|k| k * 10 + 3).collect::<Vec<_>>());
    let bare = s.query(q(|q| q.supi = Some("001010000000003".into()))).await.unwrap();
    assert_eq!(bare.xdrs, by_supi.xdrs, "a bare IMSI finds the same subscriber");

    let window = s
        .query(q(|q| {
            q.from = Some(T0 + 10_000_000_000);
            q.to = Some(T0 + 20_000_000_000)
        }))
        .await
        .unwrap();
    assert_eq!(ids(&window.xdrs), (10..20).collect::<Vec<_>>());
    let timeouts =
        s.query(q(|q| q.outcome = Some(OutcomeFilter::Is(Outcome::Timeout)))).await.unwrap();
    assert_eq!(ids(&timeouts.xdrs), (0..100).filter(|n| n % 4 == 3).collect::<Vec<_>>());
    let code = s.query(q(|q| q.outcome = Some(OutcomeFilter::FailedWith(5030)))).await.unwrap();
    assert!(code.xdrs.is_empty(), "failures are n % 4 == 2, even, so 404");
    let code = s.query(q(|q| q.outcome = Some(OutcomeFilter::FailedWith(404)))).await.unwrap();
    assert_eq!(code.xdrs.len(), 25);
    let bsf = s
        .query(q(|q| {
            q.nf_type = Some("bsf".into());
            q.supi = Some(S1.into())
        }))
        .await
        .unwrap();
    assert_eq!(ids(&bsf.xdrs), [51, 61, 71, 81, 91]);
    let udr = s.query(q(|q| q.nf_type = Some("UDR".into()))).await.unwrap();
    assert_eq!(udr.xdrs.len(), 100);
    let none = s.query(q(|q| q.nf_type = Some("UD".into()))).await.unwrap();
    assert!(none.xdrs.is_empty(), "NF types match whole");

    // Pages of 30 with their cursors walk everything once, in order.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = s.query(XdrQuery { limit: 30, after, ..XdrQuery::default() }).await.unwrap();
        seen.extend(ids(&page.xdrs));
        match page.next {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    let exact = s.query(XdrQuery { limit: 100, ..XdrQuery::default() }).await.unwrap();
    assert_eq!(exact.next, None, "no next page when the last row is in this one");
    let past: Cursor = format!("{}-{}", u64::MAX >> 1, 0).parse().unwrap();
    assert!(s
        .query(XdrQuery { limit: 5, after: Some(past), ..XdrQuery::default() })
        .await
        .unwrap()
        .xdrs
        .is_empty());
}

async fn an_xdr_stored_again_replaces_the_first() {
    let dir = testkit::backends::state_dir("dd_xdrs");
    let s = open_store(dir.path()).await;
    s.insert(vec![xdr(1, 0, Outcome::Incomplete, "PCF")]).await.unwrap();
    s.insert(vec![xdr(1, 0, Outcome::Success, "PCF"), xdr(2, 1, Outcome::Success, "PCF")])
        .await
        .unwrap();
    let page = s.query(XdrQuery { limit: 10, ..XdrQuery::default() }).await.unwrap();
    assert_eq!(ids(&page.xdrs), [1, 2]);
    assert_eq!(page.xdrs[0].outcome, Outcome::Success);
}

async fn retention_deletes_the_xdrs_that_ended_before_the_cutoff() {
    let dir = testkit::backends::state_dir("dd_xdrs");
    let s = open_store(dir.path()).await;
    s.insert((0..25).map(|n| xdr(n, n * 60, Outcome::Success, "PCF")).collect()).await.unwrap();
    let config =
        XdrStoreConfig { retention_secs: 600, delete_batch: 4, ..XdrStoreConfig::default() };
    // At T0 + 20 min with 10 min of retention, what ended before T0 + 10 min goes: the xDRs
    // that started at minutes 0 to 9 (each ends a second after it starts).
    let deleted = retention_pass(&*s, &config, T0 + 1_200_000_000_000).await.unwrap();
    assert_eq!(deleted, 10, "in deletes of at most 4 rows");
    let left = s.query(XdrQuery { limit: 100, ..XdrQuery::default() }).await.unwrap();
    assert_eq!(ids(&left.xdrs), (10..25).collect::<Vec<_>>());
    assert_eq!(retention_pass(&*s, &config, T0 + 1_200_000_000_000).await.unwrap(), 0);

    // The periodic pass, on the wall clock: every xDR above ended in 2026, long before now
    // less a day... unless this machine's clock is earlier, which the assertion would show.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    assert!(now.as_nanos() as u64 > T0 + 1_500_000_000_000 + 86_400_000_000_000, "clock before T0");
    let store: Arc<dyn XdrStore> = s.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(run_retention(
        store,
        XdrStoreConfig { retention_secs: 86_400, retention_interval_secs: 1, delete_batch: 100 },
        async move {
            let _ = stopped.await;
        },
    ));
    let mut left = usize::MAX;
    for _ in 0..50 {
        left = s.query(XdrQuery { limit: 100, ..XdrQuery::default() }).await.unwrap().xdrs.len();
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(left, 0);
    stop.send(()).unwrap();
    task.await.unwrap();
}

// === the admin API over a real socket ===

struct State(Arc<dyn XdrStore>);

impl XdrAdmin for State {
    fn xdr_store(&self) -> Arc<dyn XdrStore> {
        self.0.clone()
    }
}

struct Admin {
    base: String,
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Admin {
    async fn start(xdrs: Vec<Xdr>) -> Admin {
        let dir = testkit::backends::state_dir("dd_xdr_admin");
        let s = open_store(dir.path()).await;
        s.insert(xdrs).await.unwrap();
        let router = xdrs::routes(sbi::Router::builder(Arc::new(State(s)))).build();
        let config =
            sbi::ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() };
        let server = sbi::SbiServer::bind(
            config,
            sbi::NfIdentity::new("DD", "test"),
            router,
            sbi::Observability::new(),
        )
        .await
        .unwrap();
        let addr = server.local_addr();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async move {
            let _ = rx.await;
        }));
        Admin { base: format!("http://{addr}"), addr, stop: Some(tx), task, _dir: dir }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap();
    }
}

static SPECS: LazyLock<Specs> = LazyLock::new(|| Specs::load(&["TS29571_CommonData"]));

fn client() -> SbiClient {
    SbiClient::new(&ClientConfig::default()).unwrap()
}

async fn the_query_answers_a_json_array_and_links_the_next_page() {
    let admin = Admin::start((0..40).map(|n| xdr(n, n, outcome_of(n), "PCF")).collect()).await;
    let c = client();
    let r = c
        .get(&format!("{}/dd-admin/v1/xdrs?outcome=success&limit=15", admin.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let page: Vec<Xdr> = serde_json::from_slice(r.body()).unwrap();
    assert_eq!(ids(&page), (0..40).filter(|n| n % 4 < 2).take(15).collect::<Vec<_>>());
    let link = r.header("link").unwrap().to_owned();
    let next = link.strip_prefix('<').and_then(|l| l.strip_suffix(">; rel=\"next\"")).unwrap();
    assert!(next.starts_with("/dd-admin/v1/xdrs?outcome=success&limit=15&cursor="), "{next}");
    let r = c.get(&format!("{}{next}", admin.base)).send().await.unwrap();
    let rest: Vec<Xdr> = serde_json::from_slice(r.body()).unwrap();
    assert_eq!(ids(&rest), (0..40).filter(|n| n % 4 < 2).skip(15).collect::<Vec<_>>());
    assert_eq!(r.header("link"), None, "the last page links nothing");

    let from = "2026-09-21T14:13:30Z"; // T0 + 10 s
    let to = "2026-09-21T16:13:35+02:00"; // T0 + 15 s
    let url = format!(
        "{}/dd-admin/v1/xdrs?supi={}&from={}&to={}",
        admin.base,
        "001010000000002",
        from,
        to.replace('+', "%2B")
    );
    let r = c.get(&url).send().await.unwrap();
    let page: Vec<Xdr> = serde_json::from_slice(r.body()).unwrap();
    assert_eq!(ids(&page), [12]);
    let r =
        c.get(&format!("{}/dd-admin/v1/xdrs?outcome=404&nf=PCF", admin.base)).send().await.unwrap();
    let page: Vec<Xdr> = serde_json::from_slice(r.body()).unwrap();
    assert_eq!(ids(&page), [2, 6, 10, 14, 18, 22, 26, 30, 34, 38]);
    admin.stop().await;
}

async fn bad_parameters_are_400_naming_each_one() {
    let admin = Admin::start(Vec::new()).await;
    let c = client();
    for (query, params) in [
        ("from=yesterday", vec!["from"]),
        ("from=2026-09-21T14:13:30Z&to=2026-09-21T14:13:30Z", vec!["to"]),
        ("to=2026-13-01T00:00:00Z&outcome=maybe&limit=0", vec!["to", "outcome", "limit"]),
        ("limit=1001", vec!["limit"]),
        ("cursor=abc", vec!["cursor"]),
        ("supi=", vec!["supi"]),
        ("limit=5&limit=6", vec!["limit"]),
        ("colour=red", vec!["colour"]),
        ("format=csv", vec!["format"]),
    ] {
        let r = c.get(&format!("{}/dd-admin/v1/xdrs?{query}", admin.base)).send().await.unwrap();
        let v: Value = serde_json::from_slice(r.body()).unwrap();
        assert_eq!(r.status().as_u16(), 400, "{query}: {v}");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        let named: Vec<&str> = v["invalidParams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["param"].as_str().unwrap())
            .collect();
        assert_eq!(named, params, "{query}: {v}");
        SPECS.assert_valid("TS29571_CommonData", "ProblemDetails", &v);
    }
    for (query, params) in [
        ("format=xml", vec!["format"]),
        ("cursor=1-1", vec!["cursor"]),
        ("limit=-1", vec!["limit"]),
    ] {
        let r =
            c.get(&format!("{}/dd-admin/v1/xdrs/export?{query}", admin.base)).send().await.unwrap();
        let v: Value = serde_json::from_slice(r.body()).unwrap();
        assert_eq!(r.status().as_u16(), 400, "{query}: {v}");
        let named: Vec<&str> = v["invalidParams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["param"].as_str().unwrap())
            .collect();
        assert_eq!(named, params, "{query}: {v}");
    }
    admin.stop().await;
}

/// `GET path` over HTTP/1.1 on a plain socket: the status line, the headers (lower-case names)
/// and the body with any chunked framing undone, plus the number of chunks it came in.
async fn http1_get(
    addr: std::net::SocketAddr,
    path: &str,
) -> (String, Vec<(String, String)>, Vec<u8>, usize) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: dd\r\nAccept: text/csv\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().to_owned();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let mut rest = &raw[split + 4..];
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v == "chunked");
    if !chunked {
        return (status, headers, rest.to_vec(), 1);
    }
    let (mut body, mut chunks) = (Vec::new(), 0);
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap(), 16).unwrap();
        rest = &rest[eol + 2..];
        if size == 0 {
            break;
        }
        body.extend_from_slice(&rest[..size]);
        chunks += 1;
        rest = &rest[size + 2..];
    }
    (status, headers, body, chunks)
}

async fn export_streams_every_matching_xdr_as_json_lines_or_csv() {
    let all: Vec<Xdr> = (0..1_234).map(|n| xdr(n, n, outcome_of(n), "PCF")).collect();
    let admin = Admin::start(all.clone()).await;

    // JSON lines over HTTP/2: one xDR per line, all of them, across pages of the store.
    let r = client().get(&format!("{}/dd-admin/v1/xdrs/export", admin.base)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    let text = std::str::from_utf8(r.body()).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<Xdr> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines, all);

    // Filtered: only the failures.
    let r = client()
        .get(&format!("{}/dd-admin/v1/xdrs/export?outcome=failure", admin.base))
        .send()
        .await
        .unwrap();
    let failures: Vec<Xdr> = std::str::from_utf8(r.body())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        failures,
        all.iter().filter(|x| x.outcome == Outcome::Failure).cloned().collect::<Vec<_>>()
    );

    // CSV over HTTP/1.1: chunked (streamed: no Content-Length), parsed back with an RFC 4180
    // reader, every field equal to the xDR's.
    let (status, headers, body, chunks) =
        http1_get(admin.addr, "/dd-admin/v1/xdrs/export?format=csv").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    assert_eq!(header("content-type"), Some("text/csv; charset=utf-8; header=present"));
    assert_eq!(header("content-length"), None);
    assert_eq!(header("content-disposition"), Some("attachment; filename=\"xdrs.csv\""));
    assert!(chunks >= 2, "1,234 rows read from the store 500 at a time come in pieces: {chunks}");
    let mut reader = csv::ReaderBuilder::new().from_reader(&body[..]);
    let names: Vec<String> = reader.headers().unwrap().iter().map(str::to_owned).collect();
    assert_eq!(names.len(), 17);
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), all.len());
    for (row, x) in rows.iter().zip(&all) {
        let field = |name: &str| row.get(names.iter().position(|n| n == name).unwrap()).unwrap();
        assert_eq!(field("id"), x.id);
        assert_eq!(
            field("session_id"),
            x.session_id.as_deref().unwrap(),
            "comma, quotes and CRLF survive"
        );
        assert_eq!(field("supi"), x.supi.as_deref().unwrap());
        assert_eq!(field("start"), dd::transforms::correlate::xdr::format_time(x.start));
        assert_eq!(field("duration_us"), x.duration_us.to_string());
        assert_eq!(field("nf_types"), "PCF;UDR");
        assert_eq!(field("outcome"), x.outcome.as_str());
        assert_eq!(
            field("outcome_status"),
            x.outcome_status.map(|s| s.to_string()).unwrap_or_default()
        );
        assert_eq!(field("close_reason"), "terminated");
        let procedures: Vec<dd::transforms::correlate::Procedure> =
            serde_json::from_str(field("procedures")).unwrap();
        assert_eq!(procedures, x.procedures);
    }
    assert!(body.ends_with(b"\r\n"));

    // `limit` caps an export; a CSV of nothing is its header.
    let r = client()
        .get(&format!("{}/dd-admin/v1/xdrs/export?format=jsonl&limit=501", admin.base))
        .send()
        .await
        .unwrap();
    assert_eq!(std::str::from_utf8(r.body()).unwrap().lines().count(), 501);
    let (_, _, body, _) =
        http1_get(admin.addr, "/dd-admin/v1/xdrs/export?format=csv&supi=imsi-999").await;
    assert_eq!(body, dd::transforms::correlate::xdr::CSV_HEADER.as_bytes());
    admin.stop().await;
}

testkit::on_both_backends!(
    xdrs_are_queried_by_supi_time_outcome_and_nf_and_paged_by_cursor,
    an_xdr_stored_again_replaces_the_first,
    retention_deletes_the_xdrs_that_ended_before_the_cutoff,
    the_query_answers_a_json_array_and_links_the_next_page,
    bad_parameters_are_400_naming_each_one,
    export_streams_every_matching_xdr_as_json_lines_or_csv,
);
