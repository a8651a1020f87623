//! What verifying a bearer token costs (issue 26: a cached JWT at most 20 µs), timed over
//! many runs and counted with callgrind where wall time is noisy:
//! `cargo build --release -p toolgate-server --example bearer_cost`, then
//! `target/release/examples/bearer_cost cached|fresh ITERATIONS` (prints ns per verify), or
//! under `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*run_measured*'`.
//! `cached` verifies one ES256 token again and again (the cache answers); `fresh` verifies a
//! new token each time (the signature is checked). Needs `openssl` on PATH for the key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::json;
use std::time::Instant;
use toolgate_server::bearer::Verifier;
use toolgate_server::JwtConfig;

#[inline(never)]
async fn run_measured(verifier: &Verifier, tokens: &[String], iterations: usize) {
    for i in 0..iterations {
        let t = &tokens[i % tokens.len()];
        std::hint::black_box(verifier.verify(t).await.unwrap());
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(iterations)) = (args.get(1), args.get(2).and_then(|n| n.parse().ok()))
    else {
        eprintln!("usage: bearer_cost cached|fresh ITERATIONS");
        std::process::exit(2);
    };
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("ec.pem");
    let out = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&pem)
        .output()
        .unwrap();
    assert!(out.status.success());
    let key = EncodingKey::from_ec_pem(&std::fs::read(&pem).unwrap()).unwrap();
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
    jwk.common.key_id = Some("k".into());
    let jwks = dir.path().join("jwks.json");
    std::fs::write(
        &jwks,
        serde_json::to_string(&JwkSet { keys: vec![jwk] }).unwrap(),
    )
    .unwrap();
    let verifier = Verifier::new(JwtConfig::new(jwks.display().to_string(), "iss", "aud"))
        .await
        .unwrap();
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let count = if mode == "fresh" { iterations } else { 1 };
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("k".into());
    let tokens: Vec<String> = (0..count)
        .map(|i| {
            let claims = json!({"iss": "iss", "aud": "aud", "exp": exp, "sub": format!("user-{i}"),
                                "tenant": "acme", "role": "admin"});
            encode(&header, &claims, &key).unwrap()
        })
        .collect();
    if mode != "fresh" {
        verifier.verify(&tokens[0]).await.unwrap();
    }
    let started = Instant::now();
    run_measured(&verifier, &tokens, iterations).await;
    let ns = started.elapsed().as_nanos() / iterations as u128;
    println!("{mode}: {ns} ns per verify over {iterations}");
}
