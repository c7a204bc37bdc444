// Live charts from the NFs' own /metrics (Prometheus text), sampled by the browser every 2 s:
// rates and mean latency are differences between two samples, as Prometheus' rate() would be.
import { h } from 'preact';
import { useState, useEffect, useRef } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';
import { api, nf } from './app.js';

const html = htm.bind(h);
const NFS = ['nrf', 'udr', 'bsf', 'pcf', 'dd'];
const COLORS = { nrf: '#1f6feb', udr: '#8250df', bsf: '#1a7f37', pcf: '#bf8700', dd: '#cf222e' };
const POINTS = 90;
const EVERY_MS = 2000;

// name{labels} value lines into [{name, labels, value}].
export function parsePrometheus(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

function totals(samples) {
  let req = 0, err = 0, sum = 0, count = 0;
  for (const s of samples) {
    if (s.name === 'sbi_requests_total') {
      req += s.value;
      if (s.labels.status_class === '4xx' || s.labels.status_class === '5xx') err += s.value;
    } else if (s.name === 'sbi_request_duration_seconds_sum') sum += s.value;
    else if (s.name === 'sbi_request_duration_seconds_count') count += s.value;
  }
  return { req, err, sum, count };
}

function Chart({ title, id, data, series, unit }) {
  const el = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const opts = { title, width: 380, height: 200, scales: { x: { time: true } },
      series: [{}, ...series.map((s) => ({ label: s, stroke: COLORS[s], width: 2 }))],
      axes: [{}, { label: unit, size: 60 }] };
    plot.current = new uPlot(opts, data, el.current);
    return () => plot.current.destroy();
  }, [series.join(',')]);
  useEffect(() => { if (plot.current) plot.current.setData(data); }, [data]);
  return html`<div class="chart" id=${id} ref=${el}></div>`;
}

export function MetricsPage() {
  const [state, setState] = useState({ t: [], nfs: {}, shown: [] });
  const last = useRef({});
  useEffect(() => {
    let stop = false, timer;
    const tick = async () => {
      const now = Date.now() / 1000;
      const got = await Promise.all(NFS.map(async (n) => {
        const r = await api('GET', nf(n, 'metrics'), undefined, { accept: 'text/plain' });
        return [n, r.ok ? totals(parsePrometheus(r.text)) : null];
      }));
      setState((s) => {
        const t = [...s.t, now].slice(-POINTS);
        const nfs = { ...s.nfs };
        for (const [n, tot] of got) {
          const prev = last.current[n];
          const series = nfs[n] || { rate: [], err: [], lat: [] };
          let rate = null, err = null, lat = null;
          if (tot && prev) {
            const dt = now - prev.at;
            rate = (tot.req - prev.req) / dt;
            err = (tot.err - prev.err) / dt;
            const dc = tot.count - prev.count;
            lat = dc > 0 ? ((tot.sum - prev.sum) / dc) * 1000 : null;
          }
          if (tot) last.current[n] = { ...tot, at: now };
          nfs[n] = { rate: [...series.rate, rate].slice(-POINTS), err: [...series.err, err].slice(-POINTS), lat: [...series.lat, lat].slice(-POINTS), up: !!tot };
        }
        return { t, nfs, shown: NFS.filter((n) => nfs[n] && nfs[n].up) };
      });
      if (!stop) timer = setTimeout(tick, EVERY_MS);
    };
    tick();
    return () => { stop = true; clearTimeout(timer); };
  }, []);
  const data = (k) => [state.t, ...state.shown.map((n) => {
    const s = state.nfs[n][k];
    return [...Array(state.t.length - s.length).fill(null), ...s];
  })];
  return html`<div><h2>Live metrics</h2>
    <p class="muted">From each NF's /metrics every ${EVERY_MS / 1000} s: SBI requests per second, 4xx/5xx answers per second, mean answer time.</p>
    ${state.shown.length === 0 ? html`<p class="muted">Waiting for the first samples…</p>` : html`<div class="charts" id="charts">
      <${Chart} id="chart-rate" title="Requests / s" unit="req/s" series=${state.shown} data=${data('rate')} />
      <${Chart} id="chart-errors" title="Errors (4xx, 5xx) / s" unit="err/s" series=${state.shown} data=${data('err')} />
      <${Chart} id="chart-latency" title="Mean latency" unit="ms" series=${state.shown} data=${data('lat')} />
    </div>`}</div>`;
}

// Messages per second each Data Director feed delivered, from dd_feed_messages_total.
export function FeedRates() {
  const [rows, setRows] = useState(null);
  const last = useRef(null);
  useEffect(() => {
    let stop = false, timer;
    const tick = async () => {
      const r = await api('GET', nf('dd', 'metrics'), undefined, { accept: 'text/plain' });
      if (r.ok) {
        const now = Date.now() / 1000;
        const per = {};
        for (const s of parsePrometheus(r.text)) {
          if (s.name !== 'dd_feed_messages_total') continue;
          const f = (per[s.labels.feed] = per[s.labels.feed] || { delivered: 0, failed: 0, rejected: 0 });
          f[s.labels.result] = (f[s.labels.result] || 0) + s.value;
        }
        const prev = last.current;
        setRows(Object.entries(per).map(([feed, v]) => {
          const p = prev && prev.per[feed];
          const dt = prev ? now - prev.at : 0;
          return { feed, total: v.delivered, rate: p && dt > 0 ? (v.delivered - p.delivered) / dt : null, failed: v.failed + v.rejected };
        }));
        last.current = { at: now, per };
      }
      if (!stop) timer = setTimeout(tick, EVERY_MS);
    };
    tick();
    return () => { stop = true; clearTimeout(timer); };
  }, []);
  if (rows === null) return html`<p class="muted">Reading the Data Director's metrics…</p>`;
  if (rows.length === 0) return html`<p class="muted" id="feed-rates">No feed has delivered anything yet.</p>`;
  return html`<table id="feed-rates"><thead><tr><th>Feed</th><th>Delivered</th><th>Messages/s</th><th>Failed or rejected</th></tr></thead><tbody>
    ${rows.map((r) => html`<tr><td>${r.feed}</td><td>${r.total}</td><td>${r.rate === null ? '…' : r.rate.toFixed(1)}</td><td>${r.failed}</td></tr>`)}</tbody></table>`;
}
