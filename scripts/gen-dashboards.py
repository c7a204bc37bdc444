#!/usr/bin/env python3
"""Writes the Grafana dashboards of deploy/grafana/ (one per NF and one for the kit's runs).

The dashboards are generated so that every NF's shares one layout (the SBI, overload, store,
process and Diameter rows are the same code) and a metric renamed in the NFs is renamed in one
place. crates/fivecore/tests/ops.rs checks that every metric these queries name is on the real
NFs' /metrics, and that the files are what this script writes (`--check`).

Every series is selected by the `nf` label the scrape configuration puts on each NF's targets
(deploy/prometheus/prometheus.yml, the Helm chart's ServiceMonitor) and by `$instance`.

Usage: scripts/gen-dashboards.py [--check]
"""
import json
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parent.parent / "deploy" / "grafana"
DS = {"type": "prometheus", "uid": "${datasource}"}
FIVE_XX = 'status_class="5xx"'
OK = 'outcome="ok"'


class Board:
    def __init__(self, uid, title, nf, description):
        self.uid, self.title, self.nf, self.description = uid, title, nf, description
        self.panels, self.y, self.x, self.next_id = [], 0, 0, 1

    def sel(self, extra=""):
        """The label selector of this dashboard's series."""
        s = f'nf="{self.nf}",instance=~"$instance"'
        return "{" + s + ("," + extra if extra else "") + "}"

    def row(self, title):
        if self.x:
            self.y, self.x = self.y + 8, 0
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def panel(self, title, targets, unit="short", kind="timeseries", width=12, description="",
              stack=False):
        if self.x + width > 24:
            self.y, self.x = self.y + 8, 0
        p = {
            "type": kind,
            "title": title,
            "id": self._id(),
            "datasource": DS,
            "gridPos": {"h": 8, "w": width, "x": self.x, "y": self.y},
            "targets": [
                {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": chr(65 + i)}
                for i, (expr, legend) in enumerate(targets)
            ],
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {},
        }
        if description:
            p["description"] = description
        if kind == "timeseries":
            p["fieldConfig"]["defaults"]["custom"] = {
                "drawStyle": "line", "lineWidth": 1, "fillOpacity": 10 if stack else 0,
                "stacking": {"mode": "normal" if stack else "none", "group": "A"},
            }
            p["options"] = {"legend": {"displayMode": "table", "placement": "bottom",
                                       "calcs": ["mean", "max", "lastNotNull"]},
                            "tooltip": {"mode": "multi", "sort": "desc"}}
        if kind == "stat":
            p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                              "values": False},
                            "colorMode": "value", "graphMode": "area", "textMode": "auto"}
        self.panels.append(p)
        self.x += width
        if self.x >= 24:
            self.y, self.x = self.y + 8, 0

    def json(self):
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": ["fivecore"],
            "timezone": "utc",
            "schemaVersion": 39,
            "version": 1,
            "editable": True,
            "refresh": "30s",
            "time": {"from": "now-1h", "to": "now"},
            "annotations": {"list": []},
            "links": [{"type": "dashboards", "tags": ["fivecore"], "asDropdown": True,
                       "title": "fivecore", "includeVars": False}],
            "templating": {"list": [
                {"name": "datasource", "label": "Prometheus", "type": "datasource",
                 "query": "prometheus", "current": {}, "hide": 0},
                {"name": "instance", "label": "Instance", "type": "query", "datasource": DS,
                 "query": {"query": f'label_values(process_resident_memory_bytes{{nf="{self.nf}"}}, instance)',
                           "refId": "instance"},
                 "definition": f'label_values(process_resident_memory_bytes{{nf="{self.nf}"}}, instance)',
                 "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*",
                 "current": {"text": "All", "value": "$__all"}, "hide": 0, "sort": 1},
            ]},
            "panels": self.panels,
        }


def rate(metric, sel, by=None):
    expr = f"rate({metric}{sel}[$__rate_interval])"
    return f"sum by ({by}) ({expr})" if by else f"sum({expr})"


def quantile(q, metric, sel, by=""):
    by_le = f"{by}, le" if by else "le"
    return f"histogram_quantile({q}, sum by ({by_le}) (rate({metric}_bucket{sel}[$__rate_interval])))"


def overview(b):
    s = b.sel()
    b.row("Overview")
    b.panel("Instances up", [(f"sum(up{s})", "up")], kind="stat", width=4,
            description="Targets Prometheus scraped successfully.")
    b.panel("Ready", [(f"min(nf_ready{s})", "ready")], kind="stat", width=4,
            description="1 when every instance answers /healthz/ready with 200.")
    b.panel("Requests/s", [(rate("sbi_requests_total", s), "req/s")], unit="reqps", kind="stat",
            width=4)
    b.panel("5xx ratio",
            [(f'{rate("sbi_requests_total", b.sel(FIVE_XX))} / {rate("sbi_requests_total", s)}',
              "5xx")],
            unit="percentunit", kind="stat", width=4)
    b.panel("p99 own latency", [(quantile(0.99, "sbi_request_own_duration_seconds", s), "p99")],
            unit="s", kind="stat", width=4)
    b.panel("RSS", [(f"sum(process_resident_memory_bytes{s})", "RSS")], unit="bytes",
            kind="stat", width=4)


def sbi(b):
    s = b.sel()
    b.row("SBI traffic")
    b.panel("Requests by operation", [(rate("sbi_requests_total", s, "operation"), "{{operation}}")],
            unit="reqps", stack=True)
    b.panel("Answers by status class",
            [(rate("sbi_requests_total", s, "status_class"), "{{status_class}}")], unit="reqps",
            stack=True)
    b.panel("Errors by cause", [(rate("sbi_problems_total", s, "cause"), "{{cause}}")],
            unit="reqps", stack=True,
            description="Answers carrying a ProblemDetails (TS 29.571), by its cause.")
    b.panel("Errors by operation and cause",
            [(rate("sbi_problems_total", s, "operation, cause"), "{{operation}} {{cause}}")],
            unit="reqps")
    b.row("SBI latency")
    for q in ("0.5", "0.99"):
        b.panel(f"p{q[2:] if q != '0.5' else '50'} by operation (answered)",
                [(quantile(q, "sbi_request_duration_seconds", s, "operation"), "{{operation}}")],
                unit="s")
    b.panel("p99 by operation, own time (less waits on other NFs)",
            [(quantile(0.99, "sbi_request_own_duration_seconds", s, "operation"), "{{operation}}")],
            unit="s")
    b.panel("p50 / p99 / p999, all operations",
            [(quantile(q, "sbi_request_duration_seconds", s), f"p{n}")
             for q, n in ((0.5, "50"), (0.99, "99"), (0.999, "999"))], unit="s")


def overload(b):
    s = b.sel()
    b.row("Overload and connections")
    b.panel("In flight and the limit in force",
            [(f"sum by (instance) (sbi_requests_in_flight{s})", "in flight {{instance}}"),
             (f"sum by (instance) (sbi_in_flight_limit{s})", "limit {{instance}}")],
            description="The limit follows latency (target_latency_ms); at it, connections "
                        "stop reading (backpressure).")
    b.panel("Shed (503 NF_CONGESTION), held reads, rate limited",
            [(rate("sbi_requests_shed_total", s), "shed/s"),
             (rate("sbi_reads_held_total", s), "reads held/s"),
             (rate("sbi_rate_limited_total", s), "429/s")], unit="ops")
    b.panel("Connections open", [(f"sum by (instance) (sbi_connections_open{s})", "{{instance}}")])
    b.panel("Connections refused, accept errors",
            [(rate("sbi_connections_refused_total", s), "refused/s"),
             (rate("sbi_accept_errors_total", s), "accept errors/s")], unit="ops")


def store(b):
    s = b.sel()
    b.row("Store")
    b.panel("Commit latency",
            [(quantile(q, "store_commit_duration_seconds", s), f"p{n}")
             for q, n in ((0.5, "50"), (0.99, "99"), (0.999, "999"))], unit="s",
            description="One group-commit COMMIT of the embedded store (WAL append and fsync).")
    b.panel("Commits and writes",
            [(rate("store_commits_total", s), "commits/s"), (rate("store_writes_total", s), "writes/s"),
             (rate("store_failed_writes_total", s), "failed writes/s")], unit="ops")
    b.panel("Writes per commit",
            [(f'{rate("store_writes_total", s)} / {rate("store_commits_total", s)}', "writes/commit")])
    b.panel("Queues", [(f"sum by (instance) (store_queued_writes{s})", "writes {{instance}}"),
                       (f"sum by (instance) (store_queued_reads{s})", "reads {{instance}}")])


def process(b):
    s = b.sel()
    b.row("Process")
    b.panel("CPU (cores)", [(f"sum by (instance) (rate(process_cpu_seconds_total{s}[$__rate_interval]))",
                             "{{instance}}")])
    b.panel("Resident memory", [(f"sum by (instance) (process_resident_memory_bytes{s})", "{{instance}}")],
            unit="bytes")


def diameter(b, what):
    s = b.sel()
    b.row(f"Diameter ({what})")
    b.panel("Answers by application, command and result class",
            [(rate("diameter_answers_total", s, "application, command, result_class"),
              "{{application}}/{{command}} {{result_class}}")], unit="ops", stack=True)
    b.panel("p99 by command",
            [(quantile(0.99, "diameter_request_duration_seconds", s, "application, command"),
              "{{application}}/{{command}}")], unit="s")
    b.panel("Peers by state", [(f"sum by (state) (diameter_peers{s})", "{{state}}")], stack=True)
    b.panel("Configured peers open", [(f"min by (peer) (diameter_peer_open{s})", "{{peer}}")],
            description="1 while the configured peer's connection is open.")
    b.panel("Refused before CER, oversize messages",
            [(rate("diameter_connections_refused_total", s, "reason"), "refused {{reason}}"),
             (rate("diameter_oversize_messages_total", s, "kind"), "oversize {{kind}}"),
             (f"sum(diameter_connections_awaiting_cer{s})", "awaiting CER")], unit="ops")


def copies(b):
    s = b.sel()
    b.row("Message copies to the Data Director (when [<nf>.copy] is on)")
    b.panel("Copies by trigger point", [(rate("dd_copies_total", s, "trigger"), "{{trigger}}")],
            unit="ops", stack=True)
    b.panel("Copies dropped by reason", [(rate("dd_copies_dropped_total", s, "reason"), "{{reason}}")],
            unit="ops")
    b.panel("Batches by result", [(rate("dd_copy_batches_total", s, "result"), "{{result}}")], unit="ops")
    b.panel("Copy buffer", [(f"sum by (instance) (dd_copy_buffer_bytes{s})", "{{instance}}")],
            unit="bytes")


def nf_board(uid, title, nf, description, extra=None, dia=None):
    b = Board(uid, title, nf, description)
    overview(b)
    sbi(b)
    overload(b)
    if extra:
        extra(b)
    if dia:
        diameter(b, dia)
    store(b)
    copies(b)
    process(b)
    return b


def udr_extra(b):
    s = b.sel()
    b.row("Policy data notifications (N36)")
    b.panel("Notifications", [(rate("udr_policy_data_notifications_recorded_total", s), "recorded/s"),
                              (rate("udr_policy_data_notifications_delivered_total", s), "delivered/s"),
                              (rate("udr_policy_data_notification_retries_total", s), "retries/s"),
                              (rate("udr_policy_data_notifications_dropped_total", s), "dropped/s")],
            unit="ops")


def pcf_extra(b):
    s = b.sel()
    b.row("Policy")
    b.panel("Policy version in force", [(f"max by (project, version) (policy_project_info{s})",
                                         "{{project}} {{version}}")], kind="table", width=8)
    b.panel("Decisions and fallbacks",
            [(rate("policy_evaluations_total", s, "version"), "evaluations {{version}}"),
             (rate("policy_fallbacks_total", s, "version"), "fallbacks {{version}}")], unit="ops",
            width=8)
    b.panel("Deploys", [(f"sum by (outcome) (increase(policy_deploys_total{s}[$__range]))",
                         "{{outcome}}")], kind="stat", width=8)
    b.row("PCF work with other NFs")
    b.panel("Policy data reads at the UDR", [(rate("pcf_policy_data_reads_total", s, "result"), "{{result}}")],
            unit="ops")
    b.panel("Bindings at the BSF",
            [(rate("pcf_bsf_bindings_total", s, "operation, result"), "{{operation}} {{result}}")],
            unit="ops")
    b.panel("UpdateNotify to the SMF and AMF",
            [(rate("pcf_sm_update_notify_total", s, "result"), "SM {{result}}"),
             (rate("pcf_am_update_notify_total", s, "result"), "AM {{result}}")], unit="ops")
    b.panel("App sessions (N5/Rx)", [(rate("pcf_app_sessions_total", s, "operation"), "{{operation}}")],
            unit="ops")
    b.panel("Policy data cache", [(rate("pcf_policy_data_cache_hits_total", s), "hits/s"),
                                  (f"sum(pcf_policy_data_cached_subscribers{s})", "cached subscribers")])
    b.panel("Session audit", [(rate("pcf_audit_checks_total", s, "result"), "{{result}}")], unit="ops")


def dd_extra(b):
    s = b.sel()
    b.row("Ingest and MAIN")
    b.panel("Copies ingested by NF topic", [(rate("dd_ingest_copies_total", s, "topic"), "{{topic}}")],
            unit="ops", stack=True)
    b.panel("Ingest bytes and batches", [(rate("dd_ingest_bytes_total", s), "bytes/s"),
                                         (rate("dd_ingest_requests_total", s), "batches/s")])
    b.panel("Ingest refused (503, queue full)", [(rate("dd_ingest_refused_total", s), "batches/s"),
                                                 (rate("dd_ingest_refused_bytes_total", s), "bytes/s")])
    b.panel("Aggregated into MAIN by topic", [(rate("dd_aggregated_total", s, "topic"), "{{topic}}")],
            unit="ops", stack=True)
    b.panel("Lost to retention, unresolved MAIN records",
            [(rate("dd_retention_skipped_total", s, "topic, consumer"), "skipped {{topic}} {{consumer}}"),
             (rate("dd_main_unresolved_total", s, "topic, consumer"), "unresolved {{topic}} {{consumer}}")],
            unit="ops")
    b.row("Feeds")
    b.panel("Messages by feed and result",
            [(rate("dd_feed_messages_total", s, "feed, result"), "{{feed}} {{result}}")], unit="ops")
    b.panel("Bytes by feed", [(rate("dd_feed_bytes_total", s, "feed"), "{{feed}}")], unit="Bps")
    b.panel("Feed lag: copy to delivery p99 (end to end)",
            [(quantile(0.99, "dd_feed_e2e_seconds", s, "feed"), "{{feed}}")], unit="s")
    b.panel("Batch delivery p99", [(quantile(0.99, "dd_feed_delivery_seconds", s, "feed"), "{{feed}}")],
            unit="s")
    b.panel("Delivery errors by kind",
            [(rate("dd_feed_errors_total", s, "feed, endpoint, kind"), "{{feed}} {{endpoint}} {{kind}}")],
            unit="ops")


def bench_board():
    b = Board("fivecore-bench", "fivecore bench (the kit's live run)", "bench",
              "What `fivecore bench --metrics-listen ADDR` serves while it runs: offered and "
              "answered rate, latency from the intended send time, and outcomes per procedure.")
    s = b.sel()
    b.row("Run")
    b.panel("Target rate", [(f"sum(bench_target_rate{s})", "target/s")], unit="reqps", kind="stat",
            width=6)
    b.panel("Answered/s", [(rate("bench_requests_total", s), "answered/s")], unit="reqps",
            kind="stat", width=6)
    b.panel("Success ratio",
            [(f'{rate("bench_requests_total", b.sel(OK))} / {rate("bench_requests_total", s)}',
              "ok")], unit="percentunit", kind="stat", width=6)
    b.panel("Outstanding", [(f"sum(bench_outstanding{s})", "outstanding")], kind="stat", width=6)
    b.row("Per procedure")
    b.panel("Answers by procedure and outcome",
            [(rate("bench_requests_total", s, "procedure, outcome"), "{{procedure}} {{outcome}}")],
            unit="reqps", stack=True)
    b.panel("p99 by procedure (from the intended send time)",
            [(quantile(0.99, "bench_latency_seconds", s, "procedure"), "{{procedure}}")], unit="s")
    b.panel("p50 by procedure", [(quantile(0.5, "bench_latency_seconds", s, "procedure"), "{{procedure}}")],
            unit="s")
    b.panel("Outstanding and answered over time",
            [(f"sum(bench_outstanding{s})", "outstanding"),
             (rate("bench_requests_total", s), "answered/s")])
    b.row("The kit's process")
    b.panel("Generator CPU (cores)",
            [(f"sum(rate(process_cpu_seconds_total{s}[$__rate_interval]))", "cores")])
    b.panel("Generator RSS", [(f"sum(process_resident_memory_bytes{s})", "RSS")], unit="bytes")
    return b


def boards():
    return [
        nf_board("fivecore-nrf", "fivecore NRF", "nrf",
                 "NRF (TS 29.510): NF management, discovery, access tokens."),
        nf_board("fivecore-udr", "fivecore UDR", "udr",
                 "UDR (TS 29.504/29.505/29.519), SLF, 5G-EIR, provisioning and Diameter Sh.",
                 extra=udr_extra, dia="Sh"),
        nf_board("fivecore-bsf", "fivecore BSF", "bsf",
                 "BSF (TS 29.521) and its Diameter Rx proxy.", dia="Rx proxy"),
        nf_board("fivecore-pcf", "fivecore PCF / PCRF", "pcf",
                 "PCF (TS 29.512/29.507/29.525/29.514) and the PCRF's Gx, Rx, Sy, Sd.",
                 extra=pcf_extra, dia="Gx, Rx, Sy, Sd"),
        nf_board("fivecore-dd", "fivecore Data Director", "dd",
                 "Data Director: ingest, NF topics and MAIN, feeds.", extra=dd_extra),
        bench_board(),
    ]


def main():
    check = "--check" in sys.argv[1:]
    OUT.mkdir(parents=True, exist_ok=True)
    stale = []
    for b in boards():
        path = OUT / f"{b.uid}.json"
        text = json.dumps(b.json(), indent=2, sort_keys=True) + "\n"
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
    if stale:
        print("out of date (run scripts/gen-dashboards.py): " + ", ".join(stale), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
