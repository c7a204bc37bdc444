//! Scenario files (`scenarios/*.toml`): what to send, how often, against what preloaded state,
//! with which peer simulators, and what the reference published for the same call model.
//!
//! The files in the repository's `scenarios/` directory are compiled into the binary, so
//! `fivecore bench --list` works from anywhere; a path to a `.toml` file is accepted too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The scenarios shipped in `scenarios/`, compiled in.
pub const BUILTIN: &[(&str, &str)] = &[
    ("nrf-51.6k", include_str!("../../../scenarios/nrf-51.6k.toml")),
    ("nrf-5k", include_str!("../../../scenarios/nrf-5k.toml")),
    ("nrf-51.6k-5k", include_str!("../../../scenarios/nrf-51.6k-5k.toml")),
    ("bsf-s1-15k-gr2", include_str!("../../../scenarios/bsf-s1-15k-gr2.toml")),
    ("bsf-s2-30k", include_str!("../../../scenarios/bsf-s2-30k.toml")),
    ("bsf-s3-35k-gr3", include_str!("../../../scenarios/bsf-s3-35k-gr3.toml")),
    ("bsf-s4-35k", include_str!("../../../scenarios/bsf-s4-35k.toml")),
    ("bsf-s5-47.7k-gr3", include_str!("../../../scenarios/bsf-s5-47.7k-gr3.toml")),
    ("bsf-s6-45k-gr3-1site", include_str!("../../../scenarios/bsf-s6-45k-gr3-1site.toml")),
    ("bsf-s7-45k-gr3-2sites", include_str!("../../../scenarios/bsf-s7-45k-gr3-2sites.toml")),
    ("bsf-s8-45k-gr3-3sites", include_str!("../../../scenarios/bsf-s8-45k-gr3-3sites.toml")),
    ("bsf-s9-54k-25m", include_str!("../../../scenarios/bsf-s9-54k-25m.toml")),
    ("bsf-s10-54k-50m", include_str!("../../../scenarios/bsf-s10-54k-50m.toml")),
    (
        "bsf-s11-54k-50m-nocongestion",
        include_str!("../../../scenarios/bsf-s11-54k-50m-nocongestion.toml"),
    ),
    (
        "bsf-s12-54k-50m-congestion",
        include_str!("../../../scenarios/bsf-s12-54k-50m-congestion.toml"),
    ),
    ("udr-t1-slf-24.2k", include_str!("../../../scenarios/udr-t1-slf-24.2k.toml")),
    ("udr-t2-eir-10k", include_str!("../../../scenarios/udr-t2-eir-10k.toml")),
    ("udr-t4a-policy-10k", include_str!("../../../scenarios/udr-t4a-policy-10k.toml")),
    ("udr-t4b-smdata-etag-10k", include_str!("../../../scenarios/udr-t4b-smdata-etag-10k.toml")),
    ("udr-t4c-policy-17.2k", include_str!("../../../scenarios/udr-t4c-policy-17.2k.toml")),
    // Issue #27: the NRF, BSF and UDR mixes together, for an hour against `fivecore up` (--up).
    ("soak-nrf-bsf-udr", include_str!("../../../scenarios/soak-nrf-bsf-udr.toml")),
    ("udr-t3-sh-25k-soap-2k", include_str!("../../../scenarios/udr-t3-sh-25k-soap-2k.toml")),
    ("bsf-overload", include_str!("../../../scenarios/bsf-overload.toml")),
    ("nrf-overload", include_str!("../../../scenarios/nrf-overload.toml")),
    ("pcf-sm-internet-30k", include_str!("../../../scenarios/pcf-sm-internet-30k.toml")),
    ("pcf-am-ue-15k", include_str!("../../../scenarios/pcf-am-ue-15k.toml")),
    ("pcf-am-ue-25k", include_str!("../../../scenarios/pcf-am-ue-25k.toml")),
    ("pcf-am-ue-30k", include_str!("../../../scenarios/pcf-am-ue-30k.toml")),
    ("pcf-am-ue-60k", include_str!("../../../scenarios/pcf-am-ue-60k.toml")),
    ("pcf-am-ue-75k", include_str!("../../../scenarios/pcf-am-ue-75k.toml")),
    ("pcf-sm-mix-43k", include_str!("../../../scenarios/pcf-sm-mix-43k.toml")),
    ("pcf-sm-mix-41k", include_str!("../../../scenarios/pcf-sm-mix-41k.toml")),
    ("pcf-sm-rx-30k", include_str!("../../../scenarios/pcf-sm-rx-30k.toml")),
    ("pcf-sm-rx-30k-binding", include_str!("../../../scenarios/pcf-sm-rx-30k-binding.toml")),
    ("pcrf-data-7.5k", include_str!("../../../scenarios/pcrf-data-7.5k.toml")),
    ("pcrf-voice-15k", include_str!("../../../scenarios/pcrf-voice-15k.toml")),
    ("pcrf-usage-10k", include_str!("../../../scenarios/pcrf-usage-10k.toml")),
    ("pcrf-conv-voice-7.5k", include_str!("../../../scenarios/pcrf-conv-voice-7.5k.toml")),
    ("pcrf-conv-voice-15k", include_str!("../../../scenarios/pcrf-conv-voice-15k.toml")),
    (
        "pcrf-conv-voice-15k-2site",
        include_str!("../../../scenarios/pcrf-conv-voice-15k-2site.toml"),
    ),
    ("pcrf-conv-data-7.5k", include_str!("../../../scenarios/pcrf-conv-data-7.5k.toml")),
    ("pcrf-conv-data-15k", include_str!("../../../scenarios/pcrf-conv-data-15k.toml")),
    ("dd-d1-500k-scp-2tcp", include_str!("../../../scenarios/dd-d1-500k-scp-2tcp.toml")),
    (
        "dd-d2-360k-scp-3tcp-http2",
        include_str!("../../../scenarios/dd-d2-360k-scp-3tcp-http2.toml"),
    ),
    ("dd-d3-360k-scp-tcp", include_str!("../../../scenarios/dd-d3-360k-scp-tcp.toml")),
    ("dd-d4-270k-mix-http2", include_str!("../../../scenarios/dd-d4-270k-mix-http2.toml")),
    ("dd-d5-270k-mix-tcp", include_str!("../../../scenarios/dd-d5-270k-mix-tcp.toml")),
    ("dd-d6-270k-scp-kafka", include_str!("../../../scenarios/dd-d6-270k-scp-kafka.toml")),
    ("dd-d7-270k-scp-tcp", include_str!("../../../scenarios/dd-d7-270k-scp-tcp.toml")),
    (
        "dd-d8-135k-mix-2tcp-replicated",
        include_str!("../../../scenarios/dd-d8-135k-mix-2tcp-replicated.toml"),
    ),
    ("dd-d9-30k-pcf-http2", include_str!("../../../scenarios/dd-d9-30k-pcf-http2.toml")),
    ("dd-d10-9k-bsf-http2", include_str!("../../../scenarios/dd-d10-9k-bsf-http2.toml")),
    (
        "dd-d11-360k-scp-3tcp-http2-vcne",
        include_str!("../../../scenarios/dd-d11-360k-scp-3tcp-http2-vcne.toml"),
    ),
    ("dd-d12-360k-scp-tcp-vcne", include_str!("../../../scenarios/dd-d12-360k-scp-tcp-vcne.toml")),
    ("dd-embedded-200k", include_str!("../../../scenarios/dd-embedded-200k.toml")),
    ("dd-kafka-80k", include_str!("../../../scenarios/dd-kafka-80k.toml")),
];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name, equal to the file stem (`nrf-5k`).
    pub name: String,
    /// One line, shown by `--list`.
    pub description: String,
    /// NFs the scenario needs (`nrf`); the kit starts them unless `--target NF=URL` is given.
    pub nfs: Vec<String>,
    pub load: Load,
    /// Settings for the NFs the kit starts, by NF: written as `[<nf>]` of a configuration file
    /// passed with `--config` (ignored for `--target` NFs).
    #[serde(default)]
    pub nf_config: std::collections::BTreeMap<String, toml::Table>,
    /// The shared sections of a kit-started NF's configuration file, by NF: each key is a
    /// top-level section (`sbi`, `store`, ...), e.g. `[nf_sections.bsf.sbi.overload]`.
    #[serde(default)]
    pub nf_sections: std::collections::BTreeMap<String, toml::Table>,
    #[serde(default)]
    pub generators: Generators,
    #[serde(default)]
    pub preload: Preload,
    #[serde(default)]
    pub simulators: Vec<Simulator>,
    /// Requests the generator sends, each at its share of the rate.
    #[serde(default)]
    pub procedures: Vec<Procedure>,
    /// Traffic the NF itself sends to the simulators (SLF queries, notifications, forwarding),
    /// counted where it arrives.
    #[serde(default)]
    pub egress: Vec<Egress>,
    /// The NF's Diameter side the `af_rx` / `pcf_rx` simulators connect to.
    pub diameter: Option<Diameter>,
    #[serde(default)]
    pub criteria: Criteria,
    pub reference: Option<Reference>,
    /// A Data Director scenario (crate::dd): copy sources instead of procedures, feeds with
    /// the kit's consumers behind them.
    pub dd: Option<crate::dd::DdScenario>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// Incoming requests per second at full scale: the sum of the procedures' `tps`.
    pub rate: f64,
    /// Measured seconds, after the warm-up.
    pub duration_s: f64,
    /// Seconds of load before measuring starts.
    pub warmup_s: f64,
    /// Requests in flight at most; beyond it the scheduler waits (and the report says so).
    #[serde(default = "default_outstanding")]
    pub max_outstanding: usize,
    /// Pooled HTTP/2 connections per NF (requests are spread over them round robin). More
    /// are opened while every one has all the streams the NF allows in use, as HTTP/2
    /// consumers do, unless `fixed_connections`.
    #[serde(default = "default_connections")]
    pub connections: usize,
    /// Exactly `connections`, never more: a fixed pool of busy connections, as SMFs and AMFs
    /// hold towards a PCF or BSF (the overload runs). `--connections` sets it too.
    #[serde(default)]
    pub fixed_connections: bool,
    /// Per-request timeout.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How the next procedure is chosen.
    #[serde(default)]
    pub mix: Mix,
    /// Closed loop: this many requests outstanding at all times, each slot sending its next
    /// request when its previous answer arrives (no arrival schedule: the rate is an outcome).
    /// Unset: the open loop at `rate`.
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// A client that gives up on a connection: a request that times out closes its connection
    /// (every request on it fails) and the next request opens a new one, as consumers that
    /// time out and reconnect do (issue #20).
    #[serde(default)]
    pub reconnect: bool,
    /// Open loop: seconds of load after the measured window at `cooldown_scale` times the
    /// rate, not measured per procedure; the report gives the seconds until the NF answered
    /// the lower rate in full again (`recovery_s`).
    #[serde(default)]
    pub cooldown_s: f64,
    #[serde(default = "default_cooldown_scale")]
    pub cooldown_scale: f64,
    /// The share of `rate` a run offers when neither `--rate` nor `--scale` says otherwise:
    /// a scenario whose reference rate is far beyond this machine, scaled to it (the file says
    /// why). Unset: the whole `rate`.
    pub default_scale: Option<f64>,
}

fn default_cooldown_scale() -> f64 {
    0.25
}

/// How the dispatcher picks the procedure of each request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mix {
    /// Independently at random, with probability `tps / Σ tps`.
    #[default]
    Random,
    /// From a shuffled deck holding each procedure in exact proportion (`tps` over the greatest
    /// common divisor of the rates, to 0.001/s): the shares are exact in every deck, so paired
    /// procedures (create/delete, AAR-I/STR) never drift apart by more than one deck, and what
    /// they create stays bounded.
    ShuffledDeck,
}
fn default_outstanding() -> usize {
    4096
}
fn default_connections() -> usize {
    4
}
fn default_timeout_ms() -> u64 {
    5000
}
fn default_session_hold_s() -> f64 {
    4.0
}
fn default_gx_apn() -> String {
    "internet".into()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generators {
    /// MCC+MNC prefix of generated SUPIs (`imsi-<prefix><msin>`).
    #[serde(default = "default_plmn")]
    pub supi_prefix: String,
    /// First MSIN (10 digits, zero padded).
    #[serde(default)]
    pub supi_first: u64,
    /// How many SUPIs the random `{supi}` draws from.
    #[serde(default = "default_supi_count")]
    pub supi_count: u64,
    /// Seed of the deterministic random generator.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// `{gpsi}`: `msisdn-<gpsi_prefix><the same 10-digit MSIN as {supi}>`.
    #[serde(default = "default_gpsi_prefix")]
    pub gpsi_prefix: String,
    /// `{imei}`: `imei-<imei_first + MSIN, 14 digits>0` (the spare digit in place of the
    /// check digit, as AMFs send it).
    #[serde(default = "default_imei_first")]
    pub imei_first: u64,
    /// `{ue_ipv4}`: this address + the preloaded subscription's index `{i}`. The Rx procedures
    /// of a scenario without preloaded bindings address these UEs (see [`Diameter::answer_host`]).
    /// A block of its own (100.64.0.0/10 by default), so no `{rand}` address of another
    /// association can shadow one of them.
    #[serde(default = "default_ue_ipv4_first")]
    pub ue_ipv4_first: std::net::Ipv4Addr,
}

fn default_ue_ipv4_first() -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(100, 64, 0, 1)
}

fn default_gpsi_prefix() -> String {
    "33".into()
}
fn default_imei_first() -> u64 {
    35_209_900_000_000
}

fn default_plmn() -> String {
    "00101".into()
}
fn default_supi_count() -> u64 {
    1_000_000
}
fn default_seed() -> u64 {
    0x5eed_f1ce
}

impl Default for Generators {
    fn default() -> Self {
        Self {
            supi_prefix: default_plmn(),
            supi_first: 0,
            supi_count: default_supi_count(),
            seed: default_seed(),
            gpsi_prefix: default_gpsi_prefix(),
            imei_first: default_imei_first(),
            ue_ipv4_first: default_ue_ipv4_first(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preload {
    #[serde(default)]
    pub profiles: Vec<ProfileSet>,
    pub subscriptions: Option<SubscriptionSet>,
    pub bindings: Option<BindingSet>,
    /// UDR subscriber data (SLF entries, EIR equipment, policy data).
    pub udr: Option<UdrSet>,
}

/// What a UDR scenario preloads, one record per subscriber `i` (the SUPI of index
/// `supi_first + i`): loaded by the bulk-load command `fivecore udr import` of a UDR the kit
/// starts, before it starts (crate::udr), provisioned over
/// `/udr-prov/v1` otherwise.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdrSet {
    /// NF holding them.
    #[serde(default = "default_udr_nf")]
    pub nf: String,
    pub kind: UdrKind,
    /// Subscribers in the reference scenario.
    pub reference_count: u64,
    /// Share of `reference_count` preloaded by default on this machine (`--subscribers N`
    /// sets the number instead).
    pub scale: f64,
    /// The last `deletable` subscribers go into `pool` (their SUPI) for the procedures that
    /// delete them; `{supi}`, `{gpsi}` and `{imei}` never draw them.
    #[serde(default)]
    pub deletable: u64,
    pub pool: Option<String>,
    /// Policy data: one PolicyDataSubscription per preloaded UE monitoring its sm-data, with
    /// its `notificationUri` at this notification sink simulator.
    pub subscribe_sim: Option<String>,
    /// The subscription ids of the deletable UEs go into this pool (for subs-to-notify
    /// DELETE), so deleting them never silences a UE that `{supi}` draws.
    pub subscription_pool: Option<String>,
    /// With `subscribe_sim`: only every `subscribe_every`-th UE gets a subscription (default 1:
    /// all).
    #[serde(default = "one_u64")]
    pub subscribe_every: u64,
    /// Every preloaded subscriber's SUPI goes into `pool` (`deletable` is then ignored): for
    /// call mixes that act on each subscriber through the pool, one request at a time.
    #[serde(default)]
    pub pool_all: bool,
    /// The `absent` subscribers after the preloaded ones are not written; their SUPIs go into
    /// `absent_pool`, for the procedures that create them.
    #[serde(default)]
    pub absent: u64,
    pub absent_pool: Option<String>,
}

/// The kind of subscriber data of a UDR scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UdrKind {
    /// SLF entries: IMSI and MSISDN of the subscriber, with NF groups for UDM, AUSF, PCF, CHF.
    Slf,
    /// 5G-EIR equipment: the IMEI `imei_first + i`, whitelisted (every 50th blacklisted, every
    /// 20th greylisted), bound to nobody.
    Eir,
    /// Policy data: a 2.5 KB SmPolicyData per UE.
    PolicySmData,
    /// Policy data for AM and UE policy control: an AmPolicyData and a UePolicySet (TS 29.519)
    /// per UE, what the PCF reads at each AM and UE create (`crate::udr::UdrPlan::am_data`
    /// and `ue_policy_set`).
    PolicyAmUeData,
    /// Sh subscriber profiles (public identities, MSISDN, IMS user state, S-CSCF, 2 KB of
    /// MMTel repository data): about 2.2 KB each, as the reference's T3.
    ShProfile,
}

fn one_u64() -> u64 {
    1
}

fn default_udr_nf() -> String {
    "udr".into()
}

impl UdrSet {
    /// Subscribers preloaded by default: `reference_count × scale`.
    pub fn default_count(&self) -> u64 {
        (self.reference_count as f64 * self.scale).round() as u64
    }
}

/// PCF bindings in the BSF before the load starts (`crate::bindings::BindingFactory`): loaded by
/// the bulk-load command `fivecore bsf preload` of a BSF the kit starts, before it starts;
/// registered over Nbsf otherwise.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BindingSet {
    /// NF holding them.
    #[serde(default = "default_binding_nf")]
    pub nf: String,
    /// Active bindings in the reference scenario.
    pub reference_count: u64,
    /// Share of `reference_count` preloaded by default on this machine (`--bindings N` sets the
    /// number instead).
    pub scale: f64,
    /// The last `deletable` preloaded bindings go into this pool for the Binding Delete
    /// procedure (`{take:POOL}`), so deletes have something to act on from the first second;
    /// the Rx procedures never address them.
    pub pool: Option<String>,
    #[serde(default)]
    pub deletable: u64,
    /// `pcf_rx` simulators the bindings name (`pcfDiamHost`), binding `i` the `i % n`-th.
    pub pcf_sims: Vec<String>,
    pub dnn: String,
    pub sst: u8,
    pub sd: Option<String>,
    /// UE IPv4 address of binding 0; binding `i` has the `i`-th next one.
    pub ipv4_first: std::net::Ipv4Addr,
    /// With an IPv6 /64 prefix too.
    #[serde(default)]
    pub dual_stack: bool,
    /// GPSI `msisdn-<prefix><MSIN>`.
    #[serde(default = "default_msisdn_prefix")]
    pub msisdn_prefix: String,
}

fn default_binding_nf() -> String {
    "bsf".into()
}
fn default_msisdn_prefix() -> String {
    "33".into()
}

impl BindingSet {
    /// Bindings preloaded by default: `reference_count × scale`.
    pub fn default_count(&self) -> u64 {
        (self.reference_count as f64 * self.scale).round() as u64
    }
}

/// The NF's Diameter side: the simulators connect to it with CER.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diameter {
    /// NF that serves it. A kit-started NF gets a free 127.0.0.1 port through `{diameter_addr}`
    /// in its `nf_config`; with `--target <nf>-diameter=ADDR` the simulators connect to ADDR.
    pub nf: String,
    /// Its Origin-Host (the CEA must come from it) and Origin-Realm.
    pub origin_host: String,
    pub origin_realm: String,
    /// Rx sessions open before the load: the AAR-I rate times this many seconds (at least
    /// 64). AAR-U, RAR and STR act on open sessions, STR on the oldest, so with the deck mix a
    /// session lives about this long. Rx only.
    #[serde(default = "default_session_hold_s")]
    pub session_hold_s: f64,
    /// Gx sessions open before the load: the CCR-I rate times this many seconds (at least 64).
    /// CCR-U borrows an open session, CCR-T ends the oldest, so with the deck mix a Gx session
    /// lives about this long. Gx only.
    #[serde(default = "default_session_hold_s")]
    pub gx_session_hold_s: f64,
    /// Called-Station-Id (the APN) of the PCEFs' Gx sessions.
    #[serde(default = "default_gx_apn")]
    pub gx_apn: String,
    /// Per-request timeout of the simulators.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// The Origin-Host the Rx answers must come from when no `pcf_rx` simulator serves the
    /// session: the PCF itself (the NF the AFs talk to, or the one behind a proxy). With it,
    /// and without `[preload.bindings]`, the AAR-Is address the UEs of the preloaded SM
    /// associations (`{ue_ipv4}` in `[preload.subscriptions]`), which must live the whole run.
    #[serde(default)]
    pub answer_host: Option<String>,
}

/// `count` NF profiles of one type, each padded to a pretty-printed size in `size_bytes`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSet {
    pub nf_type: String,
    /// Name used by `{instance:LABEL}` and in the report (defaults to `nf_type`); the reference's
    /// SLF profiles are registered as `nf_type = "UDR"` with `label = "SLF"`.
    pub label: Option<String>,
    pub count: usize,
    /// Pretty-printed JSON size range, bytes: `[min, max]`.
    pub size_bytes: [usize; 2],
    /// Service names (default: the usual services of the type).
    #[serde(default)]
    pub services: Vec<String>,
    /// Name of a simulator whose address goes into the profile's IP endpoints.
    pub endpoint_sim: Option<String>,
}

impl ProfileSet {
    pub fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.nf_type)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionSet {
    pub count: usize,
    /// The NF they are created on (default: the first of `nfs`).
    #[serde(default)]
    pub nf: Option<String>,
    #[serde(default = "default_sub_path")]
    pub path: String,
    /// JSON body template (generators allowed, `{i}` is the subscription's index).
    pub body: String,
    /// Subscriptions created here go into this pool (for `{take:POOL}` / `{peek:POOL}`).
    pub pool: Option<String>,
}

fn default_sub_path() -> String {
    "/nnrf-nfm/v1/subscriptions".into()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimKind {
    /// Accepts NfStatusNotify (any POST), answers 204.
    NotificationSink,
    /// Nudr_GroupIDmap: `GET /nudr-group-id-map/v1/nf-group-ids` answers a NfGroupIdMapResult.
    Slf,
    /// A peer NRF answering forwarded discoveries with an empty SearchResult.
    PeerNrf,
    /// An AF (P-CSCF) on Diameter Rx: connects to the NF's Diameter port, sends AAR and STR,
    /// answers RAR with RAA.
    AfRx,
    /// A PCF on Diameter Rx: connects to the NF's Diameter port with the Origin-Host the
    /// bindings name, answers AAR with AAA and STR with STA (2001), sends RAR.
    PcfRx,
    /// An IMS application server on Diameter Sh: connects to the UDR's Sh port, sends UDR, PUR
    /// and SNR, answers PNR with PNA (2001).
    AsSh,
    /// An AMF for the PCF (TS 29.518 Namf_Communication): answers N1N2MessageSubscribe 201,
    /// N1N2MessageTransfer 200 N1_N2_TRANSFER_INITIATED and then plays the UE, POSTing a
    /// MANAGE UE POLICY COMPLETE to the subscribed N1 callback (N1MessageNotify); a sink (204)
    /// for anything else (AM/UE policy UpdateNotify and terminate callbacks).
    Amf,
    /// A PCEF (P-GW) on Diameter Gx: connects to the PCRF's Diameter port, sends CCR-I, CCR-U
    /// and CCR-T, answers RAR with RAA (and ASR with ASA), 2001.
    PcefGx,
    /// A CHF (Nchf_SpendingLimitControl, TS 29.594): subscribe 201 with a status per requested
    /// counter and `Location`, unsubscribe (DELETE) 204, both counted.
    Chf,
    /// An OCS on Diameter Sy (TS 29.219, crate::sim_ocs): listens (`{sim_addr:NAME}` is its
    /// address, for the PCF's `[[pcf.sy.ocs]]`), answers SLR with `statuses`, STR with 2001,
    /// and sends SNRs with `snr_statuses` to its sessions every `snr_every_ms`.
    Ocs,
    /// A TDF on Diameter Sd (TS 29.212 §4b, crate::sim_tdf): listens (`{sim_addr:NAME}` is its
    /// address, for the PCF's `[[pcf.sd.tdf]]`), answers TSR and RAR with 2001 (an RAR
    /// releasing a session is followed by its CCR-T), and reports the start or stop of one of
    /// `report_apps` to one of its sessions every `report_every_ms`.
    Tdf,
    /// An LDAP directory (crate::sim_ldap): a real OpenLDAP slapd on 127.0.0.1 loaded with one
    /// entry per subscriber of `[generators]`; `{sim_addr:NAME}` is its address, for the PCF's
    /// `[pcf.ldap] urls`; it counts the searches it serves.
    Ldap,
}

impl SimKind {
    pub fn is_diameter(self) -> bool {
        matches!(self, SimKind::AfRx | SimKind::PcfRx | SimKind::AsSh | SimKind::PcefGx)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Simulator {
    pub name: String,
    pub kind: SimKind,
    /// Added before every answer, ms.
    pub latency_ms: u64,
    #[serde(default)]
    pub description: String,
    /// SLF only: share (0..=1) of subscribers, by the last two SUPI digits, that belong to an
    /// NF group this NRF does not hold (`<type>-grp-remote`), so their discovery is forwarded.
    #[serde(default)]
    pub remote_share: f64,
    /// SLF only: the NF types `remote_share` applies to.
    #[serde(default)]
    pub remote_nf_types: Vec<String>,
    /// Peer NRF only: its SearchResult holds this many profiles of `answer_nf_type` (another
    /// NRF set holding the NFs a forwarded discovery asks for); 0, the default: an empty one.
    #[serde(default)]
    pub answer_profiles: usize,
    /// Peer NRF only: the NF type of the profiles it answers with.
    pub answer_nf_type: Option<String>,
    /// Diameter simulators: Origin-Host and Origin-Realm.
    pub origin_host: Option<String>,
    pub origin_realm: Option<String>,
    /// OCS only: Policy-Counter-Status per Policy-Counter-Identifier, answered to an SLR for
    /// the counters it asks for.
    #[serde(default)]
    pub statuses: BTreeMap<String, String>,
    /// OCS only: the statuses its SNRs report.
    #[serde(default)]
    pub snr_statuses: BTreeMap<String, String>,
    /// OCS only: send an SNR to one of its sessions (in turn) every this many ms; 0: never.
    #[serde(default)]
    pub snr_every_ms: u64,
    /// TDF only: the TDF-Application-Identifiers its application reports name, in turn.
    #[serde(default)]
    pub report_apps: Vec<String>,
    /// TDF only: send an application report (CCR-U) to one of its sessions (in turn) every
    /// this many ms; 0: never.
    #[serde(default)]
    pub report_every_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Procedure {
    pub name: String,
    /// Call-mix row of the reference (`E`, `A`, ...).
    #[serde(default)]
    pub row: String,
    #[serde(default)]
    pub description: String,
    /// NF that serves it (default: the first of `nfs`).
    pub nf: Option<String>,
    /// Requests per second at full scale; the share of the mix is `tps / load.rate`.
    pub tps: f64,
    /// A Diameter Rx procedure instead of an HTTP request (then no method, path or body).
    pub rx: Option<RxOp>,
    /// A Diameter Sh procedure (sent by the `as_sh` simulators), like `rx`.
    pub sh: Option<ShOp>,
    /// A Diameter Gx procedure (sent by the `pcef_gx` simulators), like `rx`.
    pub gx: Option<GxOp>,
    /// `gx = "ccr_update"`: the Event-Trigger it reports (`user_location_change`: a new cell;
    /// `rat_change`: E-UTRAN and UTRAN in turn).
    pub event_trigger: Option<GxEvent>,
    /// `gx = "ccr_update"`: the usage it reports (Usage-Monitoring-Information).
    pub usage_report: Option<GxUsage>,
    #[serde(default)]
    pub method: String,
    /// Path template, e.g. `/nnrf-nfm/v1/nf-instances/{instance:AMF}`.
    #[serde(default)]
    pub path: String,
    /// Query-string templates, one picked per request by weight.
    #[serde(default)]
    pub variants: Vec<Variant>,
    /// Body template (JSON text with generators).
    pub body: Option<String>,
    /// Generate a full NF profile of this type (label of a preload set or NF type) as the
    /// body, with `nfInstanceId` = the request's `{uuid}`.
    pub body_profile: Option<String>,
    /// The body is a PcfBinding like the preloaded ones, for a UE address no binding holds
    /// (binding number `preloaded + request sequence number`).
    #[serde(default)]
    pub body_binding: bool,
    pub content_type: Option<String>,
    /// Request headers sent as given (`SOAPAction` of a SOAP call).
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Statuses counted as success: HTTP statuses, or Diameter Result-Codes for `rx`.
    pub expect: Vec<u32>,
    /// Put the created resource id (Location's last segment, else `{uuid}`) into this pool.
    pub produces: Option<String>,
    /// Put the ids this request took (`{take:POOL}`) into this pool once it is answered with
    /// an expected status (a failed request drops them): a subscriber taken from a pool is
    /// acted on by one request at a time.
    pub recycle: Option<String>,
    /// Entity tags (TS 29.500 §6.9): the kit keeps the last `ETag` answered for each URL.
    pub etag: Option<EtagUse>,
    /// A feature this build may not serve yet: if the NF never answers it with anything but
    /// 404/405/501, the report marks it "not served by this build" instead of failing.
    pub optional_feature: Option<String>,
    pub criteria: Option<Criteria>,
    /// NFDiscover: the number of profiles the reference's answers held for this target type
    /// (NRF guide Table 4-9). The kit counts the profiles of the answers (crate::profile_count)
    /// and warns when they differ.
    pub expect_profiles: Option<usize>,
    /// The NF's service operation (its `/metrics` label, e.g. `Nnrf_NFManagement_NFUpdate`)
    /// this procedure is a request of, when its name does not say (crate::nf_latency::maps_to):
    /// its latency bounds the NF's own.
    pub nf_operation: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// Query-string template: `target-nf-type=UDM&requester-nf-type=AMF&supi={supi}`.
    pub query: String,
    #[serde(default = "one")]
    pub weight: f64,
    /// Which §3.4 combination it is.
    #[serde(default)]
    pub label: String,
}

fn one() -> f64 {
    1.0
}

/// How a procedure uses entity tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EtagUse {
    /// `If-Match` with the ETag last answered for the URL (no header while the kit has seen
    /// none: the request is unconditional, and its outcome label says which).
    IfMatch,
    /// `If-None-Match: *`: create only.
    IfNoneMatchAny,
}

/// The Rx procedures (TS 29.214), as an AF (P-CSCF) and a PCF exchange them through the NF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RxOp {
    /// AAR opening a new Rx session for a bound UE (Framed-IP-Address), from an AF.
    AarInitial,
    /// AAR modifying an open session (same Session-Id), from the AF that opened it.
    AarUpdate,
    /// STR ending the oldest open session, from its AF.
    Str,
    /// RAR on an open session from the PCF serving it, answered RAA by the AF; measured at the
    /// PCF.
    Rar,
}

/// The Gx procedures (TS 29.212) a PCEF (P-GW) sends the PCRF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GxOp {
    /// CCR-I opening an IP-CAN session for a new UE address and a random subscriber.
    CcrInitial,
    /// CCR-U on an open session (lent, given back), from the PCEF that opened it.
    CcrUpdate,
    /// CCR-T ending the oldest open session.
    CcrTerminate,
}

/// The Event-Trigger a CCR-U reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GxEvent {
    UserLocationChange,
    RatChange,
}

/// Usage-Monitoring-Information of a CCR-U: octets used under a Monitoring-Key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GxUsage {
    pub monitoring_key: String,
    pub input_octets: u64,
    pub output_octets: u64,
}

/// The Sh procedures (TS 29.328 / 29.329) an application server sends to the UDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShOp {
    /// User-Data-Request: the user's MMTel repository data and IMS user state.
    UserData,
    /// Profile-Update-Request: new MMTel repository data with the user's next Sequence-Number.
    ProfileUpdate,
    /// Subscribe-Notifications-Request: subscribe to the user's MMTel repository data.
    Subscribe,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Egress {
    pub name: String,
    #[serde(default)]
    pub row: String,
    #[serde(default)]
    pub description: String,
    /// Simulator where it arrives.
    pub sim: String,
    /// Expected rate at full scale (the reference's figure).
    pub tps: f64,
    /// Feature name, shown when the NF sends none ("not served by this build").
    pub feature: String,
    /// Which of the simulator's counts the row is: `items` (the default: what it received; a
    /// notification sink's notifications, a directory's searches), `created` (an OCS's Initial
    /// SLRs, a CHF's subscriptions) or `deleted` (an OCS's STRs, a CHF's unsubscriptions).
    #[serde(default)]
    pub counter: EgressCounter,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EgressCounter {
    #[default]
    Items,
    Created,
    Deleted,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    /// Minimum share of answers with an expected status (0..=1).
    #[serde(default = "default_min_success")]
    pub min_success_rate: f64,
    /// Maximum p99 latency, ms.
    #[serde(default = "default_max_p99")]
    pub max_p99_ms: f64,
}

fn default_min_success() -> f64 {
    0.999
}
fn default_max_p99() -> f64 {
    500.0
}

impl Default for Criteria {
    fn default() -> Self {
        Self { min_success_rate: default_min_success(), max_p99_ms: default_max_p99() }
    }
}

/// The reference's published figures for the same scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// Reference scenario id and section (`N3, §4.7.2`).
    pub scenario: String,
    pub tps_achieved: f64,
    pub cpu_requested: f64,
    pub tps_per_core: f64,
    /// Achieved TPS per core the reference's utilisation tables show in use, when they do.
    pub tps_per_used_core: Option<f64>,
    /// The cores those tables show in use (pods x CPU per pod x average use), when they do.
    pub used_cores: Option<f64>,
    /// What the reference's used cores include (which pods; not its database tier, not its
    /// sidecars), said in the report's row.
    pub used_cores_include: Option<String>,
    /// What its requested cores include.
    pub requested_include: Option<String>,
    /// Whether `tps_achieved` counts the notifications the NF sent (the NRF guide: "all Ingress
    /// and NfStatusNotify traffic"); the report then counts ours the same way.
    #[serde(default)]
    pub counts_notifications: bool,
    /// The notifications per second the reference's NF sent, when it says.
    pub notifications_tps: Option<f64>,
    /// Procedure the latency percentiles are for (a name prefix).
    pub latency_procedure: Option<String>,
    pub latency_p50_ms: Option<f64>,
    pub latency_p90_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// Average latency per procedure (name → ms), where the reference gives only averages.
    #[serde(default)]
    pub mean_latency_ms: std::collections::BTreeMap<String, f64>,
    pub duration: String,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Scenario {
    pub fn from_toml(text: &str) -> Result<Self> {
        let s: Scenario = toml::from_str(text)?;
        s.validate()?;
        Ok(s)
    }

    /// A built-in name or a path to a `.toml` file.
    pub fn load(name_or_path: &str) -> Result<Self> {
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Self::from_toml(text)
                .with_context(|| format!("built-in scenario {name_or_path}"));
        }
        let p = Path::new(name_or_path);
        if p.extension().is_some_and(|e| e == "toml") && p.exists() {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            return Self::from_toml(&text).with_context(|| format!("scenario {}", p.display()));
        }
        let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
        bail!("unknown scenario {name_or_path:?} (known: {})", names.join(", "))
    }

    pub fn builtin() -> Result<Vec<Scenario>> {
        BUILTIN
            .iter()
            .map(|(n, t)| Self::from_toml(t).with_context(|| format!("scenario {n}")))
            .collect()
    }

    /// Requests per second at full scale; a Data Director scenario's copies per second (its
    /// procedures, which drive its real NFs, make copies counted in their sources' `mps`).
    pub fn total_tps(&self) -> f64 {
        match &self.dd {
            Some(d) => d.total_mps(),
            None => self.procedures.iter().map(|p| p.tps).sum::<f64>(),
        }
    }

    /// The rate a run offers by default: `load.rate`, times `load.default_scale` when set.
    pub fn default_rate(&self) -> f64 {
        self.load.rate * self.load.default_scale.unwrap_or(1.0)
    }

    pub fn criteria_for(&self, p: &Procedure) -> Criteria {
        p.criteria.clone().unwrap_or_else(|| self.criteria.clone())
    }

    /// Checks everything that can be checked without running.
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() || self.description.contains('\n') {
            bail!("name must be set and description be one line");
        }
        if self.nfs.is_empty() {
            bail!("nfs is empty");
        }
        if let Some(nf) = self.nf_config.keys().find(|nf| !self.nfs.contains(nf)) {
            bail!("nf_config.{nf}: {nf} is not in nfs");
        }
        for (nf, sections) in &self.nf_sections {
            if !self.nfs.contains(nf) || sections.contains_key(nf) {
                bail!(
                    "nf_sections.{nf}: {nf} must be in nfs, and its own section is nf_config.{nf}"
                );
            }
        }
        let l = &self.load;
        if !(l.rate > 0.0 && l.duration_s > 0.0 && l.warmup_s >= 0.0) {
            bail!("load.rate and load.duration_s must be > 0, warmup_s >= 0");
        }
        if l.max_outstanding == 0 || l.connections == 0 || l.timeout_ms == 0 {
            bail!("load.max_outstanding, connections and timeout_ms must be > 0");
        }
        if l.concurrency == Some(0) {
            bail!("load.concurrency must be > 0");
        }
        if l.default_scale.is_some_and(|x| !(x.is_finite() && x > 0.0)) {
            bail!("load.default_scale must be > 0");
        }
        if let Some(d) = &self.dd {
            d.validate()?;
            // The real NFs among the sources (`nf`) follow the Data Director in `nfs` (their
            // configuration names it, `{nf:dd}`), driven by the procedures.
            let real: Vec<&str> = d.sources.iter().filter_map(|x| x.nf.as_deref()).collect();
            let nfs_ok = self.nfs.first().is_some_and(|n| n == "dd")
                && real.iter().all(|n| self.nfs[1..].iter().any(|x| x == n));
            if !nfs_ok || real.is_empty() != self.procedures.is_empty() || l.concurrency.is_some() {
                bail!("a Data Director scenario ([dd]) has nfs = [\"dd\", <the NFs its sources name>], procedures only when a source is a real NF (dd.sources nf) and no closed loop");
            }
            // A real NF's copy rate is its procedures' TPS times the trigger points copied, so
            // the kit's scale applies alike to the copies and to the call mix.
            for src in d.sources.iter().filter(|x| x.nf.is_some()) {
                let nf = src.nf.as_deref();
                let tps: f64 =
                    self.procedures.iter().filter(|p| p.nf.as_deref() == nf).map(|p| p.tps).sum();
                let mps = tps * src.trigger_points.len() as f64;
                if (mps - src.mps).abs() > src.mps * 0.01 {
                    bail!("dd.sources {}: mps {} is not its procedures' {tps} TPS x {} trigger points", src.name, src.mps, src.trigger_points.len());
                }
            }
        }
        let total = self.total_tps();
        if (total - l.rate).abs() > l.rate * 0.01 {
            bail!(
                "load.rate {} differs from the sum of procedure tps {total:.3} by more than 1%",
                l.rate
            );
        }
        let mut labels = BTreeSet::new();
        for ps in &self.preload.profiles {
            if ps.count == 0 || ps.size_bytes[0] > ps.size_bytes[1] {
                bail!("profile set {}: count must be > 0 and size_bytes [min, max]", ps.label());
            }
            if !labels.insert(ps.label().to_string()) {
                bail!("profile set label {} repeated", ps.label());
            }
        }
        let sims: BTreeSet<&str> = self.simulators.iter().map(|s| s.name.as_str()).collect();
        if self.simulators.iter().any(|s| !(0.0..=1.0).contains(&s.remote_share)) {
            bail!("simulators: remote_share must be 0..=1");
        }
        if sims.len() != self.simulators.len() {
            bail!("simulator names must be unique");
        }
        for ps in &self.preload.profiles {
            if let Some(s) = &ps.endpoint_sim {
                if !sims.contains(s.as_str()) {
                    bail!("profile set {}: unknown simulator {s}", ps.label());
                }
            }
        }
        let mut pools: BTreeSet<String> =
            self.preload.subscriptions.iter().filter_map(|s| s.pool.clone()).collect();
        pools.extend(self.procedures.iter().filter_map(|p| p.produces.clone()));
        pools.extend(self.procedures.iter().filter_map(|p| p.recycle.clone()));
        self.validate_diameter()?;
        if let Some(b) = &self.preload.bindings {
            pools.extend(b.pool.clone());
        }
        self.validate_udr(&mut pools)?;
        let check = |what: &str, t: &str| -> Result<()> {
            crate::template::Template::parse(t)
                .with_context(|| format!("{what}: template {t:?}"))?
                .check(&labels, &pools, &sims)
                .with_context(|| format!("{what}: template {t:?}"))
        };
        if let Some(s) = &self.preload.subscriptions {
            check("preload.subscriptions.body", &s.body)?;
        }
        let mut names = BTreeSet::new();
        for p in &self.procedures {
            let what = format!("procedure {}", p.name);
            if !names.insert(p.name.as_str()) {
                bail!("{what}: name repeated");
            }
            if p.tps < 0.0 || !p.tps.is_finite() {
                bail!("{what}: tps must be >= 0");
            }
            if [p.rx.is_some(), p.sh.is_some(), p.gx.is_some()].iter().filter(|x| **x).count() > 1 {
                bail!("{what}: rx, sh and gx are exclusive");
            }
            if (p.event_trigger.is_some() || p.usage_report.is_some())
                && p.gx != Some(GxOp::CcrUpdate)
            {
                bail!("{what}: event_trigger and usage_report are for gx = \"ccr_update\"");
            }
            if p.usage_report.as_ref().is_some_and(|u| u.monitoring_key.is_empty()) {
                bail!("{what}: usage_report.monitoring_key is empty");
            }
            if p.gx.is_some() {
                self.validate_diameter_procedure(&what, p, "gx")?;
                if !self.simulators.iter().any(|s| s.kind == SimKind::PcefGx) {
                    bail!("{what}: needs a pcef_gx simulator");
                }
            } else if p.sh.is_some() {
                self.validate_sh_procedure(&what, p)?;
            } else if p.rx.is_some() {
                self.validate_diameter_procedure(&what, p, "rx")?;
                let kind = if p.rx == Some(RxOp::Rar) { SimKind::PcfRx } else { SimKind::AfRx };
                if !self.simulators.iter().any(|s| s.kind == kind) {
                    bail!("{what}: needs a {kind:?} simulator");
                }
                let answers_itself =
                    self.diameter.as_ref().is_some_and(|d| d.answer_host.is_some());
                if self.preload.bindings.is_none() && !answers_itself {
                    bail!("{what}: Rx sessions are for bound UEs: preload.bindings (or diameter.answer_host) is missing");
                }
            } else {
                if http::Method::from_bytes(p.method.as_bytes()).is_err() {
                    bail!("{what}: bad method {}", p.method);
                }
                if !p.path.starts_with('/') {
                    bail!("{what}: path must start with /");
                }
                if p.expect.is_empty() || p.expect.iter().any(|s| !(100..600).contains(s)) {
                    bail!("{what}: expect must list HTTP statuses");
                }
            }
            if p.body_binding && (self.preload.bindings.is_none() || p.body.is_some()) {
                bail!("{what}: body_binding needs preload.bindings and no body");
            }
            if let Some(nf) = &p.nf {
                if !self.nfs.contains(nf) {
                    bail!("{what}: nf {nf} not in nfs");
                }
            }
            if p.body.is_some() && p.body_profile.is_some() {
                bail!("{what}: body and body_profile are exclusive");
            }
            if let Some(b) = &p.body_profile {
                if !labels.contains(b) {
                    bail!("{what}: body_profile {b} is not a preloaded profile set");
                }
            }
            check(&what, &p.path)?;
            if let Some(b) = &p.body {
                check(&what, b)?;
            }
            if p.variants.iter().any(|v| v.weight <= 0.0) {
                bail!("{what}: variant weights must be > 0");
            }
            for v in &p.variants {
                check(&what, &v.query)?;
            }
            if let Some(c) = &p.criteria {
                check_criteria(&what, c)?;
            }
            if p.expect_profiles.is_some()
                && (p.rx.is_some() || p.sh.is_some() || p.gx.is_some() || p.method != "GET")
            {
                bail!("{what}: expect_profiles is for discovery (GET) procedures");
            }
        }
        for sim in &self.simulators {
            let ocs_only =
                !sim.statuses.is_empty() || !sim.snr_statuses.is_empty() || sim.snr_every_ms > 0;
            if ocs_only && sim.kind != SimKind::Ocs {
                bail!("simulator {}: statuses, snr_statuses and snr_every_ms are for an ocs simulator", sim.name);
            }
            if sim.kind == SimKind::Ocs && (sim.origin_host.is_none() || sim.origin_realm.is_none())
            {
                bail!("simulator {}: an ocs needs origin_host and origin_realm", sim.name);
            }
            let tdf_only = !sim.report_apps.is_empty() || sim.report_every_ms > 0;
            if tdf_only && sim.kind != SimKind::Tdf {
                bail!(
                    "simulator {}: report_apps and report_every_ms are for a tdf simulator",
                    sim.name
                );
            }
            if sim.kind == SimKind::Tdf && (sim.origin_host.is_none() || sim.origin_realm.is_none())
            {
                bail!("simulator {}: a tdf needs origin_host and origin_realm", sim.name);
            }
            if sim.report_every_ms > 0 && sim.report_apps.is_empty() {
                bail!("simulator {}: report_every_ms needs report_apps to report", sim.name);
            }
            if sim.kind == SimKind::Ldap && sim.latency_ms > 0 {
                bail!(
                    "simulator {}: a directory (slapd) adds no latency: latency_ms must be 0",
                    sim.name
                );
            }
            if sim.snr_every_ms > 0 && sim.snr_statuses.is_empty() {
                bail!("simulator {}: snr_every_ms needs snr_statuses to report", sim.name);
            }
            let answers = sim.answer_profiles > 0 || sim.answer_nf_type.is_some();
            if answers && (sim.kind != SimKind::PeerNrf || sim.answer_nf_type.is_none()) {
                bail!("simulator {}: answer_profiles and answer_nf_type are for a peer_nrf simulator, together", sim.name);
            }
        }
        check_criteria("criteria", &self.criteria)?;
        if let Some(nf) = self.preload.subscriptions.as_ref().and_then(|x| x.nf.as_ref()) {
            if !self.nfs.contains(nf) {
                bail!("preload.subscriptions.nf {nf} is not in nfs");
            }
        }
        for (nf, table) in &self.nf_config {
            let mut strings = Vec::new();
            collect_strings(&toml::Value::Table(table.clone()), &mut strings);
            for t in strings.iter().filter(|t| t.contains("{sim:")) {
                check(&format!("nf_config.{nf}"), t)?;
            }
            // `{sim_addr:NAME}`: a simulator's address (`127.0.0.1:PORT`, an OCS's for Sy, a
            // TDF's for Sd).
            for t in &strings {
                let mut rest = t.as_str();
                while let Some(at) = rest.find("{sim_addr:") {
                    let after = &rest[at + 10..];
                    let Some(end) = after.find('}') else { break };
                    if !sims.contains(&after[..end]) {
                        bail!("nf_config.{nf}: {{sim_addr:{}}} names no simulator", &after[..end]);
                    }
                    rest = &after[end..];
                }
            }
            // `{nf:NAME}`: an NF the kit starts before this one (it starts them in `nfs` order).
            let me = self.nfs.iter().position(|n| n == nf).unwrap_or(0);
            for t in &strings {
                let mut rest = t.as_str();
                while let Some(at) = rest.find("{nf:") {
                    let after = &rest[at + 4..];
                    let Some(end) = after.find('}') else { break };
                    let name = &after[..end];
                    if !self.nfs[..me].iter().any(|n| n == name) {
                        bail!(
                            "nf_config.{nf}: {{nf:{name}}} names no NF listed before {nf} in nfs"
                        );
                    }
                    rest = &after[end..];
                }
            }
        }
        for e in &self.egress {
            if !sims.contains(e.sim.as_str()) {
                bail!("egress {}: unknown simulator {}", e.name, e.sim);
            }
            let kind = self.simulators.iter().find(|x| x.name == e.sim).map(|x| x.kind);
            if e.counter != EgressCounter::Items
                && !matches!(kind, Some(SimKind::Ocs | SimKind::Chf))
            {
                bail!("egress {}: counter created / deleted is an ocs's or a chf's", e.name);
            }
        }
        if self.load.mix == Mix::ShuffledDeck {
            let tps: Vec<f64> = self.procedures.iter().map(|p| p.tps).collect();
            if crate::sched::Deck::new(&tps).is_none() {
                bail!(
                    "load.mix = shuffled_deck: the rates make a deck of more than {} cards",
                    crate::sched::Deck::MAX_CARDS
                );
            }
        }
        if let Some(r) = &self.reference {
            if let Some(name) = r.mean_latency_ms.keys().find(|n| !names.contains(n.as_str())) {
                bail!("reference.mean_latency_ms: no procedure {name}");
            }
        }
        Ok(())
    }

    /// `[preload.udr]`.
    fn validate_udr(&self, pools: &mut BTreeSet<String>) -> Result<()> {
        let Some(u) = &self.preload.udr else { return Ok(()) };
        if !self.nfs.contains(&u.nf) {
            bail!("preload.udr.nf {} is not in nfs", u.nf);
        }
        if !u.scale.is_finite() || u.scale <= 0.0 || u.default_count() == 0 {
            bail!("preload.udr: reference_count and scale must be > 0");
        }
        if u.deletable > 0 && u.pool.is_none() && u.subscription_pool.is_none() {
            bail!("preload.udr: deletable subscribers need a pool or a subscription_pool");
        }
        if u.subscribe_every == 0 {
            bail!("preload.udr.subscribe_every must be at least 1");
        }
        if u.pool_all && u.pool.is_none() {
            bail!("preload.udr.pool_all needs a pool");
        }
        if (u.absent > 0) != u.absent_pool.is_some() {
            bail!("preload.udr: absent and absent_pool go together");
        }
        if u.subscription_pool.is_some() && u.subscribe_sim.is_none() {
            bail!("preload.udr.subscription_pool needs subscribe_sim");
        }
        if u.deletable >= u.default_count() {
            bail!("preload.udr: deletable must be fewer than the subscribers preloaded");
        }
        if let Some(sim) = &u.subscribe_sim {
            if u.kind != UdrKind::PolicySmData {
                bail!("preload.udr.subscribe_sim is for policy data");
            }
            if !self
                .simulators
                .iter()
                .any(|s| &s.name == sim && s.kind == SimKind::NotificationSink)
            {
                bail!("preload.udr.subscribe_sim: {sim} is not a notification_sink simulator");
            }
        }
        if u.kind == UdrKind::Eir && self.generators.imei_first >= 100_000_000_000_000 {
            bail!("generators.imei_first must have at most 14 digits");
        }
        pools.extend(u.pool.clone());
        pools.extend(u.subscription_pool.clone());
        pools.extend(u.absent_pool.clone());
        Ok(())
    }

    /// A Diameter (`rx` or `sh`) procedure: no HTTP fields, the `[diameter]` section, and
    /// Diameter result codes to expect.
    fn validate_diameter_procedure(&self, what: &str, p: &Procedure, kind: &str) -> Result<()> {
        let http_fields = !p.method.is_empty()
            || !p.path.is_empty()
            || p.body.is_some()
            || p.body_profile.is_some()
            || p.body_binding
            || !p.variants.is_empty()
            || !p.headers.is_empty()
            || p.produces.is_some()
            || p.recycle.is_some();
        if http_fields {
            bail!(
                "{what}: an {kind} procedure has no method, path, query, body, headers, produces or recycle"
            );
        }
        if self.diameter.is_none() {
            bail!("{what}: an {kind} procedure needs the [diameter] section");
        }
        if p.expect.is_empty() || p.expect.iter().any(|s| !(1000..6000).contains(s)) {
            bail!("{what}: expect must list Diameter result codes");
        }
        Ok(())
    }

    /// An Sh procedure: no HTTP fields, result codes to expect, application servers to send it
    /// and Sh profiles to act on.
    fn validate_sh_procedure(&self, what: &str, p: &Procedure) -> Result<()> {
        self.validate_diameter_procedure(what, p, "sh")?;
        if !self.simulators.iter().any(|s| s.kind == SimKind::AsSh) {
            bail!("{what}: needs an as_sh simulator");
        }
        if self.preload.udr.as_ref().is_none_or(|u| u.kind != UdrKind::ShProfile) {
            bail!("{what}: Sh requests act on Sh profiles: preload.udr kind = \"sh_profile\" is missing");
        }
        Ok(())
    }

    /// The Diameter simulators, the `[diameter]` section and the bindings that name the PCFs.
    fn validate_diameter(&self) -> Result<()> {
        for s in self.simulators.iter().filter(|s| s.kind.is_diameter()) {
            let host_ok = s.origin_host.as_deref().is_some_and(|h| h.contains('.'));
            if !host_ok || s.origin_realm.as_deref().is_none_or(str::is_empty) {
                bail!("simulator {}: a Diameter simulator needs origin_host (an FQDN) and origin_realm", s.name);
            }
            if self.diameter.is_none() {
                bail!("simulator {}: Diameter simulators need the [diameter] section", s.name);
            }
        }
        if let Some(d) = &self.diameter {
            if !self.nfs.contains(&d.nf) {
                bail!("diameter.nf {} is not in nfs", d.nf);
            }
            let hold_ok = |h: f64| h.is_finite() && h > 0.0;
            if !hold_ok(d.session_hold_s) || !hold_ok(d.gx_session_hold_s) || d.timeout_ms == 0 {
                bail!("diameter.session_hold_s, gx_session_hold_s and timeout_ms must be > 0");
            }
            if d.gx_apn.is_empty() {
                bail!("diameter.gx_apn is empty");
            }
            // The Gx CCAs come from the answer host too; only an Rx load needs its UEs.
            if d.answer_host.is_some() && self.procedures.iter().any(|p| p.rx.is_some()) {
                self.validate_rx_ues()?;
            } else if self.procedures.iter().any(|p| p.rx.is_some())
                && self.preload.bindings.is_none()
            {
                bail!("Rx procedures need [preload.bindings] or diameter.answer_host with UEs at {{ue_ipv4}}");
            }
        }
        let mut strings = Vec::new();
        for table in self.nf_config.values().chain(self.nf_sections.values()) {
            collect_strings(&toml::Value::Table(table.clone()), &mut strings);
        }
        if strings.iter().any(|s| s.contains(DIAMETER_ADDR)) && self.diameter.is_none() {
            bail!("nf_config uses {DIAMETER_ADDR} without a [diameter] section");
        }
        self.validate_diameter_addr_refs()?;
        if let Some(b) = &self.preload.bindings {
            if !self.nfs.contains(&b.nf) {
                bail!("preload.bindings.nf {} is not in nfs", b.nf);
            }
            if !b.scale.is_finite() || b.scale <= 0.0 || b.default_count() == 0 {
                bail!("preload.bindings: reference_count and scale must be > 0");
            }
            if b.pcf_sims.is_empty() {
                bail!("preload.bindings.pcf_sims: name at least one pcf_rx simulator");
            }
            for name in &b.pcf_sims {
                if !self.simulators.iter().any(|s| &s.name == name && s.kind == SimKind::PcfRx) {
                    bail!("preload.bindings.pcf_sims: {name} is not a pcf_rx simulator");
                }
            }
            if b.deletable > 0 && b.pool.is_none() {
                bail!("preload.bindings: deletable bindings need a pool");
            }
            if b.deletable >= b.default_count() {
                bail!("preload.bindings: deletable must be fewer than the bindings preloaded");
            }
        }
        Ok(())
    }
}

impl Scenario {
    /// `diameter.answer_host`: the AAR-Is go to the UEs of the preloaded subscriptions, so
    /// those must exist (`{ue_ipv4}` in their body) and outlive the run (no procedure takes
    /// one from their pool without giving it back), or the AAR-Is would find no session.
    fn validate_rx_ues(&self) -> Result<()> {
        if self.preload.bindings.is_some() {
            bail!("diameter.answer_host and [preload.bindings] are exclusive (the bindings name pcf_rx simulators)");
        }
        if self.procedures.iter().any(|p| p.rx == Some(RxOp::Rar)) {
            bail!("diameter.answer_host: RAR is sent by a pcf_rx simulator, which this mode has none of");
        }
        // The AAR-Is bind to the UEs of the Gx sessions the PCEFs open.
        if self.binds_rx_to_gx() {
            return Ok(());
        }
        let Some(sub) = self.preload.subscriptions.as_ref() else {
            bail!(
                "diameter.answer_host: the Rx UEs are [preload.subscriptions], and there is none"
            );
        };
        if !sub.body.contains("{ue_ipv4}") || sub.count == 0 {
            bail!("diameter.answer_host: [preload.subscriptions] must give each UE {{ue_ipv4}}");
        }
        if let Some(pool) = &sub.pool {
            let take = format!("{{take:{pool}}}");
            for p in &self.procedures {
                let takes =
                    p.path.contains(&take) || p.body.as_deref().is_some_and(|b| b.contains(&take));
                if takes && p.recycle.as_deref() != Some(pool.as_str()) {
                    bail!("procedure {}: takes the Rx UEs' association from {pool} without recycle: the AAR-Is would find it gone", p.name);
                }
            }
        }
        Ok(())
    }
}

impl Scenario {
    /// The AFs' AAR-Is name the UE addresses of the Gx sessions the PCEF simulators open (a
    /// voice mix: Gx and Rx at the same PCRF), not preloaded associations.
    pub fn binds_rx_to_gx(&self) -> bool {
        self.procedures.iter().any(|p| p.gx == Some(GxOp::CcrInitial) && p.tps > 0.0)
            && self.procedures.iter().any(|p| p.rx.is_some())
    }
}

/// In `nf_config` strings: the 127.0.0.1 address the kit picked for the NF's Diameter port.
pub const DIAMETER_ADDR: &str = "{diameter_addr}";

/// In `nf_config` strings: the Diameter address the kit picked for NF `nf` (`{diameter_addr:pcf}`
/// in a BSF's `[[bsf.rx.peers]]`), known before any NF starts.
pub fn diameter_addr_of(nf: &str) -> String {
    format!("{{diameter_addr:{nf}}}")
}

impl Scenario {
    /// Whether NF `nf`'s configuration takes a Diameter address from the kit (`{diameter_addr}`).
    pub fn uses_diameter_addr(&self, nf: &str) -> bool {
        let mut strings = Vec::new();
        for table in self.nf_config.get(nf).into_iter().chain(self.nf_sections.get(nf)) {
            collect_strings(&toml::Value::Table(table.clone()), &mut strings);
        }
        strings.iter().any(|s| s.contains(DIAMETER_ADDR))
    }

    /// `{diameter_addr:NAME}` names an NF of `nfs` the kit gives a Diameter port.
    fn validate_diameter_addr_refs(&self) -> Result<()> {
        for (nf, table) in self.nf_config.iter().chain(&self.nf_sections) {
            let mut strings = Vec::new();
            collect_strings(&toml::Value::Table(table.clone()), &mut strings);
            for t in &strings {
                let mut rest = t.as_str();
                while let Some(at) = rest.find("{diameter_addr:") {
                    let after = &rest[at + "{diameter_addr:".len()..];
                    let Some(end) = after.find('}') else { break };
                    let name = &after[..end];
                    let served = self.diameter.as_ref().is_some_and(|d| d.nf == name)
                        || self.uses_diameter_addr(name);
                    if !self.nfs.iter().any(|n| n == name) || !served {
                        bail!("nf_config.{nf}: {{diameter_addr:{name}}} names no NF of nfs with a Diameter port ({DIAMETER_ADDR} in its configuration, or [diameter] nf)");
                    }
                    rest = &after[end..];
                }
            }
        }
        Ok(())
    }
}

fn collect_strings(v: &toml::Value, out: &mut Vec<String>) {
    match v {
        toml::Value::String(s) => out.push(s.clone()),
        toml::Value::Array(a) => a.iter().for_each(|v| collect_strings(v, out)),
        toml::Value::Table(t) => t.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

fn check_criteria(what: &str, c: &Criteria) -> Result<()> {
    if !(0.0..=1.0).contains(&c.min_success_rate) || c.max_p99_ms <= 0.0 {
        bail!("{what}: min_success_rate must be 0..=1 and max_p99_ms > 0");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_in_scenarios_parses_validates_and_is_built_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let s = Scenario::load(path.to_str().unwrap())
                .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            let stem = path.file_stem().unwrap().to_str().unwrap();
            assert_eq!(s.name, stem, "name equals file name");
            assert!(
                BUILTIN.iter().any(|(n, _)| *n == stem),
                "{stem} is compiled in (scenario::BUILTIN)"
            );
            seen += 1;
        }
        assert_eq!(seen, BUILTIN.len());
        assert_eq!(Scenario::builtin().unwrap().len(), BUILTIN.len());
    }

    #[test]
    fn nrf_scenarios_carry_the_reference_call_mix() {
        for name in ["nrf-5k", "nrf-51.6k", "nrf-51.6k-5k"] {
            let s = Scenario::load(name).unwrap();
            let profiles: usize = s.preload.profiles.iter().map(|p| p.count).sum();
            assert_eq!(profiles, 260, "{name}: §3.8 total");
            assert_eq!(s.preload.subscriptions.as_ref().unwrap().count, 1000);
            let disc: f64 = s.procedures.iter().filter(|p| p.row == "E").map(|p| p.tps).sum();
            let want = if name == "nrf-5k" { 5000.0 } else { 51600.0 };
            assert!((disc - want).abs() < want * 0.01, "{name}: discovery {disc}");
            assert!(s.egress.iter().any(|e| e.row == "I"), "SLF queries declared");
            assert!(s.egress.iter().any(|e| e.row == "Q"), "forwarding declared");
            assert!(
                s.procedures.iter().any(|p| p.row == "P" && p.optional_feature.is_some()),
                "access token declared"
            );
            let r = s.reference.as_ref().unwrap();
            // The guide counts "all Ingress and NfStatusNotify traffic"; its used cores are
            // every NRF pod's share (Tables 4-11, 4-20, 4-30).
            assert!(r.counts_notifications && r.notifications_tps.is_some());
            let per_used = r.tps_achieved / r.used_cores.unwrap();
            assert!((per_used - r.tps_per_used_core.unwrap()).abs() < 1.0, "{name}: {per_used}");
            // Every discovery line says how many profiles the reference's answers held
            // (Table 4-9), and its p99 bound where it comes from.
            for p in s.procedures.iter().filter(|p| p.row == "E") {
                let t = p.name.trim_start_matches("NFDiscover-");
                let want = match t {
                    "AMF" | "AUSF" | "UDM" | "LMF" | "GMLC" => 6,
                    "PCF" | "SMF" => 10,
                    "UDR" => 12,
                    _ => 3,
                };
                assert_eq!(p.expect_profiles, Some(want), "{name}: {}", p.name);
                let bound = p.criteria.as_ref().unwrap().max_p99_ms;
                let slf = ["UDM", "UDR", "AUSF"].contains(&t);
                assert!(slf || bound == 20.0, "{name}: {} p99 bound {bound}", p.name);
                assert_eq!(
                    slf,
                    bound >= r.latency_p99_ms.unwrap().min(320.0),
                    "{name}: {}",
                    p.name
                );
            }
            let peer = s.simulators.iter().find(|x| x.kind == SimKind::PeerNrf).unwrap();
            assert_eq!((peer.answer_profiles, peer.answer_nf_type.as_deref()), (6, Some("UDM")));
        }
        let n2 = Scenario::load("nrf-51.6k-5k").unwrap();
        assert_eq!(n2.reference.unwrap().tps_achieved, 54020.0);
    }

    #[test]
    fn bsf_scenarios_carry_the_reference_call_mix() {
        let bsf: Vec<Scenario> = Scenario::builtin()
            .unwrap()
            .into_iter()
            .filter(|s| s.name.starts_with("bsf-s"))
            .collect();
        assert_eq!(bsf.len(), 12, "S1-S12");
        for (n, s) in bsf.iter().enumerate() {
            let name = &s.name;
            assert!(name.starts_with(&format!("bsf-s{}-", n + 1)), "{name}: S1-S12 in order");
            let tps = |p: &str| s.procedures.iter().find(|x| x.name == p).map_or(0.0, |x| x.tps);
            assert_eq!(tps("Binding Create"), tps("Binding Delete"), "{name}: Nbsf 1:1");
            assert!(tps("Binding Create") > 0.0);
            let rx = ["AAR-I", "AAR-U", "STR"].map(tps);
            assert!(rx.iter().all(|r| (r - rx[0]).abs() <= 1.0), "{name}: Rx 1:1:1 {rx:?}");
            // S1-S5 have no RAR (AAR-U + STR = 2); S6-S12 have RAR 1.
            assert_eq!(tps("RAR") > 0.0, n >= 5, "{name}: RAR");
            assert_eq!(s.load.mix, Mix::ShuffledDeck);
            let b = s.preload.bindings.as_ref().unwrap();
            assert_eq!(b.default_count(), 10_000_000, "{name}: 10M bindings on this machine");
            let want = [15, 15, 18, 18, 18, 25, 25, 25, 25, 50, 50, 50][n];
            assert_eq!(b.reference_count / 1_000_000, want, "{name}: reference bindings");
            assert!(s.description.contains("site"), "{name}: the description says which site runs");
            let r = s.reference.as_ref().unwrap();
            assert!(
                r.mean_latency_ms.contains_key("Binding Create")
                    && r.mean_latency_ms.contains_key("AAR-I")
            );
            assert!(r.cpu_requested > 0.0 && r.tps_per_core > 0.0);
            assert!(s.diameter.is_some());
        }
        // Congestion control off and on.
        let s11 = &bsf[10].nf_sections["bsf"]["sbi"]["overload"]["max_in_flight"];
        let s12 = &bsf[11].nf_sections["bsf"]["sbi"]["overload"]["max_in_flight"];
        assert!(s11.as_integer().unwrap() > s12.as_integer().unwrap());
    }

    #[test]
    fn udr_scenarios_carry_the_reference_call_mix() {
        let get = |name: &str| Scenario::load(name).unwrap();
        let share = |s: &Scenario, p: &str| {
            s.procedures.iter().find(|x| x.name == p).map_or(0.0, |x| x.tps) / s.total_tps()
        };
        // T1: 24.2K lookups + 1.26K provisioning over >= 10M subscribers.
        let t1 = get("udr-t1-slf-24.2k");
        let u = t1.preload.udr.as_ref().unwrap();
        assert_eq!((u.kind, u.default_count()), (UdrKind::Slf, 10_000_000));
        assert_eq!(u.reference_count, 37_000_000);
        assert_eq!(t1.procedures[0].tps, 24_200.0);
        let prov: f64 = t1.procedures[1..].iter().map(|p| p.tps).sum();
        assert_eq!(prov, 1260.0);
        assert_eq!(
            t1.procedures[1..].iter().map(|p| p.tps / prov * 100.0).collect::<Vec<_>>(),
            [10.0, 10.0, 40.0, 40.0]
        );
        // T4c: 26 / 27 / 8 / 39 % and a notification per PATCH.
        let t4c = get("udr-t4c-policy-17.2k");
        for (p, pct) in [
            ("subs-to-notify POST", 26.0),
            ("sm-data GET", 27.0),
            ("subs-to-notify DELETE", 8.0),
            ("sm-data PATCH", 39.0),
        ] {
            assert!((share(&t4c, p) * 100.0 - pct).abs() < 1.0, "{p}");
        }
        assert_eq!(t4c.egress[0].tps, 6560.0);
        let u = t4c.preload.udr.as_ref().unwrap();
        assert_eq!((u.kind, u.reference_count), (UdrKind::PolicySmData, 10_000_000));
        assert!(u.subscribe_sim.is_some() && u.subscription_pool.is_some());
        // T2: 10K EIR checks over the reference's 300K.
        let t2 = get("udr-t2-eir-10k");
        assert_eq!(t2.preload.udr.as_ref().unwrap().default_count(), 300_000);
        assert_eq!(t2.total_tps(), 10_000.0);
        // T4a: 18 / 37 / 15 / 15 / 7.5 / 7.5 % and 3K notifications.
        let t4a = get("udr-t4a-policy-10k");
        let row = |s: &Scenario, r: &str| {
            s.procedures.iter().filter(|p| p.row == r).map(|p| p.tps).sum::<f64>() / s.total_tps()
        };
        for (r, pct) in [
            ("GET", 18.0),
            ("PUT", 37.0),
            ("PATCH", 15.0),
            ("DELETE", 15.0),
            ("POST Subscription", 7.5),
            ("DELETE Subscription", 7.5),
        ] {
            assert!((row(&t4a, r) * 100.0 - pct).abs() < 1e-9, "T4a {r}");
        }
        assert_eq!(t4a.egress[0].tps, 3000.0);
        // T4b: 2.5K each, with ETags on the writes.
        let t4b = get("udr-t4b-smdata-etag-10k");
        assert!(t4b.procedures.iter().all(|p| p.tps == 2500.0));
        assert_eq!(t4b.procedures.iter().filter(|p| p.etag.is_some()).count(), 3);
        // T3: Sh 25K (SNR 25 / PUR 50 / UDR 25 %) + SOAP 2K (GET 33 / DELETE 11 / POST 11 /
        // PUT 45 %), every SOAP call with its SOAPAction.
        let t3 = get("udr-t3-sh-25k-soap-2k");
        let sh_ops =
            |op: ShOp| t3.procedures.iter().filter(move |p| p.sh == Some(op)).map(|p| p.tps);
        assert_eq!(sh_ops(ShOp::Subscribe).sum::<f64>(), 6250.0);
        assert_eq!(sh_ops(ShOp::ProfileUpdate).sum::<f64>(), 12_500.0);
        assert_eq!(sh_ops(ShOp::UserData).sum::<f64>(), 6250.0);
        let soap: Vec<&Procedure> = t3.procedures.iter().filter(|p| p.sh.is_none()).collect();
        let soap_tps: f64 = soap.iter().map(|p| p.tps).sum();
        assert_eq!(soap_tps, 2000.0);
        for (r, pct) in [("GET", 33.0), ("DELETE", 11.0), ("POST", 11.0), ("PUT", 45.0)] {
            assert!((row(&t3, r) * t3.total_tps() / soap_tps * 100.0 - pct).abs() < 1e-9, "T3 {r}");
        }
        assert!(soap
            .iter()
            .all(|p| p.headers.get("soapaction").is_some_and(|a| a.contains("ShProfile"))));
        let u = t3.preload.udr.as_ref().unwrap();
        assert_eq!(
            (u.kind, u.reference_count, u.default_count()),
            (UdrKind::ShProfile, 2_000_000, 1_000_000)
        );
        let text = BUILTIN.iter().find(|(n, _)| *n == "udr-t3-sh-25k-soap-2k").unwrap().1;
        let sh_with_path =
            text.replacen("sh = \"user_data\"", "sh = \"user_data\"\npath = \"/x\"", 1);
        assert!(Scenario::from_toml(&sh_with_path).is_err(), "an Sh procedure has no path");
        let mut no_as = t3.clone();
        no_as.simulators.retain(|x| x.kind != SimKind::AsSh);
        assert!(no_as.validate().is_err(), "Sh needs as_sh simulators");
        let mut not_sh = t3.clone();
        not_sh.preload.udr.as_mut().unwrap().kind = UdrKind::PolicySmData;
        assert!(not_sh.validate().is_err(), "Sh needs Sh profiles");
        for s in [&t1, &t2, &t3, &t4a, &t4b, &t4c] {
            let r = s.reference.as_ref().unwrap();
            assert!(r.cpu_requested > 0.0 && r.tps_per_core > 0.0, "{}", s.name);
            assert!(s.description.contains("here"), "{}: the description gives our scale", s.name);
        }
        let mut bad = t4c.clone();
        bad.preload.udr.as_mut().unwrap().subscribe_sim = Some("nope".into());
        assert!(bad.validate().is_err(), "subscribe_sim must be a notification sink");
    }

    /// The AM/UE scenarios (3.2.1, 3.2.2, 3.2.6, 3.2.7, 3.2.8): the client-originated rate of
    /// the reference's tables, AM and UE equal and each 1 create : 1 delete, every subscriber's
    /// AM data and UE policy set preloaded, the p99 bound the highest latency the reference
    /// prints, and its figures.
    #[test]
    fn pcf_sm_rx_carries_the_reference_call_model_and_its_ues_outlive_the_run() {
        let s = Scenario::load("pcf-sm-rx-30k").unwrap();
        let tps = |p: &str| s.procedures.iter().find(|x| x.name == p).unwrap().tps;
        // Table 3-166: Ingress 6,637 over the call's five N7 procedures, Diameter in 5,279
        // over AAR-I : AAR-U : STR.
        let n7 = ["create-dnn_ims", "N7-dnn_internet_1st", "N7-dnn_internet_2nd"]
            .into_iter()
            .chain(["N7-dnn_internet_3rd", "delete-dnn_ims"])
            .map(tps);
        assert!(n7.clone().all(|t| t == 1327.4));
        assert!((n7.sum::<f64>() - 6637.0).abs() < 0.01);
        let rx = ["AAR-I", "AAR-U", "STR"].map(tps);
        assert!((rx.iter().sum::<f64>() - 5279.0).abs() < 0.01 && rx[0] >= rx[2], "{rx:?}");
        assert!((s.total_tps() - s.load.rate).abs() < 0.01);
        // Binding off (3.5.2): no BSF, the AFs on the PCF's own Diameter node.
        let d = s.diameter.as_ref().unwrap();
        assert_eq!((d.nf.as_str(), d.answer_host.as_deref()), ("pcf", Some("pcf.fivecore.local")));
        assert!(!s.nfs.contains(&"bsf".to_string()));
        assert_eq!(s.nf_config["pcf"]["bsf"]["enabled"].as_bool(), Some(false));
        assert_eq!(s.nf_config["pcf"]["diameter"]["listen"].as_str(), Some(DIAMETER_ADDR));
        let r = s.reference.as_ref().unwrap();
        assert_eq!((r.tps_achieved, r.cpu_requested), (29747.0, 323.0));
        assert!((r.tps_achieved / r.cpu_requested - r.tps_per_core).abs() < 0.1);
        assert!(
            (r.tps_achieved / r.used_cores.unwrap() - r.tps_per_used_core.unwrap()).abs() < 0.1
        );
        assert!(s.egress.iter().any(|e| e.sim == "smf"), "the rules' UpdateNotify counted");

        // A procedure that deletes the Rx UEs' associations would leave AAR-Is without a
        // session: refused, as are the other ways this mode cannot work.
        let text = BUILTIN.iter().find(|(n, _)| *n == "pcf-sm-rx-30k").unwrap().1;
        let deletes = text.replace("{take:ims}/delete", "{take:internet}/delete");
        let err = Scenario::from_toml(&deletes).unwrap_err();
        assert!(format!("{err:#}").contains("without recycle"), "{err:#}");
        let no_ue = text.replace("\"ipv4Address\":\"{ue_ipv4}\"", "\"ipv4Address\":\"10.0.0.1\"");
        assert!(Scenario::from_toml(&no_ue).is_err(), "the preload must give {{ue_ipv4}}");
        let no_answer = text.replace("answer_host = \"pcf.fivecore.local\"\n", "");
        assert!(Scenario::from_toml(&no_answer).is_err(), "no bindings, no answer_host");
    }

    /// 3.5.1, the binding-on twin of 3.5.2: the same call model and preloads, the bindings at a
    /// kit-started BSF, the AFs on the BSF's Rx proxy, which has the PCF's Diameter address as
    /// its peer.
    #[test]
    fn pcf_sm_rx_binding_is_3_5_2_with_the_bsf_in_the_rx_path() {
        let on = Scenario::load("pcf-sm-rx-30k-binding").unwrap();
        let off = Scenario::load("pcf-sm-rx-30k").unwrap();
        let calls = |s: &Scenario| -> Vec<(String, f64, Option<String>, String)> {
            s.procedures
                .iter()
                .map(|p| {
                    (p.name.clone(), p.tps, p.rx.as_ref().map(|r| format!("{r:?}")), p.path.clone())
                })
                .collect()
        };
        assert_eq!(calls(&on), calls(&off), "the same call model");
        assert_eq!((on.load.rate, on.load.mix), (off.load.rate, off.load.mix));
        assert_eq!(on.generators.supi_count, off.generators.supi_count);
        assert_eq!(
            on.preload.subscriptions.as_ref().unwrap().count,
            off.preload.subscriptions.as_ref().unwrap().count
        );
        // Binding on: the PCF registers at the BSF, which the kit starts before it.
        let pos = |n: &str| on.nfs.iter().position(|x| x == n).unwrap();
        assert!(pos("udr") < pos("pcf") && pos("bsf") < pos("pcf"));
        assert_eq!(on.nf_config["pcf"]["bsf"]["enabled"].as_bool(), Some(true));
        assert_eq!(on.nf_config["pcf"]["bsf"]["api_root"].as_str(), Some("{nf:bsf}"));
        assert_eq!(on.nf_config["pcf"]["diameter"]["listen"].as_str(), Some(DIAMETER_ADDR));
        // The AFs on the BSF's Rx proxy, the PCF its peer at the address the kit picks for it,
        // under the Origin-Host the bindings name and the answers carry.
        let d = on.diameter.as_ref().unwrap();
        assert_eq!((d.nf.as_str(), d.answer_host.as_deref()), ("bsf", Some("pcf.fivecore.local")));
        let rx = &on.nf_config["bsf"]["rx"];
        assert_eq!(rx["listen"].as_str(), Some(DIAMETER_ADDR));
        let peer = &rx["peers"][0];
        assert_eq!(peer["addr"].as_str(), Some(diameter_addr_of("pcf").as_str()));
        assert_eq!(peer["host"].as_str(), on.nf_config["pcf"]["diameter"]["origin_host"].as_str());
        assert!(on.uses_diameter_addr("pcf") && on.uses_diameter_addr("bsf"));
        assert!(!on.uses_diameter_addr("udr"));
        let r = on.reference.as_ref().unwrap();
        assert_eq!((r.tps_achieved, r.cpu_requested), (29747.0, 303.0));
        assert!((r.tps_achieved / r.cpu_requested - r.tps_per_core).abs() < 0.1);
        assert!(
            (r.tps_achieved / r.used_cores.unwrap() - r.tps_per_used_core.unwrap()).abs() < 0.1
        );
        assert_eq!(r.mean_latency_ms.len(), 5);

        // {diameter_addr:NAME} must name an NF with a Diameter port.
        let text = BUILTIN.iter().find(|(n, _)| *n == "pcf-sm-rx-30k-binding").unwrap().1;
        let udr = text.replace("{diameter_addr:pcf}", "{diameter_addr:udr}");
        let err = Scenario::from_toml(&udr).unwrap_err();
        assert!(format!("{err:#}").contains("{diameter_addr:udr}"), "{err:#}");
        let nope = text.replace("{diameter_addr:pcf}", "{diameter_addr:nope}");
        assert!(Scenario::from_toml(&nope).is_err());
    }

    /// The PCRF scenarios (3.1.1, 3.1.2, 3.6.1): the PCEFs' Gx mix in the reference's ratios,
    /// straight to the PCF's Diameter node, and for voice the AFs' Rx leg bound to the Gx
    /// sessions with the PCF's RARs as egress rows.
    #[test]
    fn pcrf_scenarios_carry_the_reference_call_models() {
        let tps = |s: &Scenario, op: GxOp| -> f64 {
            s.procedures.iter().filter(|p| p.gx == Some(op)).map(|p| p.tps).sum()
        };
        let pcf_diameter = |s: &Scenario| {
            let d = s.diameter.as_ref().unwrap();
            assert_eq!(
                (d.nf.as_str(), d.answer_host.as_deref()),
                ("pcf", Some("pcf.fivecore.local"))
            );
            assert_eq!(s.nf_config["pcf"]["diameter"]["listen"].as_str(), Some(DIAMETER_ADDR));
            assert_eq!(s.nf_config["pcf"]["diameter"]["enabled"].as_bool(), Some(true));
            assert!(s.simulators.iter().any(|x| x.kind == SimKind::PcefGx));
            assert_eq!(s.load.mix, Mix::ShuffledDeck);
        };
        // 3.1.1: CCR-I : CCR-U : CCR-T 1:1:1, the Gx half of Table 3-2's 7.5K; no UDR.
        let data = Scenario::load("pcrf-data-7.5k").unwrap();
        pcf_diameter(&data);
        let i = tps(&data, GxOp::CcrInitial);
        assert_eq!((i, tps(&data, GxOp::CcrUpdate), tps(&data, GxOp::CcrTerminate)), (i, i, i));
        assert_eq!(data.total_tps(), 7500.0 * 960.0 / 1920.0);
        assert_eq!(data.nfs, ["pcf"]);
        assert!(!data.binds_rx_to_gx());
        // Its Sy and LDAP: the PCF's OCS and directory are the kit's, and the reference's 2,500
        // Sy (an SLR per CCR-I, an STR per CCR-T) and 1,250 LDAP searches are egress rows.
        assert_eq!(data.nf_config["pcf"]["policy"].as_str(), Some("policies/pcrf-data"));
        assert_eq!(data.nf_config["pcf"]["sy"]["ocs"][0]["addr"].as_str(), Some("{sim_addr:ocs}"));
        let urls = data.nf_config["pcf"]["ldap"]["urls"].as_array().unwrap();
        assert_eq!(urls[0].as_str(), Some("ldap://{sim_addr:ldap}"));
        // Bound and searching where the kit's directory has its entries.
        let ldap = &data.nf_config["pcf"]["ldap"];
        let (dn, pw) = (crate::sim_ldap::BIND_DN, crate::sim_ldap::BIND_PASSWORD);
        assert_eq!(
            (ldap["bind_dn"].as_str(), ldap["bind_password"].as_str()),
            (Some(dn), Some(pw))
        );
        assert_eq!(ldap["base_dn"].as_str(), Some(crate::sim_ldap::BASE_DN));
        let kind = |n: &str| data.simulators.iter().find(|x| x.name == n).map(|x| x.kind);
        assert_eq!((kind("ocs"), kind("ldap")), (Some(SimKind::Ocs), Some(SimKind::Ldap)));
        let row = |row: &str, c: EgressCounter| -> f64 {
            data.egress.iter().filter(|e| e.row == row && e.counter == c).map(|e| e.tps).sum()
        };
        assert_eq!(row("Sy", EgressCounter::Created), i);
        assert_eq!(row("Sy", EgressCounter::Deleted), i);
        assert_eq!(row("LDAP", EgressCounter::Items), i);
        // A created / deleted count is an OCS's or a CHF's; a directory adds no latency.
        let mut wrong = data.clone();
        wrong.egress.iter_mut().find(|e| e.sim == "ldap").unwrap().counter = EgressCounter::Created;
        assert!(wrong.validate().is_err());
        let mut slow = data.clone();
        slow.simulators.iter_mut().find(|x| x.kind == SimKind::Ldap).unwrap().latency_ms = 5;
        assert!(slow.validate().is_err());
        // 3.1.2: 11 messages per call, 7 of them sent by the PCEFs and AFs, the PCF's 2 Gx RARs
        // and 2 Rx RARs per call set beside the reference's as egress.
        let voice = Scenario::load("pcrf-voice-15k").unwrap();
        pcf_diameter(&voice);
        let calls = tps(&voice, GxOp::CcrInitial);
        assert!((calls - 15000.0 / 11.0).abs() < 0.1, "{calls}");
        assert_eq!(tps(&voice, GxOp::CcrUpdate), 2.0 * calls);
        assert_eq!(tps(&voice, GxOp::CcrTerminate), calls);
        for op in [RxOp::AarInitial, RxOp::AarUpdate, RxOp::Str] {
            let rx: f64 = voice.procedures.iter().filter(|p| p.rx == Some(op)).map(|p| p.tps).sum();
            assert_eq!(rx, calls, "{op:?}");
        }
        assert!((voice.total_tps() - 7.0 * calls).abs() < 0.01);
        assert!(voice.binds_rx_to_gx() && voice.preload.subscriptions.is_none());
        let egress = |row: &str| -> f64 {
            voice.egress.iter().filter(|e| e.row == row).map(|e| e.tps).sum()
        };
        assert_eq!((egress("Gx RAR"), egress("Rx RAR")), (2.0 * calls, 2.0 * calls));
        let d = voice.diameter.as_ref().unwrap();
        assert_eq!(d.gx_apn, "ims");
        assert!(d.gx_session_hold_s > d.session_hold_s, "a call's STR before its CCR-T");
        // 3.6.1: Gx-init, Gx-Update x3 with usage, Gx-Terminate: 2,000 sessions/s of 10K.
        let usage = Scenario::load("pcrf-usage-10k").unwrap();
        pcf_diameter(&usage);
        assert_eq!(usage.total_tps(), 10_000.0);
        assert_eq!(tps(&usage, GxOp::CcrUpdate), 3.0 * tps(&usage, GxOp::CcrInitial));
        for p in usage.procedures.iter().filter(|p| p.gx == Some(GxOp::CcrUpdate)) {
            let u = p.usage_report.as_ref().unwrap();
            assert_eq!(u.monitoring_key, "monthly", "the High project's key: {}", p.name);
            assert!(u.input_octets + u.output_octets > 0);
        }
        assert_eq!(usage.reference.as_ref().unwrap().mean_latency_ms.len(), 5);
        assert_eq!(usage.nf_config["pcf"]["udr"]["api_root"].as_str(), Some("{nf:udr}"));
        assert_eq!(usage.nf_config["pcf"]["usage"]["enabled"].as_bool(), Some(true));
        assert_eq!(usage.nf_config["pcf"]["policy"].as_str(), Some("policies/high"));
        for s in [&data, &voice, &usage] {
            let r = s.reference.as_ref().unwrap();
            assert!((r.tps_achieved / r.cpu_requested - r.tps_per_core).abs() < 0.1, "{}", s.name);
            if let Some(used) = r.used_cores {
                let per = r.tps_achieved / used;
                assert!((per - r.tps_per_used_core.unwrap()).abs() < 1.0, "{}", s.name);
            }
        }

        // What a Gx procedure may not say.
        let text = BUILTIN.iter().find(|(n, _)| *n == "pcrf-data-7.5k").unwrap().1;
        let on_initial = text.replacen(
            "gx = \"ccr_initial\"",
            "gx = \"ccr_initial\"\nevent_trigger = \"rat_change\"",
            1,
        );
        let err = Scenario::from_toml(&on_initial).unwrap_err();
        assert!(format!("{err:#}").contains("ccr_update"), "{err:#}");
        let with_path =
            text.replacen("gx = \"ccr_terminate\"", "gx = \"ccr_terminate\"\npath = \"/x\"", 1);
        assert!(Scenario::from_toml(&with_path).is_err(), "a Gx procedure has no path");
        let both =
            text.replacen("gx = \"ccr_terminate\"", "gx = \"ccr_terminate\"\nrx = \"str\"", 1);
        assert!(Scenario::from_toml(&both).is_err(), "gx and rx are exclusive");
        let mut no_pcef = data.clone();
        no_pcef.simulators.retain(|x| x.kind != SimKind::PcefGx);
        assert!(no_pcef.validate().is_err(), "Gx needs pcef_gx simulators");
    }

    /// The converged scenarios (3.3.1, 3.3.2, 3.4.1, 3.4.2, 3.4.3): per call (voice) or data
    /// session the client-originated messages at the reference's count, the PCF's one Gx RAR
    /// and one Rx RAR as egress, the reference's toggles (PER where it says so, SAL, audit, no
    /// BSF, LDAP or OCS) and the High project.
    #[test]
    fn pcrf_conv_scenarios_carry_the_reference_call_models() {
        // name, voice (else data), offered client-originated rate, PER, reference TPS.
        let want = [
            ("pcrf-conv-voice-7.5k", true, 7500.0 * 7.0 / 9.0, true, 7500.0),
            ("pcrf-conv-voice-15k", true, 15_000.0 * 7.0 / 9.0, true, 15_000.0),
            // 3.4.3: Table 3-146's Diameter Gateway Ingress (8.33K), with in + out 14.64K.
            ("pcrf-conv-voice-15k-2site", true, 8330.0, true, 14_640.0),
            ("pcrf-conv-data-7.5k", false, 7500.0 * 6.0 / 8.0, false, 7500.0),
            ("pcrf-conv-data-15k", false, 15_000.0 * 6.0 / 8.0, false, 15_000.0),
        ];
        let conv: Vec<String> = Scenario::builtin()
            .unwrap()
            .into_iter()
            .filter(|s| s.name.starts_with("pcrf-conv-"))
            .map(|s| s.name)
            .collect();
        assert_eq!(conv.len(), want.len(), "{conv:?}");
        for (name, voice, rate, per, tps) in want {
            let s = Scenario::load(name).unwrap();
            let sum = |gx: Option<GxOp>, rx: Option<RxOp>| -> f64 {
                let of =
                    |p: &&Procedure| (gx.is_some() && p.gx == gx) || (rx.is_some() && p.rx == rx);
                s.procedures.iter().filter(of).map(|p| p.tps).sum()
            };
            let calls = sum(Some(GxOp::CcrInitial), None);
            let updates = if voice { 2.0 } else { 1.0 };
            assert_eq!(sum(Some(GxOp::CcrUpdate), None), updates * calls, "{name}");
            assert_eq!(sum(Some(GxOp::CcrTerminate), None), calls, "{name}");
            for op in [RxOp::AarInitial, RxOp::AarUpdate, RxOp::Str] {
                assert_eq!(sum(None, Some(op)), calls, "{name}: {op:?}, one AF session per call");
            }
            assert!((s.total_tps() - rate).abs() < rate * 0.001, "{name}: {}", s.total_tps());
            assert!((s.load.rate - s.total_tps()).abs() < 0.01, "{name}");
            // With the PCF's Gx RAR and Rx RAR, a call is 9 messages (voice), a data session 8.
            let all = if voice { 9.0 } else { 8.0 };
            if name != "pcrf-conv-voice-15k-2site" {
                assert!((calls * all - tps).abs() < tps * 0.001, "{name}: {calls} calls/s");
            }
            let egress = |row: &str| -> f64 {
                s.egress.iter().filter(|e| e.row.eq_ignore_ascii_case(row)).map(|e| e.tps).sum()
            };
            assert!((egress("RAR-Gx") - calls).abs() < 0.01, "{name}: one Gx RAR per call");
            let rx_rar = egress("RAR-Rx") + egress("RAR -rx");
            assert!((rx_rar - calls).abs() < 0.01, "{name}: one Rx RAR per call");
            assert!(s.egress.iter().all(|e| s.simulators.iter().any(|x| x.name == e.sim)));
            // Straight to the PCF, Rx bound to the Gx sessions of the one APN.
            let d = s.diameter.as_ref().unwrap();
            assert_eq!(
                (d.nf.as_str(), d.answer_host.as_deref()),
                ("pcf", Some("pcf.fivecore.local"))
            );
            assert_eq!(d.gx_apn, if voice { "ims" } else { "internet" }, "{name}");
            assert!(d.gx_session_hold_s > d.session_hold_s, "{name}: the AF session ends first");
            assert!(s.binds_rx_to_gx() && s.preload.subscriptions.is_none(), "{name}");
            assert_eq!(s.load.mix, Mix::ShuffledDeck);
            assert_eq!(s.nfs, ["pcf"], "{name}: no UDR, no BSF");
            // The reference's toggles.
            let pcf = &s.nf_config["pcf"];
            assert_eq!(pcf["policy"].as_str(), Some("policies/high"), "{name}: project High");
            assert_eq!(pcf["diameter"]["listen"].as_str(), Some(DIAMETER_ADDR));
            assert_eq!(pcf["bsf"]["enabled"].as_bool(), Some(false), "{name}: BSF NA");
            assert_eq!(pcf["audit"]["enabled"].as_bool(), Some(true), "{name}: audit");
            let per_on = pcf.get("per").and_then(|p| p["enabled"].as_bool()).unwrap_or(false);
            assert_eq!(per_on, per, "{name}: PER");
            for off in ["ldap", "sy", "chf", "udr", "usage"] {
                assert!(pcf.get(off).is_none(), "{name}: {off} is disabled or NA");
            }
            // SAL traces subscribers the CCR-Is can name: of the kit's IMSI range.
            let traced = pcf["sal"]["subscribers"].as_array().unwrap();
            assert!(!traced.is_empty(), "{name}: SAL enabled");
            let g = &s.generators;
            assert_eq!(g.supi_count, 10_000_000, "{name}: the reference's active subscribers");
            for t in traced {
                let imsi = t.as_str().unwrap().strip_prefix("imsi-").unwrap();
                let msin: u64 = imsi.strip_prefix(g.supi_prefix.as_str()).unwrap().parse().unwrap();
                assert_eq!(imsi.len(), g.supi_prefix.len() + 10, "{name}: {t}");
                assert!((g.supi_first..g.supi_first + g.supi_count).contains(&msin), "{name}: {t}");
            }
            let r = s.reference.as_ref().unwrap();
            assert_eq!(
                (r.tps_achieved, r.cpu_requested),
                (tps, if name.ends_with("voice-7.5k") { 442.0 } else { 443.0 })
            );
            assert!((r.tps_achieved / r.cpu_requested - r.tps_per_core).abs() < 0.1, "{name}");
            let per_used = r.tps_achieved / r.used_cores.unwrap();
            assert!((per_used - r.tps_per_used_core.unwrap()).abs() < 1.0, "{name}: {per_used}");
            assert!(r.notes.iter().any(|n| n.contains("JDBC")), "{name}: the JDBC latency");
            assert!(r.notes.iter().any(|n| n.contains("one site")), "{name}: GR scaled to a site");
            assert!(s.description.contains("site"), "{name}: the description says which site runs");
        }
    }

    /// Every scenario whose AFs talk to the PCF names a policy project with PA rules (the QoS of
    /// each media type): without them the PCF refuses every AAR 5063.
    #[test]
    fn the_projects_of_the_rx_scenarios_decide_application_sessions() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut checked = 0;
        for s in Scenario::builtin().unwrap() {
            let to_pcf = s.diameter.as_ref().is_some_and(|d| d.answer_host.is_some());
            if !to_pcf || !s.procedures.iter().any(|p| p.rx == Some(RxOp::AarInitial)) {
                continue;
            }
            let dir = s.nf_config["pcf"]["policy"].as_str().unwrap().to_string();
            let manifest = std::fs::read_to_string(root.join(&dir).join("project.toml")).unwrap();
            let manifest: toml::Table = toml::from_str(&manifest).unwrap();
            let services = manifest["services"].as_array().unwrap();
            assert!(services.iter().any(|x| x.as_str() == Some("PA")), "{}: {dir}", s.name);
            assert!(root.join(&dir).join("rules/pa.toml").is_file(), "{}: {dir}", s.name);
            checked += 1;
        }
        assert!(checked >= 7, "{checked}: 3.5.x twice, 3.1.2 and the five converged ones");
    }

    #[test]
    fn pcf_am_ue_scenarios_carry_the_reference_call_mix() {
        // name, offered (Ingress) TPS, reference TPS (Ingress + Egress), requested cores,
        // subscribers (reference, here), p99 bound.
        let want = [
            ("pcf-am-ue-15k", 7200.0, 30_000.0, 474.0, (1_000_000, 100_000), 78.6),
            ("pcf-am-ue-25k", 12_500.0, 50_000.0, 640.0, (12_591_141, 125_911), 125.0),
            ("pcf-am-ue-30k", 6315.0, 28_220.0, 786.0, (12_000_000, 120_000), 110.0),
            ("pcf-am-ue-60k", 13_344.0, 60_048.0, 786.0, (12_000_000, 120_000), 204.0),
            ("pcf-am-ue-75k", 16_680.0, 75_060.0, 810.0, (12_000_000, 120_000), 126.0),
        ];
        let am_ue: Vec<String> = Scenario::builtin()
            .unwrap()
            .into_iter()
            .filter(|s| s.name.starts_with("pcf-am-ue-"))
            .map(|s| s.name)
            .collect();
        assert_eq!(am_ue.len(), want.len(), "{am_ue:?}");
        for (name, rate, tps, cores, (subs, here), p99) in want {
            let s = Scenario::load(name).unwrap();
            let tps_of = |p: &str| s.procedures.iter().find(|x| x.name == p).unwrap().tps;
            assert_eq!(s.load.rate, rate, "{name}");
            assert_eq!(s.total_tps(), rate, "{name}");
            let (amc, amd) = (tps_of("AM Create"), tps_of("AM Delete"));
            let (uec, ued) = (tps_of("UE Create"), tps_of("UE Delete"));
            assert_eq!((amc, uec), (amd, ued), "{name}: 1:0:1");
            assert!((amc - uec).abs() <= 1.0, "{name}: AM and UE alike");
            // Per UE create the AMF gets a subscribe and a transfer, per delete an unsubscribe.
            assert_eq!(s.egress[0].tps, 3.0 * uec, "{name}");
            let u = s.preload.udr.as_ref().unwrap();
            assert_eq!(u.kind, UdrKind::PolicyAmUeData, "{name}");
            assert_eq!((u.reference_count, u.default_count()), (subs, here), "{name}");
            assert_eq!(s.generators.supi_count, here, "{name}");
            assert_eq!(s.nf_config["pcf"]["udr"]["api_root"].as_str(), Some("{nf:udr}"));
            assert_eq!(s.nf_config["pcf"]["policy"].as_str(), Some("policies/high"));
            assert_eq!(s.criteria.max_p99_ms, p99, "{name}");
            let r = s.reference.as_ref().unwrap();
            assert_eq!((r.tps_achieved, r.cpu_requested), (tps, cores), "{name}");
            assert!((r.tps_per_core - tps / cores).abs() < 0.1, "{name}: TPS per requested core");
            for p in ["AM Create", "AM Delete", "UE Create", "UE Delete"] {
                let l = r.mean_latency_ms[p];
                assert!(l > 0.0 && l <= p99, "{name}: {p} {l} ms");
            }
            assert!(s.description.contains("here"), "{name}: the description gives our scale");
            assert!(!r.notes.is_empty());
        }
    }

    #[test]
    fn bsf_validation_rejects_mistakes() {
        let base = Scenario::load("bsf-s9-54k-25m").unwrap();
        let text = BUILTIN.iter().find(|(n, _)| *n == "bsf-s9-54k-25m").unwrap().1;
        assert!(Scenario::from_toml(text).is_ok());
        let no_pcf = text.replacen(r#"pcf_sims = ["pcf1", "pcf2"]"#, r#"pcf_sims = ["pcscf1"]"#, 1);
        assert!(Scenario::from_toml(&no_pcf).is_err(), "bindings must name pcf_rx simulators");
        let rx_with_path = text.replacen("rx = \"rar\"", "rx = \"rar\"\npath = \"/x\"", 1);
        assert!(Scenario::from_toml(&rx_with_path).is_err(), "an Rx procedure has no path");
        let http_code = text.replacen("expect = [2001]", "expect = [200]", 1);
        assert!(Scenario::from_toml(&http_code).is_err(), "Rx expects Diameter codes");
        let mut no_diameter = base.clone();
        no_diameter.diameter = None;
        assert!(no_diameter.validate().is_err(), "{{diameter_addr}} and Rx need [diameter]");
        let mut no_host = base.clone();
        no_host.simulators[0].origin_host = None;
        assert!(no_host.validate().is_err());
        let mut too_many = base;
        too_many.preload.bindings.as_mut().unwrap().deletable = 20_000_000;
        assert!(too_many.validate().is_err());
    }

    #[test]
    fn validation_rejects_mistakes() {
        let base = BUILTIN[1].1;
        let bad_rate = base.replacen("rate = 5066", "rate = 9000", 1);
        assert!(Scenario::from_toml(&bad_rate).is_err());
        let bad_gen = base.replacen("{instance:AMF}", "{instance:NOPE}", 1);
        assert!(Scenario::from_toml(&bad_gen).is_err());
        let bad_sim = base.replacen("{sim:peer-nrf}", "{sim:nope}", 1);
        assert!(Scenario::from_toml(&bad_sim).is_err());
        assert!(Scenario::from_toml("name = 1").is_err());
        assert!(Scenario::load("no-such-scenario").is_err());
    }
}
