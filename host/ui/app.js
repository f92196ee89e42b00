// The dashboard: one page whose views read and act through the JSON API under /api/v1. The
// address after `#` names the view, so a view can be bookmarked and shared; a view is mounted
// once and refreshed every LIVE_MS while live updates are on.

import { h, fill, button } from './view.js';
import * as overview from './overview.js';
import * as tasks from './tasks.js';
import * as task from './task.js';
import * as ops from './operations.js';
import * as plugins from './plugins.js';

const LIVE_MS = 1500;
const TOKEN_KEY = 'taskhost-token';

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  live: localStorage.getItem('taskhost-live') !== 'off',
  view: null,
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

const routes = [
  [/^\/?$/, () => overview.mount],
  [/^\/tasks\/(\d+)$/, (m) => (main) => task.mount(main, Number(m[1]))],
  [/^\/tasks$/, () => tasks.mount],
  [/^\/dead$/, () => (main, q) => tasks.mount(main, q, { dead: true })],
  [/^\/queues$/, () => ops.queues],
  [/^\/limits$/, () => ops.limits],
  [/^\/schedules$/, () => ops.schedules],
  [/^\/runners$/, () => ops.runners],
  [/^\/plugins$/, () => plugins.list],
  [/^\/plugins\/([^/]+)$/, (m) => (main) => plugins.versions(main, decodeURIComponent(m[1]))],
];

async function route() {
  const [path, query = ''] = location.hash.replace(/^#/, '').split('?');
  const main = document.getElementById('main');
  const found = routes.map(([re, view]) => [path.match(re), view]).find(([m]) => m);
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
        await view.refresh(() => generation === state.generation);
        document.body.dataset.updated = String(Date.now());
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
  b.title = on ? `Updating every ${LIVE_MS / 1000} s: click to pause` : 'Not updating: click to resume';
  document.body.dataset.live = on ? 'on' : 'off';
}

function start() {
  document.getElementById('live').addEventListener('click', () => {
    setLive(!state.live);
    if (state.live) refresh();
  });
  setLive(state.live);
  window.addEventListener('hashchange', route);
  setInterval(() => {
    if (state.live && !document.hidden) refresh({ tick: true });
  }, LIVE_MS);
  route();
}

start();
