// Claude Code (`claude -p`) in Bedrock mode through the gateway's Bedrock
// routes (docs/api.md "Bedrock (family E)"): CLAUDE_CODE_USE_BEDROCK=1,
// ANTHROPIC_BEDROCK_BASE_URL=…/bedrock, the gateway key in
// AWS_BEARER_TOKEN_BEDROCK (which Claude Code sends as `Authorization: Bearer`
// and, with it, signs nothing), CLAUDE_CODE_SKIP_BEDROCK_AUTH=1 (no AWS
// credential lookup either). Claude Code then streams every turn through
// `POST /bedrock/model/{model}/invoke-with-response-stream` (an Anthropic
// Messages body in Bedrock's envelope); the gateway serves it from a model on
// any upstream protocol. Checked: the answer Claude Code prints, the access
// log (the route, the model), and what the mock upstream received (the
// model, Claude Code's tools, the tool result). Without a key the gateway
// refuses Claude Code (401), as it refuses every client.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { startStack, requireResponsesUpstream, shippedModel, KEYS, MODELS, BIN, run, sandbox, baseEnv, token, describeRun, replyFor, toolReplyPrefix } from './harness.mjs';
import { toolResultsIn, toolNamesIn, protocolOf } from './wire.mjs';

const TIMEOUT_MS = Number(process.env.SWITCHBOARD_CLIENTS_TIMEOUT_MS || 180000);

let stack;
before(async () => {
  stack = await startStack('claude-code-bedrock');
});
after(async () => {
  await stack?.stop();
});

/// Anthropic's own model (its Anthropic upstream takes the body as it is)
/// and one model on each upstream protocol.
const CELLS = [
  { protocol: 'anthropic', model: 'claude-sonnet-4.7' },
  { protocol: 'openai', model: MODELS.openai.id },
  { protocol: 'gemini', model: MODELS.gemini.id },
  { protocol: 'responses', model: MODELS.responses.id },
];

/// The model name the mock received for a catalog model: its upstream name.
const upstreamName = (id) => {
  const m = shippedModel(id);
  return m.upstream_model ?? m.id;
};

/// Runs `claude -p PROMPT` in Bedrock mode; `key` null sends no key.
async function claude(prompt, { model, key = KEYS.adapt, args = [], extraEnv = {} }) {
  const box = sandbox('claude-bedrock');
  const env = baseEnv(box.home);
  // Nothing that could reach a real AWS account: no profile, no keys, no
  // instance metadata.
  for (const k of Object.keys(env)) if (/^AWS_/.test(k)) delete env[k];
  Object.assign(env, {
    CLAUDE_CODE_USE_BEDROCK: '1',
    ANTHROPIC_BEDROCK_BASE_URL: `${stack.url}/bedrock`,
    CLAUDE_CODE_SKIP_BEDROCK_AUTH: '1',
    AWS_REGION: 'us-east-1',
    AWS_EC2_METADATA_DISABLED: 'true',
    ...(key === null ? {} : { AWS_BEARER_TOKEN_BEDROCK: key }),
    // Gateway model names in place of Claude Code's Bedrock ids
    // (`us.anthropic.claude-…-v1:0`), for the main and the background model.
    ANTHROPIC_MODEL: model,
    ANTHROPIC_SMALL_FAST_MODEL: model,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    DISABLE_BUG_COMMAND: '1',
    ...extraEnv,
  });
  const r = await run(join(BIN, 'claude'), ['-p', prompt, '--output-format', 'json', '--max-turns', '4', ...args], {
    env,
    cwd: box.work,
    timeoutMs: TIMEOUT_MS,
  }).finally(box.remove);
  let result;
  try {
    result = JSON.parse(r.stdout.slice(r.stdout.indexOf('{')));
  } catch {
    assert.fail(`claude printed no JSON result\n${describeRun(r)}\n--- gateway\n${stack.gatewayLog()}`);
  }
  return { r, result };
}

function assertAnswered({ r, result }) {
  assert.equal(result.is_error, false, `claude reported an error: ${result.result}\n${describeRun(r)}\n--- gateway\n${stack.gatewayLog()}`);
  assert.equal(r.code, 0, describeRun(r));
}

/// The gateway's access log lines (JSON objects on its stdout).
function accessLog() {
  return readFileSync(stack.logPath, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return null;
      }
    })
    .filter((l) => l && l.request_id);
}

/// Waits until the access log (written in batches) holds `count` lines that
/// `pred` accepts; resolves to them. The harness's timeout bounds the wait.
async function accessLines(pred, count) {
  for (;;) {
    const lines = accessLog().filter(pred);
    if (lines.length >= count) return lines;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/// Access log lines of Claude Code's streamed Bedrock turns on `model`.
const streamedOn = (model) => (l) => l.family === 'bedrock' && l.path === `/bedrock/model/${model}/invoke-with-response-stream`;

describe('Claude Code in Bedrock mode', { concurrency: 3 }, () => {
  for (const { protocol, model } of CELLS) {
    test(`plain answer from ${model} (${protocol} upstream)`, async () => {
      if (protocol === 'responses') requireResponsesUpstream(stack);
      const tok = token(`ccb-plain-${model}`);
      const prompt = `Say hello ${tok}`;
      const out = await claude(prompt, { model });
      assertAnswered(out);
      const reply = replyFor(protocol, prompt);
      const head = reply.slice(0, reply.indexOf(': ') + 2);
      assert.ok(out.result.result.startsWith(head), out.result.result);
      assert.ok(out.result.result.endsWith(`${prompt} ✓ héllo 🌍`), out.result.result);
      const seen = await stack.requestsWith(tok);
      assert.ok(seen.length >= 1);
      assert.ok(seen.every((q) => protocolOf(q) === protocol), seen.map((q) => q.path).join(', '));
      // The model the upstream was asked for: in the body, or in the path
      // (Gemini).
      const name = upstreamName(model);
      for (const q of seen) assert.ok(q.json?.model === name || q.path.includes(`/${name}:`), `${q.path} ${q.json?.model}`);
      // Claude Code's agent tools went upstream with the turn.
      assert.ok(toolNamesIn(protocol, seen[0].json).includes('Bash'), JSON.stringify(toolNamesIn(protocol, seen[0].json)));
      // Through E23, under the key Claude Code sent as a bearer token.
      const lines = await accessLines((l) => streamedOn(model)(l) && l.status === 200, 1);
      assert.ok(lines.every((l) => l.model === model && l.key_id === 'clients-adapt'), JSON.stringify(lines));
    });
  }

  for (const { protocol, model } of CELLS) {
    test(`tool loop with Bash through ${model} (${protocol} upstream)`, async () => {
      if (protocol === 'responses') requireResponsesUpstream(stack);
      const tok = token(`ccb-tool-${model}`);
      const args = JSON.stringify({ command: `printf %s-%s ran ${tok}`, description: 'Print a marker' });
      const prompt = `Run the command ${tok} [[agent-tool:Bash:${args}]]`;
      const out = await claude(prompt, { model, args: ['--allowedTools', 'Bash(printf:*)'] });
      assertAnswered(out);
      const answer = out.result.result;
      assert.ok(answer.startsWith(toolReplyPrefix(protocol)), answer);
      assert.ok(answer.includes(`ran-${tok}`), answer);
      const seen = await stack.requestsWith(tok);
      assert.ok(seen.length >= 2, `${seen.length} upstream requests`);
      assert.ok(seen.every((q) => protocolOf(q) === protocol), seen.map((q) => q.path).join(', '));
      assert.deepEqual(toolResultsIn(protocol, seen[0].json), []);
      const results = toolResultsIn(protocol, seen[1].json);
      assert.ok(results.some((t) => t.includes(`ran-${tok}`)), `second request's tool results: ${JSON.stringify(results)}`);
      const lines = await accessLines((l) => streamedOn(model)(l) && l.status === 200, 2);
      assert.ok(lines.every((l) => l.model === model && l.key_id === 'clients-adapt'), JSON.stringify(lines));
    });
  }

  test('no key: the gateway refuses Claude Code (401, nothing upstream)', async () => {
    const tok = token('ccb-nokey');
    // Claude Code retries a 401 (ten times, backing off to ~40 s between
    // tries): once is enough here.
    const { r, result } = await claude(`Say hello ${tok}`, { model: MODELS.openai.id, key: null, extraEnv: { CLAUDE_CODE_MAX_RETRIES: '0' } });
    assert.equal(result.is_error, true, describeRun(r));
    assert.match(result.result, /401 missing API key: send it in an Authorization: Bearer header/, result.result);
    assert.equal((await stack.requestsWith(tok)).length, 0, 'nothing went upstream');
    const refused = await accessLines((l) => streamedOn(MODELS.openai.id)(l) && l.status === 401, 1);
    assert.equal(refused[0].key_id, null);
    assert.equal(refused[0].attempts, 0);
  });
});
