//! Peer simulators: small hyper servers (HTTP/1.1 and h2c) that wait their configured latency,
//! then answer, counting what they receive.
//!
//! - notification sink: any request, 204 (NfStatusNotify callbacks);
//! - SLF: `GET /nudr-group-id-map/v1/nf-group-ids?nf-type=..&subscriberId=..` answers a
//!   NfGroupIdMapResult (TS 29.504 §6.3) mapping the subscriber to group `<type>-grp-0`;
//! - peer NRF: `GET /nnrf-disc/v1/nf-instances` answers an empty SearchResult.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::scenario::{SimKind, Simulator};

#[derive(Debug, Default)]
pub struct SimCounters {
    /// Requests received.
    pub received: AtomicU64,
    /// What they carried: for a notification sink, the notifications (the elements of a JSON
    /// array body, as the UDR batches PolicyDataChangeNotifications; 1 for any other body);
    /// for the other kinds, the requests.
    pub items: AtomicU64,
    /// Answers that were not 2xx (a request the simulator did not understand).
    pub rejected: AtomicU64,
}

pub struct RunningSim {
    pub name: String,
    pub kind: SimKind,
    pub latency_ms: u64,
    pub addr: SocketAddr,
    pub counters: Arc<SimCounters>,
    task: JoinHandle<()>,
}

impl RunningSim {
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn start(sim: &Simulator) -> std::io::Result<RunningSim> {
    if sim.kind.is_diameter() {
        // Those connect to the NF once it runs (crate::rx), they serve no HTTP.
        return Err(std::io::Error::other(format!("{} is a Diameter simulator", sim.name)));
    }
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let counters = Arc::new(SimCounters::default());
    let (kind, latency) = (sim.kind, Duration::from_millis(sim.latency_ms));
    let remote =
        Arc::new(Remote { share: sim.remote_share, nf_types: sim.remote_nf_types.clone() });
    let c = counters.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let _ = stream.set_nodelay(true);
            let (c, remote) = (c.clone(), remote.clone());
            tokio::spawn(async move {
                let svc =
                    service_fn(move |req| answer(kind, latency, c.clone(), remote.clone(), req));
                // A simulator holding every request for its added latency needs many streams at
                // once (4,420 SLF queries/s x 150 ms is 663 in flight; hyper's default is 200):
                // it must not be what limits the NF under test.
                let mut builder = Builder::new(TokioExecutor::new());
                builder.http2().max_concurrent_streams(100_000);
                let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    Ok(RunningSim {
        name: sim.name.clone(),
        kind,
        latency_ms: sim.latency_ms,
        addr,
        counters,
        task,
    })
}

pub async fn start_all(sims: &[Simulator]) -> std::io::Result<Vec<RunningSim>> {
    let mut out = Vec::new();
    for s in sims {
        out.push(start(s).await?);
    }
    Ok(out)
}

fn json(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// SLF: which subscribers belong to a group this NRF does not hold.
struct Remote {
    share: f64,
    nf_types: Vec<String>,
}

impl Remote {
    /// `<type>-grp-remote` for `share` of the subscribers (by the last two digits), of the
    /// listed types; otherwise `<type>-grp-0`.
    fn group(&self, nf_type: &str, subscriber: &str) -> String {
        let digits: String =
            subscriber.chars().rev().take_while(char::is_ascii_digit).take(2).collect();
        let bucket = digits.chars().rev().collect::<String>().parse::<u32>().unwrap_or(0);
        let remote =
            self.nf_types.iter().any(|t| t == nf_type) && f64::from(bucket) < self.share * 100.0;
        format!("{}-grp-{}", nf_type.to_ascii_lowercase(), if remote { "remote" } else { "0" })
    }
}

async fn answer(
    kind: SimKind,
    latency: Duration,
    c: Arc<SimCounters>,
    remote: Arc<Remote>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    c.received.fetch_add(1, Ordering::Relaxed);
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let items = match kind {
        SimKind::NotificationSink if body.first() == Some(&b'[') => {
            serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(&body).map_or(1, |v| v.len())
        }
        _ => 1,
    };
    c.items.fetch_add(items as u64, Ordering::Relaxed);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let rsp = match kind {
        SimKind::NotificationSink => {
            Response::builder().status(204).body(Full::new(Bytes::new())).unwrap()
        }
        SimKind::Slf => {
            let q: HashMap<String, String> =
                parts.uri.query().map(|q| form_pairs(q).into_iter().collect()).unwrap_or_default();
            // An apiPrefix may precede the API name.
            let path_ok = parts.uri.path().ends_with("/nudr-group-id-map/v1/nf-group-ids");
            match (&parts.method, path_ok, q.get("nf-type"), q.get("subscriberId")) {
                (&Method::GET, true, Some(t), Some(sub)) => {
                    let group = remote.group(t, sub);
                    json(
                        StatusCode::OK,
                        serde_json::json!({"nfGroupIds": {t.clone(): group}, "subscriberId": sub})
                            .to_string(),
                    )
                }
                _ => {
                    c.rejected.fetch_add(1, Ordering::Relaxed);
                    json(
                        StatusCode::BAD_REQUEST,
                        r#"{"status":400,"cause":"MANDATORY_QUERY_PARAM_MISSING"}"#.into(),
                    )
                }
            }
        }
        SimKind::AfRx | SimKind::PcfRx | SimKind::AsSh => {
            c.rejected.fetch_add(1, Ordering::Relaxed);
            json(StatusCode::NOT_FOUND, r#"{"status":404}"#.into())
        }
        SimKind::PeerNrf => {
            if parts.uri.path().ends_with("/nnrf-disc/v1/nf-instances") {
                json(StatusCode::OK, r#"{"validityPeriod":60,"nfInstances":[]}"#.into())
            } else {
                c.rejected.fetch_add(1, Ordering::Relaxed);
                json(StatusCode::NOT_FOUND, r#"{"status":404}"#.into())
            }
        }
    };
    Ok(rsp)
}

/// Minimal `application/x-www-form-urlencoded` decoding of a query string.
fn form_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (pct_decode(k), pct_decode(v)))
        .collect()
}

fn pct_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    Ok(v) => out.push(v),
                    Err(_) => out.extend_from_slice(&b[i..i + 3]),
                }
                i += 3;
                continue;
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slf_simulator_answers_group_id_map_after_its_latency() {
        let sim = Simulator {
            name: "slf".into(),
            kind: SimKind::Slf,
            latency_ms: 30,
            description: String::new(),
            remote_share: 0.12,
            remote_nf_types: vec!["UDM".into()],
            origin_host: None,
            origin_realm: None,
        };
        let s = start(&sim).await.unwrap();
        let client = sbi::client::SbiClient::new(&Default::default()).unwrap();
        let t = std::time::Instant::now();
        let url = format!(
            "{}/nudr-group-id-map/v1/nf-group-ids?nf-type=UDM&subscriberId=imsi-001010000000050",
            s.base_url()
        );
        let rsp = client.get(&url).send().await.unwrap();
        assert!(t.elapsed() >= Duration::from_millis(30));
        assert_eq!(rsp.status(), 200);
        let v: serde_json::Value = rsp.json().unwrap();
        assert_eq!(v["nfGroupIds"]["UDM"], "udm-grp-0");
        assert_eq!(v["subscriberId"], "imsi-001010000000050");
        let bad = client
            .get(&format!("{}/nudr-group-id-map/v1/nf-group-ids", s.base_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400);
        assert_eq!(s.counters.received.load(Ordering::Relaxed), 2);
        assert_eq!(s.counters.rejected.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn slf_maps_a_share_of_subscribers_to_a_remote_group() {
        let r = Remote { share: 0.12, nf_types: vec!["UDM".into()] };
        assert_eq!(r.group("UDM", "imsi-001010000000011"), "udm-grp-remote");
        assert_eq!(r.group("UDM", "imsi-001010000000012"), "udm-grp-0");
        assert_eq!(r.group("AUSF", "imsi-001010000000011"), "ausf-grp-0");
        let n = (0..10_000)
            .filter(|i| r.group("UDM", &format!("imsi-00101{i:010}")).ends_with("remote"))
            .count();
        assert_eq!(n, 1200);
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(pct_decode("a%2Cb+c"), "a,b c");
        assert_eq!(pct_decode("%zz"), "%zz");
        assert_eq!(pct_decode("x%4"), "x%4");
    }
}
