//! The client's request planned for one model: the policy's decision
//! (docs/api.md "Adapt or refuse"), the context check with a real token count
//! when the bytes cannot prove the fit, and the plan carried out on the body.
//! The own model and each fallback get a plan of their own.

use super::count::count_tokens;
use super::Stop;
use crate::admit::{policy, validate};
use crate::config::Model;
use crate::family::Family;
use crate::listener::Session;
use crate::proxy::attempt::Planned;
use crate::proxy::Gateway;
use crate::util::jsonedit;
use bytes::Bytes;

/// Carries out the policy's plan on the client's body: the upstream (same
/// protocol or translated) sees the lowered cap and not the dropped fields,
/// and every change is recorded for the response header, log and metric.
fn apply_plan(
    plan: &policy::Plan,
    body: Bytes,
    mut req: validate::Inspected,
) -> (Bytes, validate::Inspected, crate::adjust::Adjustments) {
    if plan.is_empty() {
        return (body, req, crate::adjust::Adjustments::default());
    }
    let adjusted = plan.adjustments(&req);
    let body = match plan.apply(&req, &body) {
        Some(edited) => {
            let edited = Bytes::from(edited);
            if req.model_span.is_some() {
                req.model_span = jsonedit::member_span(&edited, "model");
            }
            edited
        }
        None => body,
    };
    req.max_tokens = plan.output_cap(&req);
    (body, req, adjusted)
}

/// Plans the client's request for `model` (the policy of docs/api.md "Adapt or refuse", the
/// context check with a real count when the bytes cannot prove the fit)
/// and carries the plan out on the body. An error is the client's 400 for
/// the model asked for, and the reason a fallback is skipped.
pub async fn plan_for(
    gw: &Gateway,
    session: &mut Session,
    family: Family,
    req: validate::Inspected,
    body: Bytes,
    model: &Model,
    policy: crate::config::Policy,
) -> Result<Planned, Stop> {
    let mut plan = policy::decide(family, &req, &body, model, policy)?;
    if !validate::surely_fits(body.len(), plan.output_cap(&req), model) {
        let (owned, limit) = (body.clone(), model.context_length);
        let n = count_tokens(gw, session, move |cancel| {
            validate::count_input(family, &owned, limit, cancel)
        })
        .await?;
        log::debug!("{n} input tokens counted for {}", model.qualified_id);
        plan.fit_context(family, &req, model, n)?;
    }
    let adapt = plan.policy() == crate::config::Policy::Adapt;
    let (body, req, adjusted) = apply_plan(&plan, body, req);
    Ok(Planned {
        body,
        req,
        adjusted,
        adapt,
        continues: false,
        embed: None,
    })
}
