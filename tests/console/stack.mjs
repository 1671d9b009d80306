// The console suite's fixtures: the release gateway (with --admin-key and a
// data directory of its own) and the mock upstream, on loopback ports, with
// the shipped catalog pointed at the mock (tests/clients/harness.mjs's
// `catalog`); headless Chromium from Debian's package through playwright-core.
//
// Nothing is built here: `${CARGO_TARGET_DIR:-target}/release/switchboard`
// and `.../debug/examples/mock_upstream` must exist (tests/run.sh builds
// them; by hand: `cargo build --release --bin switchboard && cargo build
// --example mock_upstream`).

import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, existsSync, openSync, closeSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, isAbsolute } from 'node:path';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { catalog, PROVIDER_ENV, freePort, waitLine, REPO } from '../clients/harness.mjs';

export const ADMIN_KEY = 'sk-console-admin-secret';
export const CLIENT_KEY = 'sk-console-client';
/// The model the suite's requests use (an OpenAI upstream on the mock).
export const MODEL = 'qwen/qwen-3.6';

export function targetDir() {
  const d = process.env.CARGO_TARGET_DIR || 'target';
  return isAbsolute(d) ? d : join(REPO, d);
}

/// Where each page's screenshot goes: target/console-artifacts/.
export function artifacts() {
  const dir = join(targetDir(), 'console-artifacts');
  mkdirSync(dir, { recursive: true });
  return dir;
}

function binary(rel) {
  const p = join(targetDir(), rel);
  if (!existsSync(p)) throw new Error(`${p} not found: run \`cargo build --release --bin switchboard\` and \`cargo build --example mock_upstream\` first`);
  return p;
}

/// Starts the mock and the gateway; `stop()` ends both.
export async function startStack() {
  const dir = mkdtempSync(join(tmpdir(), 'switchboard-console-'));
  const mock = spawn(binary('debug/examples/mock_upstream'), ['--port', '0'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const mockUrl = 'http://' + (await waitLine(mock, 'listening on ', 30000)).slice('listening on '.length);
  writeFileSync(join(dir, 'catalog.json'), JSON.stringify(catalog(mockUrl)));
  writeFileSync(join(dir, 'keys.json'), JSON.stringify({ keys: [{ id: 'console-client', key: CLIENT_KEY }] }));
  const [port, admin] = [await freePort(), await freePort()];
  const logPath = join(dir, 'gateway.log');
  const log = openSync(logPath, 'w');
  const gw = spawn(binary('release/switchboard'), [
    '--catalog', join(dir, 'catalog.json'),
    '--keys', join(dir, 'keys.json'),
    '--listen', `127.0.0.1:${port}`,
    '--metrics', `127.0.0.1:${admin}`,
    '--admin-key', ADMIN_KEY,
    '--data', join(dir, 'data'),
    '--ledger-flush-ms', '50',
  ], { env: { ...process.env, ...PROVIDER_ENV, RUST_LOG: 'info' }, stdio: ['ignore', log, log] });
  closeSync(log);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30000;
  for (;;) {
    const ok = await fetch(url + '/healthz').then((r) => r.status === 200, () => false);
    if (ok) break;
    if (gw.exitCode !== null || Date.now() > deadline) {
      mock.kill();
      gw.kill('SIGKILL');
      throw new Error(`gateway did not start:\n${readFileSync(logPath, 'utf8')}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    admin: `http://127.0.0.1:${admin}`,
    log: () => readFileSync(logPath, 'utf8'),
    /// An OpenAI chat request as a client sends it; resolves to the response.
    chat(requestId, text, { stream = false, key = CLIENT_KEY } = {}) {
      return fetch(url + '/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId },
        body: JSON.stringify({ model: MODEL, stream, messages: [{ role: 'user', content: text }] }),
      });
    },
    /// GET an admin API path with the admin key.
    async adminGet(path) {
      const r = await fetch(this.admin + path, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      return { status: r.status, body: await r.json().catch(() => null) };
    },
    async stop() {
      for (const p of [gw, mock]) {
        if (p.exitCode === null) {
          p.kill('SIGTERM');
          await Promise.race([new Promise((r) => p.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
          if (p.exitCode === null) p.kill('SIGKILL');
        }
      }
    },
  };
}

/// Headless Chromium: Debian's (`/usr/bin/chromium`, or $CHROMIUM).
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    // As root (CI) Chromium's sandbox cannot start.
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  });
}

/// A page that records what it asked for and every console message, and
/// (with CONSOLE_ASSETS_FROM_SOURCE=1, for working on the assets without a
/// rebuild) is served the script and stylesheet from src/admin/console/assets/.
export async function newPage(browser) {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1360, height: 900 } });
  const page = await context.newPage();
  const seen = { requests: [], messages: [] };
  page.on('request', (r) => seen.requests.push(r.url()));
  page.on('console', (m) => seen.messages.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => seen.messages.push(`pageerror: ${e.message}`));
  if (process.env.CONSOLE_ASSETS_FROM_SOURCE === '1') {
    const assets = join(REPO, 'src', 'admin', 'console', 'assets');
    await page.route(/\/admin\/ui\/app\.(js|css)/, (route) => {
      const file = route.request().url().includes('app.js') ? 'app.js' : 'app.css';
      route.fulfill({ body: readFileSync(join(assets, file)), contentType: file.endsWith('js') ? 'text/javascript' : 'text/css' });
    });
  }
  return { context, page, seen };
}

/// Fails when the page shows a value the script failed to format.
export async function shown(page) {
  const text = await page.locator('main').innerText();
  for (const bad of ['null', 'undefined', 'NaN', '[object Object]']) assert.ok(!text.includes(bad), `"${bad}" on the page:\n${text}`);
}

/// Clicks the nav link named `name` and waits for its page.
export async function visit(page, name) {
  await page.getByRole('link', { name, exact: true }).click();
  await page.waitForSelector(`main[data-page="${name.toLowerCase()}"]`);
}
