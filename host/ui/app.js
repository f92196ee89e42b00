// The dashboard: one page whose views read and act through the JSON API under /api/v1. The
// address after `#` names the view, so a view can be bookmarked and shared; a view is mounted
// once and, while live updates are on, refreshed when the task event stream (/api/v1/events)
// tells of a change, EVENT_GAP_MS after its last read ended at the soonest. Besides, every view
// is read every LIVE_MS while the stream is down; while it is open, the views whose data also
// changes without a task event (a queue paused or a limit set elsewhere, a worker starting:
// queues, limits, schedules, runners, plugins) about every OTHER_MS, and the others about every
// SAFETY_MS all the same.

import { h, fill, button } from './view.js';
import * as overview from './overview.js';
import * as tasks from './tasks.js';
import * as task from './task.js';
import * as ops from './operations.js';
import * as plugins from './plugins.js';

const LIVE_MS = 1500;
const EVENT_GAP_MS = 1000;
const OTHER_MS = 5000;
const SAFETY_MS = 15000;
const RECONNECT_MS = 2000;
const TOKEN_KEY = 'taskhost-token';

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  live: localStorage.getItem('taskhost-live') !== 'off',
  view: null,
  // How long the current view goes unread while the stream is open and tells nothing (`routes`).
  every: SAFETY_MS,
  // Whether the event stream is open, and what closes it.
  streaming: false,
  stream: null,
  // When the current view's last read began and ended (ms), whether a read for an event is due,
  // and whether one was asked for by an event and not begun yet.
  readAt: 0,
  readEnd: 0,
  eventDue: false,
  eventAsked: false,
  // A task event came while the tab was hidden: read once it shows.
  stale: false,
  // A view mounted later makes an earlier one's late answers moot.
  generation: 0,
  // The generation whose refresh is under way, and whether another was asked for meanwhile.
  busy: null,
  again: false,
  // The read under way (settled when none is).
  reading: Promise.resolve(),
};

/** An answer of the API that is not a success: its status, code and message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** One call to the API: its JSON answer, or an ApiError. */
export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  // A form (a deploy's files) goes as the browser encodes it; anything else as JSON.
  const form = body instanceof FormData;
  if (body !== undefined && !form) headers['Content-Type'] = 'application/json';
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  let res;
  try {
    const sent = body === undefined || form ? body : JSON.stringify(body);
    res = await fetch(`/api/v1${path}`, { method, headers, body: sent });
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'the server cannot be reached');
  }
  const answer = await res.json().catch(() => null);
  if (res.ok) return answer;
  const { code = 'error', message = res.statusText } = (answer && answer.error) || {};
  if (res.status === 401) askToken();
  throw new ApiError(res.status, code, message);
}

/** A message under the header: `kind` is 'ok' or 'error'. */
export function notify(text, kind = 'ok') {
  const el = document.getElementById('notice');
  fill(el, h('span', {}, text), button('×', async () => fill(el), { class: 'link', 'aria-label': 'Dismiss' }));
  el.className = kind;
}

/** Run a write the person asked for, say how it went, and show the new state at once. */
export async function act(what, call) {
  try {
    const answer = await call();
    notify(typeof what === 'function' ? what(answer) : what);
  } catch (e) {
    const said = e.message.charAt(0).toUpperCase() + e.message.slice(1);
    notify(e.status === 403 && e.code === 'forbidden' ? `${said}.` : e.message, 'error');
  }
  await refresh();
}

function askToken() {
  const main = document.getElementById('main');
  if (main.querySelector('#token-form')) return;
  state.generation += 1;
  state.view = null;
  const input = h('input', { type: 'password', id: 'token', autocomplete: 'current-password', required: true });
  const form = h('form', { id: 'token-form', class: 'card' },
    h('h2', {}, 'A token is needed'),
    h('p', {}, 'This server asks for a bearer token from its [api] configuration. It is kept in this tab only.'),
    h('label', { for: 'token' }, 'Token'), input, h('button', { type: 'submit' }, 'Use it'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    state.token = input.value.trim();
    sessionStorage.setItem(TOKEN_KEY, state.token);
    route();
  });
  fill(main, form);
  input.focus();
}

// Each view, and how long it goes unread while the stream is open and tells nothing. Task events
// drive every view (a queue's counts, a limit's runs in flight, a schedule's slot queued, a
// deployed version's pinned tasks move with tasks); OTHER_MS catches what changes without one.
const routes = [
  [/^\/?$/, () => overview.mount, SAFETY_MS],
  [/^\/tasks\/(\d+)$/, (m) => (main) => task.mount(main, Number(m[1])), SAFETY_MS],
  [/^\/tasks$/, () => tasks.mount, SAFETY_MS],
  [/^\/dead$/, () => (main, q) => tasks.mount(main, q, { dead: true }), SAFETY_MS],
  [/^\/queues$/, () => ops.queues, OTHER_MS],
  [/^\/limits$/, () => ops.limits, OTHER_MS],
  [/^\/schedules$/, () => ops.schedules, OTHER_MS],
  [/^\/runners$/, () => ops.runners, OTHER_MS],
  [/^\/plugins$/, () => plugins.list, OTHER_MS],
  [/^\/plugins\/([^/]+)$/, (m) => (main) => plugins.versions(main, decodeURIComponent(m[1])), OTHER_MS],
];

async function route() {
  const [path, query = ''] = location.hash.replace(/^#/, '').split('?');
  const main = document.getElementById('main');
  const found = routes.map(([re, view, every]) => [path.match(re), view, every]).find(([m]) => m);
  for (const a of document.querySelectorAll('nav a')) {
    a.toggleAttribute('aria-current', a.getAttribute('href') === `#${path.split('/').slice(0, 2).join('/')}` ||
      (path === '' && a.getAttribute('href') === '#/'));
  }
  state.generation += 1;
  const generation = state.generation;
  state.view = null;
  if (!found) {
    fill(main, h('p', { class: 'empty' }, 'No such page. '), h('a', { href: '#/' }, 'Overview'));
    return;
  }
  const view = found[1](found[0])(fill(main), new URLSearchParams(query));
  state.every = found[2];
  if (generation === state.generation) state.view = view;
  await refresh();
}

/**
 * Read the current view's data again and redraw it. One read at a time per view: asked for
 * meanwhile (after an action), it reads once more when the current read ends; a live tick is
 * simply dropped.
 */
export async function refresh({ tick = false } = {}) {
  const view = state.view;
  const generation = state.generation;
  if (!view) return;
  if (state.busy === generation) {
    if (!tick) state.again = true;
    return;
  }
  state.busy = generation;
  state.reading = (async () => {
    try {
      do {
        state.again = false;
        state.readAt = Date.now();
        const asked = state.eventAsked;
        state.eventAsked = false;
        await view.refresh(() => generation === state.generation);
        state.readEnd = Date.now();
        document.body.dataset.updated = String(state.readEnd);
        // Counted for the browser test: reads a task event asked for, drawn.
        if (asked) document.body.dataset.eventReads = String(Number(document.body.dataset.eventReads || 0) + 1);
      } while (state.again && generation === state.generation);
    } catch (e) {
      if (e.status !== 401) notify(e.message, 'error');
    } finally {
      if (state.busy === generation) state.busy = null;
    }
  })();
  await state.reading;
}

/**
 * Stop reading the current view, once a read under way has ended: before an action that removes
 * what it reads (a task deleted), so no read of it is answered 404. Gives back a function that
 * resumes it (the action failed).
 */
export async function hold() {
  const view = state.view;
  state.view = null;
  await state.reading;
  return () => {
    if (state.view === null) state.view = view;
  };
}

/** Go to `hash`, dropping the current view first (it may be gone, as a deleted task). */
export function leave(hash) {
  state.generation += 1;
  state.view = null;
  location.hash = hash;
}

function setLive(on) {
  state.live = on;
  localStorage.setItem('taskhost-live', on ? 'on' : 'off');
  const b = document.getElementById('live');
  b.setAttribute('aria-pressed', String(on));
  b.textContent = on ? 'Live' : 'Paused';
  b.title = on ? 'Updating as tasks change: click to pause' : 'Not updating: click to resume';
  document.body.dataset.live = on ? 'on' : 'off';
  if (on) follow();
  else if (state.stream) state.stream.abort();
}

/** A task event: read the view again, EVENT_GAP_MS after the last read ended at the soonest. */
function told() {
  if (!state.live || state.eventDue) return;
  if (document.hidden) {
    state.stale = true;
    return;
  }
  state.eventDue = true;
  const wait = Math.max(0, state.readEnd + EVENT_GAP_MS - Date.now());
  setTimeout(() => {
    state.eventDue = false;
    state.eventAsked = true;
    // Not a tick: a read under way reads once more after it, so the change is not missed.
    refresh();
  }, wait);
}

/**
 * Follow /api/v1/events while live (with fetch, not EventSource, which cannot send a token),
 * opening it again RECONNECT_MS after it closes.
 */
async function follow() {
  if (state.stream && !state.stream.signal.aborted) return;
  const stream = new AbortController();
  state.stream = stream;
  while (state.live && !stream.signal.aborted) {
    try {
      const headers = { Accept: 'text/event-stream' };
      if (state.token) headers.Authorization = `Bearer ${state.token}`;
      const token = state.token;
      const res = await fetch('/api/v1/events', { headers, signal: stream.signal });
      if (res.status === 401) {
        // Asked again once a token is given (the views' own reads ask for it).
        while (state.token === token && !stream.signal.aborted) await pause(RECONNECT_MS);
      }
      if (res.ok && res.body) {
        setStreaming(true);
        // Missed while it was down.
        if (state.live) refresh();
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let text = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          text += value;
          const events = text.split('\n\n');
          text = events.pop();
          if (events.some((e) => /^event: (task|lagged)$/m.test(e))) told();
        }
      }
    } catch (e) {
      // Closed, aborted or unreachable: polled meanwhile, opened again below.
    }
    setStreaming(false);
    if (!stream.signal.aborted) await pause(RECONNECT_MS);
  }
  if (state.stream === stream) state.stream = null;
}

const pause = (ms) => new Promise((r) => setTimeout(r, ms));

function setStreaming(on) {
  state.streaming = on;
  document.body.dataset.stream = on ? 'open' : 'closed';
}

function start() {
  document.getElementById('live').addEventListener('click', () => {
    setLive(!state.live);
    if (state.live) refresh();
  });
  setLive(state.live);
  window.addEventListener('hashchange', route);
  document.addEventListener('visibilitychange', () => {
    if (document.hidden || !state.stale) return;
    state.stale = false;
    refresh();
  });
  setInterval(() => {
    if (!state.live || document.hidden) return;
    // (Half a tick early rather than a tick late: read within about `every`, not `every` + LIVE_MS.)
    if (!state.streaming || Date.now() - state.readAt >= state.every - LIVE_MS / 2) refresh({ tick: true });
  }, LIVE_MS);
  route();
}

start();
