// The admin console end to end (docs/operations.md "Console"): the release
// gateway and the mock upstream, a few requests (an answer, a stream, an
// upstream 503), then headless Chromium signs in through the password field
// (a wrong key refused, the right one lands on Overview) and visits each page
// by its link, checking what it shows against what was sent. A screenshot of
// each page goes to target/console-artifacts/.
//
// The Keys and Teams pages, which need the key API (POST /admin/keys, ...),
// are in keys-teams.test.mjs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, launch, newPage, artifacts, shown, visit, ADMIN_KEY, MODEL } from './stack.mjs';

let stack;
let browser;
let tab;
const shots = artifacts();

before(async () => {
  stack = await startStack();
  browser = await launch();
  tab = await newPage(browser);
});

after(async () => {
  await browser?.close();
  await stack?.stop();
});

const IDS = { ok: 'console-ui-ok', stream: 'console-ui-stream', error: 'console-ui-error' };

test('traffic reaches the ledger', async () => {
  const ok = await stack.chat(IDS.ok, 'hello console');
  assert.equal(ok.status, 200, await ok.text());
  const stream = await stack.chat(IDS.stream, 'stream for the console', { stream: true });
  assert.equal(stream.status, 200);
  assert.match(await stream.text(), /\[DONE\]/);
  // The mock answers 503: the upstream cools and the client gets an error.
  const failed = await stack.chat(IDS.error, 'fail [[status:503]]');
  assert.ok(failed.status >= 500, `status ${failed.status}`);
  await failed.text();
  const deadline = Date.now() + 10000;
  for (;;) {
    const r = await stack.adminGet('/admin/requests');
    if (r.body && r.body.data.length === 3) break;
    assert.ok(Date.now() < deadline, `ledger rows: ${JSON.stringify(r.body)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
});

test('sign-in: a wrong key is refused, the right one opens Overview', async () => {
  const { page } = tab;
  await page.goto(stack.admin + '/admin/ui/');
  const field = page.locator('#admin-key');
  assert.equal(await field.getAttribute('type'), 'password');
  await field.fill('sk-not-the-admin-key');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('That key was refused').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  await page.screenshot({ path: join(shots, 'signin.png') });
  await field.fill(ADMIN_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForSelector('main[data-page="overview"]');
  assert.ok(page.url().endsWith('/admin/ui/#/overview'), page.url());
  assert.ok(!page.url().includes(ADMIN_KEY));
  assert.equal(await page.evaluate(() => localStorage.length), 0);
  assert.equal(await field.inputValue(), '', 'the field is cleared');
  await page.getByText('signed in as admin-key').waitFor();
});

test('Overview: totals and charts with data points', async () => {
  const { page } = tab;
  await page.waitForSelector('svg[data-chart="Requests"] circle.pt');
  assert.equal(await page.locator('#tile-requests .v').textContent(), '3');
  assert.equal(await page.locator('#tile-errors .v').textContent(), '1');
  for (const chart of ['Requests', 'Errors', 'Mean latency (ms)', 'Spend (USD)']) {
    const points = page.locator(`svg[data-chart="${chart}"] circle.pt`);
    assert.ok((await points.count()) >= 1, `${chart}: no data point`);
  }
  // The requests chart's points add up to what was sent, all on the model.
  const values = await page.locator('svg[data-chart="Requests"] circle.pt').evaluateAll((cs) => cs.map((c) => [c.dataset.series, Number(c.dataset.value)]));
  assert.equal(values.reduce((a, [, v]) => a + v, 0), 3);
  assert.ok(values.every(([s]) => s === MODEL), JSON.stringify(values));
  await shown(page);
  await page.screenshot({ path: join(shots, 'overview.png'), fullPage: true });
  await page.locator('#ov-range').selectOption('30d');
  await page.waitForSelector('svg[data-chart="Spend (USD)"] circle.pt');
});

test('Requests: the requests just sent, with their attempts', async () => {
  const { page } = tab;
  await visit(page, 'Requests');
  for (const id of Object.values(IDS)) await page.waitForSelector(`tr[data-request="${id}"]`);
  const order = await page.locator('tr[data-request]').evaluateAll((rows) => rows.map((r) => r.dataset.request));
  assert.deepEqual(order, [IDS.error, IDS.stream, IDS.ok]);
  await page.locator(`tr[data-request="${IDS.error}"]`).click();
  const detail = page.locator(`tr[data-detail="${IDS.error}"]`);
  await detail.waitFor();
  const text = await detail.textContent();
  assert.match(text, /status_5xx/);
  assert.match(text, /503/);
  assert.match(text, /Error: /);
  await page.locator('#req-status').selectOption('error');
  await page.waitForFunction(() => document.querySelectorAll('tr[data-request]').length === 1);
  assert.equal(await page.locator('tr[data-request]').getAttribute('data-request'), IDS.error);
  await page.locator('#req-status').selectOption('');
  await page.waitForFunction(() => document.querySelectorAll('tr[data-request]').length === 3);
  await page.locator(`tr[data-request="${IDS.error}"]`).click();
  await shown(page);
  await page.screenshot({ path: join(shots, 'requests.png'), fullPage: true });
});

test('Usage: grouped by model with its cost, and the CSV download', async () => {
  const { page } = tab;
  await visit(page, 'Usage');
  const row = page.locator(`#usage tbody tr[data-group="${MODEL}"]`);
  await row.waitFor();
  const cells = await row.locator('td').allTextContents();
  assert.equal(cells[1], '3', `requests: ${cells}`);
  assert.equal(cells[2], '1', `errors: ${cells}`);
  assert.match(cells[cells.length - 1], /^\$\d/, `cost: ${cells}`);
  assert.notEqual(cells[cells.length - 1], '$0');
  const [download] = await Promise.all([page.waitForEvent('download'), page.locator('#usage-csv').click()]);
  assert.equal(download.suggestedFilename(), 'switchboard-usage-by-model.csv');
  const csv = readFileSync(await download.path(), 'utf8');
  const lines = csv.split('\r\n');
  assert.match(lines[0], /^model,requests,errors,input_tokens,output_tokens,/);
  const line = lines.find((l) => l.startsWith(MODEL + ','));
  assert.ok(line, csv);
  assert.equal(line.split(',')[1], '3');
  const api = await stack.adminGet(`/admin/usage?group_by=model&from=${new Date(Date.now() - 6 * 86400000).toISOString().slice(0, 10)}`);
  const group = api.body.groups.find((g) => g.model === MODEL);
  assert.equal(Number(line.split(',')[8]), group.cost_usd);
  await shown(page);
  await page.screenshot({ path: join(shots, 'usage.png'), fullPage: true });
});

test('Upstreams: health and the recent failure, live', async () => {
  const { page } = tab;
  await visit(page, 'Upstreams');
  const qwen = page.locator('section[data-provider="qwen"]');
  await qwen.waitFor();
  assert.match(await qwen.textContent(), /status_5xx 503 · \d+ s ago/);
  assert.match(await qwen.locator('.badge').first().textContent(), /healthy|half-open|cooling/);
  const stamp = await page.locator('#upstreams-updated').textContent();
  await page.waitForFunction((s) => document.querySelector('#upstreams-updated').textContent !== s, stamp);
  await shown(page);
  await page.screenshot({ path: join(shots, 'upstreams.png'), fullPage: true });
});

test('the page stays on its own origin, within its policy, and signs out', async () => {
  const { page, seen } = tab;
  const origin = new URL(stack.admin).origin;
  const foreign = seen.requests.filter((u) => !u.startsWith(origin) && !u.startsWith('blob:'));
  assert.deepEqual(foreign, []);
  assert.ok(seen.requests.every((u) => !u.includes(ADMIN_KEY)), 'the key in a URL');
  const violations = seen.messages.filter((m) => /Content Security Policy|pageerror|Refused/.test(m));
  assert.deepEqual(violations, []);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.locator('#signin').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  // A stale key in the tab (revoked meanwhile): the first 401 signs out.
  await page.evaluate(() => sessionStorage.setItem('switchboard.console.token', 'sk-stale'));
  await page.goto(stack.admin + '/admin/ui/#/requests');
  await page.getByText('Signed out: the admin API refused the key.').waitFor();
});
