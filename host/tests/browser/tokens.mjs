// With tokens: the dashboard asks for one, keeps it for the tab, shows the queue with a read
// token, and says so when that token's click is refused.
//
//   node tokens.mjs http://127.0.0.1:PORT SCREENSHOT_DIR READ_TOKEN

import { launch, open, screenshots, notice, WAIT } from './browser.mjs';

const [base, shots, token] = process.argv.slice(2);
const shot = screenshots(shots);
const problems = [];
const browser = await launch();
let page;
try {
  // The first answers are 401 (no token yet) and the click's is 403: both on purpose.
  page = await open(browser, { width: 1280, height: 800 }, problems,
    (status, url) => (status === 401 || status === 403) && url.includes('/api/v1/'));
  await page.goto(`${base}/#/queues`);
  await page.waitForSelector('#token-form', WAIT);
  await shot(page, 'token');
  await page.fill('#token', token);
  await page.click('#token-form button[type=submit]');
  await page.waitForSelector('tr[data-key="mail"] [data-action="pause"]', WAIT);
  await page.click('tr[data-key="mail"] [data-action="pause"]');
  await notice(page, 'This token may only read.');
  await page.reload();
  await page.waitForSelector('tr[data-key="mail"]', WAIT);
} catch (e) {
  problems.push(e.message);
  if (page) await shot(page, 'failure').catch(() => {});
} finally {
  await browser.close();
}
console.log(JSON.stringify({ problems }));
process.exit(problems.length ? 1 : 0);
