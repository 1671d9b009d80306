// Gemini CLI (`gemini -p`) through the gateway's Gemini route
// (GOOGLE_GEMINI_BASE_URL=…/google) to a model on each upstream protocol: a
// plain answer, and a tool loop in which the agent runs the
// `run_shell_command` tool the upstream asks for and sends its output back.
// Gemini CLI sends `generationConfig.thinkingConfig`: an `adapt` key gets
// answers from models without reasoning; a `strict` key gets the 400 there,
// and an answer where the model takes the request as it is.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { mkdirSync, writeFileSync } from 'node:fs';

import { startStack, requireResponsesUpstream, KEYS, MODELS, BIN, run, sandbox, baseEnv, token, describeRun, toolReplyPrefix } from './harness.mjs';
import { toolResultsIn, protocolOf } from './wire.mjs';

const TIMEOUT_MS = Number(process.env.SWITCHBOARD_CLIENTS_TIMEOUT_MS || 180000);

let stack;
before(async () => {
  stack = await startStack('gemini-cli');
});
after(async () => {
  await stack?.stop();
});

/// User settings: API-key auth, and no network side traffic (usage
/// statistics, telemetry, update checks).
const SETTINGS = {
  security: { auth: { selectedType: 'gemini-api-key' }, folderTrust: { enabled: false } },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
};

/// One model per upstream protocol, named as a Gemini client names it: the
/// path segment after `models/` (`provider/model_id`, or a bare id).
const CELLS = [
  { protocol: 'gemini', model: MODELS.gemini.id },
  { protocol: 'openai', model: `${MODELS.openai.provider}/${MODELS.openai.id}` },
  { protocol: 'anthropic', model: `${MODELS.anthropic.provider}/${MODELS.anthropic.id}` },
  { protocol: 'responses', model: `${MODELS.responses.provider}/${MODELS.responses.id}` },
];

async function gemini(prompt, { model, key = KEYS.adapt, args = [] }) {
  const box = sandbox('gemini');
  mkdirSync(join(box.home, '.gemini'), { recursive: true });
  writeFileSync(join(box.home, '.gemini', 'settings.json'), JSON.stringify(SETTINGS, null, 2));
  const env = {
    ...baseEnv(box.home),
    GOOGLE_GEMINI_BASE_URL: `${stack.url}/google`,
    GEMINI_API_KEY: key,
    GEMINI_CLI_TRUST_WORKSPACE: 'true',
    // Run in this process instead of relaunching itself with a bigger heap.
    GEMINI_CLI_NO_RELAUNCH: 'true',
    GEMINI_TELEMETRY_ENABLED: 'false',
  };
  const r = await run(join(BIN, 'gemini'), ['-p', prompt, '-m', model, '-o', 'json', ...args], {
    env,
    cwd: box.work,
    timeoutMs: TIMEOUT_MS,
  }).finally(box.remove);
  // The JSON result is the last top-level object on stdout (on stderr after
  // an error).
  const parse = (text) => {
    try {
      return JSON.parse(text.slice(text.lastIndexOf('\n{') + 1));
    } catch {
      return undefined;
    }
  };
  const result = parse(r.stdout) ?? parse(r.stderr);
  if (!result) assert.fail(`gemini printed no JSON result\n${describeRun(r)}`);
  return { r, result };
}

function assertAnswered({ r, result }) {
  assert.equal(result.error, undefined, `gemini reported an error: ${JSON.stringify(result.error)}\n${describeRun(r)}\n--- gateway\n${stack.gatewayLog()}`);
  assert.equal(r.code, 0, describeRun(r));
  assert.equal(typeof result.response, 'string', describeRun(r));
}

describe('Gemini CLI', { concurrency: 3 }, () => {
  for (const { protocol, model } of CELLS) {
    test(`plain answer from ${model} (${protocol} upstream)`, async () => {
      if (protocol === 'responses') requireResponsesUpstream(stack);
      const tok = token(`gc-plain-${protocol}`);
      const prompt = `Say hello ${tok}`;
      const out = await gemini(prompt, { model });
      assertAnswered(out);
      assert.ok(out.result.response.startsWith(`Hello from ${protocol} mock: `), out.result.response);
      assert.ok(out.result.response.trimEnd().endsWith(`${prompt} ✓ héllo 🌍`), out.result.response);
      const seen = await stack.requestsWith(tok);
      assert.ok(seen.length >= 1);
      assert.ok(seen.every((q) => protocolOf(q) === protocol), seen.map((q) => q.path).join(', '));
    });

    test(`tool loop with run_shell_command through ${model} (${protocol} upstream)`, async () => {
      if (protocol === 'responses') requireResponsesUpstream(stack);
      const tok = token(`gc-tool-${protocol}`);
      const args = JSON.stringify({ command: `printf %s-%s ran ${tok}`, description: 'Print a marker' });
      const prompt = `Run the command ${tok} [[agent-tool:run_shell_command:${args}]]`;
      const out = await gemini(prompt, { model, args: ['--approval-mode', 'yolo'] });
      assertAnswered(out);
      const answer = out.result.response;
      assert.ok(answer.startsWith(toolReplyPrefix(protocol)), answer);
      assert.ok(answer.includes(`ran-${tok}`), answer);
      assert.equal(out.result.stats?.tools?.byName?.run_shell_command?.success, 1, JSON.stringify(out.result.stats?.tools));
      const seen = await stack.requestsWith(tok);
      assert.ok(seen.length >= 2, `${seen.length} upstream requests`);
      assert.ok(seen.every((q) => protocolOf(q) === protocol), seen.map((q) => q.path).join(', '));
      assert.deepEqual(toolResultsIn(protocol, seen[0].json), []);
      const results = toolResultsIn(protocol, seen[1].json);
      assert.ok(results.some((t) => t.includes(`ran-${tok}`)), `second request's tool results: ${JSON.stringify(results)}`);
      if (protocol !== 'gemini') {
        // Gemini CLI's `{"output": …}` reaches another protocol's model as
        // the bare output text (docs/protocol-mapping.md, "Tool results
        // across families").
        assert.ok(results.every((t) => !t.startsWith('{"output"')), `second request's tool results: ${JSON.stringify(results)}`);
      }
    });
  }

  test('a strict key: 400 for thinkingConfig on a model without reasoning', async () => {
    const tok = token('gc-strict-400');
    const { r, result } = await gemini(`Say hello ${tok}`, { model: MODELS.gemini.id, key: KEYS.strict });
    assert.notEqual(r.code, 0, describeRun(r));
    assert.equal(result.error?.code, 400, describeRun(r));
    assert.match(result.error.message, /thinkingConfig/, result.error.message);
    assert.equal((await stack.requestsWith(tok)).length, 0, 'nothing went upstream');
  });

  test('a strict key: answered by a model that takes the request as it is', async () => {
    const tok = token('gc-strict-ok');
    const prompt = `Say hello ${tok}`;
    const out = await gemini(prompt, { model: 'gemini-3.1-pro', key: KEYS.strict });
    assertAnswered(out);
    assert.ok(out.result.response.trimEnd().endsWith(`${prompt} ✓ héllo 🌍`), out.result.response);
  });
});
