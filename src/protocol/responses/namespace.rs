//! Responses `namespace` tools (Codex's `multi_agent_v1`, MCP servers) for
//! other protocols, which have no namespaces: each member is a function tool
//! named `{namespace}__{tool}` (the contract's flat name, [`flat_name`]), and
//! a call of that flat name comes back to the client as
//! `{"type": "function_call", "namespace": …, "name": …}`.
//!
//! The request decoder flattens (the members, a `tool_choice` naming one,
//! and `function_call` items of the history that carry a `namespace`); the
//! response and stream encoders split, by the table of the names the
//! client's request declared ([`Namespaces::declared`]), so a plain tool that
//! happens to contain `__` is never split.
//!
//! Flat names stay within the 64 characters OpenAI, Anthropic and Gemini
//! allow: `{namespace}__{tool}` when it fits, else its first 47 characters,
//! `_` and 16 hex digits of a hash of the pair (stable, so a conversation's
//! history flattens the same way on every turn).

use crate::ir::ids::fnv1a;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The longest tool name every other protocol accepts.
pub const MAX_TOOL_NAME: usize = 64;

/// Hex digits of the hash that ends a flat name too long to write out.
const HASH_DIGITS: usize = 16;

/// The name other protocols see for tool `name` of `namespace`.
pub fn flat_name(namespace: &str, name: &str) -> String {
    let joined = format!("{namespace}__{name}");
    if joined.len() <= MAX_TOOL_NAME {
        return joined;
    }
    let mut head = MAX_TOOL_NAME - 1 - HASH_DIGITS;
    while !joined.is_char_boundary(head) {
        head -= 1;
    }
    let hash = fnv1a(&[namespace.as_bytes(), name.as_bytes()]);
    format!("{}_{hash:016x}", &joined[..head])
}

/// One member of a namespace: the flat name, and the pair it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Member {
    flat: String,
    namespace: String,
    name: String,
}

/// The namespaced tools a Responses request declared, by flat name (empty
/// for most requests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespaces {
    members: Vec<Member>,
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    tools: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
struct ToolPeek {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
    #[serde(default)]
    tools: Vec<MemberPeek>,
}

#[derive(Deserialize)]
struct MemberPeek {
    name: Option<String>,
}

impl Namespaces {
    /// The namespaced tools of a Responses request body (none when it has
    /// no `namespace` tool, or is not a request this can read).
    pub fn declared(body: &[u8]) -> Self {
        let mut out = Namespaces::default();
        if memchr::memmem::find(body, b"\"namespace\"").is_none() {
            return out;
        }
        let Ok(Body { tools: Some(tools) }) = serde_json::from_slice::<Body<'_>>(body) else {
            return out;
        };
        for raw in tools {
            let Ok(tool) = serde_json::from_str::<ToolPeek>(raw.get()) else {
                continue;
            };
            let (Some("namespace"), Some(ns)) = (tool.kind.as_deref(), tool.name) else {
                continue;
            };
            for name in tool.tools.into_iter().filter_map(|m| m.name) {
                out.add(&ns, name);
            }
        }
        out
    }

    /// Declares tool `name` of `namespace`.
    pub fn add(&mut self, namespace: &str, name: String) {
        self.members.push(Member {
            flat: flat_name(namespace, &name),
            namespace: namespace.to_string(),
            name,
        });
    }

    /// Whether no namespaced tool was declared.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The namespace and tool name a flat name stands for, when it is one
    /// of the declared namespaced tools.
    pub fn split(&self, flat: &str) -> Option<(&str, &str)> {
        self.members
            .iter()
            .find(|m| m.flat == flat)
            .map(|m| (m.namespace.as_str(), m.name.as_str()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_name_is_namespace_and_tool_joined_by_two_underscores() {
        assert_eq!(
            flat_name("multi_agent_v1", "spawn_agent"),
            "multi_agent_v1__spawn_agent"
        );
        // Codex's MCP namespaces end in `__` themselves: kept as sent.
        assert_eq!(
            flat_name("mcp__calendar__", "create_event"),
            "mcp__calendar____create_event"
        );
        let exact = format!("{}__{}", "n".repeat(30), "t".repeat(32));
        assert_eq!(flat_name(&"n".repeat(30), &"t".repeat(32)), exact);
    }

    #[test]
    fn a_name_too_long_keeps_its_head_and_ends_with_a_stable_hash() {
        let ns = "mcp__a_server_with_a_rather_long_name__";
        let long = flat_name(ns, "create_calendar_event_with_attendees");
        assert_eq!(long.len(), MAX_TOOL_NAME);
        assert!(long.starts_with("mcp__a_server_with_a_rather_long_name____create_"));
        assert_eq!(long, flat_name(ns, "create_calendar_event_with_attendees"));
        assert_ne!(long, flat_name(ns, "create_calendar_event_with_attendeez"));
        assert!(long
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
    }

    #[test]
    fn declared_reads_the_members_of_each_namespace_and_splits_only_those() {
        let body = br#"{"model":"m","input":"x","tools":[
            {"type":"function","name":"plain__tool","parameters":{}},
            {"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[
                {"type":"function","name":"spawn_agent","parameters":{}},
                {"type":"function","name":"wait_agent"}]},
            {"type":"web_search"}]}"#;
        let ns = Namespaces::declared(body);
        assert_eq!(
            ns.split("multi_agent_v1__spawn_agent"),
            Some(("multi_agent_v1", "spawn_agent"))
        );
        assert_eq!(
            ns.split("multi_agent_v1__wait_agent"),
            Some(("multi_agent_v1", "wait_agent"))
        );
        assert_eq!(ns.split("plain__tool"), None);
        assert_eq!(ns.split("spawn_agent"), None);
        assert!(Namespaces::declared(br#"{"tools":[{"type":"function","name":"f"}]}"#).is_empty());
        assert!(Namespaces::declared(b"not json \"namespace\"").is_empty());
    }
}
