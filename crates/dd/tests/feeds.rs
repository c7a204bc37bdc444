//! The TCP and HTTP/2 feeds against real consumers on 127.0.0.1 (issue #24, "Feeds"): every
//! envelope arrives, in order; batches spread round robin or weighted over two endpoints; a
//! consumer that goes down and comes back loses nothing while the feed's consumer (played here by
//! `deliver_retrying`, as the Data Director's feed loop does: keep the offset, retry after
//! `retry_in`) retries; overload answers fail over and `Retry-After` is honoured; TLS; bad
//! configurations name their fields; and the metrics count it all.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::consumers::{
    envelope, envelopes, pki, Answer, Http2Consumer, TcpBehaviour, TcpConsumer,
};
use dd::sinks::{build, FailureKind, FeedMetrics, Sink, SinkConfig};
use prometheus_client::registry::Registry;
use serde_json::{json, Value};

fn new_sink(feed: &str, cfg: Value) -> (Arc<dyn Sink>, FeedMetrics) {
    let cfg: SinkConfig = serde_json::from_value(cfg).unwrap();
    let metrics = FeedMetrics::default();
    let sink = build(feed, &cfg, &metrics).unwrap_or_else(|e| panic!("{e:?}"));
    (sink, metrics)
}

fn metrics_text(m: &FeedMetrics) -> String {
    let mut r = Registry::default();
    m.register(&mut r);
    let mut s = String::new();
    prometheus_client::encoding::text::encode(&mut s, &r).unwrap();
    s
}

/// What the Data Director's feed loop does with a batch: hand it again after `retry_in` until
/// it is delivered.
async fn deliver_retrying(sink: &dyn Sink, batch: &[Bytes], within: Duration) -> usize {
    let start = Instant::now();
    let mut errors = 0;
    loop {
        match sink.deliver(batch).await {
            Ok(()) => return errors,
            Err(e) => {
                errors += 1;
                assert!(start.elapsed() < within, "still not delivered after {within:?}: {e}");
                tokio::time::sleep(
                    e.retry_in().clamp(Duration::from_millis(10), Duration::from_millis(500)),
                )
                .await;
            }
        }
    }
}

async fn wait_until(what: &str, within: Duration, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn range(from: u64, to: u64) -> Vec<u64> {
    (from..to).collect()
}

// === TCP ===

#[tokio::test]
async fn tcp_feed_delivers_every_envelope_in_order_and_counts_it() {
    let c = TcpConsumer::start(TcpBehaviour::default(), None).await;
    let ep = c.addr.to_string();
    let (sink, metrics) = new_sink(
        "tcp-in-order",
        json!({"type": "tcp", "endpoints": [{"address": ep}], "max_batch": 64}),
    );
    let mut bytes = 0;
    for b in 0..20 {
        let batch = envelopes(b * 100, 100);
        bytes += batch.iter().map(|e| 4 + e.len()).sum::<usize>();
        sink.deliver(&batch).await.unwrap();
    }
    wait_until("2,000 frames", Duration::from_secs(5), || c.received.frames() == 2000).await;
    assert_eq!(c.received.seqs(), range(0, 2000));
    assert_eq!(c.received.connections.load(Ordering::SeqCst), 1, "one persistent connection");
    assert_eq!(c.received.bytes.load(Ordering::SeqCst), bytes as u64);

    let text = metrics_text(&metrics);
    let has = |line: &str| assert!(text.contains(line), "{line} not in\n{text}");
    has(&format!(
        r#"dd_feed_messages_total{{feed="tcp-in-order",endpoint="{ep}",result="delivered"}} 2000"#
    ));
    has(&format!(r#"dd_feed_bytes_total{{feed="tcp-in-order"}} {bytes}"#));
    // 100 envelopes with max_batch 64: two writes per deliver.
    has(r#"dd_feed_delivery_seconds_count{feed="tcp-in-order"} 40"#);
    has(r#"dd_feed_e2e_seconds_count{feed="tcp-in-order"} 2000"#);
    // Delivered within a minute of being stamped: nothing in the overflow bucket.
    has(r#"dd_feed_e2e_seconds_bucket{le="60.0",feed="tcp-in-order"} 2000"#);
    assert!(!text.contains("dd_feed_errors_total{"), "{text}");
    assert_eq!(sink.health()[0].connected, Some(true));
}

#[tokio::test]
async fn tcp_feed_spreads_batches_round_robin_and_weighted_over_two_endpoints() {
    let a = TcpConsumer::start(TcpBehaviour::default(), None).await;
    let b = TcpConsumer::start(TcpBehaviour::default(), None).await;
    let (rr, _) = new_sink(
        "tcp-rr",
        json!({"type": "tcp", "endpoints": [{"address": a.addr.to_string()}, {"address": b.addr.to_string()}]}),
    );
    for i in 0..10 {
        rr.deliver(&envelopes(i * 10, 10)).await.unwrap();
    }
    wait_until("100 frames", Duration::from_secs(5), || {
        a.received.frames() + b.received.frames() == 100
    })
    .await;
    // Batches alternate: a gets 0-9, 20-29, ...; b 10-19, 30-39, ...
    let (sa, sb) = (a.received.seqs(), b.received.seqs());
    assert_eq!(
        sa,
        (0..10).filter(|i| i % 2 == 0).flat_map(|i| i * 10..i * 10 + 10).collect::<Vec<_>>()
    );
    assert_eq!(
        sb,
        (0..10).filter(|i| i % 2 == 1).flat_map(|i| i * 10..i * 10 + 10).collect::<Vec<_>>()
    );

    let a2 = TcpConsumer::start(TcpBehaviour::default(), None).await;
    let b2 = TcpConsumer::start(TcpBehaviour::default(), None).await;
    let (weighted, _) = new_sink(
        "tcp-60-40",
        json!({"type": "tcp", "balance": "weighted", "endpoints": [
            {"address": a2.addr.to_string(), "weight": 60}, {"address": b2.addr.to_string(), "weight": 40}]}),
    );
    for i in 0..1000 {
        weighted.deliver(&[envelope(i, 10)]).await.unwrap();
    }
    wait_until("1,000 frames", Duration::from_secs(5), || {
        a2.received.frames() + b2.received.frames() == 1000
    })
    .await;
    assert_eq!((a2.received.frames(), b2.received.frames()), (600, 400));
}

#[tokio::test]
async fn tcp_feed_consumer_down_then_back_loses_nothing() {
    let mut c = TcpConsumer::start(TcpBehaviour::default(), None).await;
    let addr = c.addr;
    let (sink, metrics) = new_sink(
        "tcp-down",
        json!({"type": "tcp", "endpoints": [{"address": addr.to_string()}],
               "backoff_min_ms": 50, "backoff_max_ms": 200}),
    );
    let batches: Vec<Vec<Bytes>> = (0..10).map(|i| envelopes(i * 50, 50)).collect();
    for b in &batches[..5] {
        sink.deliver(b).await.unwrap();
    }
    wait_until("250 frames", Duration::from_secs(5), || c.received.frames() == 250).await;
    let received = c.received.clone();
    c.stop().await;
    // The sink notices the closed connection before it writes into it.
    wait_until("the sink sees the connection closed", Duration::from_secs(5), || {
        sink.health()[0].connected == Some(false)
    })
    .await;
    // Down: the batch is refused at once, with when to try again.
    let e = sink.deliver(&batches[5]).await.unwrap_err();
    assert_eq!(e.failures.len(), 1, "{e}");
    assert_eq!(e.failures[0].kind, FailureKind::Connect, "{e}");
    assert!(!sink.health()[0].up);
    // Asked again during the backoff, it does not even try.
    let e = sink.deliver(&batches[5]).await.unwrap_err();
    assert!(e.failures.is_empty() && e.retry_in > Duration::ZERO, "{e}");

    let feed = {
        let sink = sink.clone();
        let batches = batches.clone();
        tokio::spawn(async move {
            let mut errors = 0;
            for b in &batches[5..] {
                errors += deliver_retrying(&*sink, b, Duration::from_secs(10)).await;
            }
            errors
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _back = TcpConsumer::start_on(addr, TcpBehaviour::default(), None, received.clone()).await;
    let errors = feed.await.unwrap();
    assert!(errors > 0, "the feed loop saw the consumer down");
    wait_until("500 frames", Duration::from_secs(5), || received.frames() == 500).await;
    assert_eq!(received.seqs(), range(0, 500), "every envelope once, in order");
    assert!(sink.health()[0].up);
    let text = metrics_text(&metrics);
    assert!(
        text.contains(&format!(
            r#"dd_feed_errors_total{{feed="tcp-down",endpoint="{addr}",kind="connect"}}"#
        )),
        "{text}"
    );
}

#[tokio::test]
async fn tcp_acknowledged_feed_sends_again_what_a_dying_consumer_did_not_acknowledge() {
    // Processes frames, acknowledges them, then dies after 120 with the rest unacknowledged.
    let mut a = TcpConsumer::start(
        TcpBehaviour { ack: true, die_after: Some(120), ..Default::default() },
        None,
    )
    .await;
    let addr = a.addr;
    let (sink, _) = new_sink(
        "tcp-ack",
        json!({"type": "tcp", "delivery": "acknowledged", "endpoints": [{"address": addr.to_string()}],
               "backoff_min_ms": 50, "backoff_max_ms": 200}),
    );
    let batches: Vec<Vec<Bytes>> = (0..4).map(|i| envelopes(i * 50, 50)).collect();
    sink.deliver(&batches[0]).await.unwrap();
    sink.deliver(&batches[1]).await.unwrap();
    let e = sink.deliver(&batches[2]).await.unwrap_err();
    assert_eq!(e.failures[0].kind, FailureKind::Closed, "{e}");
    a.stop().await;
    let acked = a.received.acked.load(Ordering::SeqCst);
    assert!((100..=120).contains(&acked), "acknowledged {acked}");
    // It had processed frames beyond what it acknowledged: those were not counted delivered.
    assert!(a.received.frames() > 120);

    let b = TcpConsumer::start_on(
        addr,
        TcpBehaviour { ack: true, ..Default::default() },
        None,
        Arc::default(),
    )
    .await;
    deliver_retrying(&*sink, &batches[2], Duration::from_secs(10)).await;
    sink.deliver(&batches[3]).await.unwrap();
    // Nothing lost: what the first consumer acknowledged and what the second received cover
    // everything, the second from the failed batch on, in order.
    assert_eq!(&a.received.seqs()[..acked as usize], &range(0, acked)[..]);
    assert_eq!(b.received.seqs(), range(100, 200));
}

#[tokio::test]
async fn tcp_acknowledged_feed_fails_a_batch_the_consumer_never_acknowledges() {
    let silent = TcpConsumer::start(TcpBehaviour::default(), None).await;
    let (sink, metrics) = new_sink(
        "tcp-silent",
        json!({"type": "tcp", "delivery": "acknowledged", "write_timeout_ms": 200,
               "endpoints": [{"address": silent.addr.to_string()}]}),
    );
    let start = Instant::now();
    let e = sink.deliver(&envelopes(0, 10)).await.unwrap_err();
    assert_eq!(e.failures[0].kind, FailureKind::Timeout, "{e}");
    assert!(start.elapsed() >= Duration::from_millis(200));
    // The consumer did receive them: a retry would bring them again (at least once).
    assert_eq!(silent.received.frames(), 10);
    let text = metrics_text(&metrics);
    assert!(text.contains(r#"result="failed"} 10"#), "{text}");
    assert!(text.contains(r#"kind="timeout"} 1"#), "{text}");
}

#[tokio::test]
async fn tcp_feed_over_tls_to_a_consumer_with_our_ca() {
    let ours = pki();
    let c = TcpConsumer::start(TcpBehaviour { ack: true, ..Default::default() }, Some(&ours)).await;
    let (sink, _) = new_sink(
        "tcp-tls",
        json!({"type": "tcp", "delivery": "acknowledged", "endpoints": [{"address": c.addr.to_string()}],
               "tls": {"ca_files": [ours.ca]}}),
    );
    for i in 0..5 {
        sink.deliver(&envelopes(i * 40, 40)).await.unwrap();
    }
    assert_eq!(c.received.seqs(), range(0, 200));

    // The certificate's name is checked: by DNS name too.
    let (by_name, _) = new_sink(
        "tcp-tls-name",
        json!({"type": "tcp", "endpoints": [{"address": c.addr.to_string()}],
               "tls": {"ca_files": [ours.ca], "server_name": "localhost"}}),
    );
    by_name.deliver(&envelopes(200, 1)).await.unwrap();

    // A consumer whose certificate another CA signed is not written to.
    let other = pki();
    let (untrusting, _) = new_sink(
        "tcp-tls-other",
        json!({"type": "tcp", "endpoints": [{"address": c.addr.to_string()}],
               "tls": {"ca_files": [other.ca]}}),
    );
    let e = untrusting.deliver(&envelopes(201, 1)).await.unwrap_err();
    assert_eq!(e.failures[0].kind, FailureKind::Tls, "{e}");
    wait_until("201 frames", Duration::from_secs(5), || c.received.frames() == 201).await;
}

// === HTTP/2 ===

#[tokio::test]
async fn http2_feed_posts_every_envelope_in_order_as_framed_copies() {
    let c = Http2Consumer::start(None).await;
    let uri = c.uri("http");
    let (sink, metrics) = new_sink(
        "h2-in-order",
        json!({"type": "http2", "endpoints": [{"uri": uri}], "max_batch": 64}),
    );
    for b in 0..20 {
        sink.deliver(&envelopes(b * 100, 100)).await.unwrap();
    }
    assert_eq!(c.requests.seqs(), range(0, 2000));
    // 100 envelopes with max_batch 64: two requests per deliver.
    assert_eq!(c.requests.requests(), 40);
    let cts = c.requests.content_types.lock().unwrap().clone();
    assert!(cts.iter().all(|ct| ct == dd::envelope::CONTENT_TYPE), "{cts:?}");
    let text = metrics_text(&metrics);
    assert!(
        text.contains(&format!(
            r#"dd_feed_messages_total{{feed="h2-in-order",endpoint="{uri}",result="delivered"}} 2000"#
        )),
        "{text}"
    );
    assert!(text.contains(r#"dd_feed_e2e_seconds_count{feed="h2-in-order"} 2000"#), "{text}");
    assert!(text.contains(r#"dd_feed_delivery_seconds_count{feed="h2-in-order"} 40"#), "{text}");
}

#[tokio::test]
async fn http2_feed_spreads_batches_round_robin_and_weighted() {
    let (a, b) = (Http2Consumer::start(None).await, Http2Consumer::start(None).await);
    let (rr, _) = new_sink(
        "h2-rr",
        json!({"type": "http2", "endpoints": [{"uri": a.uri("http")}, {"uri": b.uri("http")}]}),
    );
    for i in 0..10 {
        rr.deliver(&envelopes(i * 10, 10)).await.unwrap();
    }
    assert_eq!((a.requests.requests(), b.requests.requests()), (5, 5));
    assert_eq!(a.requests.seqs()[..10], range(0, 10)[..]);
    assert_eq!(b.requests.seqs()[..10], range(10, 20)[..]);

    let (a2, b2) = (Http2Consumer::start(None).await, Http2Consumer::start(None).await);
    let (weighted, _) = new_sink(
        "h2-50-50",
        json!({"type": "http2", "balance": "weighted", "endpoints": [
            {"uri": a2.uri("http"), "weight": 60}, {"uri": b2.uri("http"), "weight": 40}]}),
    );
    for i in 0..500 {
        weighted.deliver(&[envelope(i, 10)]).await.unwrap();
    }
    assert_eq!((a2.requests.requests(), b2.requests.requests()), (300, 200));
}

#[tokio::test]
async fn http2_feed_fails_over_on_overload_and_5xx_and_honours_retry_after() {
    let (a, b) = (Http2Consumer::start(None).await, Http2Consumer::start(None).await);
    a.set(Answer { status: 503, retry_after: Some("1".into()), ..Default::default() });
    let (sink, metrics) = new_sink(
        "h2-overload",
        json!({"type": "http2", "endpoints": [{"uri": a.uri("http")}, {"uri": b.uri("http")}],
               "backoff_min_ms": 50}),
    );
    for i in 0..6 {
        sink.deliver(&envelopes(i * 10, 10)).await.unwrap();
    }
    // a was asked once, said 503 Retry-After: 1, and was left alone for that second (its
    // backoff alone would have been 50 ms).
    assert_eq!(a.requests.requests(), 1);
    assert_eq!(b.requests.seqs(), range(0, 60));
    let h = sink.health();
    assert!(!h[0].up && h[0].down_for_ms.unwrap() > 100, "{h:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    a.set(Answer::default());
    for i in 6..10 {
        sink.deliver(&envelopes(i * 10, 10)).await.unwrap();
    }
    assert_eq!(a.requests.seqs().len(), 20, "back in rotation after Retry-After");

    // A 500 fails over too (the batch is retried, not dropped).
    b.set(Answer { status: 500, ..Default::default() });
    for i in 10..14 {
        sink.deliver(&envelopes(i * 10, 10)).await.unwrap();
    }
    let mut all = a.requests.seqs();
    all.extend(b.requests.seqs());
    all.sort();
    assert_eq!(all, range(0, 140), "every envelope delivered exactly once");
    let text = metrics_text(&metrics);
    let a_uri = a.uri("http");
    assert!(
        text.contains(&format!(
            r#"dd_feed_errors_total{{feed="h2-overload",endpoint="{a_uri}",kind="overloaded"}} 1"#
        )),
        "{text}"
    );
    assert!(text.contains(r#"kind="status"} 1"#), "{text}");
}

#[tokio::test]
async fn http2_feed_counts_a_refused_batch_as_rejected_and_moves_on() {
    let c = Http2Consumer::start(None).await;
    c.set(Answer { status: 400, ..Default::default() });
    let (sink, metrics) =
        new_sink("h2-400", json!({"type": "http2", "endpoints": [{"uri": c.uri("http")}]}));
    sink.deliver(&envelopes(0, 7)).await.unwrap();
    assert_eq!(c.requests.requests(), 1, "not retried");
    let text = metrics_text(&metrics);
    assert!(text.contains(r#"result="rejected"} 7"#), "{text}");
    assert!(text.contains(r#"result="delivered"} 0"#), "{text}");
    assert!(sink.health()[0].up, "the consumer answered: it is up");
}

#[tokio::test]
async fn http2_feed_consumer_down_then_back_loses_nothing() {
    let mut c = Http2Consumer::start(None).await;
    let addr = c.addr;
    let uri = c.uri("http");
    let (sink, _) = new_sink(
        "h2-down",
        json!({"type": "http2", "endpoints": [{"uri": uri}], "backoff_min_ms": 50, "backoff_max_ms": 200,
               "connect_timeout_ms": 200}),
    );
    let batches: Vec<Vec<Bytes>> = (0..10).map(|i| envelopes(i * 50, 50)).collect();
    for b in &batches[..5] {
        sink.deliver(b).await.unwrap();
    }
    let requests = c.requests.clone();
    c.stop().await;
    let e = sink.deliver(&batches[5]).await.unwrap_err();
    assert!(matches!(e.failures[0].kind, FailureKind::Connect | FailureKind::Io), "{e}");

    let feed = {
        let (sink, batches) = (sink.clone(), batches.clone());
        tokio::spawn(async move {
            for b in &batches[5..] {
                deliver_retrying(&*sink, b, Duration::from_secs(10)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _back = Http2Consumer::start_on(addr, None, requests.clone()).await;
    feed.await.unwrap();
    assert_eq!(requests.seqs(), range(0, 500), "every envelope once, in order");
}

#[tokio::test]
async fn http2_feed_holds_at_most_max_in_flight_requests() {
    let c = Http2Consumer::start(None).await;
    c.set(Answer { delay: Duration::from_millis(50), ..Default::default() });
    let (sink, _) = new_sink(
        "h2-bounded",
        json!({"type": "http2", "endpoints": [{"uri": c.uri("http")}], "max_in_flight": 2}),
    );
    let start = Instant::now();
    let delivers: Vec<_> = (0..8)
        .map(|i| {
            let sink = sink.clone();
            tokio::spawn(async move { sink.deliver(&envelopes(i * 5, 5)).await })
        })
        .collect();
    for d in delivers {
        d.await.unwrap().unwrap();
    }
    assert_eq!(c.requests.max_in_flight.load(Ordering::SeqCst), 2);
    // Eight 50 ms answers, two at a time.
    assert!(start.elapsed() >= Duration::from_millis(200), "{:?}", start.elapsed());
    let mut seqs = c.requests.seqs();
    seqs.sort();
    assert_eq!(seqs, range(0, 40));
}

#[tokio::test]
async fn http2_feed_over_tls() {
    let pki = pki();
    let c = Http2Consumer::start(Some(&pki)).await;
    let uri = format!("https://localhost:{}/copies", c.addr.port());
    let (sink, _) = new_sink(
        "h2-tls",
        json!({"type": "http2", "endpoints": [{"uri": uri}], "tls": {"ca_files": [pki.ca]}}),
    );
    sink.deliver(&envelopes(0, 30)).await.unwrap();
    assert_eq!(c.requests.seqs(), range(0, 30));
}

// === configuration ===

#[test]
fn bad_configurations_name_every_wrong_field() {
    let cases = [
        (json!({"type": "tcp", "endpoints": []}), vec!["/endpoints"]),
        (
            json!({"type": "tcp",
                   "endpoints": [{"address": "no-port", "weight": 0}, {"address": "10.0.0.1:0"}],
                   "max_batch": 0, "max_in_flight": 0, "write_timeout_ms": 0,
                   "backoff_min_ms": 500, "backoff_max_ms": 100}),
            vec![
                "/backoff_max_ms",
                "/endpoints/0/address",
                "/endpoints/0/weight",
                "/endpoints/1/address",
                "/max_batch",
                "/max_in_flight",
                "/write_timeout_ms",
            ],
        ),
        (
            json!({"type": "tcp", "endpoints": [{"address": "127.0.0.1:9"}],
                   "tls": {"ca_files": ["/nonexistent/ca.pem"], "cert_file": "/nonexistent/c.pem",
                           "server_name": "not a name"}}),
            vec!["/tls/ca_files/0", "/tls/key_file", "/tls/server_name"],
        ),
        (
            json!({"type": "tcp", "endpoints": [{"address": "127.0.0.1:9"}], "tls": {"ca_files": []}}),
            vec!["/tls/ca_files"],
        ),
        (
            json!({"type": "http2",
                   "endpoints": [{"uri": "ftp://a/"}, {"uri": "https://b.example:8443/x"}, {"uri": "not a uri"},
                                 {"uri": "http://c.example:0/"}],
                   "request_timeout_ms": 0}),
            vec![
                "/endpoints/0/uri",
                "/endpoints/2/uri",
                "/endpoints/3/uri",
                "/request_timeout_ms",
                "/tls/ca_files",
            ],
        ),
    ];
    for (cfg, want) in cases {
        let parsed: SinkConfig = serde_json::from_value(cfg.clone()).unwrap();
        let errs = match build("bad", &parsed, &FeedMetrics::default()) {
            Ok(_) => panic!("{cfg} was accepted"),
            Err(errs) => errs,
        };
        let mut got: Vec<&str> = errs.iter().map(|p| p.param.as_str()).collect();
        got.sort();
        assert_eq!(got, want, "{cfg}: {errs:?}");
        assert!(errs.iter().all(|p| p.reason.as_ref().is_some_and(|r| !r.is_empty())), "{errs:?}");
        assert_eq!(parsed.validate(), errs);
    }
}
