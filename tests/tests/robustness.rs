//! Robustness: hostile policy text and hostile requests end in a decision or a clean error,
//! never a panic or a hang.
//!
//! Two halves: the regression inputs in `tests/fixtures/fuzz/` (hand-made adversarial inputs
//! and anything the fuzz targets in `fuzz/` ever found), replayed on every run; and proptest
//! properties over arbitrary bytes and generated JSON with deep nesting, huge numbers and wrong
//! types. `TOOLGATE_PROPTEST_CASES` overrides the case counts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::PathBuf;
use toolgate_engine::{Policy, Request, RequestError, Response};
use toolgate_tests::{example_policy, proptest_config, EXAMPLES};

fn examples() -> &'static [Policy] {
    static P: std::sync::OnceLock<Vec<Policy>> = std::sync::OnceLock::new();
    P.get_or_init(|| EXAMPLES.iter().map(|n| example_policy(n)).collect())
}

fn fixtures(kind: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = toolgate_tests::repo_root()
        .join("tests")
        .join("fixtures")
        .join("fuzz")
        .join(kind);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// A compile outcome is a policy, or errors that render with the file name and a position.
fn check_compile(name: &str, text: &str) -> Result<Option<Policy>, String> {
    match Policy::compile(name, text) {
        Ok(p) => Ok(Some(p)),
        Err(e) => {
            if e.errors().count() == 0 {
                return Err(format!("{name}: a compile error with no errors"));
            }
            let rendered = e.render();
            if !rendered.contains(&format!("{name}:")) {
                return Err(format!(
                    "{name}: rendering lacks the file name:\n{rendered}"
                ));
            }
            Ok(None)
        }
    }
}

/// A request outcome is a response with one well-formed decision per call, or an error that
/// says where: a line and column for bad JSON, a field path for a schema error.
fn check_request(policy: &Policy, text: &str) -> Result<(), String> {
    match policy.decide_json(text) {
        Ok(r) => check_response(&Request::from_json(text).unwrap(), &r),
        Err(RequestError::Json {
            line,
            column,
            message,
        }) => {
            if line == 0 && column == 0 && !text.trim().is_empty() {
                return Err(format!("a JSON error with no position: {message}"));
            }
            if message.is_empty() {
                return Err("a JSON error with no message".into());
            }
            Ok(())
        }
        Err(RequestError::Schema { path, message }) => {
            if message.is_empty() {
                return Err(format!("a schema error at `{path}` with no message"));
            }
            Ok(())
        }
        Err(RequestError::DuplicateKey { path, line, .. }) => {
            if path.is_empty() || line == 0 {
                return Err(format!(
                    "a duplicate-key error with no place: `{path}` line {line}"
                ));
            }
            Ok(())
        }
        Err(e @ RequestError::WrongPolicy { .. }) => {
            if e.to_string().contains(policy.module()) {
                Ok(())
            } else {
                Err(format!("wrong-policy error does not name the policy: {e}"))
            }
        }
        // `RequestError` is non-exhaustive: a kind this check does not know fails it, so a
        // new kind is given its own check here.
        Err(e) => Err(format!("a request error this test does not check: {e:?}")),
    }
}

fn check_response(request: &Request, r: &Response) -> Result<(), String> {
    if r.decisions.len() != request.calls.len() {
        return Err(format!(
            "{} decisions for {} calls",
            r.decisions.len(),
            request.calls.len()
        ));
    }
    for (d, c) in r.decisions.iter().zip(&request.calls) {
        let denied = !d.allow;
        if d.id != c.id
            || d.tool != c.tool
            || d.kind.is_some() != denied
            || d.rule.is_some() != denied
            || d.reason.is_some() != denied
            || (d.fail_open && denied)
        {
            return Err(format!("malformed decision {d:?} for {c:?}"));
        }
    }
    serde_json::to_string(r).map_err(|e| e.to_string())?;
    Ok(())
}

#[test]
fn policy_regression_inputs_compile_or_fail_cleanly() {
    let inputs = fixtures("policies");
    assert!(
        inputs.len() >= 10,
        "only {} policy fixtures found",
        inputs.len()
    );
    let mut problems = Vec::new();
    for (path, bytes) in &inputs {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let text = String::from_utf8_lossy(bytes);
        match check_compile(&name, &text) {
            Ok(Some(p)) => {
                // A policy that compiles judges a batch of every tool it knows.
                let calls: Vec<Value> = p
                    .tools()
                    .map(|(t, _)| json!({"id": t, "tool": t, "args": {"x": 1}}))
                    .collect();
                for stage in p.stages().map(Some).chain([None, Some("nowhere")]) {
                    let req = json!({"facts": {"stage": stage, "latched": true}, "calls": calls});
                    if let Err(e) = check_request(&p, &req.to_string()) {
                        problems.push(format!("{name}: {e}"));
                    }
                }
            }
            Ok(None) => {}
            Err(e) => problems.push(e),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn request_regression_inputs_get_a_decision_or_a_located_error() {
    let inputs = fixtures("requests");
    assert!(
        inputs.len() >= 10,
        "only {} request fixtures found",
        inputs.len()
    );
    let mut problems = Vec::new();
    for (path, bytes) in &inputs {
        let text = String::from_utf8_lossy(bytes);
        for policy in examples() {
            if let Err(e) = check_request(policy, &text) {
                problems.push(format!("{} ({}): {e}", path.display(), policy.module()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The hand-made fixtures mean what their names say: these outcomes are fixed.
#[test]
fn known_regression_inputs_have_their_expected_outcome() {
    let coach = &examples()[1];
    let read = |name: &str| {
        let path = toolgate_tests::repo_root()
            .join("tests/fixtures/fuzz/requests")
            .join(name);
        String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned()
    };
    // Past serde_json's recursion limit: a JSON error, not a stack overflow.
    assert!(matches!(
        coach.decide_json(&read("deep_args_past_limit.json")),
        Err(RequestError::Json { .. })
    ));
    // Under the limit: judged.
    let payout = &examples()[0];
    let r = payout
        .decide_json(&read("deep_args_under_limit.json"))
        .unwrap();
    assert!(
        !r.decisions[0].allow,
        "an array is not a number: {:?}",
        r.decisions[0]
    );
    // A number past f64 range is a JSON error; a long one within range is judged as a number.
    assert!(matches!(
        coach.decide_json(&read("number_out_of_range.json")),
        Err(RequestError::Json { .. })
    ));
    let r = payout.decide_json(&read("huge_numbers.json")).unwrap();
    let allowed: Vec<bool> = r.decisions.iter().map(|d| d.allow).collect();
    // 9e299, -1e308 and 1e25 are outside (0, 250]; the smallest subnormal is inside.
    assert_eq!(allowed, [false, false, true, false], "{:?}", r.decisions);
    // Standard facts of the wrong type name the field.
    for (file, path) in [
        ("stage_turns_huge.json", "facts.stage_turns"),
        ("stage_turns_negative.json", "facts.stage_turns"),
        ("stage_turns_float.json", "facts.stage_turns"),
        ("wrong_type_message_from.json", "facts.messages[0].from"),
        ("wrong_type_latched.json", "facts.latched"),
        ("wrong_type_call_args.json", "calls[0].args"),
        ("wrong_type_call_tool.json", "calls[0].tool"),
        ("wrong_type_called_ok.json", "facts.called[0].ok"),
        // Closed objects: a key the schema does not name, refused rather than ignored.
        ("unknown_call_field.json", "calls[0].arguments"),
        ("unknown_message_field.json", "facts.messages[0].role"),
        ("unknown_called_field.json", "facts.called[0].name"),
    ] {
        match coach.decide_json(&read(file)) {
            Err(RequestError::Schema { path: got, .. }) => assert_eq!(got, path, "{file}"),
            other => panic!("{file}: expected a schema error at {path}, got {other:?}"),
        }
    }
    // 500 calls, one decision each, in order.
    let r = coach.decide_json(&read("many_calls.json")).unwrap();
    assert_eq!(r.decisions.len(), 500);
}

// ---- properties --------------------------------------------------------------------------

/// JSON text with a nesting depth anywhere from 0 to well past serde_json's limit of 128.
fn nested(depth: usize, objects: bool, inner: &str) -> String {
    let (open, close) = if objects {
        ("{\"k\":", "}")
    } else {
        ("[", "]")
    };
    format!("{}{inner}{}", open.repeat(depth), close.repeat(depth))
}

fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        (1usize..600, any::<bool>()).prop_map(|(n, neg)| format!(
            "{}1{}",
            if neg { "-" } else { "" },
            "0".repeat(n)
        )),
        (-800i32..800).prop_map(|e| format!("1e{e}")),
        Just("-0".to_string()),
        Just("0.0000000000000000000000000000000000001".to_string()),
    ]
}

/// A JSON value as text: right-typed or not, deep or not, long or not.
fn value_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        number_text(),
        "[a-z_]{0,8}".prop_map(|s| json!(s).to_string()),
        (1usize..3000).prop_map(|n| json!("x".repeat(n)).to_string()),
        ".{0,6}".prop_map(|s| json!(s).to_string()),
        (
            0usize..300,
            any::<bool>(),
            prop_oneof![number_text(), Just("\"image\"".to_string())]
        )
            .prop_map(|(d, o, inner)| nested(d, o, &inner)),
        Just("[]".to_string()),
        Just("{}".to_string()),
    ]
}

/// A request with every standard field set to a generated value (often the wrong type).
fn request_text() -> impl Strategy<Value = String> {
    let tool = prop::sample::select(vec![
        "\"grade_attempt\"",
        "\"fetch_vendor_doc\"",
        "\"authorise_bacs_payout\"",
        "\"confirm_payment\"",
        "\"nope\"",
    ])
    .prop_map(String::from);
    (
        prop_oneof![
            Just("\"coach\"".to_string()),
            Just("\"chat\"".to_string()),
            value_text()
        ],
        prop_oneof![Just("1".to_string()), value_text()],
        prop_oneof![Just("false".to_string()), value_text()],
        prop_oneof![
            Just("[{\"from\":\"client\",\"media\":[\"image\"]}]".to_string()),
            value_text()
        ],
        prop_oneof![Just("{\"phone\":\"1\"}".to_string()), value_text()],
        prop::collection::vec(
            (prop_oneof![tool, value_text()], value_text(), value_text()),
            0..4,
        ),
    )
        .prop_map(|(stage, turns, latched, messages, fields, calls)| {
            let calls: Vec<String> = calls
                .iter()
                .enumerate()
                .map(|(i, (t, a, u))| {
                    format!(
                        "{{\"id\":\"c{i}\",\"tool\":{t},\"args\":{{\"url\":{u},\"amount\":{a}}}}}"
                    )
                })
                .collect();
            format!(
                "{{\"facts\":{{\"stage\":{stage},\"stage_turns\":{turns},\"latched\":{latched},\
                 \"messages\":{messages},\"fields\":{fields}}},\"calls\":[{}]}}",
                calls.join(",")
            )
        })
}

proptest! {
    #![proptest_config(proptest_config(256))]

    /// The parser and compiler never panic on arbitrary bytes (read as lossy UTF-8), and a
    /// failure always carries an error that renders with the file name.
    #[test]
    fn the_parser_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(d) = toolgate_lang::parse(&text) {
            prop_assert!(d.iter().any(|d| d.is_error()));
        }
        check_compile("bytes.gate", &text).map_err(TestCaseError::fail)?;
    }

    /// The same for arbitrary text after a valid header, so the fuzz reaches declarations.
    #[test]
    fn the_parser_never_panics_after_a_valid_header(tail in "\\PC{0,300}") {
        let text = format!("module m\nwrite w\nstage s {{ tools [w] }}\n{tail}");
        check_compile("tail.gate", &text).map_err(TestCaseError::fail)?;
    }

    /// decide_json never panics on generated requests with deep nesting, huge numbers, long
    /// strings and wrong types, and returns a well-formed response or a located error.
    #[test]
    fn decide_json_returns_a_decision_or_a_located_error(text in request_text()) {
        for policy in examples() {
            check_request(policy, &text).map_err(TestCaseError::fail)?;
        }
    }

    /// A standard fact of the wrong type is rejected, naming that fact; never defaulted.
    #[test]
    fn a_wrong_typed_standard_fact_names_its_path(
        field in prop::sample::select(vec![
            ("stage", "facts.stage"),
            ("stage_turns", "facts.stage_turns"),
            ("latched", "facts.latched"),
            ("messages", "facts.messages"),
            ("fields", "facts.fields"),
            ("called", "facts.called"),
        ]),
        wrong in prop_oneof![
            Just(json!("text")),
            Just(json!(-3)),
            Just(json!(2.5)),
            Just(json!([1])),
            Just(json!({"k": 1})),
            Just(json!(true)),
        ],
    ) {
        let (key, path) = field;
        let fits = match key {
            "stage" => wrong.is_string(),
            "stage_turns" => wrong.is_u64(),
            "latched" => wrong.is_boolean(),
            "messages" | "called" => false, // [1] holds a non-object item
            "fields" => wrong.is_object(),
            _ => unreachable!(),
        };
        let text = json!({"facts": {key: wrong}, "calls": []}).to_string();
        match Request::from_json(&text) {
            Ok(_) => prop_assert!(fits, "{} accepted {}", key, wrong),
            Err(RequestError::Schema { path: got, .. }) => {
                prop_assert!(!fits, "{} rejected {}", key, wrong);
                prop_assert!(got.starts_with(path), "{} reported at {}", path, got);
            }
            Err(e) => prop_assert!(false, "{}: {}", key, e),
        }
    }
}
