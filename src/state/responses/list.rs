//! Listing a stored response's input items (`GET /v1/responses/{id}/input_items`):
//! the query, the items' ids, and one page in OpenAI's list shape.

use super::{quote_single, StoredResponse};
use crate::error::GatewayError;
use crate::util::json_text::JsonText;
use serde_json::{json, Value};

/// An input item as `GET /v1/responses/{id}/input_items` lists it: with an
/// `id` (its own, or one derived from the response id and its position,
/// stable across reads).
pub fn listed_item(response_id: &str, index: usize, item: &JsonText) -> Value {
    let mut v: Value = serde_json::from_str(item.get()).unwrap_or(Value::Null);
    if let Value::Object(obj) = &mut v {
        let has_id = obj.get("id").is_some_and(Value::is_string);
        if !has_id {
            let prefix = match obj.get("type").and_then(Value::as_str) {
                Some("message") | None => "msg_",
                Some("function_call_output") => "fco_",
                Some("function_call") => "fc_",
                Some("reasoning") => "rs_",
                Some(_) => "item_",
            };
            let id = crate::ir::ids::stable_id(
                prefix,
                &[response_id.as_bytes(), index.to_string().as_bytes()],
            );
            obj.insert("id".into(), json!(id));
        }
    }
    v
}

/// The order of an input-items page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// `GET /v1/responses/{id}/input_items` query: `order` (default `desc`, as
/// the API), `limit` (1..=100, default 20), `after` / `before` (item ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub order: Order,
    pub limit: usize,
    pub after: Option<String>,
    pub before: Option<String>,
}

impl ListQuery {
    /// Reads the query string; a bad value is a 400 naming it.
    pub fn parse(query: Option<&str>) -> Result<ListQuery, GatewayError> {
        let mut q = ListQuery {
            order: Order::Desc,
            limit: 20,
            after: None,
            before: None,
        };
        for pair in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = String::from_utf8_lossy(&crate::util::percent::decode_lenient(
                v,
                crate::util::percent::Component::Query,
            ))
            .into_owned();
            match k {
                "order" => {
                    q.order = match v.as_str() {
                        "asc" => Order::Asc,
                        "desc" => Order::Desc,
                        _ => {
                            return Err(GatewayError::invalid_param(
                                "order",
                                format!(
                                    "Invalid value for 'order': expected 'asc' or 'desc', got {}.",
                                    quote_single(&v)
                                ),
                            ))
                        }
                    }
                }
                "limit" => {
                    q.limit = v
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=100).contains(n))
                        .ok_or_else(|| {
                            GatewayError::invalid_param(
                                "limit",
                                format!(
                                    "Invalid value for 'limit': expected an integer from 1 to 100, got {}.",
                                    quote_single(&v)
                                ),
                            )
                        })?;
                }
                "after" if !v.is_empty() => q.after = Some(v),
                "before" if !v.is_empty() => q.before = Some(v),
                _ => {}
            }
        }
        Ok(q)
    }
}

/// One page of `rec`'s input items, in OpenAI's list shape.
pub fn list_page(rec: &StoredResponse, q: &ListQuery) -> Value {
    let mut items: Vec<Value> = rec
        .input_items
        .iter()
        .enumerate()
        .map(|(i, it)| listed_item(&rec.id, i, it))
        .collect();
    if q.order == Order::Desc {
        items.reverse();
    }
    let pos = |id: &str| {
        items
            .iter()
            .position(|v| v.get("id").and_then(Value::as_str) == Some(id))
    };
    let start = match &q.after {
        Some(a) => pos(a).map_or(items.len(), |i| i + 1),
        None => 0,
    };
    let end = match &q.before {
        Some(b) => pos(b).unwrap_or(items.len()),
        None => items.len(),
    };
    let window: Vec<Value> = if start < end {
        items[start..end].to_vec()
    } else {
        Vec::new()
    };
    let has_more = window.len() > q.limit;
    let data: Vec<Value> = window.into_iter().take(q.limit).collect();
    let id_at = |v: Option<&Value>| v.and_then(|x| x.get("id")).cloned().unwrap_or(Value::Null);
    json!({
        "object": "list",
        "data": data,
        "first_id": id_at(data.first()),
        "last_id": id_at(data.last()),
        "has_more": has_more,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::responses::store::tests::{rec, text};
    use crate::state::responses::ResponseStore;

    #[test]
    fn pages_follow_order_limit_and_after() {
        let store = ResponseStore::memory();
        let mut r = rec(&store, "r", "k", None);
        r.input_items = (0..5)
            .map(|i| {
                text(&format!(
                    r#"{{"type":"message","id":"m{i}","role":"user","content":[]}}"#
                ))
            })
            .collect();
        let q = ListQuery::parse(Some("order=asc&limit=2")).unwrap();
        let p = list_page(&r, &q);
        assert_eq!(p["first_id"], "m0");
        assert_eq!(p["last_id"], "m1");
        assert_eq!(p["has_more"], true);
        let q = ListQuery::parse(Some("order=asc&limit=2&after=m3")).unwrap();
        let p = list_page(&r, &q);
        assert_eq!(p["data"].as_array().unwrap().len(), 1);
        assert_eq!(p["has_more"], false);
        let p = list_page(&r, &ListQuery::parse(None).unwrap());
        assert_eq!(p["first_id"], "m4");
        assert_eq!(p["object"], "list");
        assert!(ListQuery::parse(Some("order=up")).is_err());
        assert!(ListQuery::parse(Some("limit=0")).is_err());
        assert!(ListQuery::parse(Some("limit=101")).is_err());
    }
}
