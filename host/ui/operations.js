// What an operator runs the queue with: queues (pause, resume), flow-control limits (set, clear)
// and the keys sharing queues, schedules (pause, resume, trigger) and the live runners (handlers:
// plugins.js).

import { api, act } from './app.js';
import { h, fill, put, table, section, when, duration, number, button, taskLink, pausedSince, lag } from './view.js';

/** A page of one table, read from `path` and drawn by `draw(answer)`. */
function page(main, title, hint, path, draw) {
  const body = h('div', { id: 'page-body' });
  put(main, h('h1', {}, title), hint && h('p', { class: 'hint' }, hint), body);
  return {
    async refresh(current) {
      const answer = await api('GET', path);
      if (current()) fill(body, draw(answer));
    },
  };
}

const path = (name) => encodeURIComponent(name);

/** Pause or Resume, as `pausedOn` says, of `/{kind}/{name}`. */
function pauseButton(what, kind, name, pausedOn) {
  const verb = pausedOn ? 'resume' : 'pause';
  return button(pausedOn ? 'Resume' : 'Pause',
    () => act(`${what} ${name} ${verb}d.`, () => api('POST', `/${kind}/${path(name)}/${verb}`)), { 'data-action': verb });
}

export function queues(main) {
  return page(main, 'Queues', 'A paused queue keeps its tasks: workers start none of them until it is resumed; runs in flight end as usual. Held: due tasks its limits hold back now (see Limits).',
    '/queues', ({ queues: list }) => table([
      { label: 'Queue', cell: (q) => h('a', { href: `#/tasks?queue=${path(q.name)}` }, q.name) },
      { label: 'Due', cell: (q) => number(q.due), cls: 'num' },
      { label: 'Later', cell: (q) => number(q.later), cls: 'num' },
      { label: 'Running', cell: (q) => number(q.running), cls: 'num' },
      { label: 'Limit', cell: queueLimit, cls: 'num' },
      { label: 'Held', cell: (q) => number(q.held_back), cls: 'num' },
      { label: 'Lag', cell: lag, cls: 'num' },
      { label: 'Workers', cell: workers, cls: 'num' },
      { label: 'State', cell: (q) => pausedSince(q.paused_on) },
      { label: '', cell: (q) => pauseButton('Queue', 'queues', q.name, q.paused_on) },
    ], list, { key: (q) => q.name, empty: 'No queue has tasks yet.' }));
}

/** A queue's runs in flight at most, with its starts per period beside it when it has a rate. */
function queueLimit(q) {
  if (!q.rate_limit) return number(q.max_running);
  return [q.max_running === null ? '' : `${number(q.max_running)} · `, h('span', { title: 'starts per period' }, q.rate_limit)];
}

/** Live workers claiming from a queue; a warning when it has due tasks and none does. */
function workers(q) {
  if (q.served_by > 0 || q.due === 0 || q.paused_on) return number(q.served_by);
  return h('span', { class: 'badge unclaimed', title: `No live worker claims from ${q.name}: start one with --queues ${q.name}, or with none for every queue.` },
    'none claims it');
}

// The fields of a limit's change (`LimitChange` in host/src/model/limits.rs), as the form asks
// for them: whole numbers (at least `min`), but the rate, which is `N/PERIOD`.
const CHANGE = [
  { field: 'max_running', hint: 'max running', min: 1, title: 'Runs in flight at once, on all workers together (a queue, a handler)' },
  { field: 'rate_limit', hint: 'rate, e.g. 5/1s', title: 'Starts per period, on all workers together (a queue, a handler)' },
  { field: 'rate_burst', hint: 'burst', min: 0, title: 'With a rate: starts allowed at once beyond its pace' },
  { field: 'max_running_per_key', hint: 'max per key', min: 1, title: 'Runs in flight of each key at once (a queue)' },
  { field: 'rate_limit_per_key', hint: 'rate per key', title: 'Starts per period of each key, each paced apart (a queue)' },
  { field: 'rate_burst_per_key', hint: 'burst per key', min: 0, title: 'With a rate per key: starts each key may take at once beyond its pace' },
  { field: 'weight', hint: 'weight', min: 1, title: 'Turns to a weight-1 key’s one (a key)' },
  { field: 'fuel_per_turn', hint: 'fuel per turn', min: 1000000, title: 'The fuel a turn of a key buys: each key’s turns spaced by the fuel its runs burn (a queue)' },
  { field: 'on_success', hint: 'on success: delete, keep', title: 'What a success does with its task: keep it, or delete it where nothing reads it again (a queue)' },
];

// Keys listed, the longest-waiting first: enough to see who waits, not every tenant there is.
const KEYS_SHOWN = 100;

export function limits(main) {
  const list = h('div', { id: 'limit-list' });
  const keys = h('div', { id: 'key-list' });
  // The form stays out of what each refresh redraws, so what is being typed is kept.
  put(main, h('h1', {}, 'Limits'),
    h('p', { class: 'hint' }, 'Caps on runs in flight and on starts per period, over all workers together: due tasks beyond them wait. A key’s weight is its share of turns against other keys. A change reaches every worker within a second.'),
    list, section('Set a limit', h('p', { class: 'hint' }, 'Empty fields stay as they are.'), limitForm()),
    section('Keys', h('p', { class: 'hint' }, `Tasks queued with a key take turns with the other keys of their queue, each as often as its weight says. The ${KEYS_SHOWN} longest-waiting first.`), keys));
  return {
    async refresh(current) {
      const [l, k] = await Promise.all([api('GET', '/limits'), api('GET', `/keys?limit=${KEYS_SHOWN}`)]);
      if (!current()) return;
      fill(list, limitTable(l.limits));
      fill(keys, keyTable(k.keys));
    },
  };
}

const limitName = (l) => `${l.scope}:${l.target}`;

function limitTable(list) {
  return table([
    { label: 'Limit', cell: limitLink },
    { label: 'Max running', cell: (l) => number(l.max_running), cls: 'num' },
    { label: 'Rate', cell: (l) => rate(l.rate, l.rate_burst) },
    { label: 'Per key', cell: (l) => number(l.max_running_per_key), cls: 'num' },
    { label: 'Rate per key', cell: (l) => rate(l.rate_per_key, l.rate_burst_per_key) },
    { label: 'Weight', cell: (l) => number(l.weight), cls: 'num' },
    { label: 'Fuel per turn', cell: (l) => number(l.fuel_per_turn), cls: 'num' },
    { label: 'On success', cell: (l) => (l.scope === 'queue' ? l.on_success : '—') },
    { label: 'Running', cell: (l) => number(l.running), cls: 'num' },
    { label: 'Due', cell: (l) => number(l.due), cls: 'num' },
    { label: 'Held back', cell: (l) => (l.scope === 'key' ? '—' : number(l.held_back)), cls: 'num' },
    { label: 'Set by', cell: setBy },
    { label: '', cell: clearButton },
  ], list, { key: limitName, empty: 'No limit is set: every due task may start. Set one below, with `taskhost limits set`, or in the configuration.' });
}

/** A limit's name, linking to its tasks (a queue's, a handler's: the task list filters by those). */
function limitLink(l) {
  const name = limitName(l);
  return l.scope === 'key' ? h('strong', {}, name) : h('a', { href: `#/tasks?${l.scope}=${path(l.target)}` }, name);
}

/** A rate as `N/PERIOD`, with its burst when it has one (as `taskhost limits` shows it). */
function rate(r, burst) {
  return r ? `${r}${burst ? ` (burst ${burst})` : ''}` : '—';
}

// Who set a limit: a worker's file at its start, or an operator live (which a file leaves be).
const SET_BY = {
  file: ['configuration', 'From a worker’s configuration file, at its start'],
  operator: ['operator', 'Set live: a worker’s configuration file does not overwrite it'],
};

function setBy(l) {
  const [who, title] = SET_BY[l.set_by] || [];
  return who ? [h('span', { title }, who), ' ', when(l.updated_on)] : when(l.updated_on);
}

/** Clear: take the limit out, once asked (a file's limit comes back at a worker's next start). */
function clearButton(l) {
  const name = limitName(l);
  const back = l.set_by === 'file' ? ' A worker started later with it in its configuration sets it again.' : '';
  return button('Clear', async () => {
    if (!confirm(`Clear the limit ${name}?${back}`)) return;
    await act((a) => (a.changed ? `Limit ${name} cleared.` : `Limit ${name} was not set.`),
      () => api('DELETE', `/limits/${path(name)}`));
  }, { 'data-action': 'clear', class: 'danger' });
}

/** The form that sets a limit: fields left empty are left out of the change, so they stay. */
function limitForm() {
  const name = h('input', { name: 'name', 'data-field': 'name', required: true, autocomplete: 'off', size: 24,
    placeholder: 'limit, e.g. queue:mail', pattern: '(queue|handler|key):.+', title: 'queue:NAME, handler:NAME or key:NAME' });
  const inputs = CHANGE.map((c) => [c, h('input', { name: c.field, 'data-field': c.field, placeholder: c.hint, title: c.title,
    autocomplete: 'off', type: c.min === undefined ? 'text' : 'number', min: c.min, step: c.min === undefined ? undefined : 1 })]);
  const submit = h('button', { type: 'submit' }, 'Set');
  const form = h('form', { id: 'limit-form', class: 'filters' }, label('limit', name),
    inputs.map(([c, input]) => label(c.hint, input)), submit);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (submit.disabled) return;
    const change = {};
    for (const [c, input] of inputs) {
      const v = input.value.trim();
      if (v) change[c.field] = c.min === undefined ? v : Number(v);
    }
    const target = name.value.trim();
    submit.disabled = true;
    try {
      // Emptied once set, not when refused: what was typed stays to be corrected.
      await act((a) => `Limit ${a.name} set: ${summary(a)}.`,
        () => api('PUT', `/limits/${path(target)}`, change).then((a) => { form.reset(); return a; }));
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

function label(text, input) {
  return h('label', {}, h('span', { class: 'sr' }, text), input);
}

/** What a limit holds now, as the API answers its change. */
function summary(a) {
  const parts = [a.max_running && `${number(a.max_running)} running at most`, a.rate_limit && rate(a.rate_limit, a.rate_burst),
    a.max_running_per_key && `${number(a.max_running_per_key)} per key`,
    a.rate_limit_per_key && `${rate(a.rate_limit_per_key, a.rate_burst_per_key)} per key`, a.weight && `weight ${a.weight}`,
    a.fuel_per_turn && `${number(a.fuel_per_turn)} fuel a turn`, a.on_success === 'delete' && 'successes deleted'];
  return parts.filter(Boolean).join(', ') || 'nothing limited';
}

function keyTable(list) {
  return table([
    { label: 'Key', cell: (k) => h('code', {}, k.key) },
    { label: 'Queue', cell: (k) => h('a', { href: `#/tasks?queue=${path(k.queue)}` }, k.queue) },
    { label: 'Due', cell: (k) => number(k.due), cls: 'num' },
    { label: 'Later', cell: (k) => number(k.later), cls: 'num' },
    { label: 'Running', cell: (k) => number(k.running), cls: 'num' },
    { label: 'Wait', cell: (k) => (k.waiting_since ? duration(Date.now() - Date.parse(k.waiting_since)) : '—'), cls: 'num' },
    // A key without a weight set has weight 1 (DEFAULT_WEIGHT).
    { label: 'Weight', cell: (k) => number(k.weight ?? 1), cls: 'num' },
    // The fuel its runs burn on average, where its queue weighs keys by fuel.
    { label: 'Fuel a run', cell: (k) => number(k.fuel_per_run), cls: 'num' },
  ], list, { key: (k) => `${k.queue}/${k.key}`, empty: 'No unfinished task has a key.' });
}

export function schedules(main) {
  return page(main, 'Schedules', 'Periodic tasks. Trigger queues one now, besides its slots.', '/schedules',
    ({ schedules: list }) => table([
      { label: 'Schedule', cell: (s) => h('strong', {}, s.name) },
      { label: 'When', cell: (s) => [h('code', {}, s.cron), s.time_zone === 'UTC' ? '' : ` (${s.time_zone})`] },
      { label: 'Handler', cell: (s) => h('a', { href: `#/tasks?handler=${path(s.handler)}` }, s.handler) },
      { label: 'Queue', cell: (s) => s.queue },
      { label: 'Missed slots', cell: (s) => s.missed },
      { label: 'Latest slot', cell: (s) => when(s.last_slot) },
      { label: 'From', cell: (s) => (s.declared ? 'configuration' : 'command line') },
      { label: 'State', cell: (s) => pausedSince(s.paused_on) },
      { label: '', cell: (s) => h('span', { class: 'actions' },
        button('Trigger', () => act((a) => h('span', {}, `Schedule ${s.name} queued task `, taskLink(a.task), '.'),
          () => api('POST', `/schedules/${path(s.name)}/trigger`)), { 'data-action': 'trigger' }),
        pauseButton('Schedule', 'schedules', s.name, s.paused_on)) },
    ], list, { key: (s) => s.name, empty: 'No schedule. Add one with `taskhost schedule add` or in the configuration.' }));
}

export function runners(main) {
  return page(main, 'Runners', 'Worker processes alive now, by their heartbeats.', '/runners',
    ({ runners: list }) => table([
      { label: 'Runner', cell: (r) => `#${r.id}` },
      { label: 'Host', cell: (r) => r.host_name },
      { label: 'PID', cell: (r) => r.process_id, cls: 'num' },
      { label: 'Started', cell: (r) => when(r.started_on) },
      { label: 'Heartbeat', cell: (r) => when(r.heartbeat_on) },
      { label: 'Handlers', cell: (r) => (r.handlers
        ? h('ul', { class: 'plain' }, Object.entries(r.handlers).map(([name, digest]) =>
          h('li', {}, name, ' ', h('code', { class: 'muted', title: digest }, digest.slice(0, 12)))))
        : 'not said yet') },
    ], list, { key: (r) => r.id, empty: 'No worker is running. Start one with `taskhost worker`.' }));
}
