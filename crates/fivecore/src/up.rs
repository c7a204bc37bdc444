//! `fivecore up`: every NF of this build in one process on its default port.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;

use crate::cli::UpArgs;
use crate::nf::{self, NOT_LANDED};

pub fn run(args: &UpArgs) -> ExitCode {
    crate::logging::init(args.log_format);
    let config = match &args.config {
        Some(path) => match crate::config::Config::load(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("fivecore: {e}");
                return ExitCode::from(1);
            }
        },
        None => crate::config::Config::default(),
    };
    if args.check_config {
        let nfs: Vec<nf::Nf> = nf::ALL.iter().filter(|i| i.available).map(|i| i.nf).collect();
        return crate::config::report_check(&config, &nfs);
    }
    let mut out = Stdout::default();
    let names: Vec<&str> = nf::ALL.iter().filter(|i| i.available).map(|i| i.name).collect();
    if names.is_empty() {
        eprintln!(
            "fivecore up: no network function has landed in this build yet; nothing is served."
        );
        return ExitCode::from(NOT_LANDED);
    }
    out.line(&format!(
        "fivecore up: starting the {} (stores in {})",
        names.join(", "),
        args.data_dir.display()
    ));
    if let Err(e) = std::fs::create_dir_all(&args.data_dir) {
        eprintln!("fivecore up: cannot create {}: {e}", args.data_dir.display());
        return ExitCode::from(1);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fivecore up: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    // Each available NF with its own database under --data-dir (the defaults of `fivecore
    // <nf>`), on the configured host and its own port: one `[sbi] listen` cannot serve three.
    let dir = Some(args.data_dir.as_path());
    let db = |n: nf::Nf| args.data_dir.join(nf::info(n).db_file);
    let listen = |n: nf::Nf| nf::up_listen(&config, n, args.port_base);
    let mut nrf_config = nf::nrf_run_config(&config, dir);
    nrf_config.store.path = db(nf::Nf::Nrf);
    nrf_config.sbi.listen = listen(nf::Nf::Nrf);
    let mut bsf_config = nf::bsf_run_config(&config, dir);
    bsf_config.store.path = db(nf::Nf::Bsf);
    bsf_config.sbi.listen = listen(nf::Nf::Bsf);
    // The NRF's instance id is the configured one; the others generate their own.
    bsf_config.instance_id = None;
    // The whole core: the BSF's Rx proxy runs too (on `[bsf.rx] listen`, 3869 by default).
    bsf_config.bsf.rx.enabled = true;
    let mut udr_config = nf::udr_run_config(&config, dir);
    udr_config.store.path = db(nf::Nf::Udr);
    udr_config.sbi.listen = listen(nf::Nf::Udr);
    udr_config.instance_id = None;
    // And the UDR's Diameter Sh server (on `[udr.sh] listen`, 3870 by default).
    udr_config.udr.sh.enabled = true;
    let mut pcf_config = nf::pcf_run_config(&config, dir);
    pcf_config.store.path = db(nf::Nf::Pcf);
    pcf_config.sbi.listen = listen(nf::Nf::Pcf);
    pcf_config.instance_id = None;
    // The whole core: the PCF registers its bindings at the BSF it finds through the NRF.
    pcf_config.pcf.bsf.enabled = true;
    let mut dd_config = nf::dd_run_config(&config, dir);
    dd_config.store.path = db(nf::Nf::Dd);
    dd_config.sbi.listen = listen(nf::Nf::Dd);
    dd_config.instance_id = None;
    let tokens_required = config.sbi.oauth2.required;
    let console_config = config.console.clone();
    let console_listen = nf::up_console_listen(&config, args.port_base);
    let nf_sbi = config.sbi.clone();
    let result = runtime.block_on(async move {
        // Watched before any NF serves: a SIGTERM that arrives once they answer (a supervisor
        // stopping a core it saw ready) stops them gracefully instead of killing the process.
        let stop_signal = shutdown_signal();
        // Every NF binds its ports before anything is announced as serving; the first that
        // cannot (a port in use) stops `up` before it has said anything untrue.
        let nrf = nrf::bind(nrf_config).await.map_err(|e| format!("NRF: {e}"))?;
        // The other NFs register with the NRF of this process unless their `[<nf>.nrf]` says
        // otherwise; with --port-base 0 its port is known only now.
        // When the NFs require access tokens, they also ask this NRF for them and send them.
        let own_nrf = || nrf_client::NrfClientConfig {
            api_roots: vec![format!("http://{}", reachable(nrf.local_addr()))],
            access_tokens: tokens_required,
            ..Default::default()
        };
        bsf_config.bsf.nrf.get_or_insert_with(own_nrf);
        udr_config.udr.nrf.get_or_insert_with(own_nrf);
        pcf_config.pcf.nrf.get_or_insert_with(own_nrf);
        // With `[sbi.oauth2] required = true` and no key source of their own, the NFs check
        // tokens against the keys of this process's NRF.
        let own_jwks = format!("http://{}/oauth2/jwks", reachable(nrf.local_addr()));
        for sbi in
            [&mut bsf_config.sbi, &mut udr_config.sbi, &mut pcf_config.sbi, &mut dd_config.sbi]
        {
            default_jwks(&mut sbi.oauth2, &own_jwks);
        }
        let udr = udr::bind(udr_config).await.map_err(|e| format!("UDR: {e}"))?;
        let bsf = bsf::bind(bsf_config).await.map_err(|e| format!("BSF: {e}"))?;
        let pcf = pcf::bind(pcf_config).await.map_err(|e| format!("PCF: {e}"))?;
        let dd = dd::bind(dd_config).await.map_err(|e| format!("Data Director: {e}"))?;
        // The console, on by default in `up`, talks to the NFs just bound unless `[console.nfs]`
        // names others.
        let console = if console_config.enabled.unwrap_or(true) {
            let mut c = console_config;
            let url = |addr| crate::console_cli::nf_url(&nf_sbi, addr);
            c.nfs.nrf.get_or_insert_with(|| url(nrf.local_addr()));
            c.nfs.udr.get_or_insert_with(|| url(udr.local_addr()));
            c.nfs.bsf.get_or_insert_with(|| url(bsf.local_addr()));
            c.nfs.pcf.get_or_insert_with(|| url(pcf.local_addr()));
            c.nfs.dd.get_or_insert_with(|| url(dd.local_addr()));
            let listen = c.listen.unwrap_or(console_listen);
            Some(crate::console_cli::bind(&c, listen, true).await?)
        } else {
            None
        };
        let console_addr = console.as_ref().map(|c| c.local_addr());
        let bound = [
            (nf::Nf::Nrf, nrf.local_addr(), None),
            (nf::Nf::Udr, udr.local_addr(), udr.sh_local_addr()),
            (nf::Nf::Bsf, bsf.local_addr(), bsf.rx_local_addr()),
            (nf::Nf::Pcf, pcf.local_addr(), pcf.diameter_addr()),
            (nf::Nf::Dd, dd.local_addr(), None),
        ];

        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let (stop_nrf_tx, stop_nrf_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        // Each NF reports when it stops, so one that stops on its own stops `up`.
        let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let spawn = |name: &'static str, fut: BoxedNf| {
            let done = done_tx.clone();
            tokio::spawn(async move {
                let r = fut.await.map_err(|e| format!("{name}: {e}"));
                let _ = done.send(());
                r
            })
        };
        let nrf = spawn(
            "NRF",
            Box::pin(
                async move { nrf.serve(stopped(stop_nrf_rx)).await.map_err(|e| e.to_string()) },
            ),
        );
        let mut others = vec![
            spawn(
                "BSF",
                Box::pin({
                    let stop = stopped(stop_rx.clone());
                    async move { bsf.serve(stop).await.map_err(|e| e.to_string()) }
                }),
            ),
            spawn(
                "UDR",
                Box::pin({
                    let stop = stopped(stop_rx.clone());
                    async move { udr.serve(stop).await.map_err(|e| e.to_string()) }
                }),
            ),
            spawn(
                "PCF",
                Box::pin({
                    let stop = stopped(stop_rx.clone());
                    async move { pcf.serve(stop).await.map_err(|e| e.to_string()) }
                }),
            ),
            spawn(
                "Data Director",
                Box::pin({
                    let stop = stopped(stop_rx.clone());
                    async move { dd.serve(stop).await.map_err(|e| e.to_string()) }
                }),
            ),
        ];
        if let Some(console) = console {
            let stop = stopped(stop_rx.clone());
            others.push(spawn(
                "console",
                Box::pin(async move { console.serve(stop).await.map_err(|e| e.to_string()) }),
            ));
        }
        out.line(&endpoint_table(&bound, console_addr));
        tokio::select! {
            () = stop_signal => {}
            _ = done_rx.recv() => {}
        }
        // The others first: they deregister from the NRF while the NRF still serves.
        let _ = stop_tx.send(true);
        let mut result = Ok(());
        for task in others {
            let r = task.await.map_err(|e| e.to_string()).and_then(|r| r);
            result = result.and(r);
        }
        let _ = stop_nrf_tx.send(true);
        let n = nrf.await.map_err(|e| e.to_string()).and_then(|r| r);
        result.and(n)
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fivecore up: {e}");
            ExitCode::from(1)
        }
    }
}

type BoxedNf = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>;

/// Where the NFs of this process reach one bound to every address: loopback.
pub(crate) fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, addr.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, addr.port()).into(),
        _ => addr,
    }
}

/// `up`'s standard output: the start line and the endpoint table, nothing else (logs go to
/// stderr). Once a write fails (`fivecore up | head` after head has exited: EPIPE, as Rust
/// ignores SIGPIPE) `up` stops writing there and keeps serving: the core's life does not hang
/// on who reads its banner, and Ctrl-C or SIGTERM still stops it.
#[derive(Default)]
struct Stdout {
    closed: bool,
}

impl Stdout {
    fn line(&mut self, text: &str) {
        use std::io::Write;
        if self.closed {
            return;
        }
        let mut out = std::io::stdout().lock();
        if let Err(e) = writeln!(out, "{text}").and_then(|()| out.flush()) {
            self.closed = true;
            tracing::warn!(error = %e, "stdout closed; fivecore up keeps serving (logs go to stderr)");
        }
    }
}

/// The table `up` prints once every NF is bound: each NF, the addresses it is bound to, and
/// whether this build serves it (NFs not landed show the ports they will have).
pub fn endpoint_table(
    bound: &[(nf::Nf, SocketAddr, Option<SocketAddr>)],
    console: Option<SocketAddr>,
) -> String {
    let mut out = String::from(
        "NF             SBI                     Diameter                      status\n",
    );
    for i in nf::ALL.iter() {
        let here = bound.iter().find(|(n, _, _)| *n == i.nf);
        let sbi = match here {
            Some((_, addr, _)) => format!("http://{addr}"),
            None => format!("http://127.0.0.1:{}", i.sbi_port),
        };
        let dia = match (i.diameter, here) {
            (None, _) => "-".to_owned(),
            (Some((app, _)), Some((_, _, Some(addr)))) => format!("{addr} ({app})"),
            (Some((app, port)), None) if i.diameter_served => format!("127.0.0.1:{port} ({app})"),
            // Served by this build but not enabled in its configuration (the PCF's Gx).
            (Some((app, _)), Some(_)) if i.diameter_served => format!("- ({app} off)"),
            (Some((app, _)), _) => format!("- ({app} to come)"),
        };
        let status = match (here, i.issue) {
            (Some(_), _) => "serving".to_owned(),
            (None, Some(n)) => format!("not landed (issue #{n})"),
            (None, None) => "not landed".to_owned(),
        };
        out.push_str(&format!("{:<14} {:<23} {:<29} {}\n", i.name, sbi, dia, status));
    }
    if let Some(addr) = console {
        let url = format!("http://{addr}/console/");
        out.push_str(&format!("{:<14} {:<53} {}\n", "Console", url, "serving"));
    }
    out.push_str("Every SBI port also serves /metrics, /healthz/live and /healthz/ready.");
    out
}

/// Completes on SIGINT or SIGTERM, whichever comes first. The handlers are installed by this
/// call, not at the future's first poll: until then a signal's default action would kill the
/// process, skipping the NRF deregistration and the stores' orderly close. Call it inside the
/// runtime, before serving.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = int.recv() => tracing::info!("SIGINT received, stopping"),
                _ = term.recv() => tracing::info!("SIGTERM received, stopping"),
            },
            (Err(e), Ok(mut int)) => {
                tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops fivecore");
                int.recv().await;
                tracing::info!("SIGINT received, stopping");
            }
            (Ok(mut term), Err(e)) => {
                tracing::warn!(error = %e, "cannot watch SIGINT; only SIGTERM stops fivecore");
                term.recv().await;
                tracing::info!("SIGTERM received, stopping");
            }
            (Err(e), Err(_)) => {
                tracing::warn!(error = %e, "cannot watch SIGTERM or SIGINT; fivecore stops when killed");
                std::future::pending::<()>().await
            }
        }
    }
}

/// Points a producer that requires tokens but names no key source at `jwks_url`.
fn default_jwks(oauth2: &mut sbi::oauth2::OAuth2Config, jwks_url: &str) {
    if oauth2.required && oauth2.jwks_url.is_none() && oauth2.jwks_file.is_none() {
        oauth2.jwks_url = Some(jwks_url.to_owned());
    }
}
