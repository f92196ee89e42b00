// Debian's Chromium through playwright-core (from PLAYWRIGHT_DIR), and pages that record every
// console error or warning, uncaught exception and failed request as a problem.

import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';

const { chromium } = createRequire(`${process.env.PLAYWRIGHT_DIR}/`)('playwright-core');

export const WAIT = { timeout: 30_000 };

export function launch() {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--no-first-run', '--disable-sync', '--disable-quic'],
  });
}

/**
 * A page of `viewport` whose problems go to `problems`; `expected(status, url)` says which
 * error answers the scenario causes on purpose (the browser logs those too).
 */
export async function open(browser, viewport, problems, expected = () => false) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const allowed = new Set();
  page.on('response', (r) => {
    if (r.status() < 400) return;
    if (expected(r.status(), r.url())) allowed.add(r.status());
    else problems.push(`${r.status()} from ${r.url()}`);
  });
  page.on('console', (m) => {
    if (m.type() !== 'error' && m.type() !== 'warning') return;
    // The browser's own line for an error answer the scenario expects ("... status of 401 ...").
    const status = Number((m.text().match(/^Failed to load resource: .*status of (\d+)/) || [])[1]);
    if (allowed.has(status)) return;
    problems.push(`${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => {
    // The event stream is closed by the page when live updates pause, and by the browser when the
    // page closes: aborted, not failed.
    const aborted = r.failure()?.errorText === 'net::ERR_ABORTED';
    if (aborted && new URL(r.url()).pathname === '/api/v1/events') return;
    problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('dialog', (d) => d.accept());
  return page;
}

export function screenshots(dir) {
  mkdirSync(dir, { recursive: true });
  return (page, name) => page.screenshot({ path: `${dir}/${name}.png`, fullPage: true });
}

/** Wait until the notice under the header says `text`. */
export function notice(page, text) {
  return page.waitForFunction((t) => document.getElementById('notice').textContent.includes(t), text, WAIT);
}
