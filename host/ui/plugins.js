// Handlers: those deployed into the database (their active version, every version, the
// releases, a rollback) and the files of the server's plugins directory; and a form that deploys
// a component. Deploys and rollbacks need a token with the deploy role.

import { api, act } from './app.js';
import { h, fill, put, table, section, when, duration, number, bytes, button } from './view.js';

const path = (name) => encodeURIComponent(name);
const short = (digest) => h('code', { title: digest }, digest.slice(0, 12));

/** The handlers, and the deploy form. */
export function list(main) {
  const body = h('div', { id: 'page-body' });
  // The form stays out of what each refresh redraws, so what was chosen is kept.
  put(main, h('h1', {}, 'Plugins'),
    h('p', { class: 'hint' }, 'The handlers queueing accepts: deployed into the database (for every worker on every machine), or files of this server’s plugins directory. Checked from their types; nothing is compiled here. Grants show names only.'),
    body, section('Deploy a handler',
      h('p', { class: 'hint' }, 'Checked as a worker checks a plugin, stored once by its sha256 and made the handler’s active version: every worker switches within a second, once it has compiled it. Needs a token with the deploy role.'),
      deployForm()));
  return {
    async refresh(current) {
      const { plugins } = await api('GET', '/plugins');
      if (current()) fill(body, pluginTable(plugins));
    },
  };
}

function pluginTable(list) {
  return table([
    { label: 'Handler', cell: (p) => h('a', { href: `#/tasks?handler=${path(p.name)}` }, p.name) },
    { label: 'From', cell: source },
    { label: 'Queueable', cell: (p) => (p.ok ? h('span', { class: 'badge success' }, 'ok')
      : [h('span', { class: 'badge error' }, 'broken'), ' ', h('span', { class: 'error-text' }, p.error || '')]) },
    { label: 'sha256', cell: (p) => (p.sha256 ? short(p.sha256) : '—') },
    { label: 'Workers', cell: (p) => `${number(p.served_by)}${p.compiled ? ' (compiled here)' : ''}`, cls: 'num' },
    { label: 'At once', cell: (p) => number(p.max_running), cls: 'num' },
    { label: 'Limits', cell: (p) => (p.limits ? h('ul', { class: 'plain' },
      h('li', {}, `fuel ${number(p.limits.fuel)}`), h('li', {}, `memory ${bytes(p.limits.memory_bytes)}`),
      h('li', {}, `time ${duration(p.limits.timeout_ms)}`)) : '—') },
    { label: 'Grants', cell: (p) => grants(p.grants) },
  ], list, { key: (p) => p.name, empty: 'No handler: deploy one below, or put NAME.wasm in the plugins directory.' });
}

/** Deployed (with a link to its versions) or the directory's file. */
function source(p) {
  if (p.source !== 'deployed') return h('span', { class: 'muted' }, 'directory');
  return h('a', { href: `#/plugins/${path(p.name)}`, 'data-action': 'versions' }, `deployed, release ${p.release}`);
}

function grants(g) {
  if (!g) return '—';
  const items = [['env', g.env], ['dir', g.dirs], ['http', g.http], ['socket', g.sockets]]
    .flatMap(([kind, names]) => names.map((n) => h('li', {}, h('span', { class: 'muted' }, `${kind} `), n)));
  return items.length ? h('ul', { class: 'plain' }, items) : 'none';
}

/** Name, component and manifest: posted as a form, as `curl -F` would. */
function deployForm() {
  const name = h('input', { name: 'name', 'data-field': 'name', autocomplete: 'off', size: 20,
    placeholder: 'handler (the file’s name)', pattern: '[A-Za-z0-9_\\-]+', title: 'Letters, digits, - and _; empty: the component file’s name' });
  const component = h('input', { type: 'file', name: 'component', 'data-field': 'component', accept: '.wasm', required: true });
  const manifest = h('input', { type: 'file', name: 'manifest', 'data-field': 'manifest', accept: '.toml' });
  const submit = h('button', { type: 'submit' }, 'Deploy');
  const form = h('form', { id: 'deploy-form', class: 'filters' },
    h('label', {}, 'Component ', component), h('label', {}, 'Manifest ', manifest), name, submit);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const file = component.files[0];
    if (submit.disabled || !file) return;
    const handler = name.value.trim() || file.name.replace(/\.wasm$/, '');
    const sent = new FormData();
    sent.append('component', file);
    if (manifest.files[0]) sent.append('manifest', manifest.files[0]);
    submit.disabled = true;
    try {
      await act((a) => (a.release === null
        ? `${a.handler} ${a.digest.slice(0, 12)} is active already: nothing changed.`
        : `Deployed ${a.handler} ${a.digest.slice(0, 12)} (${bytes(a.size)}), release ${a.release}.`),
      () => api('POST', `/plugins/${path(handler)}/versions`, sent).then((a) => { form.reset(); return a; }));
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

/** One deployed handler: its versions (roll back to any) and its releases. */
export function versions(main, name) {
  const body = h('div', { id: 'page-body' });
  put(main, h('p', {}, h('a', { href: '#/plugins' }, '← Plugins')), h('h1', {}, name),
    h('p', { class: 'hint' }, 'Its versions, the newest deployed first. Roll back makes one active again, with a release of its own; pinned: unfinished tasks that run that version whatever is active. Versions neither active nor pinned go after the overseer’s retention.'),
    body);
  return {
    async refresh(current) {
      const answer = await api('GET', `/plugins/${path(name)}/versions`);
      if (!current()) return;
      fill(body, versionTable(name, answer.versions),
        section('Releases', releaseTable(answer.releases)));
    },
  };
}

function versionTable(name, list) {
  return table([
    { label: '', cell: (v) => (v.active ? h('span', { class: 'badge success' }, 'active') : '') },
    { label: 'Version', cell: (v) => short(v.digest) },
    { label: 'Size', cell: (v) => bytes(v.size), cls: 'num' },
    { label: 'Deployed', cell: (v) => [when(v.deployed_on), ' ', h('span', { class: 'muted' }, v.deployed_by)] },
    { label: 'Last active', cell: (v) => when(v.released_on) },
    { label: 'Pinned', cell: (v) => number(v.pinned), cls: 'num' },
    { label: '', cell: (v) => (v.active ? '' : rollbackButton(name, v.digest)) },
  ], list, { key: (v) => v.digest, rowClass: (v) => (v.active ? 'active' : undefined) });
}

function rollbackButton(name, digest) {
  return button('Roll back to it', async () => {
    if (!confirm(`Make ${name} ${digest.slice(0, 12)} active again? Every worker switches within a second.`)) return;
    await act((r) => `${name} rolled back to ${r.digest.slice(0, 12)}, release ${r.id}.`,
      () => api('POST', `/plugins/${path(name)}/rollback?to=${digest}`));
  }, { 'data-action': 'rollback' });
}

function releaseTable(list) {
  return table([
    { label: 'Release', cell: (r) => `${r.id}`, cls: 'num' },
    { label: 'When', cell: (r) => when(r.released_on) },
    { label: 'Action', cell: (r) => r.action },
    { label: 'Version', cell: (r) => short(r.digest) },
    { label: 'By', cell: (r) => r.released_by },
  ], list, { key: (r) => r.id });
}
