// A tiny OpenAI Responses API server that records what a client sends, for
// the cells that pin down a client's request shape without the gateway (what
// the gateway's family D codec must accept). It answers `POST …/responses`
// with a text reply, streamed when the request says `stream: true`, or, when
// the last user message holds the mock's `[[agent-tool:NAME:JSON]]` marker and
// no tool output has come back yet, with a `function_call` of tool NAME.

import http from 'node:http';

const MARKER = /\[\[agent-tool:([A-Za-z0-9_.-]+):(\{.*?\})\]\]/s;

function lastUserText(input) {
  if (typeof input === 'string') return input;
  const users = (input || []).filter((i) => (i.type ?? 'message') === 'message' && i.role === 'user');
  const last = users[users.length - 1];
  if (!last) return '';
  if (typeof last.content === 'string') return last.content;
  return (last.content || []).map((p) => p.text ?? '').join('');
}

function toolOutputs(input) {
  return Array.isArray(input) ? input.filter((i) => /_call_output$/.test(i.type ?? '')) : [];
}

function answer(body, n) {
  const outputs = toolOutputs(body.input);
  const marker = MARKER.exec(lastUserText(body.input));
  if (marker && outputs.length === 0) {
    return { type: 'function_call', id: `fc_${n}`, call_id: `call_${n}`, name: marker[1], arguments: marker[2], status: 'completed' };
  }
  const text = outputs.length
    ? `Hello from capture: tool result: ${outputs.map((o) => (typeof o.output === 'string' ? o.output : JSON.stringify(o.output))).join(' | ')}`
    : `Hello from capture: ${lastUserText(body.input)}`;
  return { type: 'message', id: `msg_${n}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] };
}

function streamOf(response, item) {
  let seq = 0;
  const out = [];
  const ev = (type, fields) => out.push(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...fields })}\n\n`);
  const pending = { ...response, status: 'in_progress', output: [], usage: null };
  ev('response.created', { response: pending });
  ev('response.in_progress', { response: pending });
  if (item.type === 'function_call') {
    ev('response.output_item.added', { output_index: 0, item: { ...item, arguments: '', status: 'in_progress' } });
    ev('response.function_call_arguments.delta', { output_index: 0, item_id: item.id, delta: item.arguments });
    ev('response.function_call_arguments.done', { output_index: 0, item_id: item.id, arguments: item.arguments });
  } else {
    const part = item.content[0];
    ev('response.output_item.added', { output_index: 0, item: { ...item, status: 'in_progress', content: [] } });
    ev('response.content_part.added', { output_index: 0, item_id: item.id, content_index: 0, part: { ...part, text: '' } });
    ev('response.output_text.delta', { output_index: 0, item_id: item.id, content_index: 0, delta: part.text });
    ev('response.output_text.done', { output_index: 0, item_id: item.id, content_index: 0, text: part.text });
    ev('response.content_part.done', { output_index: 0, item_id: item.id, content_index: 0, part });
  }
  ev('response.output_item.done', { output_index: 0, item });
  ev('response.completed', { response });
  return out.join('');
}

/// Starts the capture server on a loopback port: `{url, requests, stop()}`;
/// `requests` are `{method, path, headers, body, json}` in arrival order.
export function startCapture() {
  const requests = [];
  let n = 0;
  const server = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      let json = null;
      try {
        json = JSON.parse(raw);
      } catch {}
      requests.push({ method: req.method, path: req.url, headers: req.headers, body: raw, json });
      if (req.method !== 'POST' || !req.url.split('?')[0].endsWith('/responses') || !json) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}`, type: 'invalid_request_error', param: null, code: null } }));
        return;
      }
      n += 1;
      const item = answer(json, n);
      const response = {
        id: `resp_capture_${n}`,
        object: 'response',
        created_at: Math.floor(Date.now() / 1000),
        status: 'completed',
        model: json.model,
        output: [item],
        usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 },
      };
      if (json.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(streamOf(response, item));
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(response));
      }
    });
  });
  return new Promise((ok) => {
    server.listen(0, '127.0.0.1', () => {
      ok({
        url: `http://127.0.0.1:${server.address().port}`,
        requests,
        stop: () => new Promise((r) => server.close(r)),
      });
    });
  });
}
