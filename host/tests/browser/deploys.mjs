// Deploys on the Plugins page in Debian's Chromium (playwright-core): with a deploy token, a
// component of another world is refused in one line, two versions of `greet` are deployed through
// the form, its versions page lists both and rolls back to the first by its button. Before, from
// Node as an application would (FormData, as `curl -F`): a write token may not deploy, and a file
// that is not WebAssembly is refused. Prints what it saw as one JSON line.
//
//   node deploys.mjs http://127.0.0.1:PORT SCREENSHOT_DIR DEPLOY_TOKEN WRITE_TOKEN V1 V2 WRONG

import { launch, open, screenshots, notice, WAIT } from './browser.mjs';

const [base, shots, deployToken, writeToken, v1, v2, wrong] = process.argv.slice(2);
const shot = screenshots(shots);
const problems = [];
const done = {};

async function post(token, name, bytes) {
  const form = new FormData();
  form.append('component', new Blob([bytes]), `${name}.wasm`);
  // Encoded first and sent in one piece: a refusal answered before the body is read then
  // reaches the caller rather than a broken pipe.
  const encoded = new Response(form);
  const headers = { Authorization: `Bearer ${token}`, 'Content-Type': encoded.headers.get('content-type') };
  const res = await fetch(`${base}/api/v1/plugins/${name}/versions`,
    { method: 'POST', headers, body: await encoded.arrayBuffer() });
  return [res.status, await res.json()];
}

const [writeStatus, writeAnswer] = await post(writeToken, 'greet', Buffer.from('\0asm'));
done.write_token = [writeStatus, writeAnswer.error?.code, writeAnswer.error?.message];
const [textStatus, textAnswer] = await post(deployToken, 'greet', Buffer.from('not a component'));
done.not_wasm = [textStatus, textAnswer.error?.code, textAnswer.error?.message];

const browser = await launch();
let page;
try {
  // The first answers are 401 (no token yet), the refused deploy's 400: both on purpose.
  page = await open(browser, { width: 1280, height: 900 }, problems,
    (status, url) => (status === 401 || status === 400) && url.includes('/api/v1/'));
  await page.goto(`${base}/#/plugins`);
  await page.waitForSelector('#token-form', WAIT);
  await page.fill('#token', deployToken);
  await page.click('#token-form button[type=submit]');
  await page.waitForSelector('#deploy-form', WAIT);

  const deploy = async (file, said) => {
    await page.fill('#deploy-form [data-field="name"]', 'greet');
    await page.setInputFiles('#deploy-form [data-field="component"]', file);
    await page.click('#deploy-form button[type=submit]');
    await notice(page, said);
    done.notices = [...(done.notices || []), await page.textContent('#notice')];
  };
  await deploy(wrong, 'refused greet: ');
  await deploy(v1, 'Deployed greet');
  await deploy(v2, 'Deployed greet');
  await page.waitForSelector('#page-body tr[data-key="greet"] [data-action="versions"]', WAIT);
  done.listed = await page.textContent('#page-body tr[data-key="greet"]');
  await shot(page, 'plugins-deployed');

  await page.click('#page-body tr[data-key="greet"] [data-action="versions"]');
  await page.waitForSelector('#page-body tr[data-key] [data-action="rollback"]', WAIT);
  done.versions = await page.$$eval('#page-body > .scroll tr[data-key]', (rows) => rows.map((r) => r.dataset.key));
  const older = await page.getAttribute('#page-body tr[data-key]:has([data-action="rollback"])', 'data-key');
  await page.click(`#page-body tr[data-key="${older}"] [data-action="rollback"]`);
  await notice(page, 'greet rolled back to');
  await page.waitForFunction((d) => !document.querySelector(`#page-body tr[data-key="${d}"] [data-action="rollback"]`), older, WAIT);
  done.rolled_back_to = older;
  done.releases = await page.$$eval('#page-body section tr[data-key]', (rows) => rows.map((r) => r.children[2].textContent));
  await shot(page, 'versions');
} catch (e) {
  problems.push(e.message);
  if (page) await shot(page, 'failure').catch(() => {});
} finally {
  await browser.close();
}
console.log(JSON.stringify({ problems, ...done }));
process.exit(problems.length ? 1 : 0);
