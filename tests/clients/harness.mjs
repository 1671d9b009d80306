// Shared fixtures of the real-clients suite: starts the release mock upstream
// and the release `switchboard` on loopback ports, with a test catalog whose
// models are the shipped conf/catalog.json models (same shapes) and whose
// providers all point at the mock; runs client processes with a timeout; reads
// what the mock received.
//
// The gateway is `${CARGO_TARGET_DIR:-target}/release/switchboard`, the mock
// `${CARGO_TARGET_DIR:-target}/debug/examples/mock_upstream`, as for the SDK
// suite (built by tests/run.sh, or by hand: `cargo build --release --bin
// switchboard && cargo build --example mock_upstream`).

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, existsSync, mkdirSync, openSync, closeSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, isAbsolute, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';

export const HERE = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(HERE, '..', '..');
export const BIN = join(HERE, 'node_modules', '.bin');

/// Client keys: the catalog's default policy is `adapt`; each key sets its own.
export const KEYS = { adapt: 'sk-clients-adapt', strict: 'sk-clients-strict' };

/// The one model per upstream wire protocol, as each client family names it.
/// The providers: `qwen` has an OpenAI upstream only, `deepseek` an Anthropic
/// one only, `google` a Gemini one (see `catalog` below), and all three accept
/// every client family, so one model per protocol is reachable from each.
export const MODELS = {
  openai: { id: 'qwen-3.6', provider: 'qwen' },
  anthropic: { id: 'deepseek-v4-pro', provider: 'deepseek' },
  gemini: { id: 'gemini-3.1-flash-lite-preview', provider: 'google' },
  // `moonshotai` is given only a Responses upstream here (section 4.1's
  // `"protocol": "responses"`, called at `{base_url}/responses`).
  responses: { id: 'kimi-2.6', provider: 'moonshotai' },
};
/// The upstream protocols of the first three families, which every client's
/// cells cover.
export const PROTOCOLS = ['openai', 'anthropic', 'gemini'];
/// All four upstream protocols, with the OpenAI Responses API (family D).
export const ALL_PROTOCOLS = [...PROTOCOLS, 'responses'];

/// Where the mock serves each wire protocol (tests/e2e/common/mock_upstream/).
export const MOCK_BASE = { openai: '/openai/v1', anthropic: '/anthropic/v1', gemini: '/gemini/v1beta', responses: '/responses-api/v1' };

/// How the gateway's mock reply reads (tests/e2e/common/mock_upstream/).
export const replyFor = (protocol, text) => `Hello from ${protocol} mock: ${text} ✓ héllo 🌍`;
export const toolReplyPrefix = (protocol) => `Hello from ${protocol} mock: tool result: `;

function targetDir() {
  const d = process.env.CARGO_TARGET_DIR || 'target';
  return isAbsolute(d) ? d : join(REPO, d);
}

function binary(rel) {
  const p = join(targetDir(), rel);
  if (!existsSync(p)) {
    throw new Error(`${p} not found: run \`cargo build --release --bin switchboard\` and \`cargo build --example mock_upstream\` first`);
  }
  return p;
}

export function freePort() {
  return new Promise((ok, fail) => {
    const s = net.createServer();
    s.unref();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/// A model of the shipped catalog.
export function shippedModel(id) {
  const shipped = JSON.parse(readFileSync(join(REPO, 'conf', 'catalog.json'), 'utf8'));
  const m = shipped.models.find((x) => x.id === id);
  if (!m) throw new Error(`shipped catalog has no model ${id}`);
  return m;
}

/// The shipped catalog with every provider's upstreams pointed at the mock.
/// With `responses` (the default) `moonshotai` gets a Responses upstream only;
/// without it (a gateway that does not know that protocol yet refuses such a
/// catalog) its OpenAI and Anthropic ones.
export function catalog(mockUrl, { responses = true } = {}) {
  const shipped = JSON.parse(readFileSync(join(REPO, 'conf', 'catalog.json'), 'utf8'));
  const up = (protocol) => ({ protocol, base_url: mockUrl + MOCK_BASE[protocol], api_key_env: `SB_CLIENTS_KEY_${protocol.toUpperCase()}` });
  // One upstream protocol per provider, so that each model's route is known.
  const upstreams = {
    openai: ['openai'],
    anthropic: ['anthropic'],
    google: ['gemini'],
    qwen: ['openai'],
    deepseek: ['anthropic'],
    moonshotai: responses ? ['responses'] : ['openai', 'anthropic'],
  };
  const providers = shipped.providers.map((p) => ({
    ...p,
    upstreams: (upstreams[p.id] || [p.upstreams[0].protocol]).map(up),
  }));
  // Family C reaches a model only through a provider that accepts it.
  for (const { id, provider } of Object.values(MODELS)) {
    const p = providers.find((x) => x.id === provider);
    if (!p || !p.families.includes('gemini')) throw new Error(`shipped catalog: provider ${provider} missing or not on family C`);
    if (!shipped.models.some((m) => m.id === id && m.provider === provider)) throw new Error(`shipped catalog has no model ${provider}/${id}`);
  }
  // The catalog's policy is the default, `adapt`; each key sets its own.
  return { ...shipped, policy: 'adapt', providers };
}

export const PROVIDER_ENV = {
  SB_CLIENTS_KEY_OPENAI: 'upstream-key-openai',
  SB_CLIENTS_KEY_ANTHROPIC: 'upstream-key-anthropic',
  SB_CLIENTS_KEY_GEMINI: 'upstream-key-gemini',
  SB_CLIENTS_KEY_RESPONSES: 'upstream-key-responses',
};

export function waitLine(proc, prefix, ms) {
  return new Promise((ok, fail) => {
    let buf = '';
    const timer = setTimeout(() => fail(new Error(`no "${prefix}" line within ${ms} ms`)), ms);
    proc.stdout.on('data', (d) => {
      buf += d;
      const line = buf.split('\n').find((l) => l.startsWith(prefix));
      if (line) {
        clearTimeout(timer);
        ok(line.trim());
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`exited with ${code} before "${prefix}"`));
    });
  });
}

async function getStatus(url) {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return r.status;
  } catch {
    return 0;
  }
}

/// Starts the gateway on a catalog; resolves to `{gw, url, logPath}` once it
/// is healthy, or to `{exited: log}` when it stopped before that (a catalog
/// it refuses).
async function startGateway(dir, name, catalogJson) {
  writeFileSync(join(dir, `${name}.json`), JSON.stringify(catalogJson, null, 2));
  const port = await freePort();
  const metrics = await freePort();
  const logPath = join(dir, `gateway-${name}.log`);
  const log = openSync(logPath, 'w');
  const gw = spawn(binary('release/switchboard'), [
    '--catalog', join(dir, `${name}.json`),
    '--keys', join(dir, 'keys.json'),
    '--listen', `127.0.0.1:${port}`,
    '--metrics', `127.0.0.1:${metrics}`,
  ], { env: { ...process.env, ...PROVIDER_ENV, RUST_LOG: 'info', SWITCHBOARD_DATA: join(dir, `data-${name}`) }, stdio: ['ignore', log, log] });
  closeSync(log);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30000;
  while ((await getStatus(url + '/healthz')) !== 200) {
    if (gw.exitCode !== null || gw.signalCode !== null) return { exited: readFileSync(logPath, 'utf8') };
    if (Date.now() > deadline) {
      gw.kill('SIGKILL');
      throw new Error(`gateway did not start:\n${readFileSync(logPath, 'utf8')}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { gw, url, logPath };
}

/// Starts the mock upstream and the gateway; `stop()` ends both.
///
/// The catalog has a Responses upstream (`MODELS.responses`); a gateway that
/// refuses that catalog (one without family D yet) is started again on the
/// catalog without it, so that the other cells still run, and
/// `stack.responsesUpstream` is false (`requireResponsesUpstream` fails the
/// cells that need it, with the gateway's reason).
export async function startStack(name) {
  const dir = mkdtempSync(join(tmpdir(), `switchboard-clients-${name}-`));
  const mockProc = spawn(binary('debug/examples/mock_upstream'), ['--port', '0'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const line = await waitLine(mockProc, 'listening on ', 30000);
  const mockUrl = 'http://' + line.slice('listening on '.length);
  writeFileSync(join(dir, 'keys.json'), JSON.stringify({
    keys: [
      { id: 'clients-adapt', key: KEYS.adapt, policy: 'adapt' },
      { id: 'clients-strict', key: KEYS.strict, policy: 'strict' },
    ],
  }, null, 2));
  let started;
  let responsesRefused = null;
  try {
    started = await startGateway(dir, 'catalog', catalog(mockUrl));
    if (started.exited !== undefined) {
      responsesRefused = started.exited.split('\n').filter(Boolean).slice(-5).join('\n');
      started = await startGateway(dir, 'catalog-without-responses', catalog(mockUrl, { responses: false }));
      if (started.exited !== undefined) throw new Error(`gateway did not start:\n${started.exited}`);
    }
  } catch (e) {
    mockProc.kill();
    throw e;
  }
  const { gw, url, logPath } = started;
  const stack = {
    dir,
    url,
    mockUrl,
    logPath,
    /// Whether the gateway took the catalog with a Responses upstream.
    responsesUpstream: responsesRefused === null,
    responsesRefused,
    /// Requests the mock received, in order (control routes excluded).
    async requests() {
      const r = await fetch(mockUrl + '/__mock/requests');
      return (await r.json()).map((q) => ({ ...q, json: tryJson(q.body) }));
    },
    /// The mock's requests whose body contains `token`.
    async requestsWith(token) {
      return (await stack.requests()).filter((q) => q.body.includes(token));
    },
    gatewayLog(lines = 60) {
      return readFileSync(logPath, 'utf8').split('\n').slice(-lines).join('\n');
    },
    async stop() {
      for (const p of [gw, mockProc]) {
        if (p.exitCode === null) {
          p.kill('SIGTERM');
          await Promise.race([new Promise((r) => p.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
          if (p.exitCode === null) p.kill('SIGKILL');
        }
      }
    },
  };
  return stack;
}

/// Fails a cell that needs the Responses upstream when the gateway refused it.
export function requireResponsesUpstream(stack) {
  if (!stack.responsesUpstream) {
    throw new Error(`the gateway refused a catalog with a "responses" upstream (family D not built in?):\n${stack.responsesRefused}`);
  }
}

function tryJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/// Runs a client process to its end, with a timeout that kills it (and its
/// process group) and fails with what it printed. Resolves to
/// `{code, stdout, stderr}`.
export function run(cmd, args, { env, cwd, timeoutMs = 120000, input } = {}) {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { env, cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.stdin.end(input ?? '');
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
      fail(new Error(`${cmd} ${args.join(' ')}\ntimed out after ${timeoutMs} ms\n--- stdout\n${stdout}\n--- stderr\n${stderr}`));
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      fail(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      ok({ code, stdout, stderr });
    });
  });
}

/// A fresh home and working directory for one client run.
export function sandbox(name) {
  const root = mkdtempSync(join(tmpdir(), `switchboard-${name}-`));
  const home = join(root, 'home');
  const work = join(root, 'work');
  mkdirSync(home, { recursive: true });
  mkdirSync(work, { recursive: true });
  return { root, home, work, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/// The environment a client starts from: the machine's, minus anything that
/// could point it at a real service or a real account.
export function baseEnv(home) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) {
    if (/^(ANTHROPIC_|CLAUDE_|CODEX_|GEMINI_|GOOGLE_|OPENAI_|VERTEX|CLOUDSDK_|HTTPS?_PROXY|https?_proxy|NO_PROXY|no_proxy)/.test(k)) delete env[k];
  }
  return { ...env, HOME: home, XDG_CONFIG_HOME: join(home, '.config'), XDG_CACHE_HOME: join(home, '.cache'), CI: 'true', NO_COLOR: '1', TERM: 'dumb' };
}

/// A unique token per cell, so that concurrent cells find their own requests.
let seq = 0;
export function token(cell) {
  seq += 1;
  return `cell-${cell}-${process.pid}-${seq}`;
}

export function describeRun(r) {
  return `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr.slice(-4000)}`;
}
