//! The policy for requests a model cannot take as they are (docs/api.md "Adapt or refuse").
//! Under `adapt` an output cap above the model's maximum (or above what the
//! context leaves after the input) is lowered and optional knobs the model
//! does not list are dropped; under `strict` each of those is a 400 naming the
//! parameter. What would change the kind of answer (tools, JSON output, images,
//! `n` > 1, logprobs) and input that alone exceeds the context are refused
//! under both. A [`Plan`] says what changes; it is applied to the client's raw
//! body (so same-protocol upstreams get it byte for byte, and translation
//! starts from the adapted body) and reported as [`Adjustments`].

use crate::adjust::Adjustments;
use crate::admit::validate::{context_error, Inspected, Use};
use crate::config::{Model, Policy};
use crate::error::GatewayError;
use crate::family::Family;
use crate::protocol::spoke;
use crate::util::jsonedit::{self, Edit};
use serde_json::Value;

/// Catalog parameters that `adapt` drops when a model does not list them:
/// optional knobs whose loss does not change the kind of answer. Every other
/// parameter of the vocabulary (`tools`, `tool_choice`, `response_format`,
/// `n`, `logprobs`, and the basic `temperature`, `top_p`, `stop`, `stream`,
/// `max_tokens`) is refused under both policies when the model lacks it.
pub const DROPPABLE: [&str; 11] = [
    "reasoning",
    "top_k",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "metadata",
    "service_tier",
    "parallel_tool_calls",
    "context_management",
    "cache_control",
];

/// Anthropic's smallest thinking budget.
const MIN_THINKING_BUDGET: u64 = 1024;

/// How a thinking budget is fitted under a lowered cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThinkingFix {
    Lower { now: u64, was: u64 },
    Drop,
}

/// What will change in one request.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    policy: Policy,
    /// The most output tokens the upstream may be asked for, when a cap field is above it.
    limit: Option<u64>,
    /// The fields dropped, in request order.
    drops: Vec<Use>,
}

fn bad(param: &str, msg: impl Into<String>) -> GatewayError {
    GatewayError::invalid_param(param, msg)
}

/// Checks `req` against `model` under `policy`: the 400s, and under `adapt`
/// the plan of changes. Cheap: no tokenising (see [`Plan::fit_context`]).
pub fn decide(
    family: Family,
    req: &Inspected,
    body: &[u8],
    model: &Model,
    policy: Policy,
) -> Result<Plan, GatewayError> {
    // Required on messages, not on count_tokens (which is never checked).
    let sp = spoke(family);
    if sp.requires_max_tokens && req.max_tokens.is_none() {
        return Err(bad("max_tokens", "max_tokens: field required"));
    }
    if let Some(t) = req.temperature {
        let max = sp.max_temperature;
        if !(0.0..=max).contains(&t) {
            let name = sp.temperature_field;
            return Err(bad(
                name,
                format!(
                    "temperature {t} is out of range: the {family} protocol accepts 0 to {max}"
                ),
            ));
        }
    }
    let mut plan = Plan {
        policy,
        ..Plan::default()
    };
    for &(field, n) in &req.caps {
        if n > model.max_output_tokens {
            if policy == Policy::Strict {
                return Err(bad(
                    field,
                    format!(
                        "{field} {n} is above the maximum of {} output tokens for model {} (the policy is strict; under adapt it would be lowered)",
                        model.max_output_tokens, model.id
                    ),
                ));
            }
            plan.lower(req, model.max_output_tokens);
        }
    }
    for u in &req.uses {
        if model.supports(u.param) {
            continue;
        }
        if policy == Policy::Adapt && DROPPABLE.contains(&u.param) {
            plan.drops.push(*u);
            continue;
        }
        let name = u.name();
        let hint = if DROPPABLE.contains(&u.param) {
            " (the policy is strict; under adapt it would be dropped)"
        } else {
            ""
        };
        return Err(bad(
            name,
            format!(
                "model {} does not support the parameter {name}{hint}",
                model.id
            ),
        ));
    }
    if !model.supported_features.vision && has_images(family, body) {
        let param = sp.input_field;
        return Err(bad(
            param,
            format!(
                "model {} does not accept images: remove the image parts from {param}",
                model.id
            ),
        ));
    }
    Ok(plan)
}

impl Plan {
    /// The policy the plan was made under.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.limit.is_none() && self.drops.is_empty()
    }

    /// The output cap the upstream will be asked for (`None`: the request names none).
    pub fn output_cap(&self, req: &Inspected) -> Option<u64> {
        req.max_tokens.map(|m| self.limit.map_or(m, |l| m.min(l)))
    }

    fn lower(&mut self, req: &Inspected, n: u64) {
        if req.caps.iter().any(|&(_, v)| v > n) {
            self.limit = Some(self.limit.map_or(n, |l| l.min(n)));
        }
    }

    /// Fits the output cap into what the context leaves after `input` tokens
    /// (counted or bounded by the caller): input alone above the context is
    /// always a 400; input plus cap above it is a 400 under `strict` and a
    /// lowered cap under `adapt`.
    pub fn fit_context(
        &mut self,
        family: Family,
        req: &Inspected,
        model: &Model,
        input: u64,
    ) -> Result<(), GatewayError> {
        let cap = self.output_cap(req);
        if input >= model.context_length {
            return Err(context_error(family, model, input, cap));
        }
        let room = model.context_length - input;
        match cap {
            Some(c) if c > room => {
                if self.policy == Policy::Strict {
                    return Err(context_error(family, model, input, cap));
                }
                self.lower(req, room);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// An Anthropic thinking budget that a lowered cap leaves too large (the
    /// budget must stay below `max_tokens`): scaled down in the client's own
    /// proportion, or, below Anthropic's minimum of 1024, thinking is dropped.
    fn thinking_fix(&self, req: &Inspected) -> Option<ThinkingFix> {
        let (limit, budget, cap) = (self.limit?, req.thinking_budget?, req.max_tokens?);
        if budget < limit || self.drops.iter().any(|u| u.field == "thinking") {
            return None;
        }
        let scaled = u128::from(budget) * u128::from(limit) / u128::from(cap.max(1));
        let new = u64::try_from(scaled).unwrap_or(u64::MAX).min(limit - 1);
        Some(if new < MIN_THINKING_BUDGET {
            ThinkingFix::Drop
        } else {
            ThinkingFix::Lower {
                now: new,
                was: budget,
            }
        })
    }

    /// What the plan changes, by the client's own field names.
    pub fn adjustments(&self, req: &Inspected) -> Adjustments {
        let mut a = Adjustments::default();
        if let Some(l) = self.limit {
            for &(field, was) in &req.caps {
                if was > l {
                    a.clamp(field, l, was);
                }
            }
        }
        if let Some(ThinkingFix::Lower { now, was }) = self.thinking_fix(req) {
            a.clamp("thinking.budget_tokens", now, was);
        }
        for u in &self.drops {
            a.drop_field(u.name());
        }
        if let Some(ThinkingFix::Drop) = self.thinking_fix(req) {
            a.drop_field("thinking");
        }
        a
    }

    /// The raw-body edits that carry the plan out.
    pub fn edits(&self, req: &Inspected) -> Vec<Edit> {
        let mut out = Vec::new();
        if let Some(l) = self.limit {
            for &(field, was) in &req.caps {
                if was > l {
                    out.push(Edit::set(field, l.to_string().into_bytes()));
                }
            }
        }
        match self.thinking_fix(req) {
            Some(ThinkingFix::Lower { now, .. }) => out.push(Edit::set(
                "thinking.budget_tokens",
                now.to_string().into_bytes(),
            )),
            Some(ThinkingFix::Drop) => out.push(Edit::remove("thinking")),
            None => {}
        }
        out.extend(self.drops.iter().map(|u| Edit::remove(u.field)));
        out
    }

    /// The client's body with the plan applied; `None` when nothing changes.
    pub fn apply(&self, req: &Inspected, body: &[u8]) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        jsonedit::apply(body, &self.edits(req))
    }
}

/// Built once: building a finder costs more than searching a small body.
static IMAGE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"image"));

/// Whether the conversation of a `family` body carries an image part.
/// Parses the body; called only for models without vision.
fn has_images(family: Family, body: &[u8]) -> bool {
    // Every image part names "image" (its type or its media type) unless
    // written with escapes: a body with neither is read no further (the
    // parse below is most of a small request's cost).
    let unicode_escape = memchr::memchr_iter(b'\\', body).any(|at| body.get(at + 1) == Some(&b'u'));
    if !unicode_escape && IMAGE.find(body).is_none() {
        return false;
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    v.get(spoke(family).input_field).is_some_and(image_in)
}

fn image_in(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().any(image_in),
        Value::Object(o) => {
            if o.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| matches!(t, "image_url" | "image" | "input_image"))
            {
                return true;
            }
            for k in ["inlineData", "inline_data", "fileData", "file_data"] {
                let mime = o
                    .get(k)
                    .and_then(|d| d.get("mimeType").or_else(|| d.get("mime_type")))
                    .and_then(Value::as_str);
                if mime.is_some_and(|m| m.starts_with("image/")) {
                    return true;
                }
            }
            o.values().any(image_in)
        }
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::admit::validate::inspect;
    use crate::config::Catalog;

    fn model(params: &str, vision: bool) -> Model {
        let text = format!(
            r#"{{"providers":[{{"id":"p","families":["openai"],"upstreams":[{{"protocol":"openai","base_url":"http://127.0.0.1:1"}}]}}],
              "models":[{{"id":"m","provider":"p","context_length":1000,"max_output_tokens":100,
                "pricing":{{"prompt":"0","completion":"0"}},"protocols":["openai","anthropic","gemini"],
                "supported_parameters":{params},"supported_features":{{"vision":{vision}}}}}]}}"#
        );
        Catalog::from_str("c.json", &text, &|_| None)
            .unwrap()
            .model("m")
            .unwrap()
            .clone()
    }

    fn run(
        family: Family,
        body: &str,
        m: &Model,
        policy: Policy,
    ) -> Result<(String, String), GatewayError> {
        let req = inspect(family, body.as_bytes(), false)?;
        let plan = decide(family, &req, body.as_bytes(), m, policy)?;
        let out = plan
            .apply(&req, body.as_bytes())
            .map(|b| String::from_utf8(b).unwrap())
            .unwrap_or_else(|| body.to_string());
        Ok((plan.adjustments(&req).render(), out))
    }

    const CLAUDE_CODE: &str = r#"{"model":"m","max_tokens":32000,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},"context_management":{"edits":[]},"metadata":{"user_id":"u"},"x_unknown":1,"tools":[{"name":"f","input_schema":{}}]}"#;

    #[test]
    fn adapt_clamps_and_drops_claude_code_knobs() {
        let m = model(r#"["max_tokens","tools"]"#, true);
        let (report, out) = run(Family::Anthropic, CLAUDE_CODE, &m, Policy::Adapt).unwrap();
        assert_eq!(
            report,
            "max_tokens=100 (was 32000); dropped=thinking,output_config.effort,metadata,context_management,cache_control"
        );
        assert_eq!(
            out,
            r#"{"model":"m","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"x_unknown":1,"tools":[{"name":"f","input_schema":{}}]}"#
        );
    }

    #[test]
    fn a_thinking_budget_stays_below_the_lowered_cap() {
        let m = model(r#"["max_tokens","reasoning"]"#, true);
        let body = r#"{"model":"m","max_tokens":32000,"thinking":{"type":"enabled","budget_tokens":31999},"messages":[{"role":"user","content":"x"}]}"#;
        let m_big = Model {
            max_output_tokens: 8192,
            context_length: 200_000,
            ..m.clone()
        };
        let (report, out) = run(Family::Anthropic, body, &m_big, Policy::Adapt).unwrap();
        assert_eq!(
            report,
            "max_tokens=8192 (was 32000); thinking.budget_tokens=8191 (was 31999)"
        );
        assert_eq!(
            out,
            r#"{"model":"m","max_tokens":8192,"thinking":{"type":"enabled","budget_tokens":8191},"messages":[{"role":"user","content":"x"}]}"#
        );
        // Below Anthropic's minimum budget, thinking goes.
        let (report, out) = run(Family::Anthropic, body, &m, Policy::Adapt).unwrap();
        assert_eq!(report, "max_tokens=100 (was 32000); dropped=thinking");
        assert!(!out.contains("thinking"), "{out}");
        // A budget already below the cap is left alone.
        let small = body.replace("31999", "2048");
        let (report, _) = run(Family::Anthropic, &small, &m_big, Policy::Adapt).unwrap();
        assert_eq!(report, "max_tokens=8192 (was 32000)");
    }

    #[test]
    fn strict_refuses_the_same_request() {
        let m = model(r#"["max_tokens","tools"]"#, true);
        let e = run(Family::Anthropic, CLAUDE_CODE, &m, Policy::Strict).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("max_tokens"));
        let body = CLAUDE_CODE.replace("32000", "50");
        let e = run(Family::Anthropic, &body, &m, Policy::Strict).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("thinking"), "{e}");
        let m = model(
            r#"["max_tokens","tools","cache_control","reasoning"]"#,
            true,
        );
        let e = run(Family::Anthropic, &body, &m, Policy::Strict).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("metadata"), "{e}");
    }

    #[test]
    fn what_changes_the_answer_is_refused_under_adapt() {
        let m = model(r#"["max_tokens","stream"]"#, false);
        for (family, body, param) in [
            (
                Family::OpenAi,
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[]}"#,
                "tools",
            ),
            (
                Family::OpenAi,
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"n":2}"#,
                "n",
            ),
            (
                Family::OpenAi,
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true}"#,
                "logprobs",
            ),
            (
                Family::OpenAi,
                r#"{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}"#,
                "response_format",
            ),
            (
                Family::OpenAi,
                r#"{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x"}}]}]}"#,
                "messages",
            ),
            (
                Family::Gemini,
                r#"{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}"#,
                "contents",
            ),
            // Spelled with escapes, an image part is still one.
            (
                Family::OpenAi,
                r#"{"model":"m","messages":[{"role":"user","content":[{"type":"\u0069mage_url","\u0069mage_url":{"url":"http://x"}}]}]}"#,
                "messages",
            ),
            (
                Family::Gemini,
                r#"{"contents":[{"parts":[{"inlineData":{"mimeType":"\u0069mage/png","data":"AA=="}}]}]}"#,
                "contents",
            ),
            (
                Family::Gemini,
                r#"{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"candidateCount":3}}"#,
                "generationConfig.candidateCount",
            ),
        ] {
            let e = run(family, body, &m, Policy::Adapt).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}: {e}");
        }
        // n = 1 and logprobs = false ask for nothing.
        let ok =
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"n":1,"logprobs":false}"#;
        assert!(run(Family::OpenAi, ok, &m, Policy::Strict).is_ok());
    }

    #[test]
    fn openai_and_gemini_knobs() {
        let m = model(r#"["max_tokens","temperature"]"#, true);
        let body = r#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":128000,"max_completion_tokens":50,"reasoning_effort":"high","seed":1,"user":"u","parallel_tool_calls":false,"temperature":0.5,"foo":[1]}"#;
        let (report, out) = run(Family::OpenAi, body, &m, Policy::Adapt).unwrap();
        assert_eq!(
            report,
            "max_tokens=100 (was 128000); dropped=seed,reasoning_effort,user,parallel_tool_calls"
        );
        assert_eq!(
            out,
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":100,"max_completion_tokens":50,"temperature":0.5,"foo":[1]}"#
        );
        let body = r#"{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"maxOutputTokens":65536,"thinkingConfig":{"thinkingBudget":-1},"topK":4}}"#;
        let (report, out) = run(Family::Gemini, body, &m, Policy::Adapt).unwrap();
        assert_eq!(
            report,
            "generationConfig.maxOutputTokens=100 (was 65536); dropped=generationConfig.topK,generationConfig.thinkingConfig"
        );
        assert_eq!(
            out,
            r#"{"contents":[{"parts":[{"text":"x"}]}],"generationConfig":{"maxOutputTokens":100}}"#
        );
    }

    #[test]
    fn context_room_lowers_the_cap_or_refuses() {
        let m = model(r#"["max_tokens"]"#, true);
        let body = r#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":100}"#;
        let req = inspect(Family::OpenAi, body.as_bytes(), false).unwrap();
        let mut plan = decide(Family::OpenAi, &req, body.as_bytes(), &m, Policy::Adapt).unwrap();
        plan.fit_context(Family::OpenAi, &req, &m, 960).unwrap();
        assert_eq!(plan.output_cap(&req), Some(40));
        assert_eq!(plan.adjustments(&req).render(), "max_tokens=40 (was 100)");
        let e = plan
            .fit_context(Family::OpenAi, &req, &m, 1001)
            .unwrap_err();
        assert_eq!(e.code.as_deref(), Some("context_length_exceeded"));
        let mut strict = decide(Family::OpenAi, &req, body.as_bytes(), &m, Policy::Strict).unwrap();
        assert!(strict.fit_context(Family::OpenAi, &req, &m, 960).is_err());
        assert!(strict.fit_context(Family::OpenAi, &req, &m, 900).is_ok());
    }
}
