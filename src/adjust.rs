//! What the gateway changed in a request (docs/api.md "Adapt or refuse"): output caps it lowered
//! under the `adapt` policy, settings carried in another form than the
//! client's (structured output as Anthropic's `output_config.format` or as a
//! prompt instruction), and fields it dropped (unsupported optional knobs,
//! or fields the upstream protocol cannot carry). Rendered once for the
//! `x-switchboard-adjusted` header, the access log and the adaptations metric.

use std::fmt::Write as _;

/// One output cap lowered: `param=new (was old)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clamp {
    pub param: String,
    pub now: u64,
    pub was: u64,
}

/// One setting the upstream got in another form: `param=form`
/// (`response_format=output_config.format`, `text.format=instruction`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    /// The client's name for the setting.
    pub param: String,
    /// What the upstream got instead.
    pub form: &'static str,
}

/// Every change made to one request, in the order it was made.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Adjustments {
    pub clamped: Vec<Clamp>,
    pub carried: Vec<Carried>,
    /// Dropped fields, by the client's own name for them (`thinking`,
    /// `generationConfig.thinkingConfig`, `context_management`, ...).
    pub dropped: Vec<String>,
}

impl Adjustments {
    /// Records that `param` was lowered from `was` to `now`.
    pub fn clamp(&mut self, param: impl Into<String>, now: u64, was: u64) {
        let param = param.into();
        if let Some(c) = self.clamped.iter_mut().find(|c| c.param == param) {
            c.now = now;
            return;
        }
        self.clamped.push(Clamp { param, now, was });
    }

    /// Records that the upstream got `param` as `form` (once per param: the
    /// last form recorded wins).
    pub fn carry(&mut self, param: impl Into<String>, form: &'static str) {
        let param = param.into();
        match self.carried.iter_mut().find(|c| c.param == param) {
            Some(c) => c.form = form,
            None => self.carried.push(Carried { param, form }),
        }
    }

    /// Records that `field` was dropped (once, however often it is reported).
    pub fn drop_field(&mut self, field: impl Into<String>) {
        let field = field.into();
        if !self.dropped.contains(&field) {
            self.dropped.push(field);
        }
    }

    /// Adds everything `other` recorded.
    pub fn merge(&mut self, other: Adjustments) {
        for c in other.clamped {
            self.clamp(c.param, c.now, c.was);
        }
        for c in other.carried {
            self.carry(c.param, c.form);
        }
        for d in other.dropped {
            self.drop_field(d);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.clamped.is_empty() && self.carried.is_empty() && self.dropped.is_empty()
    }

    /// The header / access-log form:
    /// `max_tokens=16384 (was 32000); response_format=output_config.format; dropped=thinking,context_management`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.clamped {
            if !out.is_empty() {
                out.push_str("; ");
            }
            let _ = write!(out, "{}={} (was {})", c.param, c.now, c.was);
        }
        for c in &self.carried {
            if !out.is_empty() {
                out.push_str("; ");
            }
            let _ = write!(out, "{}={}", c.param, c.form);
        }
        if !self.dropped.is_empty() {
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str("dropped=");
            out.push_str(&self.dropped.join(","));
        }
        out
    }

    /// Each adjusted parameter's name (the metric's label is
    /// [`metric_label`] of it).
    pub fn parameters(&self) -> impl Iterator<Item = &str> {
        self.clamped
            .iter()
            .map(|c| c.param.as_str())
            .chain(self.carried.iter().map(|c| c.param.as_str()))
            .chain(self.dropped.iter().map(String::as_str))
    }
}

/// Every value the adaptations metric's `parameter` label may take: the
/// names the gateway itself reports (the catalog's parameter vocabulary,
/// output caps, each protocol's name for a canonical setting, Responses'
/// hosted tool kinds) and the protocols' well-known fields a translation
/// drops. Anything else a client sent (an unknown field, an invented tool
/// type) is counted under `other`: a label value taken from requests would
/// let any key holder grow the metrics page without bound. Sorted (binary
/// search).
const METRIC_LABELS: [&str; 90] = [
    "audio",
    "background",
    "cache_control",
    "cachedContent",
    "container",
    "context_management",
    "conversation",
    "frequency_penalty",
    "function_call",
    "functions",
    "generationConfig.candidateCount",
    "generationConfig.frequencyPenalty",
    "generationConfig.logprobs",
    "generationConfig.maxOutputTokens",
    "generationConfig.mediaResolution",
    "generationConfig.presencePenalty",
    "generationConfig.responseJsonSchema",
    "generationConfig.responseLogprobs",
    "generationConfig.responseMimeType",
    "generationConfig.responseModalities",
    "generationConfig.responseSchema",
    "generationConfig.seed",
    "generationConfig.speechConfig",
    "generationConfig.stopSequences",
    "generationConfig.temperature",
    "generationConfig.thinkingConfig",
    "generationConfig.thinkingConfig.thinkingLevel",
    "generationConfig.topK",
    "generationConfig.topP",
    "include",
    "labels",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_output_tokens",
    "max_tokens",
    "max_tool_calls",
    "mcp_servers",
    "metadata",
    "metadata.user_id",
    "modalities",
    "n",
    "output_config.effort",
    "output_config.format",
    "output_format",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt",
    "prompt_cache_key",
    "reasoning",
    "reasoning.effort",
    "reasoning_effort",
    "response_format",
    "safetySettings",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "stop_sequences",
    "store",
    "stream",
    "stream_options.include_obfuscation",
    "temperature",
    "text.format",
    "text.verbosity",
    "thinking",
    "thinking.budget_tokens",
    "toolConfig",
    "tool_choice",
    "tool_choice.disable_parallel_tool_use",
    "tools",
    "tools.code_interpreter",
    "tools.computer_use_preview",
    "tools.file_search",
    "tools.image_generation",
    "tools.local_shell",
    "tools.mcp",
    "tools.untyped",
    "tools.web_search",
    "tools.web_search_preview",
    "tools[].function.strict",
    "tools[].strict",
    "top_k",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
    "verbosity",
    "web_search_options",
];

/// The `parameter` label for an adjusted field: itself when it is in the
/// fixed vocabulary, else `other`.
pub fn metric_label(name: &str) -> &'static str {
    METRIC_LABELS
        .binary_search(&name)
        .map_or("other", |i| METRIC_LABELS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_contract_form() {
        let mut a = Adjustments::default();
        assert_eq!(a.render(), "");
        a.clamp("max_tokens", 16384, 32000);
        a.drop_field("thinking");
        a.drop_field("context_management");
        a.drop_field("thinking");
        a.carry("response_format", "instruction");
        a.carry("response_format", "output_config.format");
        assert_eq!(
            a.render(),
            "max_tokens=16384 (was 32000); response_format=output_config.format; dropped=thinking,context_management"
        );
        assert_eq!(
            a.parameters().collect::<Vec<_>>(),
            [
                "max_tokens",
                "response_format",
                "thinking",
                "context_management"
            ]
        );
    }

    #[test]
    fn metric_labels_come_from_a_fixed_vocabulary() {
        assert!(METRIC_LABELS.windows(2).all(|w| w[0] < w[1]), "sorted");
        for known in crate::admit::policy::DROPPABLE {
            assert_eq!(metric_label(known), known);
        }
        assert_eq!(
            metric_label("generationConfig.maxOutputTokens"),
            "generationConfig.maxOutputTokens"
        );
        assert_eq!(
            metric_label("tools.web_search_preview"),
            "tools.web_search_preview"
        );
        assert_eq!(metric_label("x_unknown_17"), "other");
        assert_eq!(metric_label("tools.invented_kind"), "other");
        assert_eq!(metric_label(""), "other");
    }
}
