//! `fivecore cert`: a lab PKI for mutual TLS (docs/security.md). `ca` makes a CA; `nf` makes an
//! NF's certificate signed by it, with the NF instance id as a `urn:uuid:` URI in its
//! subjectAltName (TS 33.310 §6.1.3c names NF certificates so), its DNS names (for Diameter, the
//! Origin-Host: crates/diameter/src/tls.rs) and addresses,
//! and both TLS server and client use (an NF is a producer and a consumer on one certificate).
//! Keys are ECDSA P-256. For production, an operator's PKI issues the certificates instead.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

#[derive(Args, Debug, Clone)]
pub struct CertArgs {
    #[command(subcommand)]
    pub command: CertCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum CertCommand {
    /// Make a CA: DIR/ca.crt and DIR/ca.key.
    Ca(CaArgs),
    /// Make an NF's certificate signed by a CA: DIR/<name>.crt and DIR/<name>.key.
    Nf(NfCertArgs),
}

#[derive(Args, Debug, Clone)]
pub struct CaArgs {
    /// Directory to write ca.crt and ca.key into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The CA's common name.
    #[arg(long, default_value = "fivecore lab CA")]
    pub name: String,
    /// Validity in days.
    #[arg(long, default_value_t = 3650)]
    pub days: u32,
}

#[derive(Args, Debug, Clone)]
pub struct NfCertArgs {
    /// Directory holding the CA's ca.crt and ca.key.
    #[arg(long, value_name = "DIR")]
    pub ca: PathBuf,
    /// The NF type (NRF, UDR, BSF, PCF, ...): the certificate's common name and file name.
    #[arg(long)]
    pub nf_type: String,
    /// The NF instance id (its `instance_id` setting), put in the subjectAltName as
    /// urn:uuid:<id>. Without it, a new one is made and printed.
    #[arg(long, value_name = "UUID")]
    pub instance_id: Option<String>,
    /// DNS names the NF is reached by (repeat the flag); for a Diameter node, its Diameter
    /// identity (Origin-Host), which peers check the certificate names. Default: localhost.
    #[arg(long = "dns", value_name = "NAME")]
    pub dns: Vec<String>,
    /// IP addresses the NF is reached by (repeat the flag). Default: 127.0.0.1.
    #[arg(long = "ip", value_name = "ADDR")]
    pub ip: Vec<std::net::IpAddr>,
    /// Directory to write the certificate and key into. Default: the CA's.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// File name stem. Default: the NF type in lower case.
    #[arg(long)]
    pub name: Option<String>,
    /// Validity in days.
    #[arg(long, default_value_t = 365)]
    pub days: u32,
}

pub fn run(args: &CertArgs) -> ExitCode {
    let result = match &args.command {
        CertCommand::Ca(a) => make_ca(a),
        CertCommand::Nf(a) => make_nf(a),
    };
    match result {
        Ok(written) => {
            for line in written {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fivecore cert: {e}");
            ExitCode::from(1)
        }
    }
}

fn validity(params: &mut CertificateParams, days: u32) {
    let now = time::OffsetDateTime::now_utc();
    // A little before now: clocks of lab hosts disagree.
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(i64::from(days));
}

fn make_ca(a: &CaArgs) -> Result<Vec<String>, String> {
    let key = KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    params.distinguished_name.push(DnType::CommonName, a.name.as_str());
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut params, a.days);
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let crt = a.out.join("ca.crt");
    let k = a.out.join("ca.key");
    write(&crt, &cert.pem(), false)?;
    write(&k, &key.serialize_pem(), true)?;
    Ok(vec![format!("CA certificate: {}", crt.display()), format!("CA key: {}", k.display())])
}

fn make_nf(a: &NfCertArgs) -> Result<Vec<String>, String> {
    let read =
        |p: PathBuf| std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()));
    let ca_pem = read(a.ca.join("ca.crt"))?;
    let ca_key =
        KeyPair::from_pem(&read(a.ca.join("ca.key"))?).map_err(|e| format!("ca.key: {e}"))?;
    // The issuer as rcgen needs it: the CA's own parameters signed again with its key (same
    // name and key, so the same issuer and authority key identifier).
    let ca = CertificateParams::from_ca_cert_pem(&ca_pem)
        .map_err(|e| format!("ca.crt: {e}"))?
        .self_signed(&ca_key)
        .map_err(|e| format!("ca.crt: {e}"))?;
    let instance_id = match &a.instance_id {
        Some(id) => uuid::Uuid::parse_str(id)
            .map_err(|e| format!("--instance-id {id}: {e}"))?
            .hyphenated()
            .to_string(),
        None => uuid::Uuid::new_v4().hyphenated().to_string(),
    };
    let dns = if a.dns.is_empty() && a.ip.is_empty() {
        vec!["localhost".to_owned()]
    } else {
        a.dns.clone()
    };
    let ips = if a.dns.is_empty() && a.ip.is_empty() {
        vec![std::net::IpAddr::from([127, 0, 0, 1])]
    } else {
        a.ip.clone()
    };
    let mut params = CertificateParams::new(dns).map_err(|e| e.to_string())?;
    params.subject_alt_names.extend(ips.into_iter().map(SanType::IpAddress));
    let uri = format!("urn:uuid:{instance_id}");
    params
        .subject_alt_names
        .push(SanType::URI(uri.as_str().try_into().map_err(|e| format!("{e}"))?));
    params.distinguished_name.push(DnType::CommonName, a.nf_type.as_str());
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages =
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    validity(&mut params, a.days);
    let key = KeyPair::generate().map_err(|e| e.to_string())?;
    let cert = params.signed_by(&key, &ca, &ca_key).map_err(|e| e.to_string())?;
    let out = a.out.clone().unwrap_or_else(|| a.ca.clone());
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let stem = a.name.clone().unwrap_or_else(|| a.nf_type.to_ascii_lowercase());
    let crt = out.join(format!("{stem}.crt"));
    let k = out.join(format!("{stem}.key"));
    write(&crt, &cert.pem(), false)?;
    write(&k, &key.serialize_pem(), true)?;
    Ok(vec![
        format!("{} certificate: {} ({uri})", a.nf_type, crt.display()),
        format!("{} key: {}", a.nf_type, k.display()),
        format!("instance_id = \"{instance_id}\""),
    ])
}

/// Writes a file; a key readable by its owner only.
fn write(path: &Path, text: &str, secret: bool) -> Result<(), String> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let mut f = o.open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))
}
