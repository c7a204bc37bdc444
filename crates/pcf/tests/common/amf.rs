//! An AMF simulated for the PCF's URSP delivery: an HTTP/1.1 + h2c server on 127.0.0.1 that
//! records N1N2MessageSubscribe / UnSubscribe and N1N2MessageTransfer requests (the transfer's
//! multipart body taken apart here, independently of the PCF's own code), answers as an AMF
//! does, and then plays the UE: it POSTs the MANAGE UE POLICY COMPLETE (or COMMAND REJECT) to
//! the subscribed N1 callback, or a transfer failure to `n1n2FailureTxfNotifURI`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// What the simulated UE answers to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ue {
    Complete,
    Reject,
    /// The AMF cannot reach the UE: a transfer failure notification.
    Unreachable,
    /// Nothing (the answer is relayed some other way).
    Silent,
}

/// One request the AMF received.
#[derive(Debug, Clone)]
pub enum Seen {
    Subscribe { supi: String, body: Value },
    Unsubscribe { path: String },
    Transfer { supi: String, json: Value, n1: Vec<u8> },
}

pub struct Amf {
    pub root: String,
    pub rx: mpsc::UnboundedReceiver<Seen>,
    pub ue: Arc<Mutex<Ue>>,
}

/// The parts of a multipart/related body: (Content-Type, Content-Id, octets).
pub fn split_multipart(content_type: &str, body: &[u8]) -> Vec<(String, String, Vec<u8>)> {
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .expect("a boundary")
        .trim_matches('"')
        .to_string();
    let delim = format!("\r\n--{boundary}");
    // A leading CRLF makes the first delimiter look like the others.
    let mut whole = b"\r\n".to_vec();
    whole.extend_from_slice(body);
    let mut out = Vec::new();
    let mut pieces = Vec::new();
    let mut at = 0;
    while let Some(p) = whole[at..].windows(delim.len()).position(|w| w == delim.as_bytes()) {
        pieces.push(at + p);
        at += p + delim.len();
    }
    for w in pieces.windows(2) {
        let part = &whole[w[0] + delim.len()..w[1]];
        let part = part.strip_prefix(b"\r\n").expect("CRLF after a delimiter");
        let split = part.windows(4).position(|x| x == b"\r\n\r\n").expect("part headers end");
        let head = String::from_utf8_lossy(&part[..split]).to_string();
        let header = |name: &str| {
            head.split("\r\n")
                .find_map(|l| {
                    let (n, v) = l.split_once(':')?;
                    n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                })
                .unwrap_or_default()
        };
        out.push((header("content-type"), header("content-id"), part[split + 4..].to_vec()));
    }
    out
}

fn multipart(json: &Value, n1: &[u8]) -> (String, Vec<u8>) {
    let b = "amf-sim-boundary";
    let mut body =
        format!("--{b}\r\nContent-Type: application/json\r\n\r\n{json}\r\n").into_bytes();
    body.extend_from_slice(
        format!("--{b}\r\nContent-Type: application/vnd.3gpp.5gnas\r\nContent-Id: n1\r\n\r\n")
            .as_bytes(),
    );
    body.extend_from_slice(n1);
    body.extend_from_slice(format!("\r\n--{b}--\r\n").as_bytes());
    (format!("multipart/related; boundary={b}; type=\"application/json\""), body)
}

fn respond(status: u16, body: Value, location: Option<String>) -> hyper::Response<Full<Bytes>> {
    let bytes = if body.is_null() { Bytes::new() } else { Bytes::from(body.to_string()) };
    let mut r = hyper::Response::new(Full::new(bytes));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    if !body.is_null() {
        r.headers_mut().insert("content-type", "application/json".parse().unwrap());
    }
    if let Some(l) = location {
        r.headers_mut().insert("location", l.parse().unwrap());
    }
    r
}

struct State {
    tx: mpsc::UnboundedSender<Seen>,
    ue: Arc<Mutex<Ue>>,
    /// The N1 callbacks subscribed, by SUPI.
    callbacks: Mutex<Vec<(String, String)>>,
    root: String,
    client: sbi::client::SbiClient,
}

async fn handle(
    st: Arc<State>,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let ct = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method.as_str(), segs.as_slice()) {
        ("POST", ["namf-comm", "v1", "ue-contexts", supi, "n1-n2-messages", "subscriptions"]) => {
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let cb = v["n1NotifyCallbackUri"].as_str().unwrap_or_default().to_string();
            let n = {
                let mut c = st.callbacks.lock().unwrap();
                c.push((supi.to_string(), cb));
                c.len()
            };
            let _ = st.tx.send(Seen::Subscribe { supi: supi.to_string(), body: v });
            let loc = format!("{}{path}/{n}", st.root);
            respond(201, json!({"n1n2NotifySubscriptionId": n.to_string()}), Some(loc))
        }
        ("DELETE", ["namf-comm", "v1", "ue-contexts", _, "n1-n2-messages", "subscriptions", _]) => {
            let _ = st.tx.send(Seen::Unsubscribe { path: path.clone() });
            respond(204, Value::Null, None)
        }
        ("POST", ["namf-comm", "v1", "ue-contexts", supi, "n1-n2-messages"]) => {
            assert!(ct.starts_with("multipart/related"), "{ct}");
            let parts = split_multipart(&ct, &body);
            let json_part = parts.iter().find(|p| p.0 == "application/json").expect("JSON part");
            let json: Value = serde_json::from_slice(&json_part.2).expect("JSON part decodes");
            let id =
                json["n1MessageContainer"]["n1MessageContent"]["contentId"].as_str().unwrap_or("");
            let n1 = parts
                .iter()
                .find(|p| p.0 == "application/vnd.3gpp.5gnas" && p.1 == id)
                .expect("the N1 part n1MessageContent refers to")
                .2
                .clone();
            let pti = n1[0];
            let supi = supi.to_string();
            let _ = st.tx.send(Seen::Transfer { supi: supi.clone(), json: json.clone(), n1 });
            let ue = *st.ue.lock().unwrap();
            let st2 = st.clone();
            tokio::spawn(async move {
                // The UE answers after the AMF's 200, as over the air.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let callback = st2
                    .callbacks
                    .lock()
                    .unwrap()
                    .iter()
                    .rev()
                    .find(|(s, _)| *s == supi)
                    .map(|c| c.1.clone());
                let answer = match ue {
                    Ue::Complete => Some(vec![pti, 0x02]),
                    Ue::Reject => Some(vec![
                        pti, 0x03, 0x00, 0x09, 0x01, 0x00, 0xf1, 0x10, 0x00, 0x01, 0x00, 0x01, 0x6f,
                    ]),
                    Ue::Unreachable => {
                        let uri = json["n1n2FailureTxfNotifURI"].as_str().unwrap_or_default();
                        let body = json!({"cause": "UE_NOT_RESPONDING",
                            "n1n2MsgDataUri": format!("{}/namf-comm/v1/ue-contexts/{supi}/n1-n2-messages/1", st2.root)});
                        let _ = st2.client.post(uri).json(&body).send().await;
                        None
                    }
                    Ue::Silent => None,
                };
                if let (Some(n1), Some(cb)) = (answer, callback) {
                    let (ct, body) = multipart(
                        &json!({"n1MessageContainer": {"n1MessageClass": "UPDP",
                        "n1MessageContent": {"contentId": "n1"}}}),
                        &n1,
                    );
                    let r = st2.client.post(&cb).header("content-type", ct).body(body).send().await;
                    assert_eq!(
                        r.map(|r| r.status().as_u16()).ok(),
                        Some(204),
                        "N1MessageNotify answered"
                    );
                }
            });
            respond(200, json!({"cause": "N1_N2_TRANSFER_INITIATED"}), None)
        }
        _ => respond(404, json!({"status": 404, "cause": "RESOURCE_NOT_FOUND"}), None),
    }
}

impl Amf {
    pub async fn start(ue: Ue) -> Amf {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let ue = Arc::new(Mutex::new(ue));
        let root = format!("http://{addr}");
        let st = Arc::new(State {
            tx,
            ue: ue.clone(),
            callbacks: Mutex::new(Vec::new()),
            root: root.clone(),
            client: super::client(),
        });
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let st = st.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let st = st.clone();
                        async move { Ok::<_, std::convert::Infallible>(handle(st, req).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        Amf { root, rx, ue }
    }

    /// The next request, failing after 5 s.
    pub async fn next(&mut self) -> Seen {
        tokio::time::timeout(Duration::from_secs(5), self.rx.recv())
            .await
            .expect("an AMF request within 5 s")
            .expect("AMF alive")
    }

    /// Asserts no request arrives for a moment.
    pub async fn quiet(&mut self) {
        let r = tokio::time::timeout(Duration::from_millis(300), self.rx.recv()).await;
        assert!(r.is_err(), "unexpected AMF request: {r:?}");
    }
}
