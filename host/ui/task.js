// A task: what it was queued with, its runs newest first (live progress, partial and final
// results, logs, error, digest, fuel, timings), and what can be done with it now.

import { api, act, hold, leave, notify } from './app.js';
import { h, fill, put, badge, bar, when, duration, number, json, button, section, taskLink } from './view.js';
import { workflow } from './graph.js';

export function mount(main, id) {
  const head = h('div', { class: 'task-head' });
  const facts = h('dl', { class: 'facts', id: 'task-facts' });
  const data = h('div', { id: 'task-data' });
  const runs = h('div', { id: 'runs' });
  const children = h('div', { id: 'task-children' });
  const graph = h('div', { class: 'chart' });
  const flow = section('Workflow', graph);
  put(main, head, facts, flow, section('Data', data), section('Children', children), section('Runs', runs));
  let shownData = null;
  return {
    async refresh(current) {
      // What may be done with it now is the server's to say (by its state).
      const [{ task, runs: list, allows, after = [] }, kids] = await Promise.all([
        api('GET', `/tasks/${id}`), api('GET', `/tasks?parent=${id}&order=oldest&limit=100`)]);
      const parent = task.parent_id ? await api('GET', `/tasks/${task.parent_id}`).catch(() => null) : null;
      if (!current()) return;
      // A task alone in its workflow has no graph.
      const from = [...(parent ? [{ ...parent.task, how: 'parent' }] : []), ...after.map((d) => ({ ...d, how: 'after' }))];
      flow.hidden = from.length === 0 && kids.tasks.length === 0;
      if (!flow.hidden) fill(graph, workflow(task, from, kids.tasks));
      // The tasks its runs queued (the first hundred), each with its state.
      fill(children, kids.tasks.length === 0 ? h('p', { class: 'muted' }, 'None: its runs queued no task.')
        : h('ul', { class: 'plain' }, ...kids.tasks.map((k) => h('li', {},
          taskLink(k.id), ` ${k.handler} `, badge(k.state)))));
      const unfinished = allows.includes('cancel');
      const replayable = allows.includes('replay');
      fill(head,
        h('h1', {}, `Task #${task.id} `, badge(task.state)),
        h('div', { class: 'actions' },
          unfinished && button('Cancel', () => act(`Task ${id} cancelled.`, () => api('POST', `/tasks/${id}/cancel`)), { id: 'cancel' }),
          replayable && button(task.state === 'dead' ? 'Replay' : 'Retry', () => {
            // Running a succeeded task again repeats what it did (a payment, a mail): ask first.
            if (task.state === 'succeeded' && !confirm(`Run task ${id} again? It succeeded already.`)) return;
            return act((a) => `Task ${id} scheduled again (attempt ${a.attempt}).`, () => api('POST', `/tasks/${id}/retry`));
          }, { id: 'retry' }),
          allows.includes('delete') && button('Delete', async () => {
            if (!confirm(`Delete task ${id} and its runs? This cannot be undone.`)) return;
            const resume = await hold();
            try {
              await api('DELETE', `/tasks/${id}`);
              leave('#/tasks');
              notify(`Task ${id} deleted.`);
            } catch (e) {
              resume();
              notify(e.message, 'error');
            }
          }, { id: 'delete', class: 'danger' })));
      fill(facts, ...fact('Handler', h('a', { href: `#/tasks?handler=${encodeURIComponent(task.handler)}` }, task.handler)),
        ...fact('Queue', h('a', { href: `#/tasks?queue=${encodeURIComponent(task.queue)}` }, task.queue)),
        ...fact('Priority', task.priority),
        ...fact('Queued', when(task.queued_on), task.queued_by ? ` by ${task.queued_by}` : ''),
        ...fact(unfinished ? 'Due' : 'Last due', when(task.scheduled_on)),
        ...fact('Attempts failed', `${task.task_runs_failed} of ${task.max_attempts}`),
        ...(task.snoozes ? fact('Snoozed', `${task.snoozes} times`) : []),
        ...(task.parent_id ? fact('Parent', taskLink(task.parent_id)) : []),
        // The tasks it runs after, each with its state (a join waits for each to succeed).
        ...(after.length ? fact('Runs after', h('span', { id: 'task-after' }, ...after.flatMap((d) =>
          [taskLink(d.id), ' ', badge(d.state), ' ']))) : []),
        ...(task.state === 'waiting' ? fact('Waiting for', `${task.waiting_for} of ${after.length}`) : []),
        ...(task.gave_up_on ? fact('Given up', when(task.gave_up_on)) : []),
        ...(task.unique_key ? fact('Unique key', h('code', {}, task.unique_key)) : []),
        ...(task.run_timeout_secs ? fact('Run timeout', duration(task.run_timeout_secs * 1000)) : []));
      // The data does not change: drawn once, so a reader's selection in it survives updates.
      const text = JSON.stringify(task.data);
      if (text !== shownData) {
        fill(data, json(task.data));
        shownData = text;
      }
      fill(runs, list.length === 0 ? h('p', { class: 'empty' }, 'No run yet.')
        : [...list].reverse().map(run));
    },
  };
}

// Which result and log blocks a reader opened or closed, kept across updates.
const opened = new Map();

function details(key, openByDefault, summary, body) {
  const d = h('details', { open: opened.has(key) ? opened.get(key) : openByDefault }, h('summary', {}, summary), body);
  d.addEventListener('toggle', () => opened.set(key, d.open));
  return d;
}

function fact(term, ...value) {
  return [h('dt', {}, term), h('dd', {}, value)];
}

function run(r) {
  const ended = r.finished_on !== null && r.finished_on !== undefined;
  const took = r.duration_ms ?? (r.started_on && !ended ? Date.now() - Date.parse(r.started_on) : null);
  return h('article', { class: 'run card', 'data-run': r.id, 'data-status': r.status },
    h('header', {},
      h('h3', {}, `Attempt ${r.attempt} `, h('span', { class: 'muted' }, `run ${r.id}`)), badge(r.status),
      bar(r.status === 'success' ? 100 : r.percents_completed)),
    h('dl', { class: 'facts' },
      fact('Created', when(r.created_on)),
      fact('Started', when(r.started_on)),
      fact('Ended', when(r.finished_on)),
      fact(ended ? 'Took' : 'Running for', duration(took)),
      fact('Fuel', number(r.fuel_used)),
      fact('Runner', r.runner_id ?? '—'),
      fact('Component', r.component_digest ? h('code', { title: r.component_digest }, r.component_digest.slice(0, 16)) : '—')),
    r.error_code && h('div', { class: 'error-box' },
      h('strong', {}, r.error_code), r.error_source ? h('span', { class: 'muted' }, ` (from the ${r.error_source})`) : null,
      h('p', {}, r.error_message || '')),
    r.results !== null && r.results !== undefined &&
      details(`${r.id}/results`, true, ended ? 'Results' : 'Partial results', json(r.results)),
    r.logs && r.logs.length > 0 &&
      details(`${r.id}/logs`, true, `Logs (${r.logs.length} lines)`, h('pre', { class: 'logs' }, r.logs.join('\n'))));
}
