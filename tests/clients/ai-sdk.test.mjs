// The Vercel AI SDK (`ai` 6) through the gateway: its Anthropic provider on
// /anthropic/v1, its Google provider on /google/v1beta and its OpenAI provider
// in chat-completions mode (`openai.chat`) on /v1, each against a model on each
// of the four upstream protocols (the fourth a Responses upstream): generateText, streamText, a tool round trip and a streamed
// tool round trip, under an `adapt` key (the SDK's own defaults) and a `strict`
// key (explicit small maxOutputTokens, which the model takes as is); and a
// strict key refused with a 400 where the request exceeds the model. Then its
// OpenAI provider's default, the Responses API (`openai(model)`, family D,
// POST /v1/responses), against a model on each of the four upstream protocols
// (the fourth a Responses upstream): generateText, streamText, a tool round
// trip and a streamed one.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, streamText, tool, stepCountIs, APICallError } from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';

import { startStack, requireResponsesUpstream, KEYS, MODELS, PROTOCOLS, ALL_PROTOCOLS, replyFor, toolReplyPrefix, token, shippedModel } from './harness.mjs';
import { toolResultsIn } from './wire.mjs';

// The SDK's compatibility warnings (unknown model ids) are not test output.
globalThis.AI_SDK_LOG_WARNINGS = false;

let stack;
before(async () => {
  stack = await startStack('ai-sdk');
});
after(async () => {
  await stack?.stop();
});

/// Each provider: the model object for an upstream protocol and a key.
const PROVIDERS = {
  anthropic: (protocol, key) =>
    createAnthropic({ baseURL: `${stack.url}/anthropic/v1`, apiKey: key })(MODELS[protocol].id),
  google: (protocol, key) => {
    const { id, provider } = MODELS[protocol];
    // Bare `models/{id}` for Google's own model; `{provider}/{id}` (the SDK then
    // calls /google/v1beta/{provider}/{id}:generateContent) for the others.
    const name = protocol === 'gemini' ? id : `${provider}/${id}`;
    return createGoogleGenerativeAI({ baseURL: `${stack.url}/google/v1beta`, apiKey: key })(name);
  },
  openai: (protocol, key) => {
    const { id, provider } = MODELS[protocol];
    return createOpenAI({ baseURL: `${stack.url}/v1`, apiKey: key }).chat(`${provider}/${id}`);
  },
};

/// Settings per policy: a strict key gets requests that fit the model exactly.
const SETTINGS = { adapt: {}, strict: { maxOutputTokens: 1024 } };

function lookupTool(tok) {
  return tool({
    description: 'Looks up the forecast of a city.',
    inputSchema: z.object({ city: z.string().describe('the city') }),
    execute: async ({ city }) => `sunny-in-${city}-${tok}`,
  });
}

const TOOL_MARKER = '[[agent-tool:lookup:{"city":"Paris"}]]';

async function checkToolRoundTrip(protocol, tok, result) {
  const expected = `sunny-in-Paris-${tok}`;
  assert.equal(result.steps.length, 2, 'one tool step, then the answer');
  const [call] = result.steps[0].toolCalls;
  assert.equal(call.toolName, 'lookup');
  assert.deepEqual(call.input, { city: 'Paris' });
  assert.ok(result.text.startsWith(toolReplyPrefix(protocol)), result.text);
  assert.ok(result.text.includes(expected), result.text);
  // Upstream: the first request asked, the second carried the tool's result.
  const seen = await stack.requestsWith(tok);
  assert.equal(seen.length, 2, `two upstream requests, got ${seen.length}`);
  assert.deepEqual(toolResultsIn(protocol, seen[0].json), []);
  const results = toolResultsIn(protocol, seen[1].json);
  assert.ok(results.some((r) => r.includes(expected)), `tool result upstream: ${JSON.stringify(results)}`);
}

for (const [family, makeModel] of Object.entries(PROVIDERS)) {
  describe(`ai-sdk ${family} provider`, { concurrency: 4 }, () => {
    for (const policy of ['adapt', 'strict']) {
      for (const protocol of ALL_PROTOCOLS) {
        const cell = `${family}-${protocol}-${policy}`;
        const model = () => {
          if (protocol === 'responses') requireResponsesUpstream(stack);
          return makeModel(protocol, KEYS[policy]);
        };
        const common = () => ({ model: model(), maxRetries: 0, ...SETTINGS[policy] });

        test(`generateText via ${protocol} upstream (${policy})`, async () => {
          const tok = token(`gen-${cell}`);
          const prompt = `Say hello ${tok}`;
          const result = await generateText({ ...common(), prompt });
          assert.equal(result.text, replyFor(protocol, prompt));
          assert.equal(result.finishReason, 'stop');
          assert.ok(result.usage.outputTokens > 0);
          assert.equal((await stack.requestsWith(tok)).length, 1);
        });

        test(`streamText via ${protocol} upstream (${policy})`, async () => {
          const tok = token(`stream-${cell}`);
          const prompt = `Stream hello ${tok}`;
          const errors = [];
          const result = streamText({ ...common(), prompt, onError: ({ error }) => errors.push(error) });
          let text = '';
          let deltas = 0;
          for await (const delta of result.textStream) {
            text += delta;
            deltas += 1;
          }
          assert.deepEqual(errors, []);
          assert.equal(text, replyFor(protocol, prompt));
          assert.ok(deltas > 1, 'streamed in several deltas');
          assert.equal(await result.finishReason, 'stop');
        });

        test(`tool round trip via ${protocol} upstream (${policy})`, async () => {
          const tok = token(`tool-${cell}`);
          const result = await generateText({
            ...common(),
            prompt: `What is the forecast? ${tok} ${TOOL_MARKER}`,
            tools: { lookup: lookupTool(tok) },
            stopWhen: stepCountIs(3),
          });
          await checkToolRoundTrip(protocol, tok, result);
        });

        test(`streamed tool round trip via ${protocol} upstream (${policy})`, async () => {
          const tok = token(`stool-${cell}`);
          const errors = [];
          const result = streamText({
            ...common(),
            prompt: `What is the forecast, streamed? ${tok} ${TOOL_MARKER}`,
            tools: { lookup: lookupTool(tok) },
            stopWhen: stepCountIs(3),
            onError: ({ error }) => errors.push(error),
          });
          const text = await result.text;
          assert.deepEqual(errors, []);
          await checkToolRoundTrip(protocol, tok, { text, steps: await result.steps });
        });
      }
    }

    for (const protocol of ALL_PROTOCOLS) {
      test(`maxOutputTokens above the model's cap via ${protocol}: adapted, and 400 for a strict key`, async () => {
        if (protocol === 'responses') requireResponsesUpstream(stack);
        const tok = token(`cap-${family}-${protocol}`);
        const prompt = `Too long an answer ${tok}`;
        const over = { prompt, maxRetries: 0, maxOutputTokens: 1_000_000 };
        const adapted = await generateText({ model: makeModel(protocol, KEYS.adapt), ...over });
        assert.equal(adapted.text, replyFor(protocol, prompt));
        const adjusted = adapted.response.headers?.['x-switchboard-adjusted'] ?? '';
        assert.match(adjusted, /max_tokens|maxOutputTokens/, `x-switchboard-adjusted: ${adjusted}`);
        await assert.rejects(
          generateText({ model: makeModel(protocol, KEYS.strict), ...over }),
          (e) => {
            assert.ok(APICallError.isInstance(e), `${e}`);
            assert.equal(e.statusCode, 400, e.responseBody);
            assert.match(e.responseBody, /max_tokens|maxOutputTokens|max_output_tokens/i);
            return true;
          },
        );
        assert.equal((await stack.requestsWith(tok)).length, 1, 'the strict request never went upstream');
      });
    }
  });
}

describe('ai-sdk anthropic provider with a Claude model and its own defaults', () => {
  // For an id it reads as a Claude model (`claude-…`) the provider sends its
  // own default max_tokens, 128000, above this model's cap.
  test('adapt: lowered to the model cap and answered; strict: 400', async () => {
    const cap = shippedModel('claude-sonnet-4.7').max_output_tokens;
    const tok = token('claude-default');
    const prompt = `Default cap ${tok}`;
    const anthropic = (key) => createAnthropic({ baseURL: `${stack.url}/anthropic/v1`, apiKey: key })('claude-sonnet-4.7');
    const adapted = await generateText({ model: anthropic(KEYS.adapt), prompt, maxRetries: 0 });
    assert.equal(adapted.text, replyFor('anthropic', prompt));
    const [sent] = await stack.requestsWith(tok);
    assert.equal(sent.json.max_tokens, cap);
    const adjusted = adapted.response.headers?.['x-switchboard-adjusted'] ?? '';
    assert.match(adjusted, new RegExp(`max_tokens=${cap} \\(was 128000\\)`), adjusted);
    await assert.rejects(
      generateText({ model: anthropic(KEYS.strict), prompt: `${prompt} strict`, maxRetries: 0 }),
      (e) => {
        assert.ok(APICallError.isInstance(e), `${e}`);
        assert.equal(e.statusCode, 400, e.responseBody);
        assert.match(e.responseBody, /max_tokens/);
        return true;
      },
    );
  });
});

describe('ai-sdk openai provider, Responses API (openai(model))', { concurrency: 4 }, () => {
  // `createOpenAI(...)(id)` is the Responses model: POST {baseURL}/responses,
  // `input` items, `function_call` / `function_call_output` for tools, and the
  // Responses event stream when streaming.
  const responses = (protocol) => {
    const { id, provider } = MODELS[protocol];
    return createOpenAI({ baseURL: `${stack.url}/v1`, apiKey: KEYS.adapt })(`${provider}/${id}`);
  };

  for (const protocol of ALL_PROTOCOLS) {
    const cell = `responses-${protocol}`;
    const common = () => {
      if (protocol === 'responses') requireResponsesUpstream(stack);
      return { model: responses(protocol), maxRetries: 0 };
    };

    test(`generateText via ${protocol} upstream`, async () => {
      const tok = token(`gen-${cell}`);
      const prompt = `Say hello ${tok}`;
      const result = await generateText({ ...common(), prompt });
      assert.equal(result.text, replyFor(protocol, prompt));
      assert.equal(result.finishReason, 'stop');
      assert.ok(result.usage.inputTokens > 0);
      assert.ok(result.usage.outputTokens > 0);
      assert.equal(result.response.modelId, `${MODELS[protocol].provider}/${MODELS[protocol].id}`);
      assert.match(result.response.id, /^resp_/);
      assert.equal((await stack.requestsWith(tok)).length, 1);
    });

    test(`streamText via ${protocol} upstream`, async () => {
      const tok = token(`stream-${cell}`);
      const prompt = `Stream hello ${tok}`;
      const errors = [];
      const result = streamText({ ...common(), prompt, onError: ({ error }) => errors.push(error) });
      let text = '';
      let deltas = 0;
      for await (const delta of result.textStream) {
        text += delta;
        deltas += 1;
      }
      assert.deepEqual(errors, []);
      assert.equal(text, replyFor(protocol, prompt));
      assert.ok(deltas > 1, 'streamed in several deltas');
      assert.equal(await result.finishReason, 'stop');
      assert.ok((await result.usage).outputTokens > 0);
    });

    test(`tool round trip via ${protocol} upstream`, async () => {
      const tok = token(`tool-${cell}`);
      const result = await generateText({
        ...common(),
        prompt: `What is the forecast? ${tok} ${TOOL_MARKER}`,
        tools: { lookup: lookupTool(tok) },
        stopWhen: stepCountIs(3),
      });
      await checkToolRoundTrip(protocol, tok, result);
    });

    test(`streamed tool round trip via ${protocol} upstream`, async () => {
      const tok = token(`stool-${cell}`);
      const errors = [];
      const result = streamText({
        ...common(),
        prompt: `What is the forecast, streamed? ${tok} ${TOOL_MARKER}`,
        tools: { lookup: lookupTool(tok) },
        stopWhen: stepCountIs(3),
        onError: ({ error }) => errors.push(error),
      });
      const text = await result.text;
      assert.deepEqual(errors, []);
      await checkToolRoundTrip(protocol, tok, { text, steps: await result.steps });
    });
  }
});
