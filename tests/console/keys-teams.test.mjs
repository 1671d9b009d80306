// The console's Keys and Teams pages end to end (docs/operations.md
// "Console"), against the key API (POST/GET/PATCH/DELETE /admin/keys,
// /admin/keys/{id}/rotate, /admin/teams): a key created (its secret shown
// once, gone after a reload, working against the gateway), found by the
// filter, rotated (the old secret refused, the new one working), revoked
// (state revoked, the key refused); a team created and its budget edited.
// Screenshots: target/console-artifacts/keys.png, teams.png.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startStack, launch, newPage, artifacts, shown, visit, ADMIN_KEY } from './stack.mjs';

let stack;
let browser;
let tab;
const shots = artifacts();
const ID = 'console-made';
const TEAM = 'console-team';

before(async () => {
  stack = await startStack();
  browser = await launch();
  tab = await newPage(browser);
  const { page } = tab;
  await page.goto(stack.admin + '/admin/ui/');
  await page.locator('#admin-key').fill(ADMIN_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForSelector('main[data-page="overview"]');
});

after(async () => {
  await browser?.close();
  await stack?.stop();
});

const status = async (r) => {
  await r.text();
  return r.status;
};

test('Keys: create (the secret shown once), filter, rotate, revoke', async () => {
  const { page } = tab;
  await visit(page, 'Keys');
  await page.locator('#new-key-id').fill(ID);
  await page.locator('#new-key-rpm').fill('60');
  await page.locator('#new-key-budget').fill('5.00');
  await page.getByRole('button', { name: 'Create key' }).click();
  const secret = (await page.locator('#secret-value').textContent()).trim();
  assert.ok(secret.length >= 16, `secret ${secret}`);
  await page.waitForSelector(`tr[data-key="${ID}"]`);
  assert.equal(await status(await stack.chat('console-key-1', 'with the new key', { key: secret })), 200);

  // Shown once: a reload has no trace of it.
  await page.reload();
  await page.waitForSelector(`tr[data-key="${ID}"]`);
  assert.equal(await page.locator('#new-secret').count(), 0);
  assert.ok(!(await page.content()).includes(secret));
  const row = page.locator(`tr[data-key="${ID}"]`);
  assert.match(await row.textContent(), /active/);
  assert.match(await row.textContent(), /\$5\.00 \/ day/);

  // The filter narrows the list as one types.
  await page.locator('#keys-filter').fill('no-such-key-anywhere');
  await page.getByText('No key matches the filter.').waitFor();
  await page.locator('#keys-filter').fill(ID.slice(0, 10));
  await row.waitFor();

  // Rotate with no grace: the old secret is refused, the new one works.
  await row.getByRole('button', { name: 'Rotate' }).click();
  await page.locator('#rotate-grace').fill('0');
  await page.getByRole('button', { name: 'Rotate now' }).click();
  await page.waitForFunction((old) => {
    const v = document.querySelector('#secret-value');
    return v && v.textContent.trim() !== old;
  }, secret);
  const rotated = (await page.locator('#secret-value').textContent()).trim();
  assert.equal(await status(await stack.chat('console-key-2', 'old secret', { key: secret })), 401);
  assert.equal(await status(await stack.chat('console-key-3', 'new secret', { key: rotated })), 200);
  await shown(page);
  await page.screenshot({ path: join(shots, 'keys.png'), fullPage: true });

  // Revoke (two clicks): state revoked, the key refused.
  await page.locator(`tr[data-key="${ID}"]`).getByRole('button', { name: 'Revoke' }).click();
  await page.locator(`tr[data-key="${ID}"]`).getByRole('button', { name: 'Confirm revoke' }).click();
  // The list reloads: the row says revoked (or, if the default list leaves
  // revoked keys out, is gone), with no action left on it.
  await page.waitForFunction((id) => {
    const row = document.querySelector(`tr[data-key="${id}"]`);
    return !row || (/revoked/.test(row.textContent) && !row.querySelector('button'));
  }, ID);
  const refused = await stack.chat('console-key-4', 'revoked', { key: rotated });
  assert.equal(refused.status, 401);
  assert.match(await refused.text(), /revoked/);
  await page.locator('#keys-state').selectOption('revoked');
  await page.waitForFunction((id) => /revoked/.test(document.querySelector(`tr[data-key="${id}"]`)?.textContent || ''), ID);
  await page.locator('#keys-state').selectOption('active');
  await page.waitForFunction((id) => !document.querySelector(`tr[data-key="${id}"]`), ID);
  const api = await stack.adminGet(`/admin/keys/${ID}`);
  assert.equal(api.body.state, 'revoked');
});

test('Teams: create, then edit the budget', async () => {
  const { page } = tab;
  await visit(page, 'Teams');
  await page.locator('#new-team-id').fill(TEAM);
  await page.locator('#new-team-rpm').fill('100');
  await page.locator('#new-team-budget').fill('10');
  await page.getByRole('button', { name: 'Create team' }).click();
  const row = page.locator(`tr[data-team="${TEAM}"]`);
  await row.waitFor();
  assert.match(await row.textContent(), /\$10\.00 \/ day/);
  await row.getByRole('button', { name: 'Edit' }).click();
  await page.locator('#edit-budget').fill('25');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.waitForFunction((id) => /\$25\.00/.test(document.querySelector(`tr[data-team="${id}"]`)?.textContent || ''), TEAM);
  const api = await stack.adminGet(`/admin/teams/${TEAM}`);
  assert.equal(Number(api.body.budget.usd), 25);
  assert.equal(api.body.rpm?.limit ?? api.body.rpm, 100);
  await shown(page);
  await page.screenshot({ path: join(shots, 'teams.png'), fullPage: true });
});
