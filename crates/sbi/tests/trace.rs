//! Traces over real sockets (issue #27, docs/telemetry.md): two NFs on 127.0.0.1, a consumer
//! whose operation calls a producer with the SBI client, each exporting its spans by OTLP/HTTP
//! to a receiver in the test that decodes the protobuf the way a collector does. One request
//! gives one trace: the consumer's server span continues the caller's `traceparent`, its client
//! span is a child of it, and the producer's server span a child of that. Without OTLP the
//! caller's context is still passed on; a collector that never answers slows no request and
//! the spans it cannot take are counted on `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use sbi::client::{ClientConfig, SbiClient};
use sbi::{
    json_response, HandlerResult, NfIdentity, Observability, ProblemDetails, Router, SbiRequest,
    SbiServer, ServerConfig,
};
use serde_json::{json, Value};
use telemetry::{OtlpConfig, TelemetryConfig, Traces};
use testkit::otlp::{OtlpReceiver, SilentCollector, Span, CLIENT, SERVER};
use tokio::sync::oneshot;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";
const T: Duration = Duration::from_secs(10);

/// The producer answers what trace context it was sent; `missing` is a 404 ProblemDetails.
async fn get_item(_: Arc<()>, req: SbiRequest) -> HandlerResult {
    if req.param("itemId") == "missing" {
        return Err(ProblemDetails::not_found("no item missing"));
    }
    let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
    json_response(
        StatusCode::OK,
        &json!({"traceparent": header("traceparent"), "tracestate": header("tracestate")}),
    )
}

struct Consumer {
    client: SbiClient,
    producer: String,
}

/// The consumer's operation reads the item at the producer and answers what it got.
async fn get_thing(c: Arc<Consumer>, req: SbiRequest) -> HandlerResult {
    let url = format!("{}/nprod/v1/items/{}", c.producer, req.param("thingId"));
    let rsp =
        c.client.get(&url).send().await.map_err(|e| ProblemDetails::internal(e.to_string()))?;
    let mut out = http::Response::new(sbi::Body::from(rsp.body().clone()));
    *out.status_mut() = rsp.status();
    if let Some(ct) = rsp.headers().get(http::header::CONTENT_TYPE) {
        out.headers_mut().insert(http::header::CONTENT_TYPE, ct.clone());
    }
    Ok(out)
}

struct Nf {
    base: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    traces: Option<Traces>,
}

impl Nf {
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        (&mut self.task).await.unwrap();
        if let Some(t) = &self.traces {
            t.shutdown(Duration::from_secs(2)).await;
        }
    }

    async fn metrics(&self) -> String {
        let c = SbiClient::new(&ClientConfig::default()).unwrap();
        let r = c.get(&format!("{}/metrics", self.base)).send().await.unwrap();
        String::from_utf8(r.body().to_vec()).unwrap()
    }
}

fn telemetry(endpoint: Option<OtlpConfig>) -> TelemetryConfig {
    TelemetryConfig { otlp: endpoint, ..TelemetryConfig::default() }
}

fn otlp(endpoint: String) -> OtlpConfig {
    OtlpConfig { interval_ms: 50, ..OtlpConfig::new(endpoint) }
}

/// Serves `router` as the NF `nf_type`; with `[telemetry.otlp]`, with a tracer of its own (as
/// the NF skeleton does), also given to `client`.
async fn serve(
    nf_type: &str,
    router: Router,
    config: &TelemetryConfig,
    client: Option<&SbiClient>,
) -> Nf {
    let obs = Observability::new();
    obs.set_ready(true);
    let instance = format!("{}-1", nf_type.to_lowercase());
    let traces = Traces::start(config, nf_type, &instance).unwrap();
    let mut server = SbiServer::bind(
        ServerConfig::default(),
        NfIdentity::new(nf_type, instance.clone()),
        router,
        obs.clone(),
    )
    .await
    .unwrap();
    if let Some(t) = &traces {
        server = server.with_tracer(t.tracer());
        obs.with_registry(|r| t.register_metrics(r));
        if let Some(c) = client {
            assert!(c.set_tracer(t.tracer()));
        }
    }
    let base = format!("http://{}", server.local_addr());
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        server
            .serve(async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    Nf { base, stop: Some(stop), task, traces }
}

async fn producer(config: &TelemetryConfig) -> Nf {
    let router = Router::builder(Arc::new(()))
        .route(Method::GET, "/nprod/v1/items/{itemId}", "Nprod_Items_Get", get_item)
        .build();
    serve("UDR", router, config, None).await
}

async fn consumer(config: &TelemetryConfig, producer: &Nf) -> Nf {
    let client = SbiClient::new(&ClientConfig::default()).unwrap();
    let state = Arc::new(Consumer { client: client.clone(), producer: producer.base.clone() });
    let router = Router::builder(state)
        .route(Method::GET, "/ncons/v1/things/{thingId}", "Ncons_Things_Get", get_thing)
        .build();
    serve("PCF", router, config, Some(&client)).await
}

/// The test's own client: no tracer, so it sends only the headers given.
fn caller() -> SbiClient {
    SbiClient::new(&ClientConfig::default()).unwrap()
}

fn one<'a>(spans: &'a [Span], what: &str, pick: impl Fn(&Span) -> bool) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "one {what} in {spans:#?}");
    found[0]
}

#[tokio::test]
async fn the_spans_of_one_request_form_one_trace_across_nfs() {
    let receiver = OtlpReceiver::start().await;
    let config = telemetry(Some(otlp(receiver.endpoint())));
    let producer = producer(&config).await;
    let consumer = consumer(&config, &producer).await;
    let c = caller();

    // An AMF's request, in a trace the AMF started.
    let r = c
        .get(&format!("{}/ncons/v1/things/a", consumer.base))
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .header("tracestate", "amf=7")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let seen: Value = r.json().unwrap();
    let spans = receiver.wait_for(T, |s| s.len() >= 3).await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    assert!(spans.iter().all(|s| s.trace_id == TRACE), "one trace: {spans:#?}");
    assert!(spans.iter().all(|s| s.trace_state == "amf=7"), "{spans:#?}");

    let served =
        one(&spans, "consumer server span", |s| s.service == "fivecore-pcf" && s.kind == SERVER);
    assert_eq!(served.name, "Ncons_Things_Get");
    assert_eq!(served.parent_span_id, PARENT, "a child of the AMF's span");
    assert_eq!(served.attr("http.route"), Some("/ncons/v1/things/{thingId}"));
    assert_eq!(served.attr("http.request.method"), Some("GET"));
    assert_eq!(served.attr("http.response.status_code"), Some("200"));
    assert_eq!(served.resource["service.instance.id"], "pcf-1");
    assert_eq!(served.resource["3gpp.nf.type"], "PCF");

    let sent = one(&spans, "consumer client span", |s| s.kind == CLIENT);
    assert_eq!(sent.service, "fivecore-pcf");
    assert_eq!(sent.name, "GET nprod");
    assert_eq!(sent.parent_span_id, served.span_id);
    assert_eq!(sent.attr("url.full"), Some(format!("{}/nprod/v1/items/a", producer.base).as_str()));
    assert_eq!(sent.attr("http.response.status_code"), Some("200"));

    let produced = one(&spans, "producer server span", |s| s.service == "fivecore-udr");
    assert_eq!(produced.kind, SERVER);
    assert_eq!(produced.name, "Nprod_Items_Get");
    assert_eq!(produced.parent_span_id, sent.span_id, "a child of the consumer's client span");
    // What went on the wire: the client span's context.
    assert_eq!(seen["traceparent"], format!("00-{TRACE}-{}-01", sent.span_id));
    assert_eq!(seen["tracestate"], "amf=7");
    let requests = receiver.requests();
    assert!(
        requests.iter().all(|r| *r == ("POST /v1/traces".into(), "application/x-protobuf".into())),
        "{requests:?}"
    );

    // A request without traceparent starts a trace here; the producer's 404 carries its cause.
    let r = c.get(&format!("{}/ncons/v1/things/missing", consumer.base)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let spans = receiver.wait_for(T, |s| s.len() >= 6).await;
    let new: Vec<Span> = spans.into_iter().filter(|s| s.trace_id != TRACE).collect();
    assert_eq!(new.len(), 3, "{new:#?}");
    assert!(new.iter().all(|s| s.trace_id == new[0].trace_id));
    let root = one(&new, "root", |s| s.parent_span_id.is_empty());
    assert_eq!((root.service.as_str(), root.kind), ("fivecore-pcf", SERVER));
    let sent = one(&new, "client span", |s| s.kind == CLIENT);
    assert_eq!(sent.attr("3gpp.sbi.cause"), Some("RESOURCE_NOT_FOUND"));
    assert_eq!(sent.status_code, 2, "a 404 answer is the client's error");
    let produced = one(&new, "producer span", |s| s.service == "fivecore-udr");
    assert_eq!(produced.attr("3gpp.sbi.cause"), Some("RESOURCE_NOT_FOUND"));
    assert_eq!(produced.attr("http.response.status_code"), Some("404"));
    assert_eq!(produced.status_code, 0, "a 4xx is not the server's error");
    assert_eq!(produced.parent_span_id, sent.span_id);

    // No route: the span is named after the method, with the router's cause.
    let r = c.delete(&format!("{}/nprod/v1/nothing", producer.base)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let spans = receiver.wait_for(T, |s| s.len() >= 7).await;
    let unrouted = one(&spans, "unrouted span", |s| s.name == "DELETE");
    assert_eq!(unrouted.attr("3gpp.sbi.cause"), Some("RESOURCE_URI_STRUCTURE_NOT_FOUND"));
    assert_eq!(unrouted.attr("http.route"), None);

    let text = consumer.metrics().await;
    assert!(
        text.lines().any(|l| l.starts_with("otlp_spans_exported_total ") && !l.ends_with(" 0")),
        "{text}"
    );
    assert!(text.contains("otlp_spans_dropped_total{reason=\"queue_full\"} 0"), "{text}");
    consumer.stop().await;
    producer.stop().await;
}

#[tokio::test]
async fn without_otlp_the_callers_trace_context_is_passed_on_as_it_came() {
    let off = TelemetryConfig::default();
    let producer = producer(&off).await;
    let consumer = consumer(&off, &producer).await;
    let c = caller();
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let r = c
        .get(&format!("{}/ncons/v1/things/a", consumer.base))
        .header("traceparent", traceparent.as_str())
        .header("tracestate", "amf=7")
        .send()
        .await
        .unwrap();
    let seen: Value = r.json().unwrap();
    // Nothing recorded here: the producer's spans are the AMF's span's children.
    assert_eq!(seen["traceparent"], traceparent);
    assert_eq!(seen["tracestate"], "amf=7");
    // A malformed traceparent is not passed on (W3C: start afresh), nor is nothing.
    for sent in [Some("00-zz-00-01"), None] {
        let mut req = c.get(&format!("{}/ncons/v1/things/a", consumer.base));
        if let Some(v) = sent {
            req = req.header("traceparent", v);
        }
        let seen: Value = req.send().await.unwrap().json().unwrap();
        assert_eq!(seen["traceparent"], Value::Null, "{sent:?}");
    }
    let text = consumer.metrics().await;
    assert!(!text.contains("otlp_"), "no exporter without [telemetry.otlp]: {text}");
    consumer.stop().await;
    producer.stop().await;
}

#[tokio::test]
async fn traces_this_nf_starts_are_sampled_by_ratio_and_the_decision_travels() {
    let receiver = OtlpReceiver::start().await;
    let config = TelemetryConfig { sample_ratio: 0.0, otlp: Some(otlp(receiver.endpoint())) };
    let producer = producer(&config).await;
    let consumer = consumer(&config, &producer).await;
    let c = caller();
    // Not sampled here: the producer is told so (flags 00) and records nothing either.
    let seen: Value = c
        .get(&format!("{}/ncons/v1/things/a", consumer.base))
        .send()
        .await
        .unwrap()
        .json()
        .unwrap();
    let tp = seen["traceparent"].as_str().expect("context passed on");
    assert!(tp.starts_with("00-") && tp.ends_with("-00"), "{tp}");
    // A trace the caller sampled is recorded whole.
    c.get(&format!("{}/ncons/v1/things/a", consumer.base))
        .header("traceparent", format!("00-{TRACE}-{PARENT}-01"))
        .send()
        .await
        .unwrap();
    let spans = receiver.wait_for(T, |s| s.len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spans = if spans.len() == 3 { receiver.spans() } else { spans };
    assert_eq!(spans.len(), 3, "{spans:#?}");
    assert!(spans.iter().all(|s| s.trace_id == TRACE));
    consumer.stop().await;
    producer.stop().await;
}

#[tokio::test]
async fn a_collector_that_never_answers_slows_no_request_and_what_it_misses_is_counted() {
    let silent = SilentCollector::start().await;
    let config = telemetry(Some(OtlpConfig {
        queue_size: 4,
        batch_size: 2,
        timeout_ms: 5_000,
        ..otlp(silent.endpoint())
    }));
    let producer = producer(&config).await;
    let c = caller();
    let mut slowest = Duration::ZERO;
    for _ in 0..50 {
        let started = Instant::now();
        let r = c.get(&format!("{}/nprod/v1/items/a", producer.base)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        slowest = slowest.max(started.elapsed());
    }
    // The exporter waits 5 s for an answer that never comes; no request waited for it.
    assert!(slowest < Duration::from_secs(2), "slowest answer {slowest:?}");
    let text = producer.metrics().await;
    let dropped: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("otlp_spans_dropped_total{reason=\"queue_full\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    // At most a batch in the exporter's hands and a full queue were kept.
    assert!(dropped >= 50 - 2 - 4, "dropped {dropped}: {text}");
    // Stopping does not wait for the silent collector beyond the flush bound.
    let started = Instant::now();
    producer.stop().await;
    assert!(started.elapsed() < Duration::from_secs(4), "stop took {:?}", started.elapsed());
}
