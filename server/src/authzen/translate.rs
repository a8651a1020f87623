//! An AuthZEN evaluation as a `/v1/decide` request of one call, and the way back for the
//! locations of errors.
//!
//! | AuthZEN | toolgate |
//! |---|---|
//! | `subject.id` | `facts.principal.sub` |
//! | `subject.properties.tenant` | `facts.principal.tenant` |
//! | `subject.type`, the other `subject.properties` | `facts.principal.claims` (`type` and each property) |
//! | `action.name` | the call's `tool` |
//! | `action.properties` | the call's `args` |
//! | `resource` (`type`, `id`, `properties`) | the call's `args.resource` |
//! | `context.toolgate` (`policy`, `session`, `turn`) | the request's `policy`, `session`, `turn` |
//! | the rest of `context` | `facts` (standard facts such as `stage`, and custom ones) |
//! | (no `context.stage`) | `facts.stage` = `--authzen-stage`, if set |
//!
//! Unknown fields of the AuthZEN entities are ignored, as the spec requires. Ambiguity is
//! refused: a subject property `type` (it would hide the subject's type), an action property
//! `resource` (it would be the resource argument twice), a context `principal` (the principal
//! is the subject's), and unknown keys of `context.toolgate`, which is toolgate's own.

use crate::api_error::ApiError;
use serde_json::{json, Map, Value};
use toolgate_engine::json_type_name as type_name;

/// The namespace of toolgate's own keys in an AuthZEN `context`.
const TOOLGATE: &str = "toolgate";
/// The keys `context.toolgate` may hold, each the `/v1/decide` field of the same name.
const TOOLGATE_KEYS: [&str; 3] = ["policy", "session", "turn"];

/// The request body as an object, or 400: the spec's top level is always an object.
pub(super) fn top(value: &Value) -> Result<&Map<String, Value>, ApiError> {
    value
        .as_object()
        .ok_or_else(|| refused("", "the request body must be a JSON object".into()))
}

/// The `evaluations` array, `None` when it is absent or empty (the request is then one
/// evaluation, as the spec says); 400 when it is not an array or longer than `cap`.
pub(super) fn evaluations(
    top: &Map<String, Value>,
    cap: usize,
) -> Result<Option<&Vec<Value>>, ApiError> {
    match top.get("evaluations") {
        None => Ok(None),
        Some(Value::Array(list)) if list.is_empty() => Ok(None),
        Some(Value::Array(list)) if list.len() > cap => Err(ApiError::too_large(
            format!(
                "{} evaluations is over the cap of {cap} (--max-calls)",
                list.len()
            ),
            Some("evaluations".into()),
        )),
        Some(Value::Array(list)) => Ok(Some(list)),
        Some(other) => Err(refused(
            "evaluations",
            format!("expected an array, found {}", type_name(other)),
        )),
    }
}

/// How a list of evaluations is run (`options.evaluations_semantic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Semantic {
    /// Every evaluation, every answer (the default).
    ExecuteAll,
    /// Stop after the first denial, which is the last answer.
    DenyOnFirstDeny,
    /// Stop after the first permit, which is the last answer.
    PermitOnFirstPermit,
}

/// The semantic `options` asks for. A value the spec does not define is refused: judging it
/// as the default could run evaluations a short-circuit was meant to stop.
pub(super) fn semantic(top: &Map<String, Value>) -> Result<Semantic, ApiError> {
    let Some(options) = top.get("options") else {
        return Ok(Semantic::ExecuteAll);
    };
    let options = options.as_object().ok_or_else(|| {
        refused(
            "options",
            format!("expected an object, found {}", type_name(options)),
        )
    })?;
    match options.get("evaluations_semantic") {
        None => Ok(Semantic::ExecuteAll),
        Some(Value::String(s)) => match s.as_str() {
            "execute_all" => Ok(Semantic::ExecuteAll),
            "deny_on_first_deny" => Ok(Semantic::DenyOnFirstDeny),
            "permit_on_first_permit" => Ok(Semantic::PermitOnFirstPermit),
            other => Err(refused(
                "options.evaluations_semantic",
                format!(
                    "unknown semantic `{other}`; expected `execute_all`, `deny_on_first_deny` or `permit_on_first_permit`"
                ),
            )),
        },
        Some(other) => Err(refused(
            "options.evaluations_semantic",
            format!("expected a string, found {}", type_name(other)),
        )),
    }
}

/// One entity of an evaluation and where it came from in the body.
#[derive(Debug, Clone)]
struct Found<'a> {
    value: &'a Value,
    at: String,
}

/// The four entities of one evaluation, each from the evaluation itself or the top-level
/// default, with its location for errors.
#[derive(Debug)]
pub(super) struct Entities<'a> {
    subject: Result<Found<'a>, String>,
    action: Result<Found<'a>, String>,
    resource: Result<Found<'a>, String>,
    context: Option<Found<'a>>,
}

impl<'a> Entities<'a> {
    /// The entities of a request that is one evaluation.
    pub(super) fn single(top: &'a Map<String, Value>) -> Self {
        let pick = |key: &str| {
            top.get(key)
                .map(|value| Found {
                    value,
                    at: key.into(),
                })
                .ok_or_else(|| key.to_string())
        };
        Entities {
            subject: pick("subject"),
            action: pick("action"),
            resource: pick("resource"),
            context: pick("context").ok(),
        }
    }

    /// The entities of evaluation `i`: its own, else the top level's (the spec's defaults;
    /// an evaluation's key replaces the default whole).
    pub(super) fn of(
        top: &'a Map<String, Value>,
        item: &'a Value,
        i: usize,
    ) -> Result<Self, ApiError> {
        let here = format!("evaluations[{i}]");
        let item = item.as_object().ok_or_else(|| {
            refused(
                &here,
                format!("expected an object, found {}", type_name(item)),
            )
        })?;
        let pick = |key: &str| match item.get(key) {
            Some(value) => Ok(Found {
                value,
                at: format!("{here}.{key}"),
            }),
            None => top
                .get(key)
                .map(|value| Found {
                    value,
                    at: key.into(),
                })
                .ok_or_else(|| format!("{here}.{key}")),
        };
        Ok(Entities {
            subject: pick("subject"),
            action: pick("action"),
            resource: pick("resource"),
            context: pick("context").ok(),
        })
    }

    /// The `/v1/decide` body of this evaluation: one call, id `"0"`, in `stage` when the
    /// context names none.
    pub(super) fn decide_body(&self, stage: Option<&str>) -> Result<Value, ApiError> {
        let subject = required(&self.subject, "a subject")?;
        let action = required(&self.action, "an action")?;
        let resource = required(&self.resource, "a resource")?;

        let principal = principal(subject)?;
        let (tool, mut args) = call(action)?;
        let resource = resource_arg(resource)?;
        if args.contains_key("resource") {
            return Err(refused(
                &format!("{}.properties.resource", action.at),
                "the resource argument is the evaluation's `resource`; an action property \
                 `resource` would give it twice"
                    .into(),
            ));
        }
        args.insert("resource".into(), resource);

        let mut body = Map::new();
        let mut facts = Map::new();
        if let Some(context) = &self.context {
            let map = object(context)?;
            for (k, v) in map {
                match k.as_str() {
                    TOOLGATE => {
                        for (field, value) in toolgate_keys(context, v)? {
                            body.insert(field.into(), value.clone());
                        }
                    }
                    "principal" => {
                        return Err(refused(
                            &format!("{}.principal", context.at),
                            "the principal is the evaluation's `subject`; a context \
                             `principal` would be a second one"
                                .into(),
                        ))
                    }
                    _ => {
                        facts.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        if let Some(stage) = stage {
            facts.entry("stage").or_insert_with(|| stage.into());
        }
        facts.insert("principal".into(), principal);
        body.insert("facts".into(), Value::Object(facts));
        body.insert(
            "calls".into(),
            json!([{"id": "0", "tool": tool, "args": Value::Object(args)}]),
        );
        Ok(Value::Object(body))
    }

    /// `error`, which `/v1/decide` gave for this evaluation's body, with its location in the
    /// AuthZEN body instead.
    pub(super) fn relocate(&self, error: ApiError) -> ApiError {
        error.relocated(|at| at.map(|at| self.location(&at)))
    }

    /// Where a `/v1/decide` path of this evaluation's body is in the AuthZEN body.
    fn location(&self, at: &str) -> String {
        let at_of = |found: &Result<Found<'_>, String>| match found {
            Ok(f) => f.at.clone(),
            Err(at) => at.clone(),
        };
        let context = self
            .context
            .as_ref()
            .map_or_else(|| "context".to_string(), |c| c.at.clone());
        if let Some(rest) = strip(at, "facts.principal") {
            return format!("{}{rest}", at_of(&self.subject));
        }
        if let Some(rest) = strip(at, "facts") {
            return format!("{context}{rest}");
        }
        for field in TOOLGATE_KEYS {
            if at == field {
                return format!("{context}.{TOOLGATE}.{field}");
            }
        }
        if let Some(rest) = strip(at, "calls[0].args.resource") {
            return format!("{}{rest}", at_of(&self.resource));
        }
        if let Some(rest) = strip(at, "calls[0].args") {
            return format!("{}.properties{rest}", at_of(&self.action));
        }
        if strip(at, "calls[0].tool").is_some() {
            return format!("{}.name", at_of(&self.action));
        }
        if strip(at, "calls").is_some() {
            return at_of(&self.action);
        }
        at.to_string()
    }
}

/// `at` without `prefix` when `at` is `prefix` or a path below it: the rest (`""`,
/// `".x"`, `"[0]"`).
fn strip<'a>(at: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = at.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with('.') || rest.starts_with('[')).then_some(rest)
}

fn required<'b, 'a>(
    found: &'b Result<Found<'a>, String>,
    what: &str,
) -> Result<&'b Found<'a>, ApiError> {
    found.as_ref().map_err(|at| {
        refused(
            at,
            format!("an evaluation needs {what}, here or as the top-level default"),
        )
    })
}

/// `facts.principal` from the subject.
fn principal(subject: &Found<'_>) -> Result<Value, ApiError> {
    let map = object(subject)?;
    let kind = string_field(map, subject, "type")?;
    let id = string_field(map, subject, "id")?;
    let mut claims = Map::new();
    claims.insert("type".into(), kind.into());
    let mut principal = Map::new();
    principal.insert("sub".into(), id.into());
    if let Some(properties) = properties(map, subject)? {
        for (k, v) in properties {
            match (k.as_str(), v) {
                ("tenant", Value::String(t)) if !t.trim().is_empty() => {
                    principal.insert("tenant".into(), v.clone());
                }
                ("tenant", _) => {
                    return Err(refused(
                        &format!("{}.properties.tenant", subject.at),
                        "the tenant must be a non-empty string".into(),
                    ))
                }
                ("type", _) => {
                    return Err(refused(
                        &format!("{}.properties.type", subject.at),
                        "the claim `type` is the subject's type; a property of that name would \
                         hide it"
                            .into(),
                    ))
                }
                _ => {
                    claims.insert(k.clone(), v.clone());
                }
            }
        }
    }
    principal.insert("claims".into(), Value::Object(claims));
    Ok(Value::Object(principal))
}

/// The call's tool and arguments from the action.
fn call(action: &Found<'_>) -> Result<(String, Map<String, Value>), ApiError> {
    let map = object(action)?;
    let name = string_field(map, action, "name")?;
    let args = properties(map, action)?.cloned().unwrap_or_default();
    Ok((name.to_string(), args))
}

/// `args.resource` from the resource.
fn resource_arg(resource: &Found<'_>) -> Result<Value, ApiError> {
    let map = object(resource)?;
    let mut arg = Map::new();
    arg.insert("type".into(), string_field(map, resource, "type")?.into());
    arg.insert("id".into(), string_field(map, resource, "id")?.into());
    if let Some(p) = properties(map, resource)? {
        arg.insert("properties".into(), Value::Object(p.clone()));
    }
    Ok(Value::Object(arg))
}

/// The `context.toolgate` fields, each a string.
fn toolgate_keys<'v>(
    context: &Found<'_>,
    value: &'v Value,
) -> Result<Vec<(&'static str, &'v Value)>, ApiError> {
    let here = format!("{}.{TOOLGATE}", context.at);
    let map = value.as_object().ok_or_else(|| {
        refused(
            &here,
            format!("expected an object, found {}", type_name(value)),
        )
    })?;
    let mut out = Vec::new();
    for (k, v) in map {
        let Some(field) = TOOLGATE_KEYS.into_iter().find(|f| f == k) else {
            return Err(refused(
                &format!("{here}.{k}"),
                format!(
                    "unknown field; `{TOOLGATE}` holds `policy`, `session` and `turn`{}",
                    did_you_mean(k)
                ),
            ));
        };
        if !v.is_string() {
            return Err(refused(
                &format!("{here}.{k}"),
                format!("expected a string, found {}", type_name(v)),
            ));
        }
        out.push((field, v));
    }
    Ok(out)
}

/// A did-you-mean for a misspelt `context.toolgate` key.
fn did_you_mean(key: &str) -> String {
    toolgate_lang::did_you_mean(key, TOOLGATE_KEYS)
        .map(|m| format!("; did you mean `{m}`?"))
        .unwrap_or_default()
}

fn object<'a>(found: &Found<'a>) -> Result<&'a Map<String, Value>, ApiError> {
    found.value.as_object().ok_or_else(|| {
        refused(
            &found.at,
            format!("expected an object, found {}", type_name(found.value)),
        )
    })
}

fn string_field<'a>(
    map: &'a Map<String, Value>,
    found: &Found<'_>,
    key: &str,
) -> Result<&'a str, ApiError> {
    let at = format!("{}.{key}", found.at);
    match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(refused(&at, "expected a non-empty string".into())),
        Some(other) => Err(refused(
            &at,
            format!("expected a string, found {}", type_name(other)),
        )),
        None => Err(refused(&at, "required by AuthZEN 1.0".into())),
    }
}

fn properties<'a>(
    map: &'a Map<String, Value>,
    found: &Found<'_>,
) -> Result<Option<&'a Map<String, Value>>, ApiError> {
    match map.get("properties") {
        None => Ok(None),
        Some(Value::Object(p)) => Ok(Some(p)),
        Some(other) => Err(refused(
            &format!("{}.properties", found.at),
            format!("expected an object, found {}", type_name(other)),
        )),
    }
}

fn refused(at: &str, message: String) -> ApiError {
    let location = (!at.is_empty()).then(|| at.to_string());
    ApiError::bad_request("schema", message, location)
}
