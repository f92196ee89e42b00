// Tasks (and dead letters): filters kept in the address, pages by cursor, and actions on the
// tasks ticked.

import { api, act } from './app.js';
import { h, fill, put, table, badge, when, button, taskLink } from './view.js';

// A task's states, as the API names them (its `state` field and filter).
const STATES = ['waiting', 'scheduled', 'running', 'awaiting-retry', 'succeeded', 'dead', 'cancelled'];
const FILTERS = ['state', 'queue', 'handler', 'text'];

export function mount(main, query, { dead = false } = {}) {
  const selected = new Set();
  // Cursors of the pages before this one, to go back.
  const cursors = [];
  let after = null;
  let page = [];
  const base = dead ? '#/dead' : '#/tasks';

  const inputs = {
    state: h('select', { name: 'state', id: 'f-state' }, h('option', { value: '' }, 'any state'),
      STATES.map((s) => h('option', { value: s }, s.replace('-', ' ')))),
    queue: h('input', { name: 'queue', id: 'f-queue', placeholder: 'queue', autocomplete: 'off' }),
    handler: h('input', { name: 'handler', id: 'f-handler', placeholder: 'handler', autocomplete: 'off' }),
    text: h('input', { name: 'text', id: 'f-text', type: 'search', placeholder: 'text in data', autocomplete: 'off' }),
  };
  for (const k of FILTERS) inputs[k].value = query.get(k) || '';
  const form = h('form', { class: 'filters', role: 'search' },
    FILTERS.filter((k) => !(dead && k === 'state')).map((k) => h('label', {}, h('span', { class: 'sr' }, k), inputs[k])),
    h('button', { type: 'submit' }, 'Filter'),
    h('a', { href: base, class: 'link' }, 'Clear'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const k of FILTERS) if (inputs[k].value.trim()) q.set(k, inputs[k].value.trim());
    const target = `${base}${q.toString() ? `?${q}` : ''}`;
    if (location.hash === target) redraw();
    else location.hash = target;
  });

  const count = h('span', { id: 'selected' });
  const ids = () => [...selected];
  const bulk = (verb, done) => () => act(done, () => api('POST', `/tasks/${verb}`, { ids: ids() }).then((a) => {
    selected.clear();
    return a;
  }));
  const actions = h('div', { class: 'bulk', id: 'bulk' }, count,
    button('Cancel', bulk('cancel', (a) => `Cancelled ${a.cancelled} of the tasks ticked.`), { id: 'bulk-cancel' }),
    button(dead ? 'Replay' : 'Retry', bulk('retry', (a) => `Scheduled ${a.retried} again.`), { id: 'bulk-retry' }),
    button('Delete', async () => {
      if (!confirm(`Delete ${selected.size} finished task(s) and their runs? This cannot be undone.`)) return;
      await bulk('delete', (a) => `Deleted ${a.deleted} finished task(s).`)();
    }, { id: 'bulk-delete', class: 'danger' }));
  const list = h('div', { id: 'task-list' });
  const older = button('Older →', async () => { cursors.push(after); after = page.next; await redraw(); }, { id: 'older' });
  const newer = button('← Newer', async () => { after = cursors.pop() ?? null; await redraw(); }, { id: 'newer' });
  put(main, h('h1', {}, dead ? 'Dead letters' : 'Tasks'),
    dead ? h('p', { class: 'hint' }, 'Tasks given up on, with their last error. Replay schedules one again from its first attempt.') : null,
    form, actions, list, h('div', { class: 'pager' }, newer, older));

  const params = () => {
    const q = new URLSearchParams({ limit: '50' });
    for (const k of FILTERS) if (query.get(k)) q.set(k, query.get(k));
    if (dead) q.set('dead', 'true');
    if (after !== null) q.set('after', String(after));
    return q;
  };
  let redraw = async () => {};
  const view = {
    async refresh(current) {
      const answer = await api('GET', `/tasks?${params()}`);
      if (!current()) return;
      page = answer;
      draw();
    },
  };
  redraw = () => view.refresh(() => true);

  function draw() {
    const tick = (t) => h('input', { type: 'checkbox', 'aria-label': `Select task ${t.id}`, checked: selected.has(t.id),
      onchange: (e) => { if (e.target.checked) selected.add(t.id); else selected.delete(t.id); summarize(); } });
    const all = h('input', { type: 'checkbox', id: 'select-page', 'aria-label': 'Select this page',
      checked: page.tasks.length > 0 && page.tasks.every((t) => selected.has(t.id)),
      onchange: (e) => { for (const t of page.tasks) { if (e.target.checked) selected.add(t.id); else selected.delete(t.id); } draw(); } });
    fill(list, table([
      { label: all, cell: tick, cls: 'tick' },
      { label: 'Task', cell: (t) => taskLink(t.id) },
      { label: 'Handler', cell: (t) => t.handler },
      { label: 'Queue', cell: (t) => t.queue },
      { label: 'State', cell: (t) => badge(t.state) },
      { label: 'Attempts failed', cell: (t) => `${t.task_runs_failed} / ${t.max_attempts}`, cls: 'num' },
      ...(dead ? [{ label: 'Last error', cell: (t) => h('span', { class: 'error-text', title: t.last_error || '' }, clip(t.last_error || '—')) }] : []),
      { label: 'Data', cell: (t) => h('code', { class: 'data' }, clip(JSON.stringify(t.data))) },
      { label: 'Queued', cell: (t) => when(t.queued_on) },
      { label: dead ? 'Given up' : 'Due', cell: (t) => when(dead ? t.gave_up_on : t.scheduled_on) },
    ], page.tasks, { key: (t) => t.id, empty: dead ? 'No dead letters.' : 'No task matches.' }));
    older.hidden = page.next === null || page.next === undefined;
    newer.hidden = cursors.length === 0 && after === null;
    summarize();
  }
  function summarize() {
    count.textContent = selected.size ? `${selected.size} selected` : 'Tick tasks to act on them';
    for (const b of actions.querySelectorAll('button')) b.disabled = selected.size === 0;
  }
  return view;
}

function clip(text) {
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}
