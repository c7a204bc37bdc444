// The fivecore console: plain ES modules (Preact + htm, uPlot), no build step. Every read and
// change goes through /console/api, which forwards to the NFs' own REST APIs; what an NF
// refuses comes back as its own ProblemDetails and is shown as it is.
import { h, render } from 'preact';
import { useState, useEffect, useRef, useCallback } from 'preact/hooks';
import htm from 'htm';
import { MetricsPage, FeedRates } from './metrics.js';

export const html = htm.bind(h);

let onUnauthorized = () => {};

// One request to the console's API. Changes carry the console's CSRF header.
export async function api(method, path, body, headers = {}) {
  const hd = { accept: 'application/json, application/problem+json', ...headers };
  if (method !== 'GET' && method !== 'HEAD') hd['x-fivecore-console'] = '1';
  let payload;
  if (body !== undefined) {
    hd['content-type'] = hd['content-type'] || 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const r = await fetch(path, { method, headers: hd, body: payload, credentials: 'same-origin' });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  const ct = r.headers.get('content-type') || '';
  if (r.status === 401 && path !== '/console/api/login') onUnauthorized();
  return { status: r.status, ok: r.ok, json, text, etag: r.headers.get('etag'),
    problem: ct.startsWith('application/problem+json') ? (json || { status: r.status }) : null };
}

export const nf = (name, path) => `/console/api/nf/${name}/${path}`;

// A ProblemDetails as the NF (or the console) sent it.
export function Problem({ p, id }) {
  if (!p) return null;
  return html`<div class="problem" id=${id}>
    <div><b>${p.status} ${p.title || ''}</b> <span class="cause">${p.cause || ''}</span></div>
    ${p.detail && html`<div class="detail">${p.detail}</div>`}
    ${p.invalidParams && html`<ul>${p.invalidParams.map((ip) =>
      html`<li><code>${ip.param}</code>${ip.reason ? ': ' + ip.reason : ''}</li>`)}</ul>`}
  </div>`;
}

// What a request answered: its problem, or a short success line.
function Outcome({ r, id, okText }) {
  if (!r) return null;
  if (r.problem || !r.ok) return html`<${Problem} id=${id} p=${r.problem || { status: r.status, detail: r.text }} />`;
  return html`<div class="ok" id=${id}>${okText || `${r.status} OK`}</div>`;
}

function Login({ onIn }) {
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [res, setRes] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    const r = await api('POST', '/console/api/login', { name, password });
    if (r.ok) onIn(r.json); else setRes(r);
  };
  return html`<form class="login section" id="login-form" onSubmit=${submit}>
    <h2>fivecore console</h2>
    <label>User <input id="login-name" autocomplete="username" value=${name} onInput=${(e) => setName(e.target.value)} /></label>
    <label>Password <input id="login-password" type="password" autocomplete="current-password" value=${password} onInput=${(e) => setPassword(e.target.value)} /></label>
    <button id="login-submit" type="submit">Log in</button>
    <${Problem} id="login-error" p=${res && res.problem} />
  </form>`;
}

function usePoll(fn, ms, deps = []) {
  useEffect(() => {
    let stop = false;
    let timer;
    const tick = async () => {
      try { await fn(); } finally { if (!stop) timer = setTimeout(tick, ms); }
    };
    tick();
    return () => { stop = true; clearTimeout(timer); };
  }, deps);
}

// Every profile the NRF holds, with its status, refreshed every 2 s.
function Registry() {
  const [rows, setRows] = useState(null);
  const [err, setErr] = useState(null);
  usePoll(async () => {
    const list = await api('GET', nf('nrf', 'nnrf-nfm/v1/nf-instances'));
    if (!list.ok) { setErr(list); return; }
    const items = (list.json && list.json._links && list.json._links.item) || [];
    const ids = items.map((i) => i.href.split('/').pop());
    const profiles = await Promise.all(ids.map(async (id) => {
      const r = await api('GET', nf('nrf', `nnrf-nfm/v1/nf-instances/${encodeURIComponent(id)}`));
      return r.ok ? r.json : { nfInstanceId: id, nfStatus: `(${r.status})` };
    }));
    profiles.sort((a, b) => (a.nfType || '').localeCompare(b.nfType || '') || a.nfInstanceId.localeCompare(b.nfInstanceId));
    setErr(null);
    setRows(profiles);
  }, 2000);
  const services = (p) => (p.nfServices || Object.values(p.nfServiceList || {})).map((s) => s.serviceName).join(', ');
  return html`<section><h2>NF registry</h2>
    <${Outcome} r=${err} id="registry-error" />
    ${rows === null ? html`<p class="muted">Loading…</p>` : html`
    <table id="nf-registry"><thead><tr><th>Type</th><th>Instance</th><th>Status</th><th>Addresses</th><th>Services</th><th>Heartbeat</th></tr></thead>
    <tbody>${rows.map((p) => html`<tr data-nf-type=${p.nfType} data-nf-instance=${p.nfInstanceId}>
      <td>${p.nfType}</td><td><code>${p.nfInstanceId}</code></td>
      <td class=${'status-' + p.nfStatus}>${p.nfStatus}</td>
      <td>${[...(p.ipv4Addresses || []), ...(p.ipv6Addresses || []), p.fqdn].filter(Boolean).join(', ')}</td>
      <td>${services(p)}</td><td>${p.heartBeatTimer ? p.heartBeatTimer + ' s' : ''}</td></tr>`)}
    </tbody></table>
    <p class="muted">${rows.length} profile(s), refreshed every 2 s.</p>`}
  </section>`;
}

const BINDING_QUERY = ['ipv4Addr', 'ipDomain', 'ipv6Prefix', 'macAddr48', 'dnn', 'snssai', 'supi', 'gpsi'];

// Nbsf_Management discovery with its own query parameters, and the Rel-17 UE bindings.
function Bindings() {
  const [q, setQ] = useState({});
  const [res, setRes] = useState(null);
  const query = (keys) => keys.filter((k) => q[k]).map((k) => `${k}=${encodeURIComponent(q[k])}`).join('&');
  const search = async (e) => {
    e.preventDefault();
    setRes({ kind: 'pcf', r: await api('GET', nf('bsf', `nbsf-management/v1/pcfBindings?${query(BINDING_QUERY)}`)) });
  };
  const ueBindings = async () => {
    setRes({ kind: 'ue', r: await api('GET', nf('bsf', `nbsf-management/v1/pcf-ue-bindings?${query(['supi', 'gpsi'])}`)) });
  };
  let body = null;
  if (res) {
    const r = res.r;
    if (r.status === 204) body = html`<p id="binding-none">No binding matches.</p>`;
    else if (!r.ok) body = html`<${Problem} id="binding-error" p=${r.problem || { status: r.status, detail: r.text }} />`;
    else {
      const list = Array.isArray(r.json) ? r.json : [r.json];
      body = html`<div id="binding-result">${list.map((b) => html`<table class="binding">
        ${Object.entries(b).map(([k, v]) => html`<tr><th>${k}</th><td><code>${typeof v === 'string' ? v : JSON.stringify(v)}</code></td></tr>`)}
      </table>`)}</div>`;
    }
  }
  return html`<section><h2>BSF bindings</h2>
    <form class="form" id="binding-form" onSubmit=${search}>
      ${BINDING_QUERY.map((k) => html`<label>${k}<input id=${'b-' + k} value=${q[k] || ''} onInput=${(e) => setQ({ ...q, [k]: e.target.value })} /></label>`)}
      <button id="binding-search" type="submit">Find binding</button>
      <button class="plain" id="binding-ue" type="button" onClick=${ueBindings}>PCF for UE bindings</button>
    </form>${body}</section>`;
}

// Load, edit and save one JSON resource of the UDR's provisioning API.
function Editor({ id, title, keyLabel, path, createPath, template, readOnly }) {
  const [key, setKey] = useState('');
  const [text, setText] = useState('');
  const [etag, setEtag] = useState(null);
  const [exists, setExists] = useState(false);
  const [res, setRes] = useState(null);
  const load = async (e) => {
    if (e) e.preventDefault();
    const r = await api('GET', nf('udr', path(encodeURIComponent(key))));
    if (r.ok) { setText(JSON.stringify(r.json, null, 2)); setEtag(r.etag); setExists(true); setRes(null); }
    else {
      setExists(false); setEtag(null);
      if (r.status === 404) setText(JSON.stringify(template(key), null, 2));
      setRes(r);
    }
  };
  const save = async () => {
    const headers = etag ? { 'if-match': etag } : {};
    const r = exists || !createPath
      ? await api('PUT', nf('udr', path(encodeURIComponent(key))), text, headers)
      : await api('POST', nf('udr', createPath), text);
    setRes({ ...r, saved: true });
    if (r.ok) { setEtag(r.etag); setExists(true); if (r.json) setText(JSON.stringify(r.json, null, 2)); }
  };
  const del = async () => {
    const r = await api('DELETE', nf('udr', path(encodeURIComponent(key))));
    setRes({ ...r, saved: true });
    if (r.ok) { setExists(false); setEtag(null); }
  };
  const outcome = res && (res.problem || !res.ok)
    ? (res.status === 404 && !res.saved
      ? html`<p class="muted" id=${id + '-result'}>Not provisioned: edit the template and save to create it.</p>`
      : html`<${Problem} id=${id + '-result'} p=${res.problem || { status: res.status, detail: res.text }} />`)
    : res && html`<div class="ok" id=${id + '-result'}>${res.status} ${res.status === 201 ? 'created' : res.status === 204 ? 'done' : 'saved'}</div>`;
  return html`<section id=${id}><h3>${title}</h3>
    <form class="form" onSubmit=${load}>
      <label>${keyLabel}<input id=${id + '-key'} value=${key} onInput=${(e) => setKey(e.target.value)} /></label>
      <button id=${id + '-load'} type="submit">Load</button>
    </form>
    <textarea id=${id + '-json'} rows="12" value=${text} onInput=${(e) => setText(e.target.value)}></textarea>
    <div><button id=${id + '-save'} type="button" disabled=${!key || readOnly} onClick=${save}>Save</button>
      <button id=${id + '-delete'} class="danger" type="button" disabled=${!exists || readOnly} onClick=${del}>Delete</button>
      ${etag && html`<span class="muted">ETag ${etag}</span>`}</div>
    ${outcome}
  </section>`;
}

function Subscribers({ me }) {
  const ro = me.role !== 'admin';
  return html`<div><h2>Subscribers</h2>
    ${ro && html`<p class="muted">Read-only: the UDR will not be asked to change anything.</p>`}
    <${Editor} id="policy" title="Policy data (UDR)" keyLabel="ueId (imsi-…)" readOnly=${false}
      path=${(k) => `udr-prov/v1/policy-data/ues/${k}`}
      template=${() => ({ amData: { subscCats: ['gold'] } })} />
    <${Editor} id="slf" title="SLF entry" keyLabel="subscriberId (imsi-…, msisdn-…)" readOnly=${false}
      path=${(k) => `udr-prov/v1/slf-entries/${k}`} createPath="udr-prov/v1/slf-entries"
      template=${(k) => ({ subscriberIds: [k], nfGroupIds: { UDM: 'udm-group-1' } })} />
    <${Editor} id="eir" title="5G-EIR status" keyLabel="IMEI (14 digits)" readOnly=${false}
      path=${(k) => `udr-prov/v1/eir/imeis/${k}`} createPath="udr-prov/v1/eir/imeis"
      template=${(k) => ({ imei: k, status: 'BLACKLISTED' })} />
  </div>`;
}

// Policy projects: the version in force, the versions API when the PCF has it, and deploy.
function Policy() {
  const [project, setProject] = useState(null);
  const [versions, setVersions] = useState(null);
  const [res, setRes] = useState(null);
  const [dir, setDir] = useState('');
  const [detail, setDetail] = useState(null);
  const refresh = useCallback(async () => {
    setProject(await api('GET', nf('pcf', 'policy-admin/v1/project')));
    setVersions(await api('GET', nf('pcf', 'policy-admin/v1/versions')));
  }, []);
  useEffect(() => { refresh(); }, []);
  const act = async (method, path, body, label) => {
    const r = await api(method, nf('pcf', path), body);
    setRes({ ...r, label });
    await refresh();
    return r;
  };
  const deploy = (e) => { e.preventDefault(); act('POST', 'policy-admin/v1/project/deploy', dir ? { dir } : undefined, 'deployed'); };
  const show = async (kind, r) => setDetail({ kind, r });
  const active = versions && versions.ok && Array.isArray(versions.json) ? versions.json.find((v) => v.active) : null;
  const p = project && project.ok ? project.json : null;
  return html`<div><h2>Policy projects</h2>
    <section id="policy-project"><h3>In force</h3>
      ${project && !project.ok && html`<${Problem} p=${project.problem} />`}
      ${p && html`<table><tr><th>Project</th><td id="project-name">${p.name}</td></tr>
        <tr><th>Version</th><td id="project-version">${p.version}</td></tr>
        ${p.dir && html`<tr><th>Directory</th><td><code>${p.dir}</code></td></tr>`}
        ${Object.entries(p).filter(([k]) => !['name', 'version', 'dir'].includes(k)).map(([k, v]) =>
          html`<tr><th>${k}</th><td><code>${typeof v === 'string' ? v : JSON.stringify(v)}</code></td></tr>`)}</table>`}
    </section>
    <section id="policy-versions"><h3>Versions</h3>
      ${versions && !versions.ok && html`<p class="muted" id="versions-unavailable">This PCF has no versions API (${versions.status}); deploy a project directory below.</p>`}
      ${versions && versions.ok && html`<table id="versions"><thead><tr><th>Id</th><th>Project version</th><th>Name</th><th>Deployed</th><th></th></tr></thead><tbody>
        ${versions.json.map((v) => html`<tr data-version=${v.id}><td>${v.id}</td><td>${v.projectVersion}</td><td>${v.name}</td><td>${v.deployedAt || ''}</td>
          <td>${v.active ? html`<span class="badge">active</span>` : html`
            <button class="activate" onClick=${() => act('POST', `policy-admin/v1/versions/${encodeURIComponent(v.id)}/activate`, undefined, 'activated')}>Activate</button>`}
            <button class="plain test" onClick=${async () => show('test', await api('POST', nf('pcf', `policy-admin/v1/versions/${encodeURIComponent(v.id)}/test`)))}>Test</button>
            ${active && !v.active && html`<button class="plain diff" onClick=${async () => show('diff', await api('GET', nf('pcf', `policy-admin/v1/versions/${encodeURIComponent(active.id)}/diff/${encodeURIComponent(v.id)}`)))}>Diff</button>`}
            <button class="plain files" onClick=${async () => show('files', await api('GET', nf('pcf', `policy-admin/v1/versions/${encodeURIComponent(v.id)}`)))}>Files</button></td></tr>`)}
      </tbody></table>
      <button id="rollback" class="danger" onClick=${() => act('POST', 'policy-admin/v1/rollback', undefined, 'rolled back')}>Roll back</button>`}
    </section>
    <section id="policy-deploy"><h3>Deploy a project directory</h3>
      <form class="form" onSubmit=${deploy}>
        <label>Directory on the PCF's host (empty: the one in force, again)<input id="deploy-dir" size="50" value=${dir} onInput=${(e) => setDir(e.target.value)} /></label>
        <button id="deploy-btn" type="submit">Check and deploy</button>
      </form>
    </section>
    <div id="policy-result">${res && html`<${Outcome} r=${res} id="policy-outcome" okText=${`${res.status}: ${res.label}`} />`}</div>
    ${detail && html`<section id="policy-detail"><${VersionDetail} d=${detail} /></section>`}
  </div>`;
}

function VersionDetail({ d }) {
  const r = d.r;
  if (!r.ok) return html`<${Problem} p=${r.problem || { status: r.status, detail: r.text }} />`;
  if (d.kind === 'test') {
    return html`<h3>Test run: ${r.json.passed} passed, ${r.json.failed} failed</h3><table>
      ${(r.json.cases || []).map((c) => html`<tr><td>${c.passed ? '✔' : '✘'}</td><td>${c.name}</td><td>${c.message || ''}</td></tr>`)}</table>`;
  }
  if (d.kind === 'diff') {
    return html`<h3>Diff</h3>${(r.json.files || []).map((f) => html`<h4>${f.path} <span class="muted">${f.status}</span></h4>
      <pre>${(f.unifiedDiff || '').split('\n').map((l) => html`<div class=${l.startsWith('+') ? 'diff-add' : l.startsWith('-') ? 'diff-del' : ''}>${l}</div>`)}</pre>`)}`;
  }
  return html`<h3>Files of ${r.json.id}</h3>${Object.entries(r.json.files || {}).map(([p, t]) => html`<h4>${p}</h4><pre>${t}</pre>`)}`;
}

// Data Director feeds: list, edit as JSON, and live delivery rates from its /metrics.
function Feeds({ me }) {
  const [feeds, setFeeds] = useState(null);
  const [text, setText] = useState('');
  const [res, setRes] = useState(null);
  const refresh = async () => setFeeds(await api('GET', nf('dd', 'dd-admin/v1/feeds')));
  useEffect(() => { refresh(); }, []);
  const edit = (f) => setText(JSON.stringify(f, null, 2));
  const save = async () => {
    let name = '';
    try { name = JSON.parse(text).name || ''; } catch (_) { name = ''; }
    const r = name
      ? await api('PUT', nf('dd', `dd-admin/v1/feeds/${encodeURIComponent(name)}`), text)
      : await api('POST', nf('dd', 'dd-admin/v1/feeds'), text);
    setRes(r);
    refresh();
  };
  const del = async (name) => { setRes(await api('DELETE', nf('dd', `dd-admin/v1/feeds/${encodeURIComponent(name)}`))); refresh(); };
  const list = feeds && feeds.ok && Array.isArray(feeds.json) ? feeds.json : [];
  return html`<div><h2>Data Director feeds</h2>
    <section>${feeds && !feeds.ok && html`<${Problem} p=${feeds.problem || { status: feeds.status, detail: feeds.text }} />`}
      <table id="feeds"><thead><tr><th>Name</th><th>Sink</th><th>Filter</th><th>Start</th><th></th></tr></thead><tbody>
      ${list.map((f) => html`<tr data-feed=${f.name}><td>${f.name}</td><td><code>${f.sink && f.sink.type}</code></td><td>${f.filter || ''}</td><td>${f.start || ''}</td>
        <td><button class="plain" onClick=${() => edit(f)}>Edit</button><button class="danger" disabled=${me.role !== 'admin'} onClick=${() => del(f.name)}>Delete</button></td></tr>`)}
      </tbody></table>${list.length === 0 && html`<p class="muted">No feed.</p>`}</section>
    <section><h3>Create or replace a feed</h3>
      <textarea id="feed-json" rows="10" placeholder='{"name": "f1", "sink": {"type": "tcp", "endpoints": ["127.0.0.1:9000"]}, "start": "latest"}' value=${text} onInput=${(e) => setText(e.target.value)}></textarea>
      <button id="feed-save" onClick=${save}>Save</button>
      <${Outcome} r=${res} id="feed-result" /></section>
    <section><h3>Live delivery rates</h3><${FeedRates} /></section>
  </div>`;
}

const PAGES = [
  ['registry', 'NF registry', Registry],
  ['bindings', 'Bindings', Bindings],
  ['subscribers', 'Subscribers', Subscribers],
  ['policy', 'Policy', Policy],
  ['feeds', 'DD feeds', Feeds],
  ['metrics', 'Metrics', MetricsPage],
];

function pageFromHash() {
  const k = location.hash.replace(/^#\/?/, '');
  return PAGES.find((p) => p[0] === k) ? k : 'registry';
}

function App() {
  const [me, setMe] = useState(undefined);
  const [page, setPage] = useState(pageFromHash());
  useEffect(() => {
    onUnauthorized = () => setMe(null);
    api('GET', '/console/api/session').then((r) => setMe(r.ok ? r.json : null));
    const onHash = () => setPage(pageFromHash());
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  if (me === undefined) return html`<p class="muted">Loading…</p>`;
  if (me === null) return html`<${Login} onIn=${setMe} />`;
  const logout = async () => { await api('POST', '/console/api/logout'); setMe(null); };
  const Page = PAGES.find((p) => p[0] === page)[2];
  return html`<div>
    <header><h1>fivecore console</h1>
      <nav>${PAGES.map(([k, label]) => html`<a id=${'nav-' + k} class=${k === page ? 'active' : ''} href=${'#/' + k}>${label}</a>`)}</nav>
      <span class="who" id="who">${me.name} (${me.role})</span>
      <button class="plain" id="logout" onClick=${logout}>Log out</button></header>
    <main id=${'page-' + page}><${Page} me=${me} /></main></div>`;
}

render(html`<${App} />`, document.getElementById('app'));
