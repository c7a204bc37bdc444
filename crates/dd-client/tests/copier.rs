//! The copier against a stand-in ingest API over real sockets (testkit::dd_ingest): batches
//! delivered in order, an ingest that is down then back, 503s, a refused batch, the flush at
//! stop, and the metrics that show each.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dd_client::{Copier, CopyConfig, TriggerPoint};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use prometheus_client::registry::Registry;
use sbi::client::{ClientConfig, SbiClient};
use sbi::layer::tap::{self, Exchange, MessageCopy, MessageTap, Peer};
use testkit::dd_ingest::Ingest;

const T: Duration = Duration::from_secs(10);

fn start(uri: &str, f: impl FnOnce(&mut CopyConfig)) -> (Copier, Arc<dyn MessageTap>) {
    let mut c = CopyConfig { enabled: true, uri: uri.into(), ..CopyConfig::default() };
    f(&mut c);
    let client = SbiClient::new(&ClientConfig {
        connect_timeout_ms: 200,
        request_timeout_ms: 1000,
        ..ClientConfig::default()
    })
    .unwrap();
    let copier = Copier::start(&c, "BSF", "8370e6ad-be17-4f89-9541-0c008a3dece0", client).unwrap();
    let tap = copier.sbi_tap();
    (copier, tap)
}

/// A binding create and its 201, as the BSF's server layer shows them.
fn exchange(tap: &dyn MessageTap, n: u32) {
    let uri: Uri = "/nbsf-management/v1/pcfBindings".parse().unwrap();
    let mut h = HeaderMap::new();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    let body = format!(r#"{{"supi":"imsi-00101000000{n:04}","dnn":"internet"}}"#);
    let mut ex = Exchange::default();
    let m = MessageCopy {
        trigger: tap::TriggerPoint::IngressRequest,
        request_at: SystemTime::now(),
        answer_at: None,
        method: &Method::POST,
        uri: &uri,
        operation: "Nbsf_Management_Register",
        stream_id: 0,
        peer: Peer::Addr("127.0.0.1:50000".parse().unwrap()),
        status: None,
        headers: &h,
        body: body.as_bytes(),
    };
    tap.copy(&m, &mut ex);
    let mut ah = HeaderMap::new();
    let loc = format!("http://127.0.0.1:7002/nbsf-management/v1/pcfBindings/b{n}");
    ah.insert("location", HeaderValue::from_str(&loc).unwrap());
    let a = MessageCopy {
        trigger: tap::TriggerPoint::IngressResponse,
        answer_at: Some(SystemTime::now()),
        status: Some(StatusCode::CREATED),
        headers: &ah,
        body: body.as_bytes(),
        ..m
    };
    tap.copy(&a, &mut ex);
}

fn metrics(c: &Copier) -> String {
    let mut r = Registry::default();
    c.register_metrics(&mut r);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
    text
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

fn in_order(copies: &[dd_client::Copy], n: usize) -> bool {
    copies.len() == n && copies.iter().enumerate().all(|(i, c)| c.sequence == i as u64)
}

#[tokio::test]
async fn batches_arrive_in_order_with_what_the_copier_was_shown() {
    let ingest = Ingest::start().await;
    let (copier, tap) = start(&ingest.uri(), |c| c.batch_size = 3);
    for n in 0..10 {
        exchange(&*tap, n);
    }
    let copies = ingest.wait_for(T, |c| c.len() == 20).await;
    assert!(in_order(&copies, 20), "sequence order is arrival order");
    for (n, pair) in copies.chunks(2).enumerate() {
        let (req, ans) = (&pair[0], &pair[1]);
        assert_eq!(
            (req.trigger, ans.trigger),
            (TriggerPoint::IngressRequest, TriggerPoint::IngressResponse)
        );
        let supi = format!("imsi-00101000000{n:04}");
        assert_eq!((req.supi(), ans.supi()), (supi.as_str(), supi.as_str()));
        assert_eq!(ans.session_id(), format!("b{n}"));
        assert_eq!(req.transaction, ans.transaction);
        assert_eq!(req.nf_type(), "BSF");
        assert_eq!(req.operation(), "Nbsf_Management_Register");
    }
    let text = metrics(&copier);
    assert_eq!(metric(&text, "dd_copies_total{trigger=\"ingress_request\"}"), 10.0);
    assert_eq!(metric(&text, "dd_copies_total{trigger=\"ingress_response\"}"), 10.0);
    assert!(metric(&text, "dd_copy_batches_total{result=\"delivered\"}") >= 1.0);
    assert_eq!(metric(&text, "dd_copy_buffer_bytes"), 0.0);
    copier.stop(T).await;
    ingest.stop();
}

#[tokio::test]
async fn copies_wait_for_an_ingest_that_is_down_and_arrive_once_it_is_back() {
    let ingest = Ingest::start().await;
    let addr = ingest.addr;
    ingest.stop();
    let (copier, tap) = start(&format!("http://{addr}"), |c| c.batch_size = 4);
    for n in 0..10 {
        exchange(&*tap, n);
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let text = metrics(&copier);
    assert!(metric(&text, "dd_copy_batches_total{result=\"unreachable\"}") >= 1.0, "{text}");
    assert!(metric(&text, "dd_copy_buffer_bytes") > 0.0, "{text}");
    assert_eq!(metric(&text, "dd_copy_batches_total{result=\"delivered\"}"), 0.0);

    let ingest = Ingest::start_on(addr).await;
    let copies = ingest.wait_for(T, |c| c.len() == 20).await;
    assert!(in_order(&copies, 20), "resent in order, nothing lost");
    let text = metrics(&copier);
    assert_eq!(metric(&text, "dd_copy_buffer_bytes"), 0.0);
    assert_eq!(metric(&text, "dd_copies_dropped_total{reason=\"buffer_full\"}"), 0.0);
    copier.stop(T).await;
    ingest.stop();
}

#[tokio::test]
async fn a_503_keeps_the_batch_until_the_ingest_takes_it() {
    let ingest = Ingest::start().await;
    ingest.answer(503);
    let (copier, tap) = start(&ingest.uri(), |_| {});
    exchange(&*tap, 1);
    let deadline = std::time::Instant::now() + T;
    while ingest.posts() < 3 {
        assert!(std::time::Instant::now() < deadline, "the batch is sent again");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(ingest.copies().is_empty());
    assert!(metric(&metrics(&copier), "dd_copy_batches_total{result=\"unavailable\"}") >= 2.0);
    ingest.answer(0);
    let copies = ingest.wait_for(T, |c| c.len() == 2).await;
    assert!(in_order(&copies, 2));
    copier.stop(T).await;
    ingest.stop();
}

#[tokio::test]
async fn a_batch_the_ingest_refuses_for_good_is_dropped_and_counted() {
    let ingest = Ingest::start().await;
    ingest.answer(400);
    let (copier, tap) = start(&ingest.uri(), |_| {});
    exchange(&*tap, 1);
    let deadline = std::time::Instant::now() + T;
    loop {
        let text = metrics(&copier);
        if metric(&text, "dd_copies_dropped_total{reason=\"rejected\"}") == 2.0 {
            assert_eq!(metric(&text, "dd_copy_batches_total{result=\"rejected\"}"), 1.0);
            assert_eq!(metric(&text, "dd_copy_buffer_bytes"), 0.0);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The next batch is sent, not held behind the refused one.
    ingest.answer(0);
    exchange(&*tap, 2);
    let copies = ingest.wait_for(T, |c| c.len() == 2).await;
    assert_eq!(copies[0].sequence, 2);
    copier.stop(T).await;
    ingest.stop();
}

#[tokio::test]
async fn the_stop_sends_a_batch_still_lingering() {
    let ingest = Ingest::start().await;
    let (copier, tap) = start(&ingest.uri(), |c| c.linger_ms = 10_000);
    exchange(&*tap, 1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(ingest.copies().is_empty(), "still lingering");
    copier.stop(T).await;
    assert_eq!(ingest.copies().len(), 2);
    let text = metrics(&copier);
    assert_eq!(metric(&text, "dd_copies_dropped_total{reason=\"stopped\"}"), 0.0);
    ingest.stop();
}
