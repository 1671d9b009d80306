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
