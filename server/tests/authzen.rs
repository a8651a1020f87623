//! AuthZEN 1.0 (`POST /access/v1/evaluation`, `POST /access/v1/evaluations`): a gateway that
//! speaks the OpenID Authorization API asks toolgate as its PDP. The requests here are the
//! spec's own examples (`api/authorization-api-1_0.md` of openid/authzen), judged by a policy
//! whose tools are the spec's actions: subject → principal, action → tool and arguments,
//! resource → `args.resource`, context → facts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{get, log_lines, post, send, serve, Served};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use serde_json::{json, Value};

/// The spec's actions as tools: alice may read accounts and documents, except the
/// document `subject-search.md`; nobody may edit.
const LIBRARY: &str = r#"module library
read can_read, read
write can_edit
ingest fetch
write send
stage main { tools [can_read, read, can_edit, fetch, send] }
rule alice_reads for [can_read, read] {
  require principal.sub == "alice@example.com"
  refusal "only alice may read here"
}
rule not_that_one for [can_read, read] {
  require not (args.resource.id == "subject-search.md" or args.resource.id == "2")
  refusal "that document is not yours to read"
}
rule sales_only for can_edit {
  require principal.claims.department == "Sales"
  refusal "only Sales may edit"
}
rule acme_sends for send {
  require principal.tenant == "acme"
  refusal "only acme may send"
}
latch untrusted {
  set_by ingest
  blocks write
  refusal "a fetched page was read this turn; no write may run"
}
"#;

/// The server as a gateway's PDP: evaluations whose context names no stage are judged in
/// `main` (`--authzen-stage`).
async fn library() -> Served {
    serve(&[("library.gate", LIBRARY)], |c, _| {
        c.authzen_stage = Some("main".into());
    })
    .await
}

async fn evaluation(app: &Router, body: Value) -> (StatusCode, Value) {
    post(app, "/access/v1/evaluation", None, body).await
}

async fn evaluations(app: &Router, body: Value) -> (StatusCode, Value) {
    post(app, "/access/v1/evaluations", None, body).await
}

/// The spec's "Example Request" of the Access Evaluation API, verbatim.
fn spec_single_request() -> Value {
    json!({
      "subject": {
        "type": "user",
        "id": "alice@example.com"
      },
      "resource": {
        "type": "account",
        "id": "123"
      },
      "action": {
        "name": "can_read",
        "properties": {
          "method": "GET"
        }
      },
      "context": {
        "time": "1985-10-26T01:22-07:00"
      }
    })
}

#[tokio::test]
async fn the_specs_single_request_is_permitted_for_alice() {
    let lib = library().await;
    let (status, answer) = evaluation(&lib.app, spec_single_request()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["decision"], true, "{answer}");
    let ctx = &answer["context"]["toolgate"];
    assert_eq!(ctx["policy"], "library");
    assert!(ctx["decision_id"].is_string(), "{answer}");
    assert!(answer["context"].get("reason_user").is_none(), "{answer}");
}

#[tokio::test]
async fn a_denial_is_200_with_decision_false_and_the_refusal_as_reasons() {
    let lib = library().await;
    let mut body = spec_single_request();
    body["subject"]["id"] = json!("bob@example.com");
    let (status, answer) = evaluation(&lib.app, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["decision"], false, "{answer}");
    let ctx = &answer["context"];
    assert_eq!(
        ctx["reason_user"]["403"], "only alice may read here",
        "{answer}"
    );
    assert!(
        ctx["reason_admin"]["403"]
            .as_str()
            .unwrap()
            .contains("alice_reads"),
        "{answer}"
    );
    assert_eq!(ctx["toolgate"]["kind"], "rule");
    assert_eq!(ctx["toolgate"]["rule"], "alice_reads");
}

#[tokio::test]
async fn subject_properties_become_claims_and_tenant() {
    let lib = library().await;
    let edit = |department: &str| {
        json!({
          "subject": {"type": "user", "id": "alice@example.com",
                      "properties": {"department": department}},
          "resource": {"type": "document", "id": "d1"},
          "action": {"name": "can_edit"}
        })
    };
    let (_, sales) = evaluation(&lib.app, edit("Sales")).await;
    assert_eq!(sales["decision"], true, "{sales}");
    let (_, hr) = evaluation(&lib.app, edit("HR")).await;
    assert_eq!(hr["decision"], false, "{hr}");
    assert_eq!(hr["context"]["toolgate"]["rule"], "sales_only");

    let send = |tenant: Value| {
        json!({
          "subject": {"type": "user", "id": "alice@example.com", "properties": {"tenant": tenant}},
          "resource": {"type": "mailbox", "id": "out"},
          "action": {"name": "send"}
        })
    };
    let (_, acme) = evaluation(&lib.app, send(json!("acme"))).await;
    assert_eq!(acme["decision"], true, "{acme}");
    let (_, other) = evaluation(&lib.app, send(json!("globex"))).await;
    assert_eq!(other["decision"], false, "{other}");
    // A tenant that is not a string is the PEP's error, not a silent unknown.
    let (status, bad) = evaluation(&lib.app, send(json!(7))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    assert_eq!(
        bad["error"]["location"], "subject.properties.tenant",
        "{bad}"
    );
}

#[tokio::test]
async fn the_resource_is_the_calls_resource_argument() {
    let lib = library().await;
    let read = |id: &str| {
        json!({
          "subject": {"type": "user", "id": "alice@example.com"},
          "resource": {"type": "document", "id": id},
          "action": {"name": "read"}
        })
    };
    let (_, ok) = evaluation(&lib.app, read("boxcarring.md")).await;
    assert_eq!(ok["decision"], true, "{ok}");
    let (_, no) = evaluation(&lib.app, read("subject-search.md")).await;
    assert_eq!(no["decision"], false, "{no}");
    assert_eq!(no["context"]["toolgate"]["rule"], "not_that_one");
}

/// The spec's boxcarring example with a default subject and context and an action the
/// third evaluation overrides: answers in request order.
#[tokio::test]
async fn the_specs_evaluations_with_defaults_answer_in_order() {
    let lib = library().await;
    let body = json!({
      "subject": {
        "type": "user",
        "id": "alice@example.com"
      },
      "context": {
        "time": "2024-05-31T15:22-07:00"
      },
      "action": {
        "name": "can_read"
      },
      "evaluations": [
        {
          "resource": {
            "type": "document",
            "id": "boxcarring.md"
          }
        },
        {
          "resource": {
            "type": "document",
            "id": "subject-search.md"
          }
        },
        {
          "action": {
            "name": "can_edit"
          },
          "resource": {
            "type": "document",
            "id": "resource-search.md"
          }
        }
      ]
    });
    let (status, answer) = evaluations(&lib.app, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let decisions: Vec<&Value> = answer["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["decision"])
        .collect();
    assert_eq!(decisions, [&json!(true), &json!(false), &json!(false)]);
    assert_eq!(
        answer["evaluations"][2]["context"]["toolgate"]["rule"],
        "sales_only"
    );
    // The spec recommends no top-level decision when `evaluations` is answered.
    assert!(answer.get("decision").is_none(), "{answer}");
}

/// The spec's "read three documents" example under each of its three semantics; the
/// policy denies document 2, as the spec's answers assume.
#[tokio::test]
async fn the_three_evaluation_semantics_short_circuit_as_the_spec_shows() {
    let lib = library().await;
    let body = |semantic: &str| {
        json!({
          "subject": {"type": "user", "id": "alice@example.com"},
          "action": {"name": "read"},
          "options": {"evaluations_semantic": semantic},
          "evaluations": [
            {"resource": {"type": "document", "id": "1"}},
            {"resource": {"type": "document", "id": "2"}},
            {"resource": {"type": "document", "id": "3"}}
          ]
        })
    };
    let decisions = |answer: &Value| -> Vec<bool> {
        answer["evaluations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["decision"].as_bool().unwrap())
            .collect()
    };
    let (_, all) = evaluations(&lib.app, body("execute_all")).await;
    assert_eq!(decisions(&all), [true, false, true], "{all}");
    let (_, deny_first) = evaluations(&lib.app, body("deny_on_first_deny")).await;
    assert_eq!(decisions(&deny_first), [true, false], "{deny_first}");
    let (_, permit_first) = evaluations(&lib.app, body("permit_on_first_permit")).await;
    assert_eq!(decisions(&permit_first), [true], "{permit_first}");
    // No `options`: execute_all.
    let mut plain = body("execute_all");
    plain.as_object_mut().unwrap().remove("options");
    let (_, plain) = evaluations(&lib.app, plain).await;
    assert_eq!(decisions(&plain), [true, false, true], "{plain}");
    // A semantic the spec does not define is the PEP's error: judging it as execute_all
    // could run calls a short-circuit meant to stop.
    let (status, bad) = evaluations(&lib.app, body("deny_on_second_deny")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    assert_eq!(bad["error"]["location"], "options.evaluations_semantic");
}

#[tokio::test]
async fn evaluations_without_an_array_answer_as_a_single_evaluation() {
    let lib = library().await;
    for body in [spec_single_request(), {
        let mut b = spec_single_request();
        b["evaluations"] = json!([]);
        b
    }] {
        let (status, answer) = evaluations(&lib.app, body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(answer["decision"], true, "{answer}");
        assert!(answer.get("evaluations").is_none(), "{answer}");
    }
}

#[tokio::test]
async fn one_bad_evaluation_is_a_false_decision_with_an_error_not_a_failed_payload() {
    let lib = library().await;
    let body = json!({
      "subject": {"type": "user", "id": "alice@example.com"},
      "evaluations": [
        {"action": {"name": "read"}, "resource": {"type": "document", "id": "1"}},
        {"resource": {"type": "document", "id": "1"}},
        {"action": {"name": "read"}, "resource": {"type": "document"}}
      ]
    });
    let (status, answer) = evaluations(&lib.app, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let e = answer["evaluations"].as_array().unwrap();
    assert_eq!(e.len(), 3, "{answer}");
    assert_eq!(e[0]["decision"], true);
    for (i, at) in [
        (1, "evaluations[1].action"),
        (2, "evaluations[2].resource.id"),
    ] {
        assert_eq!(e[i]["decision"], false, "{answer}");
        assert_eq!(e[i]["context"]["error"]["status"], 400, "{answer}");
        assert_eq!(e[i]["context"]["error"]["location"], at, "{answer}");
    }
}

#[tokio::test]
async fn a_missing_required_entity_is_400_with_its_location() {
    let lib = library().await;
    for (drop, at) in [
        ("subject", "subject"),
        ("action", "action"),
        ("resource", "resource"),
    ] {
        let mut body = spec_single_request();
        body.as_object_mut().unwrap().remove(drop);
        let (status, answer) = evaluation(&lib.app, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{drop}: {answer}");
        assert_eq!(answer["error"]["location"], at, "{answer}");
    }
    let mut body = spec_single_request();
    body["subject"]["id"] = json!(42);
    let (status, answer) = evaluation(&lib.app, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["location"], "subject.id");
    let (status, answer) = evaluation(&lib.app, json!([1, 2])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
}

#[tokio::test]
async fn unknown_fields_are_ignored_as_the_spec_requires() {
    let lib = library().await;
    let mut body = spec_single_request();
    body["x-trace"] = json!({"span": 1});
    body["subject"]["x-issuer"] = json!("idp");
    body["action"]["x-note"] = json!(true);
    let (status, answer) = evaluation(&lib.app, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["decision"], true, "{answer}");
}

#[tokio::test]
async fn evaluations_sent_to_the_single_endpoint_are_refused_not_dropped() {
    let lib = library().await;
    let mut body = spec_single_request();
    body["evaluations"] = json!([{"resource": {"type": "document", "id": "2"}}]);
    let (status, answer) = evaluation(&lib.app, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["location"], "evaluations");
}

#[tokio::test]
async fn ambiguous_mappings_are_refused() {
    let lib = library().await;
    // `action.properties.resource` would be the call's resource argument twice.
    let mut body = spec_single_request();
    body["action"]["properties"]["resource"] = json!("x");
    let (status, answer) = evaluation(&lib.app, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["location"], "action.properties.resource");
    // The principal comes from `subject`; a context that brings one is a second source.
    let mut body = spec_single_request();
    body["context"]["principal"] = json!({"sub": "root"});
    let (status, answer) = evaluation(&lib.app, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["location"], "context.principal");
    // A subject property named `type` would hide the subject's type in the claims.
    let mut body = spec_single_request();
    body["subject"]["properties"] = json!({"type": "admin"});
    let (status, answer) = evaluation(&lib.app, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["location"], "subject.properties.type");
}

/// Without `--authzen-stage`, an evaluation whose context names no stage is judged as any
/// request without a stage: denied, kind `stage`, never allowed by a guess.
#[tokio::test]
async fn without_a_configured_stage_an_evaluation_needs_one_in_its_context() {
    let plain = serve(&[("library.gate", LIBRARY)], |_, _| {}).await;
    let (status, answer) = evaluation(&plain.app, spec_single_request()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["decision"], false, "{answer}");
    assert_eq!(answer["context"]["toolgate"]["kind"], "stage");
    let mut body = spec_single_request();
    body["context"]["stage"] = json!("main");
    let (_, answer) = evaluation(&plain.app, body).await;
    assert_eq!(answer["decision"], true, "{answer}");
}

#[tokio::test]
async fn context_facts_reach_the_policy_with_their_paths_in_errors() {
    let lib = library().await;
    // A stage the policy lacks: the call is denied by its stage.
    let mut body = spec_single_request();
    body["context"]["stage"] = json!("nowhere");
    let (status, answer) = evaluation(&lib.app, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["decision"], false, "{answer}");
    assert_eq!(answer["context"]["toolgate"]["kind"], "stage");
    // A malformed standard fact: its path is the context's.
    let mut body = spec_single_request();
    body["context"]["latched"] = json!("yes");
    let (status, answer) = evaluation(&lib.app, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["location"], "context.latched", "{answer}");
    // Approvals are the server's to keep, from the context as from /v1/decide.
    let mut body = spec_single_request();
    body["context"]["approvals"] = json!([format!("ap1:{}", "0".repeat(64))]);
    let (status, answer) = evaluation(&lib.app, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["error"]["location"], "context.approvals", "{answer}");
}

/// With a session and turn in `context.toolgate`, evaluations are judged in order against
/// the turn's state: a fetch latches the turn, and the later send is denied.
#[tokio::test]
async fn evaluations_carry_turn_state_in_order() {
    let lib = library().await;
    let body = json!({
      "subject": {"type": "user", "id": "alice@example.com", "properties": {"tenant": "acme"}},
      "context": {"toolgate": {"session": "s1", "turn": "t1"}},
      "evaluations": [
        {"action": {"name": "send"}, "resource": {"type": "mailbox", "id": "out"}},
        {"action": {"name": "fetch", "properties": {"url": "https://example.com"}},
         "resource": {"type": "page", "id": "p"}},
        {"action": {"name": "send"}, "resource": {"type": "mailbox", "id": "out"}}
      ]
    });
    let (status, answer) = evaluations(&lib.app, body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let e = answer["evaluations"].as_array().unwrap();
    assert_eq!(e[0]["decision"], true, "{answer}");
    assert_eq!(e[1]["decision"], true, "{answer}");
    assert_eq!(e[2]["decision"], false, "{answer}");
    assert_eq!(e[2]["context"]["toolgate"]["kind"], "latch");
    // The same turn's next request is still latched.
    let (_, again) = evaluation(
        &lib.app,
        json!({
          "subject": {"type": "user", "id": "alice@example.com", "properties": {"tenant": "acme"}},
          "context": {"toolgate": {"session": "s1", "turn": "t1"}},
          "action": {"name": "send"}, "resource": {"type": "mailbox", "id": "out"}
        }),
    )
    .await;
    assert_eq!(again["decision"], false, "{again}");
    // `session` without `turn` is refused as on /v1/decide, at the context's path.
    let (status, bad) = evaluation(
        &lib.app,
        json!({
          "subject": {"type": "user", "id": "alice@example.com"},
          "context": {"toolgate": {"session": "s1"}},
          "action": {"name": "read"}, "resource": {"type": "document", "id": "1"}
        }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    assert_eq!(bad["error"]["location"], "context.toolgate.turn", "{bad}");
}

#[tokio::test]
async fn the_request_id_is_echoed_and_every_evaluation_is_logged() {
    let lib = library().await;
    let request = Request::post("/access/v1/evaluation")
        .header("content-type", "application/json")
        .header("x-request-id", "bfe9eb29-ab87-4ca3-be83-a1d5d8305716")
        .body(Body::from(spec_single_request().to_string()))
        .unwrap();
    let response = tower::ServiceExt::oneshot(lib.app.clone(), request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["x-request-id"],
        "bfe9eb29-ab87-4ca3-be83-a1d5d8305716"
    );
    // An error answer carries it too.
    let request = Request::post("/access/v1/evaluation")
        .header("content-type", "application/json")
        .header("x-request-id", "r-2")
        .body(Body::from("{}"))
        .unwrap();
    let response = tower::ServiceExt::oneshot(lib.app.clone(), request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(response.headers()["x-request-id"], "r-2");

    let (_, _) = send(
        &lib.app,
        Request::post("/access/v1/evaluations")
            .header("content-type", "application/json")
            .body(Body::from(
                json!({
                  "subject": {"type": "user", "id": "alice@example.com"},
                  "action": {"name": "read"},
                  "evaluations": [
                    {"resource": {"type": "document", "id": "1"}},
                    {"resource": {"type": "document", "id": "2"}}
                  ]
                })
                .to_string(),
            ))
            .unwrap(),
    )
    .await;
    let lines = log_lines(lib).await;
    // One decision-log line per judged evaluation: 1 + 2.
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[2]["decisions"][0]["allow"], false, "{lines:?}");
}

/// The PDP metadata (`/.well-known/authzen-configuration`) names the identifier the server
/// is configured with (`--authzen-pdp`), never one read off the request's `Host`, which the
/// PEP would then check against itself.
#[tokio::test]
async fn metadata_names_both_endpoints_under_the_configured_identifier() {
    let lib = serve(&[("library.gate", LIBRARY)], |c, _| {
        c.authzen_pdp = Some("https://pdp.example.com".into());
        c.authzen_stage = Some("main".into());
    })
    .await;
    let request = Request::get("/.well-known/authzen-configuration")
        .header("host", "evil.example.net")
        .body(Body::empty())
        .unwrap();
    let (status, meta) = send(&lib.app, request).await;
    assert_eq!(status, StatusCode::OK, "{meta}");
    assert_eq!(meta["policy_decision_point"], "https://pdp.example.com");
    assert_eq!(
        meta["access_evaluation_endpoint"],
        "https://pdp.example.com/access/v1/evaluation"
    );
    assert_eq!(
        meta["access_evaluations_endpoint"],
        "https://pdp.example.com/access/v1/evaluations"
    );
    assert!(meta.get("search_subject_endpoint").is_none(), "{meta}");
    // Without an identifier there is no metadata to publish.
    let plain = library().await;
    let (status, _) = get(&plain.app, "/.well-known/authzen-configuration", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// An identifier the spec does not allow stops the server at start-up, with the reason.
#[tokio::test]
async fn a_pdp_identifier_that_is_not_https_without_query_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("library.gate"), LIBRARY).unwrap();
    for (url, why) in [
        ("http://pdp.example.com", "https"),
        ("https://pdp.example.com/?tenant=1", "query"),
        ("https://", "host"),
    ] {
        let mut config =
            toolgate_server::Config::new(toolgate_server::PolicySource::Path(dir.path().into()));
        config.authzen_pdp = Some(url.into());
        config.poll = std::time::Duration::ZERO;
        config.log.sink = toolgate_server::LogSink::File(dir.path().join("log"));
        let err = match toolgate_server::Server::start(config).await {
            Ok(_) => panic!("{url} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("--authzen-pdp") && err.contains(why),
            "{url}: {err}"
        );
    }
}
