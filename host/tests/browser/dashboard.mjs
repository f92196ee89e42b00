// Drives the dashboard in Debian's Chromium (playwright-core) as a person would: each page
// loads with no console error, a running task's progress bar advances, and cancel, retry,
// pause, trigger, bulk actions, replay and setting and clearing limits work by clicking. It queues its own tasks through the
// API (a worker runs them) and prints what it did as one JSON line for the Rust test to check
// in the database. Screenshots go to the directory given.
//
//   node dashboard.mjs http://127.0.0.1:PORT SCREENSHOT_DIR     (PLAYWRIGHT_DIR: where playwright-core is)

import { launch, open as openWith, screenshots, notice, WAIT } from './browser.mjs';

const [base, shots] = process.argv.slice(2);
const shot = screenshots(shots);

async function call(method, path, body) {
  const res = await fetch(`${base}/api/v1${path}`, {
    method, headers: { 'Content-Type': 'application/json' }, body: body && JSON.stringify(body),
  });
  const answer = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(answer)}`);
  return answer;
}

const later = new Date(Date.now() + 3600_000).toISOString();
const held = await call('POST', '/tasks', { handler: 'probe', queue: 'held', data: { hold_ms: 600_000 } });
const hostile = await call('POST', '/tasks', { handler: 'echo', data: {
  html: '<img src=x onerror="window.__xss=1">', script: '</script><script>window.__xss=2</script>' } });
const failing = await call('POST', '/tasks', { handler: 'fail', data: { retryable: false } });
const mail = await call('POST', '/tasks', { tasks: ['a', 'b', 'needle'].map((to) => ({
  handler: 'echo', queue: 'mail', at: later, data: { to } })) });
// A fan-out of two parts and a join after them, for the workflow graph.
const flow = await call('POST', '/tasks', { handler: 'fan-out', data: { items: [1, 2], join: 'join' } });
// Due in a queue the worker was not given.
await call('POST', '/tasks', { handler: 'echo', queue: 'nobody' });

const browser = await launch();
const problems = [];
const done = {};
const open = (viewport) => openWith(browser, viewport, problems);

async function visit(page, hash, ready) {
  await page.goto(`${base}/${hash}`);
  await page.waitForSelector(ready, WAIT);
}

// Click `selector` until `done(arg)` holds in the page: a live update redraws what it shows, and
// a button or link redrawn between the press and the release loses the click.
async function clickUntil(page, selector, done, arg) {
  const deadline = Date.now() + WAIT.timeout;
  for (;;) {
    try {
      await page.click(selector, { timeout: 2000 });
      await page.waitForFunction(done, arg, { timeout: 2000 });
      return;
    } catch (e) {
      if (Date.now() > deadline) throw e;
    }
    // A slow answer may have landed since (and taken what was clicked away): then it is done.
    if (await page.evaluate(done, arg)) return;
  }
}

// Click the link to `hash` until the page has gone there (the overview redraws its cards).
function follow(page, selector, hash) {
  return clickUntil(page, selector, (h) => location.hash === h, hash);
}

// Set the limit `name` through the Limits page's form, and wait until the table lists it.
async function setLimit(page, name, fields) {
  await page.fill('#limit-form [data-field="name"]', name);
  for (const [field, value] of Object.entries(fields)) await page.fill(`#limit-form [data-field="${field}"]`, String(value));
  await page.click('#limit-form button[type=submit]');
  await notice(page, `Limit ${name} set`);
  await page.waitForSelector(`#limit-list tr[data-key="${name}"]`, WAIT);
}

// The text of the cell under `label` in the row `key` of the table in `list`, read in the page.
function cellText([list, key, label]) {
  const table = document.querySelector(`${list} table`);
  const col = table ? [...table.querySelectorAll('th')].findIndex((th) => th.textContent === label) : -1;
  const row = table && table.querySelector(`tr[data-key="${key}"]`);
  return col < 0 || !row ? null : row.children[col].textContent;
}

let page;
let slow;
try {
  page = await open({ width: 1280, height: 800 });

  // A running task's progress bar advances without a reload, read again as the event stream
  // tells of its progress.
  // Queued only now, once the browser is up: under load the launch alone can outlast a short run,
  // and the page must read the bar at least twice while it runs.
  slow = await call('POST', '/tasks', { handler: 'probe', data: { steps: 100, step_ms: 200 } });
  await visit(page, `#/tasks/${slow.id}`, '[data-run] [role=progressbar]');
  await page.waitForSelector('body[data-stream="open"]', WAIT);
  await page.waitForFunction(() => Number(document.querySelector('[data-run] [role=progressbar]')
    .getAttribute('aria-valuenow')) > 0, null, WAIT);
  const first = Number(await page.getAttribute('[data-run] [role=progressbar]', 'aria-valuenow'));
  await shot(page, 'task-running');
  await page.waitForFunction((v) => Number(document.querySelector('[data-run] [role=progressbar]')
    .getAttribute('aria-valuenow')) > v, first, WAIT);
  await page.waitForSelector('[data-run] pre.logs', WAIT);
  await shot(page, 'task-done');
  done.progress = [first, Number(await page.getAttribute('[data-run] [role=progressbar]', 'aria-valuenow'))];
  done.event_reads = Number(await page.getAttribute('body', 'data-event-reads'));

  // A workflow's graph: the fan-out, then its two parts and the join, each with its state; from
  // the join, its parent and the two parts it runs after.
  const nodes = () => [...document.querySelectorAll('#task-graph [data-task]')].map((n) => [Number(n.dataset.task), n.dataset.state]);
  await visit(page, `#/tasks/${flow.id}`, '#task-graph');
  await page.waitForFunction(() => {
    const boxes = [...document.querySelectorAll('#task-graph [data-task]')];
    return boxes.length === 4 && boxes.every((b) => b.dataset.state === 'succeeded');
  }, null, WAIT);
  done.graph = await page.evaluate(nodes);
  await shot(page, 'workflow');
  await page.click(`#task-graph [data-task="${done.graph[3][0]}"]`);
  await page.waitForFunction((id) => location.hash === `#/tasks/${id}` && document.querySelectorAll('#task-graph [data-task]').length === 4,
    done.graph[3][0], WAIT);
  // Read when drawn: the page may be between two draws of its graph (both show four boxes).
  done.join_graph = await (await page.waitForFunction(() => {
    const found = [...document.querySelectorAll('#task-graph [data-task]')].map((n) => [Number(n.dataset.task), n.dataset.state]);
    return found.length === 4 && found;
  }, null, WAIT)).jsonValue();

  // Overview: counts, the chart, queues and handlers.
  await visit(page, '#/', '#chart svg');
  await page.waitForSelector('#by-queue tr[data-key="mail"]', WAIT);
  await shot(page, 'overview');

  // Cancel a running task by clicking, retry it, then cancel it again.
  await visit(page, `#/tasks/${held.id}`, 'h1 [data-status="running"]');
  await page.click('#cancel');
  await page.waitForSelector('h1 [data-status="cancelled"]', WAIT);
  await page.click('#retry');
  await notice(page, 'scheduled again');
  await page.waitForFunction(() => document.querySelector('h1 [data-status]')?.dataset.status !== 'cancelled', null, WAIT);
  await page.click('#cancel');
  await page.waitForSelector('h1 [data-status="cancelled"]', WAIT);
  done.cancelled = held.id;
  // The handlers table counts its cancelled runs (statistics are kept as runs end).
  await visit(page, '#/', '#chart svg');
  const cancelledRuns = () => {
    const table = document.querySelector('#by-handler table');
    const col = table ? [...table.querySelectorAll('th')].findIndex((th) => th.textContent === 'Cancelled') : -1;
    const row = table && [...table.querySelectorAll('tr')]
      .find((tr) => tr.children[0]?.textContent === 'probe' && tr.children[1]?.textContent === 'held');
    return col < 0 || !row ? 0 : Number(row.children[col].textContent);
  };
  await page.waitForFunction(cancelledRuns, null, WAIT);
  done.handler_cancelled = await page.evaluate(cancelledRuns);

  // Hostile data is shown as text: no element, no script.
  await visit(page, `#/tasks/${hostile.id}`, '#task-data pre');
  const shown = await page.textContent('#task-data pre');
  if (!shown.includes('<img src=x onerror=')) problems.push(`the data is not shown as text: ${shown}`);
  if (await page.evaluate(() => window.__xss !== undefined || document.querySelector('main img') !== null)) {
    problems.push('task data became markup');
  }
  await page.waitForSelector('#delete', WAIT);
  await page.click('#delete');
  await notice(page, `Task ${hostile.id} deleted.`);
  await page.waitForSelector('#task-list', WAIT);
  done.deleted = hostile.id;

  // Pause and resume a queue.
  await visit(page, '#/queues', 'tr[data-key="mail"] [data-action="pause"]');
  await page.click('tr[data-key="mail"] [data-action="pause"]');
  await page.waitForSelector('tr[data-key="mail"] .badge.paused', WAIT);
  done.paused = (await call('GET', '/queues')).queues.find((q) => q.name === 'mail').paused_on !== null;
  await page.waitForSelector('tr[data-key="nobody"] .badge.unclaimed', WAIT);
  done.unclaimed = await page.textContent('tr[data-key="nobody"] .badge.unclaimed');
  await shot(page, 'queues');
  await page.click('tr[data-key="mail"] [data-action="resume"]');
  await page.waitForSelector('tr[data-key="mail"] [data-action="pause"]', WAIT);
  // The queues page follows the event stream: a task queued elsewhere asks for a read, which
  // draws its queue. (Its stream open first: a new stream is not told of earlier tasks.)
  await page.waitForSelector('body[data-stream="open"]', WAIT);
  const reads = Number(await page.getAttribute('body', 'data-event-reads'));
  await call('POST', '/tasks', { handler: 'echo', queue: 'told' });
  await page.waitForFunction((r) => Number(document.body.dataset.eventReads || 0) > r, reads, WAIT);
  await page.waitForSelector('tr[data-key="told"]', WAIT);
  done.queues_told = true;

  // Trigger and pause a schedule.
  await visit(page, '#/schedules', 'tr[data-key="nightly"] [data-action="trigger"]');
  await page.click('tr[data-key="nightly"] [data-action="trigger"]');
  await notice(page, 'queued task');
  await page.click('tr[data-key="nightly"] [data-action="pause"]');
  await page.waitForSelector('tr[data-key="nightly"] [data-action="resume"]', WAIT);

  // Filter by text in the data, then cancel a whole page of tasks at once.
  await visit(page, '#/tasks?queue=mail', `tr[data-key="${mail.tasks[2].id}"]`);
  await page.fill('#f-text', 'needle');
  await page.click('.filters button[type=submit]');
  await page.waitForFunction(() => document.querySelectorAll('#task-list tbody tr').length === 1, null, WAIT);
  await page.fill('#f-text', '');
  await page.click('.filters button[type=submit]');
  await page.waitForFunction(() => document.querySelectorAll('#task-list tbody tr').length === 3, null, WAIT);
  await page.click('#select-page');
  await page.click('#bulk-cancel');
  await notice(page, 'Cancelled 3');
  await page.waitForFunction(() => [...document.querySelectorAll('#task-list [data-status]')]
    .every((b) => b.dataset.status === 'cancelled'), null, WAIT);
  done.bulk_cancelled = mail.tasks.map((t) => t.id);

  // The overview's "Awaiting retry" lists by state: the dead letter, whose latest run also
  // failed, is not among them; filtered as dead, it is.
  await visit(page, '#/', '#chart svg');
  // Every card that links to a list filters by what the list's form shows.
  done.card_links = await page.$$eval('.card.stat[href]', (cards) => cards.map((c) => c.getAttribute('href')));
  await follow(page, 'a[href="#/tasks?state=awaiting-retry"]', '#/tasks?state=awaiting-retry');
  await page.waitForSelector('#task-list p.empty, #task-list table', WAIT);
  done.awaiting_retry = await page.$$eval('#task-list tr[data-key]', (rows) => rows.map((r) => Number(r.dataset.key)));
  await page.selectOption('#f-state', 'dead');
  await page.click('form.filters button[type=submit]');
  await page.waitForSelector(`#task-list tr[data-key="${failing.id}"]`, WAIT);
  done.dead_by_state = await page.$$eval('#task-list tr[data-key]', (rows) => rows.map((r) => Number(r.dataset.key)));

  // Replay a dead letter.
  await visit(page, '#/dead', `tr[data-key="${failing.id}"]`);
  await shot(page, 'dead-letters');
  // Its failures against the number allowed, and when it was given up: how long ago and the time.
  done.dead_row = await page.textContent(`tr[data-key="${failing.id}"]`);
  await page.check(`tr[data-key="${failing.id}"] input[type=checkbox]`);
  await page.click('#bulk-retry');
  await notice(page, 'Scheduled 1 again');
  done.replayed = failing.id;

  // Live updates pause and resume.
  await visit(page, '#/', '#chart svg');
  await page.click('#live');
  await page.waitForSelector('body[data-live="off"] #live[aria-pressed="false"]', WAIT);
  const stamp = await page.getAttribute('body', 'data-updated');
  await page.click('#live');
  await page.waitForFunction((s) => document.body.dataset.updated !== s, stamp, WAIT);

  for (const [hash, ready, name] of [['#/runners', '#page-body tr[data-key]', 'runners'],
    ['#/plugins', '#page-body tr[data-key="probe"]', 'plugins'], ['#/schedules', 'tr[data-key="nightly"]', 'schedules']]) {
    await visit(page, hash, ready);
    await shot(page, name);
  }

  // Limits, last: set a cap, a cap and a rate per key on queue keyed (the Rust test queued two tasks of
  // one key there, and no worker claims it: one is held back) and a key's weight through the
  // form, see both listed, clear the key's by its button; the keys table lists the key.
  await visit(page, '#/limits', '#limit-form');
  await setLimit(page, 'queue:keyed', { max_running: 1, max_running_per_key: 1, rate_limit_per_key: '5/1s', rate_burst_per_key: 2,
    fuel_per_turn: 2000000, on_success: 'delete' });
  await setLimit(page, 'key:tenant-a', { weight: 3 });
  await page.waitForFunction((names) => names.every((n) => document.querySelector(`#limit-list tr[data-key="${n}"]`)),
    ['queue:keyed', 'key:tenant-a'], WAIT);
  done.limits_shown = await page.$$eval('#limit-list tr[data-key]', (rows) => rows.map((r) => r.dataset.key));
  done.held_back_shown = await page.evaluate(cellText, ['#limit-list', 'queue:keyed', 'Held back']);
  done.rate_per_key_shown = await page.evaluate(cellText, ['#limit-list', 'queue:keyed', 'Rate per key']);
  done.fuel_per_turn_shown = await page.evaluate(cellText, ['#limit-list', 'queue:keyed', 'Fuel per turn']);
  done.on_success_shown = await page.evaluate(cellText, ['#limit-list', 'queue:keyed', 'On success']);
  await page.waitForSelector('#key-list tr[data-key="keyed/tenant-b"]', WAIT);
  done.keys_shown = await page.$$eval('#key-list tr[data-key]', (rows) => rows.map((r) => r.children[0].textContent));
  await shot(page, 'limits');
  const gone = (selector) => !document.querySelector(selector);
  const tenant = '#limit-list tr[data-key="key:tenant-a"]';
  // (No wait on the notice: a click repeated after a slow answer is told it was not set.)
  await clickUntil(page, `${tenant} [data-action="clear"]`, gone, tenant);
  done.limit_cleared = 'key:tenant-a';

  // A phone: the same pages fit its width.
  const phone = await open({ width: 390, height: 844 });
  for (const [hash, ready, name] of [['#/', '#chart svg', 'phone-overview'], [`#/tasks/${slow.id}`, '[data-run]', 'phone-task'],
    ['#/tasks', '#task-list tr[data-key]', 'phone-tasks']]) {
    await visit(phone, hash, ready);
    const wide = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    if (wide > 0) problems.push(`${hash} is ${wide} px wider than a phone`);
    await shot(phone, name);
  }
} catch (e) {
  problems.push(`${e.message}`);
  if (page) await shot(page, 'failure').catch(() => {});
} finally {
  await browser.close();
}
console.log(JSON.stringify({ problems, ...done }));
process.exit(problems.length ? 1 : 0);
