//! Tests of the Responses request codec that cover both directions.

use super::custom::{custom_arguments, custom_input, custom_parameters, CUSTOM_INPUT_KEY};
use super::decode::decode_tool;
use super::encode::encode_tool;
use crate::family::Family;
use crate::ir::Tool;
use crate::protocol::responses::wire::ToolDef;
use serde_json::json;

const F: Family = Family::Responses;

#[test]
fn custom_tool_descriptions_carry_the_grammar_and_come_back_clean() {
    let format = json!({"type": "grammar", "syntax": "lark", "definition": "start: \"x\""});
    let tool = ToolDef {
        kind: "custom".into(),
        name: Some("apply_patch".into()),
        description: Some("Edit files.".into()),
        format: Some(format),
        ..ToolDef::default()
    };
    let decoded = decode_tool(tool, 0);
    let Ok(Tool::Function(f)) = &decoded else {
        panic!("{decoded:?}");
    };
    assert!(f
        .description
        .as_deref()
        .is_some_and(|d| d.starts_with("Edit files.") && d.contains("lark grammar")));
    assert_eq!(f.parameters, Some(custom_parameters()));
    let back = encode_tool(&Tool::Function(f.clone()), 0, Some(F));
    assert_eq!(
        back.ok(),
        Some(
            json!({"type": "custom", "name": "apply_patch", "description": "Edit files.",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: \"x\""}})
        )
    );
}

#[test]
fn custom_arguments_are_recognised_by_shape() {
    assert_eq!(
        custom_input(&custom_arguments("*** Begin")),
        Some("*** Begin")
    );
    assert_eq!(custom_input(&json!({CUSTOM_INPUT_KEY: 1})), None);
    assert_eq!(custom_input(&json!({CUSTOM_INPUT_KEY: "a", "b": 1})), None);
    assert_eq!(custom_input(&json!({"input": "a"})), None);
}

/// A Codex-shaped request: a plain function, the `multi_agent_v1` namespace
/// of sub-agent tools, and a history with a call of one of them.
fn codex_request(extra_tool: Option<serde_json::Value>) -> serde_json::Value {
    let mut tools = vec![
        json!({"type": "function", "name": "exec_command", "strict": false,
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}),
        json!({"type": "namespace", "name": "multi_agent_v1",
            "description": "Tools for spawning and managing sub-agents.",
            "tools": [
                {"type": "function", "name": "spawn_agent", "description": "Spawn a sub-agent.",
                    "strict": false, "parameters": {"type": "object", "properties": {"message": {"type": "string"}}}},
                {"type": "function", "name": "wait_agent", "strict": false,
                    "parameters": {"type": "object", "properties": {}}}]}),
    ];
    tools.extend(extra_tool);
    json!({"model": "m", "tools": tools,
        "tool_choice": {"type": "function", "namespace": "multi_agent_v1", "name": "wait_agent"},
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "review"}]},
            {"type": "function_call", "call_id": "call_1", "namespace": "multi_agent_v1",
                "name": "spawn_agent", "arguments": "{\"message\":\"review\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "agent_7"}]})
}

fn decode_body(
    body: &serde_json::Value,
) -> Result<crate::ir::ChatRequest, super::super::super::common::TranslateError> {
    let ctx = crate::protocol::common::DecodeContext {
        model: None,
        stream: false,
    };
    super::decode(&serde_json::to_vec(body).unwrap_or_default(), &ctx)
}

#[test]
fn namespace_tools_are_flattened_with_their_calls_and_choice() {
    use crate::ir::{Block, ToolChoice};
    let req = decode_body(&codex_request(None));
    let Ok(req) = req else { panic!("{req:?}") };
    let names: Vec<&str> = req
        .tools
        .iter()
        .filter_map(|t| match t {
            Tool::Function(f) => Some(f.name.as_str()),
            Tool::Opaque(_) => None,
        })
        .collect();
    assert_eq!(
        names,
        [
            "exec_command",
            "multi_agent_v1__spawn_agent",
            "multi_agent_v1__wait_agent"
        ]
    );
    let Tool::Function(spawn) = &req.tools[1] else {
        panic!()
    };
    assert_eq!(
        spawn.description.as_deref(),
        Some("Tools for spawning and managing sub-agents.\n\nSpawn a sub-agent.")
    );
    assert!(spawn.extra.is_empty(), "{:?}", spawn.extra);
    assert_eq!(
        req.tool_choice,
        Some(ToolChoice::Tool("multi_agent_v1__wait_agent".into()))
    );
    let call = req
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|b| match b {
            Block::ToolCall(c) => Some(c),
            _ => None,
        });
    let call = call.map(|c| (c.name.as_str(), c.extra.is_empty()));
    assert_eq!(call, Some(("multi_agent_v1__spawn_agent", true)));
    let result = req
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|b| match b {
            Block::ToolResult(r) => r.name.as_deref(),
            _ => None,
        });
    assert_eq!(result, Some("multi_agent_v1__spawn_agent"));
}

#[test]
fn a_flat_name_another_tool_has_is_refused_naming_the_member() {
    let clash = json!({"type": "function", "name": "multi_agent_v1__wait_agent", "parameters": {}});
    let err = decode_body(&codex_request(Some(clash))).err();
    let err = err.map(|e| (e.status(), e.param.unwrap_or_default(), e.message));
    let Some((status, param, message)) = err else {
        panic!("accepted")
    };
    assert_eq!((status, param.as_str()), (400, "tools[1].tools[1]"));
    assert!(
        message.contains("\"multi_agent_v1__wait_agent\""),
        "{message}"
    );
    // A member that is no function or custom tool is named too.
    let hosted = json!({"model": "m", "input": "x", "tools": [{"type": "namespace", "name": "ns",
        "tools": [{"type": "web_search"}]}]});
    let err = decode_body(&hosted).err().and_then(|e| e.param);
    assert_eq!(err.as_deref(), Some("tools[0].tools[0]"));
}

#[test]
fn a_whole_answer_gives_a_namespaced_call_its_namespace_back() {
    use crate::ir::{Block, ChatResponse, Extra, StopReason, ToolCall};
    use crate::protocol::responses::namespace::Namespaces;
    let call = |id: &str, name: &str| {
        Block::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({"message": "review"}),
            signature: None,
            cache_control: None,
            extra: Extra::default(),
        })
    };
    let resp = ChatResponse {
        id: "resp_1".into(),
        content: vec![
            call("call_1", "multi_agent_v1__spawn_agent"),
            call("call_2", "exec_command"),
        ],
        stop_reason: Some(StopReason::ToolUse),
        ..ChatResponse::default()
    };
    let names = Namespaces::declared(&serde_json::to_vec(&codex_request(None)).unwrap_or_default());
    let out = crate::protocol::responses::response::encode_named(&resp, "acme/m", &names);
    let Ok(out) = out else { panic!("{out:?}") };
    let first = &out["output"][0];
    assert_eq!(
        (
            &first["type"],
            &first["namespace"],
            &first["name"],
            &first["call_id"]
        ),
        (
            &json!("function_call"),
            &json!("multi_agent_v1"),
            &json!("spawn_agent"),
            &json!("call_1")
        )
    );
    assert_eq!(first["arguments"], "{\"message\":\"review\"}");
    assert_eq!(out["output"][1]["name"], "exec_command");
    assert!(out["output"][1].get("namespace").is_none());
    // A namespace's custom tool comes back as a custom call with it.
    let mut names = names;
    names.add("editing", "apply_patch".into());
    let custom = ChatResponse {
        content: vec![Block::ToolCall(ToolCall {
            id: "call_3".into(),
            name: "editing__apply_patch".into(),
            arguments: custom_arguments("*** Begin Patch"),
            signature: None,
            cache_control: None,
            extra: Extra::default(),
        })],
        ..resp.clone()
    };
    let out = crate::protocol::responses::response::encode_named(&custom, "acme/m", &names);
    let item = out.ok().map(|o| o["output"][0].clone()).unwrap_or_default();
    assert_eq!(
        (
            &item["type"],
            &item["namespace"],
            &item["name"],
            &item["input"]
        ),
        (
            &json!("custom_tool_call"),
            &json!("editing"),
            &json!("apply_patch"),
            &json!("*** Begin Patch")
        )
    );
    // Without the request's names nothing is split.
    let plain = crate::protocol::responses::response::encode(&resp, "acme/m");
    assert_eq!(
        plain.ok().map(|o| o["output"][0]["name"].clone()),
        Some(json!("multi_agent_v1__spawn_agent"))
    );
}
