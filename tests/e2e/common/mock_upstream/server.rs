//! The shared server: accepts connections, reads each request, routes it
//! (provider routes, `/__mock/` control routes, `~MARKERS` path faults) and
//! hands the reply to `reply` for writing.
//! Imports `super::*` (the rest of the mock upstream).

use super::*;

pub(super) async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    // Owning the connection tasks here means aborting this task ends them too.
    let mut connections = JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                state.connections.fetch_add(1, Ordering::SeqCst);
                let state = Arc::clone(&state);
                connections.spawn(async move {
                    // A connection error only ends that connection.
                    let _ = serve_connection(&state, stream).await;
                });
            }
            // Out of descriptors and the like: back off instead of spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
        while connections.try_join_next().is_some() {}
    }
}

pub(super) async fn serve_connection(state: &State, stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut conn = WireReader::new(stream);
    loop {
        let Some(head) = conn.read_head(MAX_HEAD_BYTES).await? else {
            return Ok(());
        };
        let mut start = head.start_line.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (start.next(), start.next(), start.next(), start.next())
        else {
            let reply = Reply::full(400, "text/plain", b"bad request line".to_vec());
            write_reply(conn.get_mut(), reply, false).await?;
            return Ok(());
        };
        let (method, target) = (method.to_owned(), target.to_owned());
        let connection = head.header("connection");
        let keep_alive = match version {
            "HTTP/1.1" => !has_token(connection, "close"),
            "HTTP/1.0" => has_token(connection, "keep-alive"),
            _ => false,
        };
        if has_token(head.header("expect"), "100-continue") {
            let io = conn.get_mut();
            io.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
            io.flush().await?;
        }
        let body = match Framing::of_request(&head) {
            Ok(framing) => {
                BodyReader::new(framing)
                    .read_to_end(&mut conn, MAX_BODY_BYTES)
                    .await
            }
            Err(e) => Err(e),
        };
        let body = match body {
            Ok(body) => body,
            Err(e) => {
                let protocol = guess_protocol(split_target(&target).0);
                let reply = match e.kind() {
                    io::ErrorKind::FileTooLarge => {
                        error_reply(protocol, 413, "mock: request body too large")
                    }
                    io::ErrorKind::InvalidData => {
                        error_reply(protocol, 400, &format!("mock: bad request body: {e}"))
                    }
                    _ => return Err(e),
                };
                write_reply(conn.get_mut(), reply, false).await?;
                lingering_close(&mut conn).await;
                return Ok(());
            }
        };
        let request = RecordedRequest {
            method,
            path: target,
            headers: head.headers,
            body,
        };
        let reply = respond(state, request);
        let status = reply.status;
        let keep = match write_reply(conn.get_mut(), reply, keep_alive).await {
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {
                state.aborted.fetch_add(1, Ordering::SeqCst);
                return Err(e);
            }
            written => written?,
        };
        if state.verbose.load(Ordering::Relaxed) {
            eprintln!("mock_upstream: {} -> {status}", head.start_line);
        }
        if !keep {
            return Ok(());
        }
    }
}

/// Ends a connection whose request body was not read to its end. Closing a
/// socket with unread input makes the kernel send a reset, which can destroy
/// the reply still in flight; so shut the write side and drain the input.
pub(super) async fn lingering_close(conn: &mut WireReader<TcpStream>) {
    if conn.get_mut().shutdown().await.is_err() {
        return;
    }
    let drain = async {
        while let Ok(piece) = conn.read_some(1 << 16).await {
            if piece.is_empty() {
                break;
            }
        }
    };
    // Whatever happens while draining, the connection is over.
    let _ = tokio::time::timeout(Duration::from_secs(5), drain).await;
}

pub(super) fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    }
}

pub(super) fn query_has(query: Option<&str>, pair: &str) -> bool {
    query.is_some_and(|q| q.split('&').any(|p| p == pair))
}

/// The protocol whose error shape an unknown path gets.
pub(super) fn guess_protocol(path: &str) -> Protocol {
    if path.contains("/responses") {
        Protocol::Responses
    } else if path.contains("/messages") || path.contains("anthropic") {
        Protocol::Anthropic
    } else if path.contains("/models/")
        || path.contains("v1beta")
        || path.contains("gemini")
        || path.contains("google")
    {
        Protocol::Gemini
    } else {
        Protocol::OpenAi
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Route {
    Chat,
    Responses,
    ResponsesCount,
    Messages,
    AnthropicCount,
    Generate {
        model: String,
    },
    StreamGenerate {
        model: String,
        sse: bool,
    },
    GeminiCount {
        model: String,
    },
    /// OpenAI `/embeddings`.
    Embeddings,
    /// Gemini `:embedContent` (`batch` false) and `:batchEmbedContents`.
    Embed {
        model: String,
        batch: bool,
    },
    /// Vertex AI's Anthropic models (`:rawPredict`, `:streamRawPredict`).
    RawPredict {
        model: String,
    },
    /// Bedrock: InvokeModel (`converse` false) or Converse, streamed or not.
    Bedrock {
        model: String,
        converse: bool,
        stream: bool,
    },
    /// Vertex AI's text embeddings (`:predict`).
    Predict {
        model: String,
    },
    NotFound(Protocol),
}

pub(super) fn classify(method: &str, target: &str) -> Route {
    let (path, query) = split_target(target);
    let path = path.trim_end_matches('/');
    if method != "POST" {
        return Route::NotFound(guess_protocol(path));
    }
    if let Some((model, method)) = bedrock_call(path) {
        return Route::Bedrock {
            model,
            converse: method.starts_with("converse"),
            stream: method.ends_with("stream"),
        };
    }
    if path.ends_with("/chat/completions") {
        return Route::Chat;
    }
    if path.ends_with("/embeddings") {
        return Route::Embeddings;
    }
    if path.ends_with("/responses/input_tokens") {
        return Route::ResponsesCount;
    }
    if path.ends_with("/responses") {
        return Route::Responses;
    }
    if path.ends_with("/messages/count_tokens") {
        return Route::AnthropicCount;
    }
    if path.ends_with("/messages") {
        return Route::Messages;
    }
    if let Some(at) = path.rfind("/models/") {
        if let Some((model, action)) = path[at + "/models/".len()..].rsplit_once(':') {
            let model = model.to_owned();
            match action {
                "generateContent" => return Route::Generate { model },
                "streamGenerateContent" => {
                    let sse = query_has(query, "alt=sse");
                    return Route::StreamGenerate { model, sse };
                }
                "countTokens" => return Route::GeminiCount { model },
                "embedContent" | "batchEmbedContents" => {
                    let batch = action == "batchEmbedContents";
                    return Route::Embed { model, batch };
                }
                "rawPredict" | "streamRawPredict" => return Route::RawPredict { model },
                // Vertex's only (`/v1/projects/…`); elsewhere an unknown route.
                "predict" if path.starts_with("/v1/projects/") => return Route::Predict { model },
                _ => {}
            }
        }
    }
    Route::NotFound(guess_protocol(path))
}

pub(super) fn respond(state: &State, request: RecordedRequest) -> Reply {
    let (path, _) = split_target(&request.path);
    if let Some(control) = path.strip_prefix("/__mock/") {
        return control_reply(state, &request.method, control);
    }
    if let Some(reply) = cloud_reply(state, &request).or_else(|| rerank_reply(state, &request)) {
        state.requests().push(request);
        return reply;
    }
    let seq = state.seq.fetch_add(1, Ordering::SeqCst) + 1;
    let mut faults = path_faults(state, path);
    if faults.contains("[[prompt-cache]]") {
        faults.push_str(&prompt_cache(state, path, &request.body));
    }
    let reply = provider_reply(
        classify(&request.method, &request.path),
        &request,
        seq,
        &faults,
    );
    state.requests().push(request);
    reply
}

/// The markers of a `~…` path segment, as bracketed marker text, unless an
/// `every:N` among them skips this request (or `once`: every request but
/// the path's first).
pub(super) fn path_faults(state: &State, path: &str) -> String {
    let Some(segment) = path.split('/').find_map(|s| s.strip_prefix('~')) else {
        return String::new();
    };
    let mut every = 1u64;
    let mut once = false;
    let mut text = String::new();
    for m in segment.split(',').filter(|m| !m.is_empty()) {
        if m == "once" {
            once = true;
            continue;
        }
        match m.strip_prefix("every:") {
            Some(n) => every = n.parse().unwrap_or(1).max(1),
            None => {
                text.push_str("[[");
                text.push_str(m);
                text.push_str("]]");
            }
        }
    }
    let mut counts = state
        .fault_counts
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let n = counts.entry(segment.to_owned()).or_default();
    *n += 1;
    if once {
        return if *n == 1 { text } else { String::new() };
    }
    if (*n).is_multiple_of(every) {
        text
    } else {
        String::new()
    }
}

/// `~prompt-cache`: the turns of the request (system prompt first) that
/// begin as an earlier request's on `path` did, as `[[cached:N]]` (N: their
/// JSON bytes / 4); the request's turns are remembered for the next ones.
fn prompt_cache(state: &State, path: &str, body: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return String::new();
    };
    let mut turns: Vec<String> = ["system", "instructions", "systemInstruction"]
        .iter()
        .filter_map(|k| v.get(*k).map(Value::to_string))
        .collect();
    for k in ["messages", "input", "contents"] {
        if let Some(Value::Array(items)) = v.get(k) {
            turns.extend(items.iter().map(Value::to_string));
        }
    }
    let mut cache = state
        .prompt_cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let seen = cache.entry(path.to_owned()).or_default();
    let hit = seen
        .iter()
        .map(|s| s.iter().zip(&turns).take_while(|(a, b)| a == b).count())
        .max()
        .unwrap_or(0);
    let bytes: usize = turns[..hit].iter().map(String::len).sum();
    seen.push(turns);
    format!("[[cached:{}]]", bytes / 4)
}

/// `[[bad-crc]]` on a Converse stream: the middle frame's CRC is wrong.
fn as_bad_crc(mut reply: Reply, bad: bool) -> Reply {
    if let (true, ReplyBody::Stream(frames)) = (bad, &mut reply.body) {
        let middle = frames.len() / 2;
        if let Some(last) = frames.get_mut(middle).and_then(|f| f.last_mut()) {
            *last ^= 0x5a;
        }
    }
    reply
}

pub(super) fn control_reply(state: &State, method: &str, what: &str) -> Reply {
    match (method, what.trim_end_matches('/')) {
        ("GET", "requests") => {
            let list: Vec<Value> = state
                .requests()
                .iter()
                .map(RecordedRequest::to_json)
                .collect();
            Reply::json(200, &Value::Array(list))
        }
        ("POST", "reset") => {
            let cleared = std::mem::take(&mut *state.requests()).len();
            Reply::json(200, &json!({ "cleared": cleared }))
        }
        _ => Reply::json(
            404,
            &json!({ "error": format!("no mock control route {method} /__mock/{what}") }),
        ),
    }
}

pub(super) fn provider_reply(
    route: Route,
    request: &RecordedRequest,
    seq: u64,
    faults: &str,
) -> Reply {
    let protocol = match &route {
        Route::Chat | Route::Embeddings => Protocol::OpenAi,
        Route::Responses | Route::ResponsesCount => Protocol::Responses,
        Route::Messages
        | Route::AnthropicCount
        | Route::RawPredict { .. }
        | Route::Bedrock { .. } => Protocol::Anthropic,
        Route::Generate { .. }
        | Route::StreamGenerate { .. }
        | Route::GeminiCount { .. }
        | Route::Embed { .. }
        | Route::Predict { .. } => Protocol::Gemini,
        Route::NotFound(protocol) => {
            let message = format!("mock: no route for {} {}", request.method, request.path);
            return error_reply(*protocol, 404, &message);
        }
    };
    let text = String::from_utf8_lossy(&request.body);
    let parsed = serde_json::from_slice::<Value>(&request.body).unwrap_or(Value::Null);
    // A continuation (the request ends with an assistant prefill): the body's
    // faults were for the answer's first request, the path's still apply.
    let prefill = assistant_prefill(protocol, &parsed);
    let text = match &prefill {
        Some(_) => std::borrow::Cow::Owned(
            text.replace("[[cut]]", "")
                .replace("[[stream-error]]", "")
                .replace("[[stall:", "[[spent-stall:")
                .replace("[[stall-mid:", "[[spent-stall-mid:")
                .replace("[[hold:", "[[spent-hold:"),
        ),
        None => text,
    };
    let markers = if faults.is_empty() {
        Markers::parse(&text)
    } else {
        Markers::parse(&format!("{faults}{text}"))
    };
    if prefill.is_some() && markers.no_prefill {
        return error_reply(
            protocol,
            400,
            "mock: this model does not support assistant message prefill",
        );
    }
    let slow = Effects {
        slow: markers.slow,
        hold: markers.hold,
        ..Effects::default()
    };
    let bedrock = matches!(route, Route::Bedrock { .. });
    if let Some(status) = markers.status {
        let message = format!("mock: forced status {status}");
        let reply = if bedrock {
            bedrock_error(status, exception_for(status), &message)
        } else {
            error_reply(protocol, status, &message)
        };
        let reply = match &markers.retry_after {
            Some(v) => reply.header("retry-after", v),
            None => reply,
        };
        return reply.with_effects(slow);
    }
    if markers.context_overflow && bedrock {
        return bedrock_error(
            400,
            "ValidationException",
            "Input is too long for requested model.",
        )
        .with_effects(slow);
    }
    if markers.context_overflow {
        return overflow_reply(protocol).with_effects(slow);
    }
    let Ok(body @ Value::Object(_)) = serde_json::from_slice::<Value>(&request.body) else {
        return error_reply(protocol, 400, "mock: request body is not a JSON object")
            .with_effects(slow);
    };
    match &route {
        Route::Embeddings => return openai_embeddings(&body).with_effects(slow),
        Route::Bedrock {
            model,
            converse: false,
            ..
        } if is_embedding_model(model) => return bedrock_embed(&body, model).with_effects(slow),
        Route::Embed { model, batch } => {
            return gemini_embed(&body, model, *batch).with_effects(slow)
        }
        Route::Predict { model } => return vertex_predict(&body, model).with_effects(slow),
        _ => {}
    }
    if protocol == Protocol::Anthropic && route == Route::Messages {
        if let Some(why) = anthropic_refusal(&body) {
            return error_reply(protocol, 400, &why).with_effects(slow);
        }
    }
    let prompt_tokens = markers
        .prompt_tokens
        .unwrap_or(request.body.len() as u64 / 4);
    let count = |value: Value| Reply::json(200, &value).with_effects(slow);
    let model = match route {
        Route::AnthropicCount => return count(json!({ "input_tokens": prompt_tokens })),
        Route::GeminiCount { .. } => return count(json!({ "totalTokens": prompt_tokens })),
        Route::ResponsesCount => {
            let body = J::Obj(vec![
                ("object", J::from("response.input_tokens")),
                ("input_tokens", J::from(prompt_tokens)),
            ]);
            return Reply::json_ordered(200, "application/json", &body).with_effects(slow);
        }
        Route::Bedrock {
            converse: true,
            stream,
            ..
        } => {
            let effects = Effects {
                slow: markers.slow,
                hold: markers.hold,
                stall: markers.stall,
                stall_mid: markers.stall_mid,
                cut: markers.cut,
                cut_end: markers.cut_end,
                max_piece: markers.max_piece.unwrap_or(DEFAULT_MAX_PIECE),
                seed: fnv1a(&request.body),
            };
            let reply = converse_reply(&body, stream, &markers, prompt_tokens);
            return as_bad_crc(reply, markers.bad_crc).with_effects(effects);
        }
        Route::Generate { ref model }
        | Route::StreamGenerate { ref model, .. }
        | Route::RawPredict { ref model }
        | Route::Bedrock { ref model, .. } => model.clone(),
        _ => body["model"].as_str().unwrap_or("mock-model").to_owned(),
    };
    let mut tool = (markers.tool || markers.text_tool).then(|| first_tool_name(protocol, &body));
    let mut tool_args = tool_args();
    let mut reply_text = if markers.echo {
        text.into_owned()
    } else {
        expected_reply(protocol, &last_user_text(protocol, &body))
    };
    if markers.json_answer && tool.is_some() {
        if let Some(schema) = first_tool_schema(protocol, &body) {
            tool_args = conforming(&schema, &schema);
        }
    } else if markers.json_answer {
        reply_text = match enforced_schema(protocol, &body) {
            Some(schema) => conforming(&schema, &schema).to_string(),
            None => "mock: this request enforces no JSON Schema".to_owned(),
        };
    }
    if let Some(prefill) = &prefill {
        // The model goes on from the prefill: the rest of its answer.
        reply_text = match reply_text.strip_prefix(prefill.as_str()) {
            Some(rest) => rest.to_owned(),
            None => format!("mock: the prefill {prefill:?} is not the start of this answer"),
        };
    }
    if let Some((name, args)) = &markers.agent_tool {
        if declares_tools(&body) {
            match last_turn_tool_results(protocol, &body) {
                Some(results) => reply_text = agent_tool_reply(protocol, &results),
                None => {
                    tool = Some(name.clone());
                    tool_args = args.clone();
                }
            }
        }
    }
    let cache_write = markers
        .cache_write
        .unwrap_or(0)
        .min(prompt_tokens - markers.cached.unwrap_or(0).min(prompt_tokens));
    let answer = Answer {
        model,
        seq,
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        thinking: markers.thinking,
        text: (tool.is_none() || markers.text_tool).then_some(reply_text),
        tool,
        tool_args,
        prompt_tokens,
        cached_tokens: markers.cached.unwrap_or(0).min(prompt_tokens),
        cache_write_tokens: cache_write,
        cache_write_1h_tokens: markers.cache_write_1h.unwrap_or(0).min(cache_write),
        deepseek_cache: markers.deepseek_cache,
        max_tokens: markers.max_tokens,
        newline: if markers.crlf { "\r\n" } else { "\n" },
    };
    let streaming = match route {
        Route::Bedrock { stream, .. } => stream,
        _ => body["stream"] == Value::Bool(true),
    };
    let reply = match route {
        Route::Chat => {
            let include_usage = body["stream_options"]["include_usage"] == Value::Bool(true);
            openai_reply(&answer, streaming, include_usage, &markers)
        }
        Route::Responses => responses_reply(&answer, &body, streaming, &markers),
        Route::Messages | Route::RawPredict { .. } => anthropic_reply(&answer, streaming, &markers),
        Route::Bedrock { .. } if streaming => {
            as_chunk_stream(anthropic_reply(&answer, true, &markers), markers.bad_crc)
        }
        Route::Bedrock { .. } => anthropic_reply(&answer, false, &markers),
        Route::Generate { .. } => gemini_reply(&answer, None, &markers),
        Route::StreamGenerate { sse, .. } => gemini_reply(&answer, Some(sse), &markers),
        _ => error_reply(protocol, 500, "mock: unreachable route"),
    };
    reply.with_effects(Effects {
        slow: markers.slow,
        hold: markers.hold,
        stall: markers.stall,
        stall_mid: markers.stall_mid,
        cut: markers.cut,
        cut_end: markers.cut_end,
        max_piece: markers.max_piece.unwrap_or(DEFAULT_MAX_PIECE),
        seed: fnv1a(&request.body),
    })
}
