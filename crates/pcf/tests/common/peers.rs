//! The real NRF, UDR and BSF the PCF talks to in its tests, each on 127.0.0.1:0 with a store
//! in the test's directory.

use std::net::SocketAddr;
use std::path::Path;

use tokio::sync::oneshot;

/// A peer NF serving until [`Served::stop`].
pub struct Served {
    pub base: String,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Spawns `serve` (given the future that completes at stop) for an NF bound at `addr`.
fn served<F>(addr: SocketAddr, serve: impl FnOnce(oneshot::Receiver<()>) -> F) -> Served
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let (stop, rx) = oneshot::channel::<()>();
    Served { base: format!("http://{addr}"), stop, task: tokio::spawn(serve(rx)) }
}

async fn stopped(rx: oneshot::Receiver<()>) {
    let _ = rx.await;
}

fn store(dir: &Path, db: &str) -> store::SqliteConfig {
    store::SqliteConfig { readers: 1, ..store::SqliteConfig::new(dir.join(db)) }
}

/// How the peers and the PCF register with the NRF at `nrf`.
pub fn nrf_client_config(nrf: &str) -> nrf_client::NrfClientConfig {
    nrf_client::NrfClientConfig {
        api_roots: vec![nrf.to_string()],
        register_retry_initial_ms: 50,
        ..Default::default()
    }
}

pub async fn start_nrf(dir: &Path) -> Served {
    let run = nrf::RunConfig {
        nrf: nrf::NrfConfig::default(),
        sbi: sbi::ServerConfig::default(),
        client: sbi::client::ClientConfig::default(),
        store: store(dir, "nrf.db"),
        instance_id: None,
    };
    let bound = nrf::bind(run).await.unwrap();
    served(bound.local_addr(), |rx| async move { bound.serve(stopped(rx)).await.unwrap() })
}

/// A UDR, registered with the NRF at `nrf` when given.
pub async fn start_udr(dir: &Path, nrf: Option<&str>) -> Served {
    let run = udr::RunConfig {
        udr: udr::UdrConfig { nrf: nrf.map(nrf_client_config), ..Default::default() },
        sbi: sbi::ServerConfig::default(),
        client: sbi::client::ClientConfig::default(),
        store: store(dir, "udr.db"),
        instance_id: None,
    };
    let bound = udr::bind(run).await.unwrap();
    served(bound.local_addr(), |rx| async move { bound.serve(stopped(rx)).await.unwrap() })
}

pub async fn start_bsf(dir: &Path) -> Served {
    let run = bsf::RunConfig {
        bsf: bsf::BsfConfig::default(),
        sbi: sbi::ServerConfig::default(),
        client: sbi::client::ClientConfig::default(),
        store: store(dir, "bsf.db"),
        instance_id: None,
    };
    let bound = bsf::bind(run).await.unwrap();
    served(bound.local_addr(), |rx| async move { bound.serve(stopped(rx)).await.unwrap() })
}
