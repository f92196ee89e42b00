// Building blocks of the pages. Everything shown is made from text nodes, never from HTML
// strings: task data, logs, errors and names come from handlers and tasks anyone may write.

/** An element: `h('a', {href: '#/', class: 'x', onclick: f}, 'text', child, [more])`. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'value') el.value = value;
    else if (key === 'checked') el.checked = !!value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Add children to `el`, skipping null, undefined and false. */
export function put(el, ...children) {
  append(el, children);
  return el;
}

/** Replace what `el` holds. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/**
 * A table that scrolls sideways on a narrow screen. `columns`: [{label, cell: row => node or
 * text, cls}]; `key`: row => a stable id, set as `data-key` so tests and updates find rows.
 */
export function table(columns, rows, { empty = 'Nothing here.', key, rowClass } = {}) {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h('div', { class: 'scroll' },
    h('table', {},
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: c.cls, scope: 'col' }, c.label)))),
      h('tbody', {}, rows.map((r) => h('tr', { 'data-key': key && key(r), class: rowClass && rowClass(r) },
        columns.map((c) => h('td', { class: c.cls }, c.cell(r))))))));
}

export function section(title, ...children) {
  return h('section', {}, h('h2', {}, title), children);
}

/** A status as a coloured word. */
export function badge(word) {
  return h('span', { class: `badge ${word}`, 'data-status': word }, word.replace('-', ' '));
}

/** A progress bar of `percent` (0 to 100). */
export function bar(percent) {
  const p = Math.max(0, Math.min(100, Number(percent) || 0));
  const inner = h('span');
  inner.style.width = `${p}%`;
  return h('span', { class: 'bar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': p,
    title: `${p}%` }, inner);
}

/** A time as "12 s ago 14:02:07" or "in 3 min 2026-12-01 09:00:00", with the locale's own form on hover. */
export function when(iso) {
  if (!iso) return '—';
  const t = new Date(iso);
  const s = (t.getTime() - Date.now()) / 1000;
  const a = Math.abs(s);
  const text = a < 2 ? 'now' : a < 90 ? `${Math.round(a)} s` : a < 5400 ? `${Math.round(a / 60)} min`
    : a < 172800 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  const relative = text === 'now' ? text : s < 0 ? `${text} ago` : `in ${text}`;
  return h('time', { datetime: iso, title: t.toLocaleString() }, relative, ' ', h('span', { class: 'muted abs' }, absolute(t)));
}

// The time itself beside how long ago: the time of day today, the date and time otherwise.
const pad = (n) => String(n).padStart(2, '0');
const ymd = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
function absolute(t) {
  const clock = `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}`;
  return ymd(t) === ymd(new Date()) ? clock : `${ymd(t)} ${clock}`;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60000).toFixed(1)} min`;
}

export function number(n) {
  return n === null || n === undefined ? '—' : Number(n).toLocaleString('en');
}

export function bytes(n) {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(1)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n} B`;
}

/** JSON laid out for reading, in a block that keeps its lines. */
export function json(value) {
  return h('pre', { class: 'json' }, value === undefined || value === null ? 'null' : JSON.stringify(value, null, 2));
}

/** A button that runs `action` once at a time (`aria-busy` meanwhile; `disabled` is the caller's). */
export function button(label, action, attrs = {}) {
  const b = h('button', { type: 'button', ...attrs }, label);
  b.addEventListener('click', async () => {
    if (b.getAttribute('aria-busy') === 'true') return;
    b.setAttribute('aria-busy', 'true');
    try { await action(); } finally { b.removeAttribute('aria-busy'); }
  });
  return b;
}

/** Paused since when, or active. */
export function pausedSince(pausedOn) {
  return pausedOn ? [h('span', { class: 'badge paused' }, 'paused'), ' ', when(pausedOn)] : 'active';
}

/** How long a queue's longest-waiting due task has waited. */
export function lag(queue) {
  return queue.oldest_due ? duration(Date.now() - Date.parse(queue.oldest_due)) : '—';
}

/** A link to a task's page. */
export function taskLink(id) {
  return h('a', { href: `#/tasks/${id}` }, `#${id}`);
}
