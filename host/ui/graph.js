// A task's workflow as a small graph: the tasks it comes from (its parent, and the tasks it runs
// after) on the left, the task, and the tasks its runs queued on the right, each a box linking
// to its page and coloured by its state. Drawn from text nodes only, as every page: handler
// names are anyone's to choose.

const NS = 'http://www.w3.org/2000/svg';
const BOX = { w: 190, h: 30, gap: 10, col: 250 };
// The most boxes a column shows; the rest are counted.
const MOST = 12;

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function clip(text, most) {
  return text.length > most ? `${text.slice(0, most - 1)}…` : text;
}

/** The graph: `from` ({id, handler, state, how: 'parent' | 'after'}), the task, `to` (its children). */
export function workflow(task, from, to) {
  const columns = [from, [{ ...task, how: 'self' }], to].map((c) => c.slice(0, MOST));
  const more = [from.length, 1, to.length].map((n, i) => n - columns[i].length);
  const rows = Math.max(...columns.map((c, i) => c.length + (more[i] > 0 ? 1 : 0)), 1);
  const height = rows * (BOX.h + BOX.gap);
  const place = (i, j, n) => ({ x: i * BOX.col, y: (height - n * (BOX.h + BOX.gap)) / 2 + j * (BOX.h + BOX.gap) });
  const svg = s('svg', { id: 'task-graph', class: 'graph', viewBox: `0 0 ${2 * BOX.col + BOX.w} ${height}`,
    role: 'img', 'aria-label': `Task ${task.id}'s workflow` });
  const self = place(1, 0, 1);
  // Edges first, under the boxes: into the task from the left, out of it to the right.
  columns.forEach((col, i) => col.forEach((n, j) => {
    if (i === 1) return;
    const p = place(i, j, col.length);
    const [a, b] = i === 0 ? [p, self] : [self, p];
    svg.append(s('line', { x1: a.x + BOX.w, y1: a.y + BOX.h / 2, x2: b.x, y2: b.y + BOX.h / 2,
      class: `edge ${n.how === 'after' ? 'after' : 'queued'}` }));
  }));
  columns.forEach((col, i) => col.forEach((n, j) => {
    const p = place(i, j, col.length);
    const name = n.handler || '';
    const label = `#${n.id} ${clip(name, 16)}`;
    const how = { parent: 'queued it', after: 'runs before it', self: 'this task' }[n.how] || 'queued by it';
    svg.append(s('a', { href: `#/tasks/${n.id}`, 'data-task': n.id, 'data-state': n.state, class: `node ${n.state}` },
      s('title', {}, `Task ${n.id}${name ? ` (${name})` : ''}: ${n.state}; ${how}`),
      s('rect', { x: p.x, y: p.y, width: BOX.w, height: BOX.h, rx: 6 }),
      s('text', { x: p.x + 8, y: p.y + BOX.h / 2 + 4 }, label),
      s('text', { x: p.x + BOX.w - 8, y: p.y + BOX.h / 2 + 4, 'text-anchor': 'end', class: 'state' }, n.state)));
  }));
  more.forEach((n, i) => {
    if (n <= 0) return;
    const p = place(i, columns[i].length, columns[i].length + 1);
    svg.append(s('text', { x: p.x + 8, y: p.y + BOX.h / 2 + 4, class: 'more' }, `and ${n} more`));
  });
  return svg;
}
