// Overview: tasks by status on each queue, the last hour's runs a minute at a time, and each
// handler's statistics.

import { api } from './app.js';
import { h, fill, put, table, section, duration, number, pausedSince, lag } from './view.js';

const SVG = 'http://www.w3.org/2000/svg';

export function mount(main) {
  const totals = h('div', { class: 'cards', id: 'totals' });
  const chart = h('div', { class: 'chart', id: 'chart' });
  const queues = h('div', { id: 'by-queue' });
  const handlers = h('div', { id: 'by-handler' });
  put(main, h('h1', {}, 'Overview'), totals,
    section('Runs over the last hour', chart), section('Queues', queues), section('Handlers', handlers));
  return {
    async refresh(current) {
      const [stats, series, qs] = await Promise.all([
        api('GET', '/stats'), api('GET', '/stats/throughput?minutes=60'), api('GET', '/queues'),
      ]);
      if (!current()) return;
      const rows = stats.stats;
      const byQueue = new Map(qs.queues.map((q) => [q.name, { ...q, runs: zeroRuns(), tasks: zeroTasks() }]));
      for (const s of rows) {
        const q = byQueue.get(s.queue) || { name: s.queue, due: 0, later: 0, running: 0, runs: zeroRuns(), tasks: zeroTasks() };
        add(q.runs, s.runs);
        add(q.tasks, s.tasks);
        byQueue.set(s.queue, q);
      }
      const all = [...byQueue.values()];
      const sum = (f) => all.reduce((n, q) => n + f(q), 0);
      fill(totals,
        card('Waiting', sum((q) => q.due + q.later), '#/tasks?state=scheduled'),
        card('Running', sum((q) => q.running), '#/tasks?state=running'),
        card('Awaiting retry', sum((q) => q.tasks.awaiting_retry), '#/tasks?state=awaiting-retry'),
        card('Dead letters', sum((q) => q.tasks.dead), '#/dead', 'dead'),
        card('Succeeded', sum((q) => q.runs.succeeded), '#/tasks?state=succeeded'),
        // Runs, not tasks: a task with a failed run may since have succeeded, so no task filter
        // lists them; the handlers' table below breaks them down.
        card('Failed runs', sum((q) => q.runs.failed + q.runs.timed_out), null, 'error'));
      fill(chart, draw(series.minutes));
      fill(queues, table([
        { label: 'Queue', cell: (q) => h('a', { href: `#/tasks?queue=${encodeURIComponent(q.name)}` }, q.name) },
        { label: 'Due', cell: (q) => number(q.due), cls: 'num' },
        { label: 'Later', cell: (q) => number(q.later), cls: 'num' },
        { label: 'Running', cell: (q) => number(q.running), cls: 'num' },
        { label: 'Awaiting retry', cell: (q) => number(q.tasks.awaiting_retry), cls: 'num' },
        { label: 'Dead', cell: (q) => number(q.tasks.dead), cls: 'num' },
        { label: 'Succeeded', cell: (q) => number(q.runs.succeeded), cls: 'num' },
        { label: 'Failed', cell: (q) => number(q.runs.failed), cls: 'num' },
        { label: 'Timed out', cell: (q) => number(q.runs.timed_out), cls: 'num' },
        { label: 'Cancelled', cell: (q) => number(q.runs.cancelled), cls: 'num' },
        { label: 'Snoozed', cell: (q) => number(q.runs.snoozed), cls: 'num' },
        { label: 'Lag', cell: lag, cls: 'num' },
        { label: 'State', cell: (q) => pausedSince(q.paused_on) },
      ], all, { key: (q) => q.name, empty: 'No queue has tasks yet.' }));
      fill(handlers, table([
        { label: 'Handler', cell: (s) => h('a', { href: `#/tasks?handler=${encodeURIComponent(s.handler)}` }, s.handler) },
        { label: 'Queue', cell: (s) => s.queue },
        { label: 'Succeeded', cell: (s) => number(s.runs.succeeded), cls: 'num' },
        { label: 'Failed', cell: (s) => number(s.runs.failed + s.runs.timed_out), cls: 'num' },
        { label: 'Cancelled', cell: (s) => number(s.runs.cancelled), cls: 'num' },
        { label: 'Snoozed', cell: (s) => number(s.runs.snoozed), cls: 'num' },
        { label: 'Failure rate', cell: (s) => `${(s.failure_rate * 100).toFixed(1)} %`, cls: 'num' },
        { label: 'p50', cell: (s) => duration(s.duration_ms && s.duration_ms.p50), cls: 'num' },
        { label: 'p95', cell: (s) => duration(s.duration_ms && s.duration_ms.p95), cls: 'num' },
        { label: 'Max', cell: (s) => duration(s.duration_ms && s.duration_ms.max), cls: 'num' },
        { label: 'Fuel (avg)', cell: (s) => number(s.fuel && Math.round(s.fuel.avg)), cls: 'num' },
        { label: 'Last minute', cell: (s) => number(s.last_minute), cls: 'num' },
        { label: 'Last hour', cell: (s) => number(s.last_hour), cls: 'num' },
      ], rows, { key: (s) => `${s.handler}/${s.queue}`, empty: 'No run has ended yet.' }));
    },
  };
}

const zeroRuns = () => ({ succeeded: 0, failed: 0, timed_out: 0, cancelled: 0, snoozed: 0 });
const zeroTasks = () => ({ waiting: 0, scheduled: 0, running: 0, awaiting_retry: 0, dead: 0 });

function add(into, from) {
  for (const k of Object.keys(into)) into[k] += from[k] || 0;
}

function card(label, value, href, kind = '') {
  return h(href ? 'a' : 'div', { class: `card stat ${kind}`, href, 'data-stat': label },
    h('span', { class: 'value' }, number(value)), h('span', { class: 'label' }, label));
}

/** Stacked bars, a minute each: succeeded, failed or timed out, cancelled. */
function draw(minutes) {
  const width = 600;
  const height = 140;
  const parts = [['succeeded', (m) => m.runs.succeeded], ['failed', (m) => m.runs.failed + m.runs.timed_out],
    ['cancelled', (m) => m.runs.cancelled]];
  const total = (m) => parts.reduce((n, [, f]) => n + f(m), 0);
  const top = Math.max(1, ...minutes.map(total));
  const step = width / Math.max(1, minutes.length);
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  // Stretched to the box's width at a fixed height: bars need no aspect ratio, and text is HTML.
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  const sums = parts.map(([name, f]) => [name, minutes.reduce((n, m) => n + f(m), 0)]);
  svg.setAttribute('aria-label', `Runs ended a minute over the last hour: ${sums.map(([n, v]) => `${v} ${n}`).join(', ')}`);
  minutes.forEach((m, i) => {
    let y = height;
    for (const [name, f] of parts) {
      const n = f(m);
      if (n === 0) continue;
      const bar = (height * n) / top;
      y -= bar;
      const rect = document.createElementNS(SVG, 'rect');
      for (const [k, v] of [['x', i * step + 1], ['y', y], ['width', Math.max(1, step - 2)], ['height', bar], ['class', name]]) {
        rect.setAttribute(k, v);
      }
      const title = document.createElementNS(SVG, 'title');
      title.textContent = `${new Date(m.at).toLocaleTimeString()}: ${n} ${name}`;
      rect.append(title);
      svg.append(rect);
    }
  });
  const axis = h('p', { class: 'axis' }, h('span', {}, `${minutes.length} min ago`), h('span', {}, 'now'));
  const legend = h('p', { class: 'legend' }, sums.map(([name, n]) => h('span', { class: name }, `${number(n)} ${name}`)),
    h('span', {}, `most in a minute: ${number(top)}`));
  return [svg, axis, legend];
}
