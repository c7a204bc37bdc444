//! The PCF's own metrics, read at scrape time (the request path only bumps atomics): the policy
//! project in force and what it has evaluated, and the deploys.
//!
//! - `policy_project_info{project, version}` 1 for the version in force;
//! - `policy_evaluations_total{version}`, `policy_fallbacks_total{version}`: decisions of the
//!   version in force, and those the fallback answered (a new version starts its own series);
//! - `policy_deploys_total{outcome="ok"|"refused"}`;
//! - `pcf_policy_data_reads_total{result="found"|"unknown"|"unreachable"}`: reads of the
//!   subscriber's policy data from the UDR;
//! - `pcf_policy_data_subscriptions_total{result="ok"|"failed"}`,
//!   `pcf_policy_data_notifications_total`: subscriptions made at the UDR, and the change
//!   notifications received; `pcf_policy_data_cache_hits_total` and
//!   `pcf_policy_data_cached_subscribers`: the per-subscriber SM data cache;
//! - `pcf_sm_update_notify_total{result="ok"|"failed"}`: UpdateNotify sent to SMFs;
//! - `pcf_am_update_notify_total{result="ok"|"failed"}`: UpdateNotify and terminate sent to AMFs;
//! - `pcf_bsf_bindings_total{operation="register"|"deregister", result="ok"|"failed"}`;
//! - `pcf_audit_checks_total{result="known"|"removed"|"no_answer"}`: the session audit (N7,
//!   N15, and Gx sessions asked with an RAR);
//! - `pcf_diameter_resent_total{command="Gx-RAR"|"Rx-RAR"|"Rx-ASR"}`,
//!   `pcf_diameter_unanswered_total{command}`: PCRF-initiated requests sent again, and those
//!   never answered (crate::resend);
//! - `pcf_app_sessions_total{operation="create"|"update"|"delete"|"terminate"}`: application
//!   sessions (N5) created, modified, deleted by the AF, ended with their SM association;
//! - `pcf_af_notifications_total{kind="notify"|"terminate", result="ok"|"failed"}`: events
//!   and terminations sent to AFs;
//! - `pcf_ursp_deliveries_total{result="initiated"|"complete"|"rejected"|"transfer_failed"|
//!   "unreachable"|"invalid"}`: URSP sent to UEs through their AMF, and how it went;
//! - `pcf_chf_subscriptions_total{result="ok"|"failed"}`, `pcf_chf_unsubscriptions_total{result}`,
//!   `pcf_chf_notifications_total{kind="notify"|"terminate"}` and the gauge
//!   `pcf_chf_subscribers`: spending limit subscriptions at the CHF (N28);
//! - `pcf_sy_requests_total{command="SLR-initial"|"SLR-intermediate"|"STR", result}`,
//!   `pcf_sy_notifications_total{result="ok"|"refused"}` and the gauge `pcf_sy_sessions`: Sy
//!   with the OCS (crate::sy);
//! - `pcf_collision_waits_total`, `pcf_collision_lease_expired_total`: requests that waited for
//!   another of the same subscriber, and those that went ahead past a stuck one's lease.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::context::Pcf;

#[derive(Debug)]
struct PolicyCollector(Arc<Pcf>);

impl std::fmt::Debug for Pcf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pcf").finish_non_exhaustive()
    }
}

pub fn register(pcf: Arc<Pcf>, r: &mut Registry) {
    r.register_collector(Box::new(PolicyCollector(pcf)));
}

impl Collector for PolicyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let pcf = &self.0;
        let p = pcf.policy.current();
        let info = ConstGauge::new(1i64);
        let mut e = encoder.encode_descriptor(
            "policy_project_info",
            "The policy project in force (1), by project name and version",
            None,
            info.metric_type(),
        )?;
        let labels = [("project", p.name.as_str()), ("version", p.version.as_str())];
        info.encode(e.encode_family(&labels)?)?;

        let (evaluations, fallbacks) = p.counters();
        for (name, help, value) in [
            ("policy_evaluations", "Decisions made by the policy version in force", evaluations),
            (
                "policy_fallbacks",
                "Decisions of the version in force answered by its fallback (a script failed)",
                fallbacks,
            ),
        ] {
            let c = ConstCounter::new(value);
            let mut e = encoder.encode_descriptor(name, help, None, c.metric_type())?;
            c.encode(e.encode_family(&[("version", p.version.as_str())])?)?;
        }

        let mut e = encoder.encode_descriptor(
            "policy_deploys",
            "Policy project deploys, by outcome (refused: the project failed its check)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        let (ok, refused) = pcf.policy.deploys();
        for (outcome, n) in [("ok", ok), ("refused", refused)] {
            let c = ConstCounter::new(n);
            c.encode(e.encode_family(&[("outcome", outcome)])?)?;
        }

        let st = &pcf.policy_data.stats;
        let mut e = encoder.encode_descriptor(
            "pcf_policy_data_reads",
            "Reads of subscribers' policy data from the UDR, by result",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (result, n) in
            [("found", &st.found), ("unknown", &st.unknown), ("unreachable", &st.unreachable)]
        {
            let c = ConstCounter::new(n.load(Ordering::Relaxed));
            c.encode(e.encode_family(&[("result", result)])?)?;
        }

        let mut e = encoder.encode_descriptor(
            "pcf_policy_data_subscriptions",
            "Policy data subscriptions made at the UDR, by result",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (result, n) in [("ok", &st.subscribed), ("failed", &st.subscribe_failed)] {
            let c = ConstCounter::new(n.load(Ordering::Relaxed));
            c.encode(e.encode_family(&[("result", result)])?)?;
        }
        let c = ConstCounter::new(st.cache_hits.load(Ordering::Relaxed));
        c.encode(encoder.encode_descriptor(
            "pcf_policy_data_cache_hits",
            "SM policy data answered from the per-subscriber cache, without a UDR read",
            None,
            c.metric_type(),
        )?)?;
        let g = ConstGauge::new(pcf.policy_data.cached() as i64);
        g.encode(encoder.encode_descriptor(
            "pcf_policy_data_cached_subscribers",
            "Subscribers whose SM policy data is cached (subscribed, with SM sessions)",
            None,
            g.metric_type(),
        )?)?;
        let c = ConstCounter::new(st.notified.load(Ordering::Relaxed));
        c.encode(encoder.encode_descriptor(
            "pcf_policy_data_notifications",
            "PolicyDataChangeNotifications received from the UDR",
            None,
            c.metric_type(),
        )?)?;
        let ns = &pcf.notifier.stats;
        let mut e = encoder.encode_descriptor(
            "pcf_sm_update_notify",
            "SM policy UpdateNotify sent to SMFs, by result",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (result, n) in [("ok", &ns.sent), ("failed", &ns.failed)] {
            let c = ConstCounter::new(n.load(Ordering::Relaxed));
            c.encode(e.encode_family(&[("result", result)])?)?;
        }
        let mut e = encoder.encode_descriptor(
            "pcf_am_update_notify",
            "AM policy UpdateNotify and terminate sent to AMFs, by result",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (result, n) in [("ok", &ns.am_sent), ("failed", &ns.am_failed)] {
            let c = ConstCounter::new(n.load(Ordering::Relaxed));
            c.encode(e.encode_family(&[("result", result)])?)?;
        }

        let b = &pcf.bindings.stats;
        let mut e = encoder.encode_descriptor(
            "pcf_bsf_bindings",
            "PCF binding registrations and deregistrations at the BSF, by result",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (op, result, n) in [
            ("register", "ok", &b.registered),
            ("register", "failed", &b.register_failed),
            ("deregister", "ok", &b.deregistered),
            ("deregister", "failed", &b.deregister_failed),
        ] {
            let c = ConstCounter::new(n.load(Ordering::Relaxed));
            c.encode(e.encode_family(&[("operation", op), ("result", result)])?)?;
        }

        let a = &pcf.audit;
        let mut e = encoder.encode_descriptor(
            "pcf_audit_checks",
            "Stale associations the session audit asked their SMF or AMF about, by what it found",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (result, n) in
            [("known", &a.known), ("removed", &a.removed), ("no_answer", &a.no_answer)]
        {
            let c = ConstCounter::new(n.load(Ordering::Relaxed));
            c.encode(e.encode_family(&[("result", result)])?)?;
        }

        for (name, help, counts) in [
            (
                "pcf_diameter_resent",
                "PCRF-initiated Diameter requests sent again after no answer, by command",
                &pcf.resend.resent,
            ),
            (
                "pcf_diameter_unanswered",
                "PCRF-initiated Diameter requests left unanswered after their last send, by command",
                &pcf.resend.unanswered,
            ),
        ] {
            let mut e = encoder.encode_descriptor(
                name,
                help,
                None,
                prometheus_client::metrics::MetricType::Counter,
            )?;
            for cmd in crate::resend::Command::ALL {
                let c = ConstCounter::new(counts[cmd as usize].load(Ordering::Relaxed));
                c.encode(e.encode_family(&[("command", cmd.label())])?)?;
            }
        }

        let a = &pcf.apps;
        let mut e = encoder.encode_descriptor(
            "pcf_app_sessions",
            "Application sessions (N5), by operation (terminate: ended with their SM association)",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (op, n) in [
            ("create", &a.created),
            ("update", &a.modified),
            ("delete", &a.deleted),
            ("terminate", &a.terminated),
        ] {
            let c = ConstCounter::new(n.load(Ordering::Relaxed));
            c.encode(e.encode_family(&[("operation", op)])?)?;
        }
        let mut e = encoder.encode_descriptor(
            "pcf_af_notifications",
            "Event notifications and terminations sent to AFs, by result",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (kind, result, n) in [
            ("notify", "ok", &a.notify_sent),
            ("notify", "failed", &a.notify_failed),
            ("terminate", "ok", &a.terminate_sent),
            ("terminate", "failed", &a.terminate_failed),
        ] {
            let c = ConstCounter::new(n.load(Ordering::Relaxed));
            c.encode(e.encode_family(&[("kind", kind), ("result", result)])?)?;
        }

        let mut e = encoder.encode_descriptor(
            "pcf_ursp_deliveries",
            "URSP deliveries to UEs through the AMF, by result",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for (result, n) in pcf.ue_policy.stats.by_result() {
            let c = ConstCounter::new(n);
            c.encode(e.encode_family(&[("result", result)])?)?;
        }

        let ch = &pcf.chf.stats;
        for (name, help, label, rows) in [
            (
                "pcf_chf_subscriptions",
                "Spending limit subscriptions made at the CHF, by result",
                "result",
                [("ok", &ch.subscribed), ("failed", &ch.subscribe_failed)],
            ),
            (
                "pcf_chf_unsubscriptions",
                "Spending limit subscriptions removed at the CHF, by result",
                "result",
                [("ok", &ch.unsubscribed), ("failed", &ch.unsubscribe_failed)],
            ),
            (
                "pcf_chf_notifications",
                "Spending limit notifications received from the CHF, by kind",
                "kind",
                [("notify", &ch.notified), ("terminate", &ch.terminated)],
            ),
        ] {
            let mut e = encoder.encode_descriptor(
                name,
                help,
                None,
                prometheus_client::metrics::MetricType::Counter,
            )?;
            for (value, n) in rows {
                let c = ConstCounter::new(n.load(Ordering::Relaxed));
                c.encode(e.encode_family(&[(label, value)])?)?;
            }
        }
        let g = ConstGauge::new(pcf.chf.subscribers() as i64);
        g.encode(encoder.encode_descriptor(
            "pcf_chf_subscribers",
            "Subscribers with a spending limit subscription at the CHF",
            None,
            g.metric_type(),
        )?)?;

        crate::sy::encode_metrics(pcf, &mut encoder)?;
        crate::sd::encode_metrics(pcf, &mut encoder)?;

        let col = &pcf.collisions;
        for (name, help, n) in [
            (
                "pcf_collision_waits",
                "Requests that waited for another request of the same subscriber",
                &col.waited,
            ),
            (
                "pcf_collision_lease_expired",
                "Requests that went ahead because another of the same subscriber held it past collision_lease_ms",
                &col.lease_expired,
            ),
        ] {
            let c = ConstCounter::new(n.load(Ordering::Relaxed));
            c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
        }

        if let Some((per, sal)) = pcf.per.counts() {
            let mut e = encoder.encode_descriptor(
                "pcf_per_records",
                "Policy Event Records (sink per) and subscriber activity log entries (sink sal), by result (dropped: the writer's queue was full)",
                None,
                prometheus_client::metrics::MetricType::Counter,
            )?;
            for (sink, c) in [("per", per), ("sal", sal)] {
                for (result, n) in
                    [("written", &c.written), ("dropped", &c.dropped), ("failed", &c.failed)]
                {
                    let k = ConstCounter::new(n.load(Ordering::Relaxed));
                    k.encode(e.encode_family(&[("sink", sink), ("result", result)])?)?;
                }
            }
        }
        Ok(())
    }
}
