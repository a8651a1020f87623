//! `serve --jwks`: the principal from a verified bearer token. Keys are generated here, by
//! `openssl genpkey` (RSA, EC P-256, Ed25519), never checked in; tokens are signed with
//! them by jsonwebtoken, and each refusal is a case the verifier must catch.
#![cfg(feature = "jwt")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::{self, post, serve, Served};
use axum::http::{header, Request, StatusCode};
use axum::Router;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::path::Path;
use toolgate_server::JwtConfig;

const ISS: &str = "https://idp.example.com";
const AUD: &str = "toolgate";

const USERS: &str = r#"module users
write delete_user
stage main { tools [delete_user] }
rule admins for delete_user {
  require principal.claims.role == "admin"
  refusal "only an admin may delete a user"
}
budget per_tenant for delete_user { count <= 2 within 1h per tenant }
"#;

/// A private key of `alg`, made by openssl in `dir`.
fn key(dir: &Path, alg: Algorithm) -> EncodingKey {
    let (name, args): (&str, &[&str]) = match alg {
        Algorithm::RS256 => (
            "rsa.pem",
            &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
        ),
        Algorithm::ES256 => (
            "ec.pem",
            &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        ),
        Algorithm::EdDSA => ("ed.pem", &["-algorithm", "ED25519"]),
        other => panic!("{other:?}"),
    };
    let path = dir.join(format!("{}-{name}", rand_tag()));
    let out = std::process::Command::new("openssl")
        .arg("genpkey")
        .args(args)
        .arg("-out")
        .arg(&path)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pem = std::fs::read(&path).unwrap();
    match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem).unwrap(),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem).unwrap(),
        _ => EncodingKey::from_ed_pem(&pem).unwrap(),
    }
}

fn rand_tag() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The public JWK of `key`, named `kid`.
fn jwk(key: &EncodingKey, alg: Algorithm, kid: &str) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(key, alg).unwrap();
    jwk.common.key_id = Some(kid.into());
    jwk
}

fn write_jwks(path: &Path, keys: &[Jwk]) {
    let set = JwkSet {
        keys: keys.to_vec(),
    };
    std::fs::write(path, serde_json::to_string(&set).unwrap()).unwrap();
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims of a valid token for `sub` with `role`, overridden by `extra`.
fn claims(sub: &str, role: &str, extra: Value) -> Value {
    let mut c = json!({"iss": ISS, "aud": AUD, "sub": sub, "exp": now() + 600,
                       "nbf": now() - 10, "tenant": "acme", "role": role});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn token(key: &EncodingKey, alg: Algorithm, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    encode(&header, claims, key).unwrap()
}

/// Keys of the three algorithms, their JWKS in `DIR/jwks.json`, and a server that verifies
/// tokens against it.
struct Issuer {
    served: Served,
    keys: Vec<(Algorithm, EncodingKey, String)>,
}

async fn issuer() -> Issuer {
    issuer_for(USERS, None).await
}

/// [`issuer`] for a server of `policy` (as `users.gate`), with `admin` as its admin token.
async fn issuer_for(policy: &str, admin: Option<&str>) -> Issuer {
    let dir = tempfile::tempdir().unwrap();
    let mut keys = Vec::new();
    let mut jwks = Vec::new();
    for (alg, kid) in [
        (Algorithm::RS256, "rsa-1"),
        (Algorithm::ES256, "ec-1"),
        (Algorithm::EdDSA, "ed-1"),
    ] {
        let k = key(dir.path(), alg);
        jwks.push(jwk(&k, alg, kid));
        keys.push((alg, k, kid.to_string()));
    }
    let path = dir.path().join("jwks.json");
    write_jwks(&path, &jwks);
    let served = serve(&[("users.gate", policy)], |c, _| {
        c.jwt = Some(JwtConfig::new(path.display().to_string(), ISS, AUD));
        c.admin_token = admin.map(String::from);
    })
    .await;
    drop(dir);
    Issuer { served, keys }
}

fn batch(principal: Option<Value>) -> Value {
    let mut facts = json!({"stage": "main"});
    if let Some(p) = principal {
        facts["principal"] = p;
    }
    json!({"facts": facts, "calls": [{"id": "c1", "tool": "delete_user", "args": {"id": 7}}]})
}

async fn decide(app: &Router, token: Option<&str>, body: Value) -> (StatusCode, Value) {
    post(app, "/v1/decide", token, body).await
}

fn allowed(answer: &Value) -> bool {
    answer["decisions"][0]["allow"] == true
}

#[tokio::test]
async fn a_valid_token_of_each_algorithm_gives_the_principal_rules_read() {
    let iss = issuer().await;
    for (alg, k, kid) in &iss.keys {
        // A tenant per algorithm, so the tenant budget of two does not run out.
        let tenant = json!({"tenant": format!("t-{alg:?}")});
        let admin = token(k, *alg, kid, &claims("ana", "admin", tenant));
        let (status, answer) = decide(&iss.served.app, Some(&admin), batch(None)).await;
        assert_eq!(status, StatusCode::OK, "{alg:?}: {answer}");
        assert!(allowed(&answer), "{alg:?}: {answer}");
        let dev = token(k, *alg, kid, &claims("bo", "dev", json!({})));
        let (_, answer) = decide(&iss.served.app, Some(&dev), batch(None)).await;
        assert!(!allowed(&answer), "{alg:?}: {answer}");
        assert_eq!(answer["decisions"][0]["rule"], "admins");
    }
    // No token: no principal, so the rule that reads it denies.
    let (status, answer) = decide(&iss.served.app, None, batch(None)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(!allowed(&answer), "{answer}");
}

/// Each way a token can be wrong is a 401 with its reason, and a challenge header.
#[tokio::test]
async fn invalid_tokens_are_refused_with_401_and_the_reason() {
    let iss = issuer().await;
    let (alg, k, kid) = &iss.keys[1];
    let dir = tempfile::tempdir().unwrap();
    let stranger = key(dir.path(), Algorithm::ES256);
    let hs = EncodingKey::from_secret(b"the public key is no secret").unwrap();
    let mut none_header = Header::new(Algorithm::HS256);
    none_header.kid = Some(kid.clone());
    let valid = token(k, *alg, kid, &claims("ana", "admin", json!({})));
    let (head, rest) = valid.split_once('.').unwrap();
    let (_, signature) = rest.split_once('.').unwrap();
    let forged_payload = {
        use base64_like::encode_url;
        encode_url(&claims("ana", "admin", json!({"role": "admin", "sub": "root"})).to_string())
    };
    let cases: Vec<(String, &str)> = vec![
        (
            token(
                k,
                *alg,
                kid,
                &claims("ana", "admin", json!({"exp": now() - 120})),
            ),
            "expired",
        ),
        (
            token(
                k,
                *alg,
                kid,
                &claims("ana", "admin", json!({"nbf": now() + 600})),
            ),
            "not valid yet",
        ),
        (
            token(
                k,
                *alg,
                kid,
                &claims("ana", "admin", json!({"aud": "other"})),
            ),
            "audience",
        ),
        (
            token(
                k,
                *alg,
                kid,
                &claims("ana", "admin", json!({"iss": "https://evil"})),
            ),
            "issuer",
        ),
        (
            token(
                &stranger,
                Algorithm::ES256,
                kid,
                &claims("ana", "admin", json!({})),
            ),
            "signature",
        ),
        (
            token(
                &stranger,
                Algorithm::ES256,
                "nobody",
                &claims("ana", "admin", json!({})),
            ),
            "key id `nobody`",
        ),
        (
            encode(&none_header, &claims("ana", "admin", json!({})), &hs).unwrap(),
            "algorithm",
        ),
        (
            token(
                &iss.keys[0].1,
                Algorithm::RS256,
                kid,
                &claims("ana", "admin", json!({})),
            ),
            "algorithm",
        ),
        (format!("{head}.{forged_payload}.{signature}"), "signature"),
        ("not-a-jwt".to_string(), "well-formed"),
        (
            token(k, *alg, kid, &claims("ana", "admin", json!({"tenant": 7}))),
            "tenant",
        ),
        ("x".repeat(9000), "bytes"),
    ];
    for (t, says) in cases {
        let request = support::post_request("/v1/decide", Some(&t), &batch(None));
        let response = tower::ServiceExt::oneshot(iss.served.app.clone(), request)
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{says}");
        let challenge = response.headers()[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\""),
            "{challenge}"
        );
        let bytes = http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap()
            .to_bytes();
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["error"]["code"], "invalid_token", "{says}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{says}: {message}");
    }
    // Not the Bearer scheme.
    let request = Request::post("/v1/decide")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, "Basic YWxhZGRpbjpvcGVuc2VzYW1l")
        .body(axum::body::Body::from(batch(None).to_string()))
        .unwrap();
    let (status, _) = support::send(&iss.served.app, request).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

/// base64url without padding, for a forged payload.
mod base64_like {
    pub fn encode_url(text: &str) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let b = text.as_bytes();
        let mut out = String::new();
        for chunk in b.chunks(3) {
            let n =
                chunk.iter().fold(0u32, |n, &c| (n << 8) | u32::from(c)) << (8 * (3 - chunk.len()));
            for i in 0..=chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }
}

#[tokio::test]
async fn a_request_may_not_bring_its_own_principal_under_jwks() {
    let iss = issuer().await;
    let (alg, k, kid) = &iss.keys[2];
    let dev = token(k, *alg, kid, &claims("bo", "dev", json!({})));
    let forged = Some(json!({"sub": "ana", "claims": {"role": "admin"}}));
    for t in [None, Some(dev.as_str())] {
        let (status, answer) = decide(&iss.served.app, t, batch(forged.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(answer["error"]["location"], "facts.principal", "{answer}");
        // The OPA route too.
        let (status, answer) = post(
            &iss.served.app,
            "/v1/data/users/decide",
            t,
            json!({"input": batch(forged.clone())}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    }
}

/// `per tenant` budgets count by the verified tenant: two admins of acme share two deletes.
#[tokio::test]
async fn budgets_count_by_the_verified_tenant() {
    let iss = issuer().await;
    let (alg, k, kid) = &iss.keys[0];
    let mut allowed_n = 0;
    for sub in ["ana", "cy", "di"] {
        let t = token(k, *alg, kid, &claims(sub, "admin", json!({})));
        let (_, answer) = decide(
            &iss.served.app,
            Some(&t),
            json!({"session": format!("s-{sub}"), "turn": "t1", "facts": {"stage": "main"},
                   "calls": [{"id": "c1", "tool": "delete_user", "args": {"id": 7}}]}),
        )
        .await;
        if allowed(&answer) {
            allowed_n += 1;
        } else {
            assert_eq!(answer["decisions"][0]["kind"], "budget", "{answer}");
        }
    }
    assert_eq!(allowed_n, 2);
}

/// A key the JWKS gains after start is fetched when a token names it (a rotation), from a
/// JWKS served over HTTP.
#[tokio::test]
async fn a_rotated_key_is_fetched_when_a_token_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let old = key(dir.path(), Algorithm::ES256);
    let new = key(dir.path(), Algorithm::EdDSA);
    let set = std::sync::Arc::new(std::sync::Mutex::new(JwkSet {
        keys: vec![jwk(&old, Algorithm::ES256, "old")],
    }));
    let shared = set.clone();
    let app = axum::Router::new().route(
        "/jwks.json",
        axum::routing::get(move || {
            let body = serde_json::to_string(&*shared.lock().unwrap()).unwrap();
            async move { body }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let served = serve(&[("users.gate", USERS)], |c, _| {
        c.jwt = Some(JwtConfig::new(format!("http://{addr}/jwks.json"), ISS, AUD));
    })
    .await;
    let by_old = token(
        &old,
        Algorithm::ES256,
        "old",
        &claims("ana", "admin", json!({})),
    );
    let (_, answer) = decide(&served.app, Some(&by_old), batch(None)).await;
    assert!(allowed(&answer), "{answer}");
    let by_new = token(
        &new,
        Algorithm::EdDSA,
        "new",
        &claims("ana", "admin", json!({})),
    );
    let (status, _) = decide(&served.app, Some(&by_new), batch(None)).await;
    // Not in the set yet; this refresh found nothing new.
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    set.lock()
        .unwrap()
        .keys
        .push(jwk(&new, Algorithm::EdDSA, "new"));
    // The refresh just made is rate-limited, so a new server sees the rotation at once.
    let served = serve(&[("users.gate", USERS)], |c, _| {
        c.jwt = Some(JwtConfig::new(format!("http://{addr}/jwks.json"), ISS, AUD));
    })
    .await;
    let (_, answer) = decide(&served.app, Some(&by_old), batch(None)).await;
    assert!(allowed(&answer), "{answer}");
    let (_, answer) = decide(&served.app, Some(&by_new), batch(None)).await;
    assert!(
        allowed(&answer),
        "a key added after start is fetched on first sight: {answer}"
    );
}

#[tokio::test]
async fn a_jwks_that_cannot_be_used_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users.gate"), USERS).unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).unwrap();
    for (jwks, says) in [
        (bad.display().to_string(), "no RS256, ES256 or EdDSA"),
        (
            dir.path().join("missing.json").display().to_string(),
            "cannot read",
        ),
        ("http://idp.example.com/jwks".to_string(), "https"),
    ] {
        let mut config =
            toolgate_server::Config::new(toolgate_server::PolicySource::Path(dir.path().into()));
        config.poll = std::time::Duration::ZERO;
        config.log.sink = toolgate_server::LogSink::File(dir.path().join("log"));
        config.jwt = Some(JwtConfig::new(jwks.clone(), ISS, AUD));
        let err = match toolgate_server::Server::start(config).await {
            Ok(_) => panic!("{jwks} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("--jwks") && err.contains(says),
            "{jwks}: {err}"
        );
    }
}

/// AuthZEN under --jwks: the principal is the token's; an evaluation about someone else is
/// refused.
#[tokio::test]
async fn authzen_takes_the_principal_from_the_token() {
    let iss = issuer().await;
    let (alg, k, kid) = &iss.keys[0];
    let admin = token(k, *alg, kid, &claims("ana", "admin", json!({})));
    let body = |sub: &str| {
        json!({"subject": {"type": "user", "id": sub},
               "action": {"name": "delete_user"},
               "resource": {"type": "user", "id": "7"},
               "context": {"stage": "main"}})
    };
    let (status, answer) = post(
        &iss.served.app,
        "/access/v1/evaluation",
        Some(&admin),
        body("ana"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["decision"], true, "{answer}");
    let (status, answer) = post(
        &iss.served.app,
        "/access/v1/evaluation",
        Some(&admin),
        body("root"),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
}

/// A payout behind an identity check and a role, for the hook tests.
const PAYOUTS: &str = r#"module users
read verify_identity
write payout
stage main { tools [verify_identity, payout] }
rule admins for payout {
  require principal.claims.role == "admin"
  refusal "only an admin may pay out"
}
rule verified for payout { require called_before(verify_identity) }
"#;

const HOOK: &str = "/v1/hooks/claude-code";

fn hook_event(session: &str, event: &str, tool: &str) -> Value {
    json!({"session_id": session, "prompt_id": "p1", "hook_event_name": event,
           "tool_name": tool, "tool_input": {}, "tool_use_id": format!("u-{}", rand_tag())})
}

/// The reason of a Claude Code denial, or `None` when the answer lets the call run.
fn hook_denial(answer: &Value) -> Option<String> {
    let out = &answer["hookSpecificOutput"];
    (out["permissionDecision"] == "deny").then(|| {
        out["permissionDecisionReason"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    })
}

/// Sends one hook event with `token`: the answer, which is always a 200.
async fn hook(app: &Router, token: Option<&str>, event: Value) -> Value {
    let (status, answer) = post(app, HOOK, token, event).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

/// The prompt, the identity check and the payout of one session, as `token`'s holder: the
/// payout's denial reason, if denied.
async fn verified_payout(app: &Router, token: Option<&str>, session: &str) -> Option<String> {
    hook(app, token, hook_event(session, "UserPromptSubmit", "")).await;
    hook(
        app,
        token,
        hook_event(session, "PreToolUse", "verify_identity"),
    )
    .await;
    hook(
        app,
        token,
        hook_event(session, "PostToolUse", "verify_identity"),
    )
    .await;
    hook_denial(&hook(app, token, hook_event(session, "PreToolUse", "payout")).await)
}

#[tokio::test]
async fn hook_events_take_the_principal_from_the_token() {
    let iss = issuer_for(PAYOUTS, None).await;
    let app = &iss.served.app;
    let (alg, k, kid) = &iss.keys[2];
    let admin = token(k, *alg, kid, &claims("ana", "admin", json!({})));
    let dev = token(k, *alg, kid, &claims("bo", "dev", json!({})));
    assert_eq!(verified_payout(app, Some(&admin), "s1").await, None);
    let refused = verified_payout(app, Some(&dev), "s2").await;
    assert_eq!(refused.as_deref(), Some("only an admin may pay out"));
    // No token: no principal, so the rule that reads it denies.
    assert!(verified_payout(app, None, "s3").await.is_some());
    // A token that is not valid is refused in the agent's own answer, with the reason; the
    // events it sent were not applied.
    let stranger_dir = tempfile::tempdir().unwrap();
    let stranger = key(stranger_dir.path(), Algorithm::EdDSA);
    let forged = token(
        &stranger,
        Algorithm::EdDSA,
        kid,
        &claims("ana", "admin", json!({})),
    );
    let reason = verified_payout(app, Some(&forged), "s4").await.unwrap();
    assert!(reason.contains("bearer token is not valid"), "{reason}");
    let expired = token(
        k,
        *alg,
        kid,
        &claims("ana", "admin", json!({"exp": now() - 3600})),
    );
    let reason = verified_payout(app, Some(&expired), "s5").await.unwrap();
    assert!(reason.contains("bearer token is not valid"), "{reason}");
}

#[tokio::test]
async fn a_callers_hook_events_never_reach_another_callers_session() {
    let iss = issuer_for(PAYOUTS, None).await;
    let app = &iss.served.app;
    let (alg, k, kid) = &iss.keys[1];
    let ana = token(k, *alg, kid, &claims("ana", "admin", json!({})));
    let bo = token(k, *alg, kid, &claims("bo", "admin", json!({})));
    // Ana's session: a prompt, no identity check yet.
    hook(app, Some(&ana), hook_event("s1", "UserPromptSubmit", "")).await;
    // Bo reports the identity check in a session of the same id.
    hook(app, Some(&bo), hook_event("s1", "UserPromptSubmit", "")).await;
    hook(
        app,
        Some(&bo),
        hook_event("s1", "PostToolUse", "verify_identity"),
    )
    .await;
    // Ana's payout still lacks her own check.
    let denied = hook(app, Some(&ana), hook_event("s1", "PreToolUse", "payout")).await;
    assert!(hook_denial(&denied).is_some(), "{denied}");
    // Bo's own session saw it.
    let allowed = hook(app, Some(&bo), hook_event("s1", "PreToolUse", "payout")).await;
    assert_eq!(hook_denial(&allowed), None, "{allowed}");
}

#[tokio::test]
async fn the_admin_token_and_a_verified_token_both_open_the_hook_endpoint() {
    let iss = issuer_for(PAYOUTS, Some("s3cret-admin-token")).await;
    let app = &iss.served.app;
    let (alg, k, kid) = &iss.keys[0];
    let ana = token(k, *alg, kid, &claims("ana", "admin", json!({})));
    assert_eq!(verified_payout(app, Some(&ana), "s1").await, None);
    // The admin token is the server's own wiring: judged, with no principal.
    let reason = verified_payout(app, Some("s3cret-admin-token"), "s2")
        .await
        .unwrap();
    assert_eq!(reason, "only an admin may pay out");
    // Neither: refused before it is judged.
    let reason = verified_payout(app, None, "s3").await.unwrap();
    assert!(
        reason.contains("--admin-token, or a token its --jwks verifies"),
        "{reason}"
    );
}
