//! Tools only a Responses upstream can run: built-in ones (`web_search`,
//! `file_search`, `code_interpreter`, `computer_use_preview`,
//! `image_generation`, `mcp`, `local_shell`, `tool_search`, …).
//! Translation to another protocol refuses them (the codec's 400 says why);
//! under the `adapt` policy they are cut from the body before translation
//! instead, and reported, because agents such as Codex CLI declare
//! `web_search` on every request whatever the model. `function` and `custom`
//! tools are translated, and so are `namespace` groups of them (flattened,
//! `super::namespace`).

use crate::util::jsonedit::{self, Edit};
use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    tools: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
struct ToolPeek<'a> {
    #[serde(rename = "type")]
    kind: Option<&'a str>,
}

/// Whether a tool of this type is translated to other protocols.
fn translated(kind: Option<&str>) -> bool {
    matches!(kind, Some("function" | "custom" | "namespace"))
}

/// The body without its hosted tools, and their names as reported
/// (`tools.web_search`); `None` when it has none (or is not a JSON object).
pub fn drop_hosted_tools(body: &[u8]) -> Option<(Vec<u8>, Vec<String>)> {
    let parsed: Body<'_> = serde_json::from_slice(body).ok()?;
    let tools = parsed.tools?;
    let mut kept: Vec<&RawValue> = Vec::with_capacity(tools.len());
    let mut dropped = Vec::new();
    for t in tools {
        let kind = serde_json::from_str::<ToolPeek<'_>>(t.get())
            .ok()
            .and_then(|p| p.kind);
        if translated(kind) {
            kept.push(t);
        } else {
            let name = format!("tools.{}", kind.unwrap_or("untyped"));
            if !dropped.contains(&name) {
                dropped.push(name);
            }
        }
    }
    if dropped.is_empty() {
        return None;
    }
    let edit = if kept.is_empty() {
        Edit::remove("tools")
    } else {
        Edit::set("tools", serde_json::to_vec(&kept).ok()?)
    };
    let out = jsonedit::apply(body, &[edit])?;
    Some((out, dropped))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hosted_tools_are_cut_and_named_and_the_rest_kept_byte_for_byte() {
        let body = br#"{"model":"m","tools":[{"type":"function","name":"f","parameters":{}},{"type":"web_search","external_web_access":false},{"type":"namespace","name":"ns","tools":[]},{"type":"custom","name":"apply_patch"},{"type":"tool_search"}],"input":"x"}"#;
        let (out, dropped) = drop_hosted_tools(body).unwrap();
        assert_eq!(dropped, ["tools.web_search", "tools.tool_search"]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"model":"m","tools":[{"type":"function","name":"f","parameters":{}},{"type":"namespace","name":"ns","tools":[]},{"type":"custom","name":"apply_patch"}],"input":"x"}"#
        );
        let only = br#"{"tools":[{"type":"file_search"}],"input":"x"}"#;
        let (out, dropped) = drop_hosted_tools(only).unwrap();
        assert_eq!(dropped, ["tools.file_search"]);
        assert_eq!(String::from_utf8(out).unwrap(), r#"{"input":"x"}"#);
        assert!(drop_hosted_tools(br#"{"tools":[{"type":"function","name":"f"}]}"#).is_none());
        assert!(drop_hosted_tools(br#"{"input":"x"}"#).is_none());
    }
}
