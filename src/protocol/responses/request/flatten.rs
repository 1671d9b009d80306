//! A request's `namespace` tools flattened for the canonical request: each
//! member a function tool named by [`flat_name`] (`{namespace}__{tool}`),
//! the namespace's description leading each member's (so nothing the model
//! would have read is lost), and no flat name shared with another tool
//! (refused: a call of it could not be told apart). The decoder turns
//! the members into function tools (`super::decode`).

use crate::ir::Tool;
use crate::protocol::common::TranslateError;
use crate::protocol::responses::namespace::flat_name;
use crate::protocol::responses::wire::ToolDef;

/// Refuses a flat name another tool of the request also has: `flattened`
/// lists where each member sits in `tools`, and its place in the request.
pub(super) fn check_unique(
    tools: &[Tool],
    flattened: &[(usize, String)],
) -> Result<(), TranslateError> {
    for (k, param) in flattened {
        let name = tool_name(&tools[*k]);
        let shared = tools
            .iter()
            .enumerate()
            .any(|(o, t)| o != *k && tool_name(t) == name);
        if shared {
            return Err(TranslateError::invalid(
                param.clone(),
                format!(
                    "this namespace tool reaches models of other protocols as a function named \"{}\", which another tool of the request is also called: rename one of them",
                    name.unwrap_or_default()
                ),
            ));
        }
    }
    Ok(())
}

fn tool_name(t: &Tool) -> Option<&str> {
    match t {
        Tool::Function(f) => Some(&f.name),
        Tool::Opaque(_) => None,
    }
}

/// A namespace's members, flat-named, each with its place in the request.
pub(super) fn members(tool: ToolDef, i: usize) -> Result<Vec<(ToolDef, String)>, TranslateError> {
    let param = format!("tools[{i}]");
    let Some(namespace) = tool.name.filter(|n| !n.is_empty()) else {
        return Err(TranslateError::invalid(
            format!("{param}.name"),
            "a namespace tool needs a name",
        ));
    };
    let mut extra = tool.extra;
    let list = extra.remove("tools").unwrap_or_default();
    let members: Vec<ToolDef> = if list.is_null() {
        Vec::new()
    } else {
        serde_json::from_value(list).map_err(|e| {
            TranslateError::invalid(
                format!("{param}.tools"),
                format!("a namespace's tools must be a list of tool objects: {e}"),
            )
        })?
    };
    let mut out = Vec::with_capacity(members.len());
    for (j, mut member) in members.into_iter().enumerate() {
        let at = format!("{param}.tools[{j}]");
        if !matches!(member.kind.as_str(), "function" | "custom") {
            return Err(TranslateError::unsupported(
                at,
                format!(
                    "a \"{}\" tool inside a namespace is only available when the model is served by a responses upstream; only function and custom tools of a namespace are translated",
                    member.kind
                ),
            ));
        }
        let Some(name) = member.name.take().filter(|n| !n.is_empty()) else {
            return Err(TranslateError::invalid(
                format!("{at}.name"),
                format!("a {} tool needs a name", member.kind),
            ));
        };
        member.name = Some(flat_name(&namespace, &name));
        member.description = match (tool.description.as_deref(), member.description.take()) {
            (Some(n), Some(d)) => Some(format!("{n}\n\n{d}")),
            (Some(n), None) => Some(n.to_string()),
            (None, d) => d,
        };
        // The namespace's own unknown fields ride with each member (and
        // are reported as dropped like any tool field another protocol
        // cannot carry).
        for (k, v) in &extra {
            member.extra.entry(k.clone()).or_insert_with(|| v.clone());
        }
        out.push((member, at));
    }
    Ok(out)
}
