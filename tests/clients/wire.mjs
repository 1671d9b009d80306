// Readers of the upstream request bodies the mock recorded, per wire protocol.

const text = (v) => (typeof v === 'string' ? v : JSON.stringify(v ?? null));

/// The tool results a request carries, anywhere in its conversation, each as
/// text (a string content as is, anything else as JSON).
export function toolResultsIn(protocol, body) {
  if (!body) return [];
  switch (protocol) {
    case 'openai':
      return (body.messages || []).filter((m) => m.role === 'tool').map((m) => text(m.content));
    case 'anthropic':
      return (body.messages || [])
        .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
        .filter((b) => b.type === 'tool_result')
        .map((b) => text(b.content));
    case 'gemini':
      return (body.contents || [])
        .flatMap((c) => c.parts || [])
        .map((p) => p.functionResponse ?? p.function_response)
        .filter(Boolean)
        .map((r) => text(r.response));
    case 'responses':
      return (Array.isArray(body.input) ? body.input : [])
        .filter((i) => i.type === 'function_call_output' || i.type === 'custom_tool_call_output')
        .map((i) => text(i.output));
    default:
      throw new Error(`unknown protocol ${protocol}`);
  }
}

/// The names of the tools a request declares.
export function toolNamesIn(protocol, body) {
  if (!body) return [];
  switch (protocol) {
    case 'openai':
      return (body.tools || []).map((t) => t.function?.name);
    case 'anthropic':
      return (body.tools || []).map((t) => t.name);
    case 'gemini':
      return (body.tools || []).flatMap((t) => t.functionDeclarations ?? t.function_declarations ?? []).map((d) => d.name);
    case 'responses':
      // Function and custom tools by name, a namespace's tools inside it,
      // built-in tools (web_search, …) by type.
      return (body.tools || []).flatMap((t) => (t.type === 'namespace' ? (t.tools || []).map((u) => u.name) : [t.name ?? t.type]));
    default:
      throw new Error(`unknown protocol ${protocol}`);
  }
}

/// The upstream wire protocol a recorded request was sent in, from its path.
export function protocolOf(request) {
  const path = request.path.split('?')[0];
  if (path.endsWith('/chat/completions')) return 'openai';
  if (path.endsWith('/responses')) return 'responses';
  if (path.endsWith('/messages')) return 'anthropic';
  if (/:(stream)?generateContent$/i.test(path)) return 'gemini';
  return null;
}
