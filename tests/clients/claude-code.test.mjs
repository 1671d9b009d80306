// Claude Code (`claude -p`) through the gateway's Anthropic route
// (ANTHROPIC_BASE_URL=…/anthropic) to models on each upstream protocol: a
// plain answer, and a tool loop in which the agent runs the Bash tool the
// upstream asks for and sends its output back. Claude Code sends what its
// vendor's newest model takes (thinking, max_tokens 32000,
// context_management, system messages inside `messages`): an `adapt` key gets
// answers; a `strict` key gets the 400 where the model can't take it.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';

import { startStack, requireResponsesUpstream, KEYS, MODELS, BIN, run, sandbox, baseEnv, token, describeRun, replyFor, toolReplyPrefix } from './harness.mjs';
import { toolResultsIn, protocolOf } from './wire.mjs';

const TIMEOUT_MS = Number(process.env.SWITCHBOARD_CLIENTS_TIMEOUT_MS || 180000);

let stack;
before(async () => {
  stack = await startStack('claude-code');
});
after(async () => {
  await stack?.stop();
});

/// The models Claude Code is tried with: Anthropic's own (passed through
/// untouched), and one model on each upstream protocol.
const CELLS = [
  { protocol: 'anthropic', model: 'claude-sonnet-4.7' },
  { protocol: 'anthropic', model: MODELS.anthropic.id },
  { protocol: 'openai', model: MODELS.openai.id },
  { protocol: 'gemini', model: MODELS.gemini.id },
  { protocol: 'responses', model: MODELS.responses.id },
];

/// Runs `claude -p PROMPT` with the documented environment; resolves to the
/// parsed `--output-format json` result and the process outcome.
async function claude(prompt, { model, key = KEYS.adapt, args = [], bearer = false }) {
  const box = sandbox('claude');
  const env = {
    ...baseEnv(box.home),
    ANTHROPIC_BASE_URL: `${stack.url}/anthropic`,
    // Sent as `x-api-key`, or with ANTHROPIC_AUTH_TOKEN as `Authorization: Bearer`.
    ...(bearer ? { ANTHROPIC_AUTH_TOKEN: key } : { ANTHROPIC_API_KEY: key }),
    // Background requests (titles, summaries) go to the same model.
    ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
    ANTHROPIC_SMALL_FAST_MODEL: model,
    // No network side traffic: updates, telemetry, error reports, feedback.
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    DISABLE_BUG_COMMAND: '1',
  };
  const r = await run(join(BIN, 'claude'), ['-p', prompt, '--model', model, '--output-format', 'json', '--max-turns', '4', ...args], {
    env,
    cwd: box.work,
    timeoutMs: TIMEOUT_MS,
  }).finally(box.remove);
  let result;
  try {
    result = JSON.parse(r.stdout.slice(r.stdout.indexOf('{')));
  } catch {
    assert.fail(`claude printed no JSON result\n${describeRun(r)}`);
  }
  return { r, result };
}

function assertAnswered({ r, result }) {
  assert.equal(result.is_error, false, `claude reported an error: ${result.result}\n${describeRun(r)}\n--- gateway\n${stack.gatewayLog()}`);
  assert.equal(r.code, 0, describeRun(r));
}

describe('Claude Code', { concurrency: 3 }, () => {
  for (const { protocol, model } of CELLS) {
    test(`plain answer from ${model} (${protocol} upstream)`, async () => {
      if (protocol === 'responses') requireResponsesUpstream(stack);
      const tok = token(`cc-plain-${model}`);
      const prompt = `Say hello ${tok}`;
      const out = await claude(prompt, { model });
      assertAnswered(out);
      // The mock quotes the last user turn's text; Claude Code puts its own
      // context blocks before the prompt there.
      const reply = replyFor(protocol, prompt);
      const head = reply.slice(0, reply.indexOf(': ') + 2);
      assert.ok(out.result.result.startsWith(head), out.result.result);
      assert.ok(out.result.result.endsWith(`${prompt} ✓ héllo 🌍`), out.result.result);
      const seen = await stack.requestsWith(tok);
      assert.ok(seen.length >= 1);
      assert.ok(seen.every((q) => protocolOf(q) === protocol), seen.map((q) => q.path).join(', '));
    });
  }

  // Tool loops: a model on each upstream protocol with an adapt key, and
  // Anthropic's own model, which takes Claude Code's requests as they are,
  // with a strict key too.
  const loops = [
    ...CELLS.filter((c) => c.model !== MODELS.anthropic.id).map((c) => ({ ...c, policy: 'adapt' })),
    { protocol: 'anthropic', model: 'claude-sonnet-4.7', policy: 'strict' },
  ];
  for (const { protocol, model, policy } of loops) {
    test(`tool loop with Bash through ${model} (${protocol} upstream, ${policy} key)`, async () => {
      if (protocol === 'responses') requireResponsesUpstream(stack);
      const tok = token(`cc-tool-${model}-${policy}`);
      // `printf` prints `ran-TOKEN`, a string the prompt does not contain.
      const args = JSON.stringify({ command: `printf %s-%s ran ${tok}`, description: 'Print a marker' });
      const prompt = `Run the command ${tok} [[agent-tool:Bash:${args}]]`;
      const out = await claude(prompt, { model, key: KEYS[policy], bearer: true, args: ['--allowedTools', 'Bash(printf:*)'] });
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
    });
  }

  test('a strict key: 400 naming what the model cannot take', async () => {
    // Claude Code sends `thinking` and `max_tokens` 32000; DeepSeek V4 Pro
    // takes at most 8192 output tokens.
    const tok = token('cc-strict');
    const { r, result } = await claude(`Say hello ${tok}`, { model: MODELS.anthropic.id, key: KEYS.strict });
    assert.equal(result.is_error, true, describeRun(r));
    assert.match(result.result, /400/, result.result);
    assert.match(result.result, /max_tokens|thinking|context_management/, result.result);
    assert.equal((await stack.requestsWith(tok)).length, 0, 'nothing went upstream');
  });
});
