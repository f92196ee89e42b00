// What an operator runs the queue with: queues (pause, resume), schedules (pause, resume,
// trigger), the live runners, and the handlers in the plugins directory.

import { api, act } from './app.js';
import { h, fill, put, table, when, duration, number, bytes, button, taskLink, pausedSince, lag } from './view.js';

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
  return page(main, 'Queues', 'A paused queue keeps its tasks: workers start none of them until it is resumed; runs in flight end as usual.',
    '/queues', ({ queues: list }) => table([
      { label: 'Queue', cell: (q) => h('a', { href: `#/tasks?queue=${path(q.name)}` }, q.name) },
      { label: 'Due', cell: (q) => number(q.due), cls: 'num' },
      { label: 'Later', cell: (q) => number(q.later), cls: 'num' },
      { label: 'Running', cell: (q) => number(q.running), cls: 'num' },
      { label: 'Limit', cell: (q) => number(q.max_running), cls: 'num' },
      { label: 'Lag', cell: lag, cls: 'num' },
      { label: 'Workers', cell: workers, cls: 'num' },
      { label: 'State', cell: (q) => pausedSince(q.paused_on) },
      { label: '', cell: (q) => pauseButton('Queue', 'queues', q.name, q.paused_on) },
    ], list, { key: (q) => q.name, empty: 'No queue has tasks yet.' }));
}

/** Live workers claiming from a queue; a warning when it has due tasks and none does. */
function workers(q) {
  if (q.served_by > 0 || q.due === 0 || q.paused_on) return number(q.served_by);
  return h('span', { class: 'badge unclaimed', title: `No live worker claims from ${q.name}: start one with --queues ${q.name}, or with none for every queue.` },
    'none claims it');
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

export function plugins(main) {
  return page(main, 'Plugins', 'The handlers in the plugins directory, as queueing checks them (nothing is compiled here). Grants show names only.',
    '/plugins', ({ plugins: list }) => table([
      { label: 'Handler', cell: (p) => h('a', { href: `#/tasks?handler=${path(p.name)}` }, p.name) },
      { label: 'Queueable', cell: (p) => (p.ok ? h('span', { class: 'badge success' }, 'ok')
        : [h('span', { class: 'badge error' }, 'broken'), ' ', h('span', { class: 'error-text' }, p.error || '')]) },
      { label: 'sha256', cell: (p) => (p.sha256 ? h('code', { title: p.sha256 }, p.sha256.slice(0, 12)) : '—') },
      { label: 'Workers', cell: (p) => `${number(p.served_by)}${p.compiled ? ' (compiled here)' : ''}`, cls: 'num' },
      { label: 'At once', cell: (p) => number(p.max_running), cls: 'num' },
      { label: 'Limits', cell: (p) => (p.limits ? h('ul', { class: 'plain' },
        h('li', {}, `fuel ${number(p.limits.fuel)}`), h('li', {}, `memory ${bytes(p.limits.memory_bytes)}`),
        h('li', {}, `time ${duration(p.limits.timeout_ms)}`)) : '—') },
      { label: 'Grants', cell: (p) => grants(p.grants) },
    ], list, { key: (p) => p.name, empty: 'No handler in the plugins directory.' }));
}

function grants(g) {
  if (!g) return '—';
  const items = [['env', g.env], ['dir', g.dirs], ['http', g.http], ['socket', g.sockets]]
    .flatMap(([kind, names]) => names.map((n) => h('li', {}, h('span', { class: 'muted' }, `${kind} `), n)));
  return items.length ? h('ul', { class: 'plain' }, items) : 'none';
}
