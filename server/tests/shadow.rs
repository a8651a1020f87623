//! Shadow mode (issue 26), in-process: `Config::shadow` judges every `/v1/decide` and
//! `/v1/data/{module}/decide` batch with a second policy set that never answers. The client's
//! answer is byte-identical with and without it; a call the shadow decides otherwise is
//! counted in `toolgate_shadow_flips_total{policy,rule,from,to}` and described under
//! `shadow` in the batch's decision-log line; the shadow writes no turn state; it reloads
//! with `POST /v1/reload`, a broken one keeps the previous shadow and says so in `/health`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{self, log_lines, post_request, send_bytes, Served};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use toolgate_server::{Config, LogMode, PolicySource, Server};

/// The shop policy: `rule` requires refunds of at most `limit`; `tainted` is set by `set_by`
/// and blocks refunds.
fn shop_policy(rule: &str, limit: u32, set_by: &str) -> String {
    format!(
        "module shop\nwrite refund\ningest fetch\nread lookup\nstage main {{ tools [refund, fetch, lookup] }}\nlatch tainted {{\n  set_by [{set_by}]\n  blocks [refund]\n}}\nrule {rule} for refund {{\n  require args.amount is number and args.amount <= {limit}\n}}\n"
    )
}

/// The serving policy: refunds up to 500 run; a fetch latches nothing.
fn live() -> String {
    shop_policy("refunds", 500, "lookup")
}

/// Stricter: refunds over 100 are denied by `small_refunds`, and a fetch latches `tainted`.
fn strict() -> String {
    shop_policy("small_refunds", 100, "lookup, fetch")
}

/// Looser: refunds up to 1000.
fn loose() -> String {
    shop_policy("big_refunds", 1000, "lookup")
}

type Shop = Served;

/// The shadow set's one file.
fn shadow_file(shop: &Shop) -> PathBuf {
    shop.dir.path().join("shadow").join("shop.gate")
}

/// A server over `live()`, with `shadow` (each a file name and its text) as its shadow set
/// when given, logging every batch to a file, configured further by `tune`.
async fn shop_with(shadow: Option<&[(&str, &str)]>, tune: impl FnOnce(&mut Config)) -> Shop {
    serve(&live(), shadow, tune).await
}

/// [`shop_with`] serving `live`.
async fn serve(
    live: &str,
    shadow: Option<&[(&str, &str)]>,
    tune: impl FnOnce(&mut Config),
) -> Shop {
    support::serve(&[("shop.gate", live)], |config, dir| {
        if let Some(files) = shadow {
            let path = dir.join("shadow");
            std::fs::create_dir(&path).unwrap();
            for (name, text) in files {
                std::fs::write(path.join(name), text).unwrap();
            }
            config.shadow = Some(path);
        }
        tune(config);
    })
    .await
}

async fn shop(shadow: &str) -> Shop {
    shop_with(Some(&[("shop.gate", shadow)]), |_| {}).await
}

async fn post_raw(app: &Router, path: &str, body: &Value) -> (StatusCode, Vec<u8>) {
    send_bytes(app, post_request(path, None, body)).await
}

async fn post(app: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    support::post(app, path, None, body).await
}

async fn get_text(app: &Router, path: &str) -> String {
    let (_, bytes) = send_bytes(app, Request::get(path).body(Body::empty()).unwrap()).await;
    String::from_utf8(bytes).unwrap()
}

async fn get(app: &Router, path: &str) -> Value {
    support::get(app, path, None).await.1
}

/// A batch of refunds (by amount) and fetches, in session `s1`, turn `turn`.
fn batch(turn: &str, calls: &[(&str, f64)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, a))| json!({"id": format!("c{i}"), "tool": tool, "args": {"amount": a}}))
        .collect();
    json!({"session": "s1", "turn": turn, "facts": {"stage": "main"}, "calls": calls})
}

async fn decide(app: &Router, body: Value) -> Vec<Value> {
    let (status, answer) = post(app, "/v1/decide", body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["decisions"].as_array().unwrap().clone()
}

/// The `toolgate_shadow_*` series of `/metrics` that have labels, as `name{labels} value`.
async fn shadow_series(app: &Router) -> Vec<String> {
    get_text(app, "/metrics")
        .await
        .lines()
        .filter(|l| l.starts_with("toolgate_shadow_") && l.contains('{'))
        .map(str::to_string)
        .collect()
}

/// The value of an unlabelled series of `/metrics`.
async fn metric(app: &Router, name: &str) -> Option<u64> {
    get_text(app, "/metrics").await.lines().find_map(|l| {
        l.strip_prefix(&format!("{name} "))
            .map(|v| v.parse().unwrap())
    })
}

/// The body with its decision id's per-process prefix blanked: two servers number their
/// decisions alike but start at different times.
fn without_boot(bytes: &[u8]) -> String {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let at = text.find("\"decision_id\":\"").unwrap() + "\"decision_id\":\"".len();
    format!("{}{}", &text[..at], &text[at + 12..])
}

#[tokio::test]
async fn a_stricter_shadow_changes_no_answer_and_is_counted_and_logged() {
    let shop = shop(&strict()).await;
    let app = &shop.app;
    let decisions = decide(app, batch("t1", &[("refund", 300.0), ("refund", 50.0)])).await;
    // The serving set answers: both refunds run.
    assert_eq!(decisions[0]["allow"], true, "{decisions:?}");
    assert_eq!(decisions[1]["allow"], true, "{decisions:?}");
    assert_eq!(
        shadow_series(app).await,
        vec![
            r#"toolgate_shadow_flips_total{policy="shop",rule="small_refunds",from="allow",to="deny"} 1"#
        ]
    );
    assert_eq!(metric(app, "toolgate_shadow_batches_total").await, Some(1));
    let policies = get(app, "/v1/policies").await;
    let revision = policies["shadow"]["loaded"][0]["revision"].clone();
    assert_eq!(policies["shadow"]["loaded"][0]["module"], "shop");
    let lines = log_lines(shop).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let d = &lines[0]["decisions"];
    assert_eq!(d[0]["allow"], true);
    assert_eq!(d[0]["shadow"]["decision"], "deny", "{d}");
    assert_eq!(d[0]["shadow"]["rule"], "small_refunds");
    assert_eq!(d[0]["shadow"]["kind"], "args");
    assert_eq!(d[0]["shadow"]["revision"], revision);
    assert!(
        d[0]["shadow"]["refusal"].as_str().unwrap().len() > 10,
        "{d}"
    );
    // The call that did not flip has no `shadow` key.
    assert!(d[1].get("shadow").is_none(), "{d}");
}

#[tokio::test]
async fn the_answer_is_byte_identical_with_and_without_a_shadow() {
    let with = shop(&strict()).await;
    let without = shop_with(None, |_| {}).await;
    let bodies = [
        (
            "/v1/decide",
            batch("t1", &[("refund", 300.0), ("fetch", 1.0)]),
        ),
        ("/v1/decide", batch("t1", &[("refund", 20.0)])),
        (
            "/v1/data/shop/decide",
            json!({"input": batch("t2", &[("refund", 700.0), ("refund", 120.0)])}),
        ),
        // Not exactly `{"input": ..}`: the strict path.
        (
            "/v1/data/shop/decide",
            json!({"input": batch("t3", &[("refund", 120.0)]), "extra": 1}),
        ),
    ];
    for (path, body) in &bodies {
        let (s1, a) = post_raw(&with.app, path, body).await;
        let (s2, b) = post_raw(&without.app, path, body).await;
        assert_eq!(s1, s2, "{path} {body}");
        if s1 == StatusCode::OK {
            assert_eq!(without_boot(&a), without_boot(&b), "{path} {body}");
        } else {
            assert_eq!(a, b, "{path} {body}");
        }
    }
    // Two refunds over 100 the serving set allowed (one on the strict path), and one the
    // shadow's latch blocks (its fetch sets `tainted`; a latch is checked before rules).
    let flips = shadow_series(&with.app).await;
    assert_eq!(
        flips,
        vec![
            r#"toolgate_shadow_flips_total{policy="shop",rule="small_refunds",from="allow",to="deny"} 2"#,
            r#"toolgate_shadow_flips_total{policy="shop",rule="tainted",from="allow",to="deny"} 1"#,
        ],
    );
}

#[tokio::test]
async fn the_strict_path_is_shadowed_like_the_one_pass_path() {
    // `--log-args` sends every request to the strict path.
    let shop = shop_with(Some(&[("shop.gate", strict().as_str())]), |c| {
        c.log.args = true
    })
    .await;
    let decisions = decide(&shop.app, batch("t1", &[("refund", 300.0)])).await;
    assert_eq!(decisions[0]["allow"], true);
    assert_eq!(
        shadow_series(&shop.app).await,
        vec![
            r#"toolgate_shadow_flips_total{policy="shop",rule="small_refunds",from="allow",to="deny"} 1"#
        ]
    );
    let lines = log_lines(shop).await;
    assert_eq!(lines[0]["decisions"][0]["shadow"]["decision"], "deny");
    assert_eq!(lines[0]["args"][0]["amount"], 300.0);
}

#[tokio::test]
async fn a_looser_shadow_flips_a_denial_under_the_serving_rule() {
    let shop = shop(&loose()).await;
    let decisions = decide(&shop.app, batch("t1", &[("refund", 700.0)])).await;
    assert_eq!(decisions[0]["allow"], false);
    assert_eq!(decisions[0]["rule"], "refunds");
    assert_eq!(
        shadow_series(&shop.app).await,
        vec![
            r#"toolgate_shadow_flips_total{policy="shop",rule="refunds",from="deny",to="allow"} 1"#
        ]
    );
    let lines = log_lines(shop).await;
    let shadow = &lines[0]["decisions"][0]["shadow"];
    assert_eq!(shadow["decision"], "allow", "{shadow}");
    assert_eq!(shadow["rule"], Value::Null);
    assert_eq!(shadow["kind"], Value::Null);
}

#[tokio::test]
async fn no_flip_no_shadow_key_and_no_flip_series() {
    let shop = shop(&strict()).await;
    decide(
        &shop.app,
        batch("t1", &[("refund", 50.0), ("refund", 900.0)]),
    )
    .await;
    assert_eq!(shadow_series(&shop.app).await, Vec::<String>::new());
    assert_eq!(
        metric(&shop.app, "toolgate_shadow_batches_total").await,
        Some(1)
    );
    let lines = log_lines(shop).await;
    for d in lines[0]["decisions"].as_array().unwrap() {
        assert!(d.get("shadow").is_none(), "{d}");
    }
}

#[tokio::test]
async fn under_log_denials_a_batch_the_shadow_would_deny_is_logged() {
    let shop = shop_with(Some(&[("shop.gate", strict().as_str())]), |c| {
        c.log.mode = LogMode::Denials
    })
    .await;
    decide(&shop.app, batch("t1", &[("refund", 50.0)])).await; // allowed by both: not logged
    decide(&shop.app, batch("t1", &[("refund", 300.0)])).await; // the shadow denies it
    let lines = log_lines(shop).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["decisions"][0]["shadow"]["decision"], "deny");
}

#[tokio::test]
async fn the_shadow_writes_no_turn_state() {
    let shop = shop(&strict()).await;
    let app = &shop.app;
    // The shadow's `tainted` latch is set by a fetch; the serving set's is not.
    let first = post(app, "/v1/decide", batch("t1", &[("fetch", 1.0)]))
        .await
        .1;
    assert_eq!(first["latched"], json!(false), "{first}");
    // The next batch of the turn: the serving set still allows the refund, so nothing the
    // shadow latched reached the turn state. And the shadow judges it with the turn's state
    // as the serving set carried it (nothing latched): no flip.
    let second = decide(app, batch("t1", &[("refund", 20.0)])).await;
    assert_eq!(second[0]["allow"], true, "{second:?}");
    assert_eq!(shadow_series(app).await, Vec::<String>::new());
    // Within one batch the shadow's own latch does block: a flip under the latch's name.
    let third = decide(app, batch("t2", &[("fetch", 1.0), ("refund", 20.0)])).await;
    assert_eq!(third[1]["allow"], true, "{third:?}");
    assert_eq!(
        shadow_series(app).await,
        vec![
            r#"toolgate_shadow_flips_total{policy="shop",rule="tainted",from="allow",to="deny"} 1"#
        ]
    );
}

#[tokio::test]
async fn the_shadow_judges_with_the_turn_state_the_serving_set_carried() {
    let shop = shop(&strict()).await;
    let app = &shop.app;
    // `lookup` latches `tainted` in both sets; the turn's state carries it to the next batch.
    decide(app, batch("t1", &[("lookup", 1.0)])).await;
    let next = decide(app, batch("t1", &[("refund", 20.0)])).await;
    assert_eq!(next[0]["allow"], false);
    assert_eq!(next[0]["kind"], "latch");
    // Both deny it (a shadow that judged without the carried latch would allow it).
    assert_eq!(shadow_series(app).await, Vec::<String>::new());
}

#[tokio::test]
async fn post_reload_reloads_the_shadow_and_a_broken_one_keeps_the_old() {
    let shop = shop(&live()).await;
    let app = &shop.app;
    decide(app, batch("t1", &[("refund", 300.0)])).await;
    assert_eq!(shadow_series(app).await, Vec::<String>::new());

    std::fs::write(shadow_file(&shop), strict()).unwrap();
    let (status, body) = post(app, "/v1/reload", json!(null)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["shadow"],
        json!({"ok": true, "generation": 2}),
        "{body}"
    );
    decide(app, batch("t1", &[("refund", 300.0)])).await;
    let flipped = r#"toolgate_shadow_flips_total{policy="shop",rule="small_refunds",from="allow",to="deny"} 1"#;
    assert_eq!(shadow_series(app).await, vec![flipped]);

    // A broken shadow: the serving set reloads, the previous shadow set keeps judging.
    std::fs::write(shadow_file(&shop), "module shop\nstage {").unwrap();
    let (status, body) = post(app, "/v1/reload", json!(null)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["shadow"]["ok"], false, "{body}");
    assert!(
        body["shadow"]["error"]
            .as_str()
            .unwrap()
            .contains("shop.gate"),
        "{body}"
    );
    let health = get(app, "/health").await;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["shadow"]["ok"], false, "{health}");
    assert_eq!(health["shadow"]["generation"], 2, "{health}");
    assert!(
        health["shadow"]["last_error"]
            .as_str()
            .unwrap()
            .contains("shop.gate"),
        "{health}"
    );
    assert_eq!(health["shadow"]["loaded"][0]["module"], "shop");
    assert_eq!(
        metric(app, "toolgate_shadow_reloads_failed_total").await,
        Some(1)
    );
    decide(app, batch("t1", &[("refund", 300.0)])).await;
    assert_eq!(
        shadow_series(app).await,
        vec![flipped.replace("} 1", "} 2")]
    );

    // Fixed again: `ok`, and the error is gone.
    std::fs::write(shadow_file(&shop), loose()).unwrap();
    let (_, body) = post(app, "/v1/reload", json!(null)).await;
    assert_eq!(
        body["shadow"],
        json!({"ok": true, "generation": 3}),
        "{body}"
    );
    let health = get(app, "/health").await;
    assert_eq!(health["shadow"]["ok"], true, "{health}");
    assert_eq!(health["shadow"]["last_error"], Value::Null, "{health}");
}

#[tokio::test]
async fn a_module_the_shadow_lacks_is_counted_and_not_compared() {
    let other = strict().replace("module shop", "module other");
    let shop = shop_with(Some(&[("other.gate", &other)]), |_| {}).await;
    decide(&shop.app, batch("t1", &[("refund", 300.0)])).await;
    decide(&shop.app, batch("t1", &[("refund", 300.0)])).await;
    assert_eq!(
        shadow_series(&shop.app).await,
        vec![r#"toolgate_shadow_missing_total{policy="shop"} 2"#]
    );
    assert_eq!(
        metric(&shop.app, "toolgate_shadow_batches_total").await,
        Some(0)
    );
}

#[tokio::test]
async fn without_a_shadow_there_is_no_shadow_anything() {
    let shop = shop_with(None, |_| {}).await;
    decide(&shop.app, batch("t1", &[("refund", 300.0)])).await;
    assert!(!get_text(&shop.app, "/metrics")
        .await
        .contains("toolgate_shadow_"));
    assert!(get(&shop.app, "/health").await.get("shadow").is_none());
    let (_, body) = post(&shop.app, "/v1/reload", json!(null)).await;
    assert!(body.get("shadow").is_none(), "{body}");
}

#[tokio::test]
async fn a_shadow_that_does_not_load_at_startup_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    std::fs::write(policies.join("shop.gate"), live()).unwrap();
    let shadow = dir.path().join("shadow");
    std::fs::create_dir(&shadow).unwrap();
    std::fs::write(shadow.join("shop.gate"), "module shop\nstage {").unwrap();
    let missing = dir.path().join("nowhere");
    for path in [&shadow, &missing] {
        let mut config = Config::new(PolicySource::Path(policies.clone()));
        config.addr = "127.0.0.1:0".parse().unwrap();
        config.log.mode = LogMode::Off;
        config.poll = std::time::Duration::ZERO;
        config.shadow = Some(path.to_path_buf());
        let error = match Server::start(config).await {
            Ok(_) => panic!(
                "started with a shadow that does not load: {}",
                path.display()
            ),
            Err(e) => e.to_string(),
        };
        assert!(
            error.starts_with(&format!("--shadow `{}`", path.display())),
            "{error}"
        );
    }
}

#[tokio::test]
async fn a_shadow_can_be_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("strict.gate");
    std::fs::write(&file, strict()).unwrap();
    let shop = shop_with(None, |c| c.shadow = Some(file.clone())).await;
    decide(&shop.app, batch("t1", &[("refund", 300.0)])).await;
    assert_eq!(shadow_series(&shop.app).await.len(), 1);
    assert!(Path::new(
        get(&shop.app, "/health").await["shadow"]["path"]
            .as_str()
            .unwrap()
    )
    .ends_with("strict.gate"));
}

#[tokio::test]
async fn an_approved_ask_is_no_flip_and_the_shadow_records_no_ask() {
    let asks = |limit: u32| {
        format!(
            "module shop\nwrite refund\nstage main {{ tools [refund] }}\nrule refunds for refund {{\n  require args.amount is number and args.amount <= {limit}\n  ask when args.amount > 50\n}}\n"
        )
    };
    let (live, shadow) = (asks(500), asks(400));
    let shop = serve(&live, Some(&[("shop.gate", &shadow)]), |_| {}).await;
    let app = &shop.app;
    let first = decide(app, batch("t1", &[("refund", 120.0)])).await;
    assert_eq!(first[0]["kind"], "ask");
    // One ask waits: the serving set's, not the shadow's too.
    let waiting = get(app, "/v1/approvals?session=s1").await;
    assert_eq!(waiting["asks"].as_array().unwrap().len(), 1, "{waiting}");
    let digest = first[0]["approval"].as_str().unwrap();
    let (status, answered) = post(
        app,
        "/v1/approvals",
        json!({"session": "s1", "approval": digest, "decision": "approve"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    // The approved call runs; the shadow, whose revision no approval names, asks: no flip.
    let ran = decide(app, batch("t1", &[("refund", 120.0)])).await;
    assert_eq!(ran[0]["allow"], true, "{ran:?}");
    assert_eq!(ran[0]["approval"], digest);
    assert_eq!(shadow_series(app).await, Vec::<String>::new());
    assert_eq!(metric(app, "toolgate_shadow_batches_total").await, Some(2));
    // A refund the shadow refuses outright is a flip from the ask.
    decide(app, batch("t1", &[("refund", 450.0)])).await;
    assert_eq!(
        shadow_series(app).await,
        vec![r#"toolgate_shadow_flips_total{policy="shop",rule="refunds",from="ask",to="deny"} 1"#]
    );
}

#[tokio::test]
async fn an_unknown_stage_is_no_label_of_its_own() {
    // The shadow renames stage `main`: a batch in `main` is in an unknown stage for it, and
    // its denial names the request's stage, which must not become a label value.
    let renamed = strict().replace("stage main", "stage primary");
    let shop = shop(&renamed).await;
    decide(&shop.app, batch("t1", &[("refund", 20.0)])).await;
    assert_eq!(
        shadow_series(&shop.app).await,
        vec![r#"toolgate_shadow_flips_total{policy="shop",rule="stage",from="allow",to="deny"} 1"#]
    );
    let lines = log_lines(shop).await;
    // The log keeps what the shadow said, stage name and all.
    assert_eq!(lines[0]["decisions"][0]["shadow"]["rule"], "main");
    assert_eq!(lines[0]["decisions"][0]["shadow"]["kind"], "stage");
}

#[tokio::test]
async fn a_hook_call_is_shadowed_and_its_session_is_the_serving_sets() {
    let shop = shop(&strict()).await;
    let app = &shop.app;
    let url = "/v1/hooks/claude-code";
    let prompt =
        json!({"session_id": "h1", "prompt_id": "p1", "hook_event_name": "UserPromptSubmit"});
    assert_eq!(post(app, url, prompt).await.1, json!({}));
    let call = |id: &str, tool: &str, amount: f64| {
        json!({"session_id": "h1", "prompt_id": "p1", "hook_event_name": "PreToolUse",
               "tool_name": tool, "tool_input": {"amount": amount}, "tool_use_id": id})
    };
    // Allowed by the serving set (`{}`: no objection), denied by the shadow: one flip.
    assert_eq!(
        post(app, url, call("u1", "refund", 300.0)).await.1,
        json!({})
    );
    // The shadow's fetch would latch the turn; the session is the serving set's, so the
    // next refund is judged unlatched by both: no flip.
    assert_eq!(post(app, url, call("u2", "fetch", 1.0)).await.1, json!({}));
    assert_eq!(
        post(app, url, call("u3", "refund", 20.0)).await.1,
        json!({})
    );
    assert_eq!(
        shadow_series(app).await,
        vec![
            r#"toolgate_shadow_flips_total{policy="shop",rule="small_refunds",from="allow",to="deny"} 1"#
        ]
    );
    assert_eq!(metric(app, "toolgate_shadow_batches_total").await, Some(3));
    let lines = log_lines(shop).await;
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["decisions"][0]["shadow"]["rule"], "small_refunds");
    assert!(lines[2]["decisions"][0].get("shadow").is_none());
}

/// A budget over batches the serving and shadow policies both declare: the shadow judges
/// with the counts the serving set was given, on both `/v1/decide` paths, so a shadow equal
/// to the serving set flips nothing (without them every budgeted call was a shadow denial).
#[tokio::test]
async fn a_budget_over_batches_is_shadowed_with_the_serving_counts() {
    let budgeted = format!(
        "{}budget per_session for refund {{ count <= 2 per session }}\n",
        live()
    );
    let shop = serve(&budgeted, Some(&[("shop.gate", budgeted.as_str())]), |_| {}).await;
    // Three batches on the one-pass path, then one on the strict path (an OPA body with a
    // key besides `input` is read strictly); the third and fourth are over the budget.
    for turn in ["t1", "t2", "t3"] {
        let d = decide(&shop.app, batch(turn, &[("refund", 10.0)])).await;
        assert_eq!(d.len(), 1);
    }
    let (status, _) = post(
        &shop.app,
        "/v1/data/shop/decide",
        json!({"input": batch("t4", &[("refund", 10.0)]), "extra": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shadow_series(&shop.app).await, Vec::<String>::new());
    let lines = log_lines(shop).await;
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines.iter().all(|l| l.get("shadow").is_none()), "{lines:?}");
}
