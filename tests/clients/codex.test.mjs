// Codex CLI (`codex exec`, unmodified) through the gateway's Responses route
// (family D, `POST /v1/responses`, streamed) to a model on each upstream
// protocol: a plain answer, and a tool loop in which the agent runs the shell
// tool (`exec_command`) the upstream asks for and sends its output back as a
// `function_call_output`. Codex is configured as a user would for a gateway:
// a throwaway CODEX_HOME whose config.toml defines a model provider with
// `wire_api = "responses"`, `base_url` = the gateway's /v1 and `env_key` = the
// variable holding the gateway key; no login, no update check, no analytics,
// no feedback, no OpenTelemetry export; approvals never and the
// `workspace-write` sandbox (the shell tool runs in the work directory).
//
// Two more groups pin down what Codex sends without the gateway: against a
// tiny capture server (capture.mjs) the request shape the family D codec must
// accept (README: "What Codex CLI sends"), and straight against the mock's
// Responses upstream the same cells as through the gateway, so that a failure
// there points at the gateway, not at the mock or the harness.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { mkdirSync, writeFileSync, readFileSync, existsSync } from 'node:fs';

import { startStack, requireResponsesUpstream, KEYS, MODELS, PROTOCOLS, ALL_PROTOCOLS, MOCK_BASE, BIN, run, sandbox, baseEnv, token, describeRun, toolReplyPrefix } from './harness.mjs';
import { toolResultsIn, toolNamesIn, protocolOf } from './wire.mjs';
import { startCapture } from './capture.mjs';

const TIMEOUT_MS = Number(process.env.SWITCHBOARD_CLIENTS_TIMEOUT_MS || 180000);
const KEY_ENV = 'SWITCHBOARD_API_KEY';

let stack;
let capture;
before(async () => {
  [stack, capture] = await Promise.all([startStack('codex'), startCapture()]);
});
after(async () => {
  await Promise.all([stack?.stop(), capture?.stop()]);
});

/// `$CODEX_HOME/config.toml`: one custom provider speaking the Responses API
/// at `baseUrl`, and nothing that reaches any other service. Every key here is
/// checked by `--strict-config`, so a Codex upgrade that drops one fails loudly.
function configToml(baseUrl, { lean = false } = {}) {
  // `lean`: no web_search built-in tool and no multi-agent namespace tool,
  // so that every tool Codex declares is a function tool.
  const leanTop = lean ? 'web_search = "disabled"\n' : '';
  const leanTables = lean ? '\n[features]\nmulti_agent = false\n' : '';
  return `${leanTop}model_provider = "switchboard"
approval_policy = "never"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.switchboard]
name = "Switchboard"
base_url = "${baseUrl}"
env_key = "${KEY_ENV}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
log_user_prompt = false
${leanTables}`;
}

/// Runs `codex exec -m MODEL PROMPT` against `baseUrl` (the gateway's /v1 by
/// default); resolves to the process outcome, the last agent message (what
/// `codex exec` prints on stdout) and how long the run took.
async function codex(prompt, { model, key = KEYS.adapt, baseUrl = `${stack.url}/v1`, lean = false }) {
  const box = sandbox('codex');
  const codexHome = join(box.home, '.codex');
  mkdirSync(codexHome, { recursive: true });
  writeFileSync(join(codexHome, 'config.toml'), configToml(baseUrl, { lean }));
  const last = join(box.root, 'last-message.txt');
  const env = { ...baseEnv(box.home), CODEX_HOME: codexHome, [KEY_ENV]: key };
  const started = Date.now();
  try {
    const r = await run(
      join(BIN, 'codex'),
      ['exec', '--strict-config', '--skip-git-repo-check', '--ephemeral', '--color', 'never', '-m', model, '-o', last, prompt],
      { env, cwd: box.work, timeoutMs: TIMEOUT_MS },
    );
    const message = existsSync(last) ? readFileSync(last, 'utf8').trim() : '';
    return { r, message, ms: Date.now() - started };
  } finally {
    box.remove();
  }
}

function assertAnswered({ r, message }, where = stack) {
  const log = where === stack ? `\n--- gateway\n${stack.gatewayLog()}` : '';
  assert.equal(r.code, 0, `codex failed\n${describeRun(r)}${log}`);
  assert.ok(message.length > 0, `no last message\n${describeRun(r)}`);
}

/// The model name Codex is given for a protocol: `provider/model_id` or the
/// bare id (both are family D model names).
const modelName = (protocol, qualified) => (qualified ? `${MODELS[protocol].provider}/${MODELS[protocol].id}` : MODELS[protocol].id);

/// A tool-loop prompt: the upstream asks for `exec_command` running `printf`,
/// whose output `ran-TOKEN` is not in the prompt.
const toolPrompt = (tok) => `Run the command ${tok} [[agent-tool:exec_command:${JSON.stringify({ cmd: `printf %s-%s ran ${tok}` })}]]`;

async function checkToolLoop(out, protocol, tok, seen) {
  const answer = out.message;
  assert.ok(answer.startsWith(toolReplyPrefix(protocol)), answer);
  assert.ok(answer.includes(`ran-${tok}`), answer);
  assert.ok(seen.length >= 2, `${seen.length} upstream requests`);
  assert.ok(seen.every((q) => protocolOf(q) === protocol), seen.map((q) => q.path).join(', '));
  assert.ok(toolNamesIn(protocol, seen[0].json).includes('exec_command'), `tools upstream: ${toolNamesIn(protocol, seen[0].json)}`);
  assert.deepEqual(toolResultsIn(protocol, seen[0].json), []);
  const results = toolResultsIn(protocol, seen[1].json);
  assert.ok(results.some((t) => t.includes(`ran-${tok}`)), `second request's tool results: ${JSON.stringify(results)}`);
}

describe('Codex CLI request shape (capture server, no gateway)', () => {
  test('what codex exec sends to /v1/responses, first turn and tool turn', async (t) => {
    const tok = token('cx-shape');
    const out = await codex(toolPrompt(tok), { model: MODELS.openai.id, baseUrl: `${capture.url}/v1`, key: 'sk-capture' });
    t.diagnostic(`codex exec: ${out.ms} ms`);
    assertAnswered(out, capture);
    assert.ok(out.message.includes(`ran-${tok}`), out.message);
    const mine = capture.requests.filter((q) => q.body.includes(tok));
    assert.equal(mine.length, 2, mine.map((q) => `${q.method} ${q.path}`).join(', '));
    for (const q of mine) {
      assert.equal(q.method, 'POST');
      assert.equal(q.path, '/v1/responses');
      assert.equal(q.headers.authorization, 'Bearer sk-capture');
      assert.match(q.headers.accept, /text\/event-stream/);
      assert.equal(q.headers.originator, 'codex_exec');
      assert.match(q.headers['user-agent'], /^codex_exec\//);
      const b = q.json;
      // Every top-level field (README: "What Codex CLI sends").
      assert.deepEqual(
        Object.keys(b).sort(),
        ['client_metadata', 'include', 'input', 'model', 'parallel_tool_calls', 'prompt_cache_key', 'reasoning', 'store', 'stream', 'tool_choice', 'tools'],
      );
      assert.equal(b.model, MODELS.openai.id);
      assert.equal(b.stream, true);
      assert.equal(b.store, false);
      assert.equal(b.tool_choice, 'auto');
      assert.equal(b.parallel_tool_calls, true);
      assert.deepEqual(b.include, ['reasoning.encrypted_content']);
      assert.deepEqual(b.reasoning, { summary: 'auto' });
      assert.equal(typeof b.prompt_cache_key, 'string');
      assert.equal(typeof b.client_metadata, 'object');
      // The system prompt is developer messages in `input`, the prompt the
      // last user message.
      const messages = b.input.filter((i) => i.type === 'message');
      assert.equal(messages[0].role, 'developer');
      const users = messages.filter((m) => m.role === 'user');
      assert.ok(users[users.length - 1].content.map((p) => p.text).join('').includes(tok));
      // Tool types: functions (the shell tool is exec_command), a namespace of
      // functions, and the built-in web_search.
      const types = [...new Set(b.tools.map((x) => x.type))].sort();
      assert.deepEqual(types, ['function', 'namespace', 'web_search'], JSON.stringify(b.tools.map((x) => [x.type, x.name])));
      const shell = b.tools.find((x) => x.name === 'exec_command');
      assert.deepEqual(shell.parameters.required, ['cmd']);
    }
    // The tool turn replays the call and adds its output.
    const second = mine[1].json.input.filter((i) => i.type !== 'message');
    assert.deepEqual(second.map((i) => i.type), ['function_call', 'function_call_output']);
    assert.equal(second[0].name, 'exec_command');
    assert.equal(second[1].call_id, second[0].call_id);
    assert.equal(typeof second[1].output, 'string');
    assert.match(second[1].output, new RegExp(`ran-${tok}`));
  });

  test('a model of Codex own catalog (gpt-5.5): custom apply_patch, tool_search, text.verbosity, reasoning.effort', async (t) => {
    // No gateway model has Codex metadata; a deployment may still name a
    // model as OpenAI does, and then Codex sends these too.
    const tok = token('cx-shape-native');
    const out = await codex(`Say hello ${tok}`, { model: 'gpt-5.5', baseUrl: `${capture.url}/v1`, key: 'sk-capture' });
    t.diagnostic(`codex exec: ${out.ms} ms`);
    assertAnswered(out, capture);
    const [q] = capture.requests.filter((r) => r.body.includes(tok));
    const b = q.json;
    assert.deepEqual(
      Object.keys(b).sort(),
      ['client_metadata', 'include', 'input', 'model', 'parallel_tool_calls', 'prompt_cache_key', 'reasoning', 'store', 'stream', 'text', 'tool_choice', 'tools'],
    );
    assert.deepEqual(b.text, { verbosity: 'low' });
    assert.equal(typeof b.reasoning.effort, 'string');
    const types = [...new Set(b.tools.map((x) => x.type))].sort();
    assert.deepEqual(types, ['custom', 'function', 'tool_search', 'web_search'], JSON.stringify(b.tools.map((x) => [x.type, x.name])));
    const patch = b.tools.find((x) => x.type === 'custom');
    assert.equal(patch.name, 'apply_patch');
    assert.equal(patch.format.type, 'grammar');
    assert.equal(patch.format.syntax, 'lark');
  });
});

describe('Codex CLI straight to the mock Responses upstream (no gateway)', { concurrency: 2 }, () => {
  const direct = () => `${stack.mockUrl}${MOCK_BASE.responses}`;

  test('plain answer', async (t) => {
    const tok = token('cx-direct-plain');
    const prompt = `Say hello ${tok}`;
    const out = await codex(prompt, { model: MODELS.responses.id, baseUrl: direct() });
    t.diagnostic(`codex exec: ${out.ms} ms`);
    assertAnswered(out, 'mock');
    assert.ok(out.message.startsWith('Hello from responses mock: '), out.message);
    assert.ok(out.message.endsWith(`${prompt} ✓ héllo 🌍`), out.message);
  });

  test('tool loop with exec_command', async (t) => {
    const tok = token('cx-direct-tool');
    const out = await codex(toolPrompt(tok), { model: MODELS.responses.id, baseUrl: direct() });
    t.diagnostic(`codex exec: ${out.ms} ms`);
    assertAnswered(out, 'mock');
    await checkToolLoop(out, 'responses', tok, await stack.requestsWith(tok));
  });
});

describe('Codex CLI through the gateway', { concurrency: 4 }, () => {
  for (const protocol of ALL_PROTOCOLS) {
    // The bare id for the answer, `provider/model_id` for the tool loop.
    const plainModel = modelName(protocol, false);
    const toolModel = modelName(protocol, true);

    test(`plain answer from ${plainModel} (${protocol} upstream)`, async (t) => {
      if (protocol === 'responses') requireResponsesUpstream(stack);
      const tok = token(`cx-plain-${protocol}`);
      const prompt = `Say hello ${tok}`;
      const out = await codex(prompt, { model: plainModel });
      t.diagnostic(`codex exec: ${out.ms} ms`);
      assertAnswered(out);
      // The mock quotes the last user turn's text; translated, Codex's
      // environment context may share that turn, before the prompt.
      assert.ok(out.message.startsWith(`Hello from ${protocol} mock: `), out.message);
      assert.ok(out.message.endsWith(`${prompt} ✓ héllo 🌍`), out.message);
      const seen = await stack.requestsWith(tok);
      assert.equal(seen.length, 1, seen.map((q) => q.path).join(', '));
      assert.equal(protocolOf(seen[0]), protocol, seen[0].path);
    });

    test(`tool loop with exec_command through ${toolModel} (${protocol} upstream)`, async (t) => {
      if (protocol === 'responses') requireResponsesUpstream(stack);
      const tok = token(`cx-tool-${protocol}`);
      const out = await codex(toolPrompt(tok), { model: toolModel });
      t.diagnostic(`codex exec: ${out.ms} ms`);
      assertAnswered(out);
      await checkToolLoop(out, protocol, tok, await stack.requestsWith(tok));
    });
  }

  // Codex with web search and multi-agent tools off declares function tools
  // only: the rest of its requests (developer messages, item ids,
  // client_metadata, include, reasoning, function_call_output) through each
  // translated upstream.
  for (const protocol of PROTOCOLS) {
    const model = modelName(protocol, true);
    test(`tool loop with function tools only (web_search and multi_agent off) through ${model} (${protocol} upstream)`, async (t) => {
      const tok = token(`cx-lean-${protocol}`);
      const out = await codex(toolPrompt(tok), { model, lean: true });
      t.diagnostic(`codex exec: ${out.ms} ms`);
      assertAnswered(out);
      const seen = await stack.requestsWith(tok);
      await checkToolLoop(out, protocol, tok, seen);
    });
  }

  // Codex's default multi-agent tools are a `namespace` (`multi_agent_v1`):
  // a translated upstream sees each as a function named
  // `multi_agent_v1__<tool>`, and its call must reach Codex as Codex's own
  // `close_agent` (a `function_call` with `namespace`), which Codex runs:
  // its output names the unknown agent, not an unknown tool.
  for (const protocol of PROTOCOLS) {
    const model = modelName(protocol, true);
    test(`namespace tool call (multi_agent_v1 close_agent) through ${model} (${protocol} upstream)`, async (t) => {
      const tok = token(`cx-ns-${protocol}`);
      const target = `agent-${tok}`;
      const prompt = `Close the agent ${tok} [[agent-tool:multi_agent_v1__close_agent:${JSON.stringify({ target })}]]`;
      const out = await codex(prompt, { model });
      t.diagnostic(`codex exec: ${out.ms} ms`);
      assertAnswered(out);
      assert.ok(out.message.startsWith(toolReplyPrefix(protocol)), out.message);
      const seen = await stack.requestsWith(tok);
      assert.ok(seen.length >= 2, `${seen.length} upstream requests`);
      const names = toolNamesIn(protocol, seen[0].json);
      for (const member of ['spawn_agent', 'wait_agent', 'close_agent']) {
        assert.ok(names.includes(`multi_agent_v1__${member}`), `tools upstream: ${names}`);
      }
      const results = toolResultsIn(protocol, seen[1].json);
      assert.equal(results.length, 1, JSON.stringify(results));
      t.diagnostic(`close_agent output upstream: ${results[0]}`);
      assert.ok(results[0].includes(target), `close_agent's output: ${results[0]}`);
      assert.doesNotMatch(results[0], /unsupported|unknown (tool|function)/i, results[0]);
    });
  }

  test('a strict key: 400 naming what the model cannot take, nothing upstream', async (t) => {
    // Codex sends `reasoning` (and `parallel_tool_calls`, `include`,
    // `prompt_cache_key`); Qwen 3.6 lists none of them.
    const tok = token('cx-strict');
    const out = await codex(`Say hello ${tok}`, { model: MODELS.openai.id, key: KEYS.strict });
    t.diagnostic(`codex exec: ${out.ms} ms`);
    assert.notEqual(out.r.code, 0, describeRun(out.r));
    // Codex prints the error body: `ERROR: {"error":{…,"param":"reasoning",…}}`.
    const said = out.r.stdout + out.r.stderr;
    assert.match(said, /invalid_request_error/, describeRun(out.r));
    assert.match(said, /"param":"(reasoning|parallel_tool_calls|prompt_cache_key|include)"/, describeRun(out.r));
    assert.equal((await stack.requestsWith(tok)).length, 0, 'nothing went upstream');
  });
});
