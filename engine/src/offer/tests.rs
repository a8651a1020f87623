#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::wire::request::{Call, Latched, Message, Request};
use crate::wire::response::DenyKind;
use serde_json::json;

const MOTOR: &str = include_str!("../../../stdlib-rules/examples/motor_claims.gate");
const COACH: &str = include_str!("../../../stdlib-rules/examples/coach.gate");
const MESSENGER: &str = include_str!("../../../stdlib-rules/examples/messenger_payments.gate");

fn compile(name: &str, src: &str) -> Policy {
    Policy::compile(name, src).unwrap()
}

fn def(name: &str) -> ToolDef {
    ToolDef::new(
        name,
        format!("The {name} tool."),
        json!({"type": "object", "properties": {"x": {"type": "string"}}}),
    )
}

fn defs(names: &[&str]) -> Vec<ToolDef> {
    names.iter().map(|n| def(n)).collect()
}

fn names(tools: &[ToolDef]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

fn withheld<'a>(offer: &'a Offer, name: &str) -> &'a WithheldTool {
    offer
        .withheld
        .iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("{name} is not withheld: {offer:?}"))
}

fn described<'a>(offer: &'a Offer, name: &str) -> &'a str {
    offer
        .tools
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| t.description.as_deref())
        .unwrap_or_else(|| panic!("{name} is not offered with a description: {offer:?}"))
}

const MOTOR_TOOLS: &[&str] = &[
    "lookup_policy_faq",
    "authorise_bacs_payout",
    "update_claim_notes",
    "query_policy_handbook_rag",
];

#[test]
fn intake_offers_no_tool_at_all() {
    let policy = compile("motor.gate", MOTOR);
    let offer = policy.offer(&Facts::in_stage("intake_claim"), &defs(MOTOR_TOOLS));
    assert!(offer.tools.is_empty(), "{offer:?}");
    assert_eq!(offer.withheld.len(), MOTOR_TOOLS.len());
    for w in &offer.withheld {
        assert_eq!(w.reason, WithheldReason::NotInStage);
        assert!(w.detail.contains("`intake_claim`"), "{}", w.detail);
    }
    assert_eq!(offer.policy.as_ref(), "motor_claims");
    assert_eq!(offer.revision.as_ref(), policy.revision());
}

#[test]
fn payout_stage_offers_its_tools_in_executor_order_with_schemas_unchanged() {
    let policy = compile("motor.gate", MOTOR);
    let mut tools = defs(MOTOR_TOOLS);
    tools[1]
        .extra
        .insert("cache_control".into(), json!({"type": "ephemeral"}));
    let offer = policy.offer(&Facts::in_stage("tier_auto_payout"), &tools);
    assert_eq!(
        names(&offer.tools),
        ["lookup_policy_faq", "authorise_bacs_payout"]
    );
    assert_eq!(offer.tools[1].input_schema, tools[1].input_schema);
    assert_eq!(offer.tools[1].extra, tools[1].extra);
    // A tool with no rules and no latch to mention keeps its description exactly.
    assert_eq!(offer.tools[0], tools[0]);
    let payout = described(&offer, "authorise_bacs_payout");
    assert!(payout.starts_with("The authorise_bacs_payout tool.\n\nHARD REQUIREMENT: this function will refuse to run unless all of these hold: (1) `args.amount` must be a number and `args.amount` must be more than 0 and `args.amount` must be at most 250; (2) `args.policy` must be \"POL-\" followed by 6 digits. Do not claim the action happened until the call succeeds."), "{payout}");
    assert_eq!(
        offer
            .withheld
            .iter()
            .map(|w| (w.name.as_str(), w.reason))
            .collect::<Vec<_>>(),
        [
            ("update_claim_notes", WithheldReason::NotInStage),
            ("query_policy_handbook_rag", WithheldReason::NotInStage)
        ]
    );
}

#[test]
fn a_precondition_reads_as_the_seed_does() {
    let policy = compile("m.gate", MESSENGER);
    let offer = policy.offer(
        &Facts::in_stage("chat"),
        &defs(&["confirm_payment", "notify_owner"]),
    );
    assert_eq!(
        described(&offer, "confirm_payment"),
        "The confirm_payment tool.\n\nHARD REQUIREMENT: this function will refuse to run unless this holds: the customer must have sent an image/document attachment in their last 10 messages. Do not claim the action happened until the call succeeds."
    );
    assert_eq!(described(&offer, "notify_owner"), "The notify_owner tool.");
}

#[test]
fn missing_unknown_and_exhausted_stages_offer_nothing() {
    let policy = compile("motor.gate", MOTOR);
    let tools = defs(&["query_policy_handbook_rag"]);

    let none = policy.offer(&Facts::default(), &tools);
    assert!(none.tools.is_empty());
    assert_eq!(
        withheld(&none, "query_policy_handbook_rag").reason,
        WithheldReason::NoStage
    );

    let unknown = policy.offer(&Facts::in_stage("payday"), &tools);
    assert!(unknown.tools.is_empty());
    let w = withheld(&unknown, "query_policy_handbook_rag");
    assert_eq!(w.reason, WithheldReason::UnknownStage);
    assert!(w.detail.contains("`payday`"));

    let mut facts = Facts::in_stage("ncd_policy_faq");
    facts.stage_turns = Some(2);
    assert_eq!(
        names(&policy.offer(&facts, &tools).tools),
        ["query_policy_handbook_rag"]
    );
    facts.stage_turns = Some(3);
    let used = policy.offer(&facts, &tools);
    assert!(used.tools.is_empty());
    assert_eq!(
        withheld(&used, "query_policy_handbook_rag").reason,
        WithheldReason::TurnsUsedUp
    );
}

#[test]
fn unclassified_and_duplicate_tools_are_withheld() {
    let policy = compile("coach.gate", COACH);
    let tools = defs(&["lookup_lesson", "delete_everything", "lookup_lesson"]);
    let offer = policy.offer(&Facts::in_stage("coach"), &tools);
    assert_eq!(names(&offer.tools), ["lookup_lesson"]);
    assert_eq!(
        withheld(&offer, "delete_everything").reason,
        WithheldReason::Unclassified
    );
    assert_eq!(
        withheld(&offer, "lookup_lesson").reason,
        WithheldReason::Duplicate
    );
}

#[test]
fn latched_writes_stay_offered_but_say_they_are_disabled() {
    let policy = compile("coach.gate", COACH);
    let tools = defs(&["grade_attempt", "search_aws_docs", "get_learner_state"]);
    let facts = Facts {
        stage: Some("coach".into()),
        latched: Latched::Flag(true),
        ..Facts::default()
    };
    let offer = policy.offer(&facts, &tools);
    assert_eq!(
        names(&offer.tools),
        ["grade_attempt", "search_aws_docs", "get_learner_state"]
    );
    assert_eq!(
        offer.disabled,
        [DisabledTool {
            name: "grade_attempt".into(),
            latch: "documentation_read".into()
        }]
    );
    let grade = described(&offer, "grade_attempt");
    assert!(
        grade.starts_with("DISABLED FOR THIS TURN: latch `documentation_read` is set"),
        "{grade}"
    );
    // The author's own refusal text explains why, and the executor's text follows it.
    assert!(
        grade.contains("this turn has read vendor documentation"),
        "{grade}"
    );
    assert!(grade.ends_with("\n\nThe grade_attempt tool."), "{grade}");
    assert_eq!(
        described(&offer, "search_aws_docs"),
        "The search_aws_docs tool."
    );

    // The map form names the latch; a set flag under an undeclared name sets every latch
    // (unsure which it meant, the offer assumes all, as `decide` does), and the request
    // readers refuse the name.
    let by_name = |name: &str| Facts {
        stage: Some("coach".into()),
        latched: Latched::ByName([(name.into(), true)].into()),
        ..Facts::default()
    };
    assert_eq!(
        policy
            .offer(&by_name("documentation_read"), &tools)
            .disabled
            .len(),
        1
    );
    assert_eq!(policy.offer(&by_name("other"), &tools).disabled.len(), 1);
    assert!(policy.check_facts(&by_name("other")).is_err());
    let cleared = Facts {
        latched: Latched::ByName([("documentation_read".into(), false)].into()),
        ..by_name("documentation_read")
    };
    assert!(policy.offer(&cleared, &tools).disabled.is_empty());
}

#[test]
fn before_the_latch_is_set_writes_warn_about_the_offered_setters_only() {
    let policy = compile("coach.gate", COACH);
    let tools = defs(&["grade_attempt", "search_aws_docs", "lookup_lesson"]);
    let offer = policy.offer(&Facts::in_stage("coach"), &tools);
    assert!(offer.disabled.is_empty());
    let grade = described(&offer, "grade_attempt");
    assert!(grade.contains("NOTE: once this turn calls `search_aws_docs`, this function is disabled until the user's next message (latch `documentation_read`)"), "{grade}");
    // Setters the executor did not list are never named to the model.
    assert!(!grade.contains("search_cloudflare_docs"), "{grade}");
    // Without an offered setter there is nothing to warn about.
    let quiet = policy.offer(&Facts::in_stage("coach"), &defs(&["grade_attempt"]));
    assert_eq!(
        described(&quiet, "grade_attempt"),
        "The grade_attempt tool."
    );
}

#[test]
fn a_tool_without_description_gets_only_the_policy_text() {
    let policy = compile("m.gate", MESSENGER);
    let tools = vec![
        ToolDef {
            name: "issue_invoice".into(),
            description: None,
            input_schema: None,
            extra: Map::new(),
        },
        ToolDef {
            name: "notify_owner".into(),
            description: None,
            input_schema: None,
            extra: Map::new(),
        },
    ];
    let offer = policy.offer(&Facts::in_stage("chat"), &tools);
    assert!(described(&offer, "issue_invoice").starts_with("HARD REQUIREMENT: this function will refuse to run unless this holds: the `phone` field must be filled in."));
    assert_eq!(offer.tools[1].description, None);
}

/// What is offered and what `decide` allows agree: a withheld tool is denied by stage or
/// class, a disabled one by its latch, and an offered one by neither.
#[test]
fn offer_agrees_with_decide() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "motor",
            MOTOR,
            &[
                "intake_claim",
                "ncd_policy_faq",
                "tier_auto_payout",
                "tier_adjuster_review",
                "nowhere",
            ],
        ),
        ("coach", COACH, &["coach"]),
        ("messenger", MESSENGER, &["chat", "nowhere"]),
    ];
    for (name, src, stages) in cases {
        let policy = compile(name, src);
        let mut all: Vec<ToolDef> = policy.tools().map(|(n, _)| def(n)).collect();
        all.push(def("not_a_tool"));
        let stage_facts = stages.iter().map(|s| Some(s.to_string())).chain([None]);
        for stage in stage_facts {
            for (latched, turns) in [(false, None), (true, None), (false, Some(5))] {
                let facts = Facts {
                    stage: stage.clone(),
                    stage_turns: turns,
                    latched: Latched::Flag(latched),
                    messages: Some(vec![Message::new("client", &["image"])]),
                    ..Facts::default()
                };
                let offer = policy.offer(&facts, &all);
                assert_eq!(offer.tools.len() + offer.withheld.len(), all.len());
                for tool in &all {
                    let request = Request::new(
                        facts.clone(),
                        vec![Call::new("c", tool.name.clone(), json!({}))],
                    );
                    let decision = &policy.decide(&request).decisions[0];
                    let offered = offer.tools.iter().any(|t| t.name == tool.name);
                    let disabled = offer.disabled.iter().any(|d| d.name == tool.name);
                    let ctx = format!("{name} {facts:?} {}: {decision:?}", tool.name);
                    if !offered {
                        assert!(
                            matches!(
                                decision.kind,
                                Some(DenyKind::Stage | DenyKind::Unclassified)
                            ),
                            "{ctx}"
                        );
                    } else if disabled {
                        assert_eq!(decision.kind, Some(DenyKind::Latch), "{ctx}");
                    } else {
                        assert!(
                            !matches!(
                                decision.kind,
                                Some(DenyKind::Stage | DenyKind::Unclassified | DenyKind::Latch)
                            ),
                            "{ctx}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn offer_requests_read_from_json_name_the_field_at_fault() {
    let ok = OfferRequest::from_json(
        r#"{"policy": "coach", "session": "s", "turn": "t",
            "facts": {"stage": "coach", "latched": true},
            "tools": [{"name": "a", "description": "d", "input_schema": {"type": "object"}, "strict": true}]}"#,
    )
    .unwrap();
    assert_eq!(ok.policy.as_deref(), Some("coach"));
    assert_eq!(ok.session.as_deref(), Some("s"));
    assert_eq!(ok.turn.as_deref(), Some("t"));
    assert_eq!(ok.facts.latched, Latched::Flag(true));
    assert_eq!(ok.tools[0].extra.get("strict"), Some(&json!(true)));

    let path_of = |text: &str| match OfferRequest::from_json(text) {
        Err(RequestError::Schema { path, .. }) => path,
        other => panic!("{text}: {other:?}"),
    };
    assert_eq!(path_of(r#"{"facts": {}}"#), "tools");
    assert_eq!(path_of(r#"{"tools": {}}"#), "tools");
    assert_eq!(
        path_of(r#"{"tools": [{"name": "a"}, {"description": "x"}]}"#),
        "tools[1].name"
    );
    assert_eq!(path_of(r#"{"tools": [{"name": ""}]}"#), "tools[0].name");
    assert_eq!(
        path_of(r#"{"tools": [{"name": "a", "description": 3}]}"#),
        "tools[0].description"
    );
    assert_eq!(
        path_of(r#"{"tools": [{"name": "a", "input_schema": "x"}]}"#),
        "tools[0].input_schema"
    );
    assert_eq!(path_of(r#"{"tools": [7]}"#), "tools[0]");
    assert_eq!(path_of(r#"{"tools": [], "calls": []}"#), "calls");
    assert_eq!(
        path_of(r#"{"tools": [], "facts": {"stage": 1}}"#),
        "facts.stage"
    );
    assert_eq!(
        path_of(r#"{"tools": [], "facts": {"messages": [{}]}}"#),
        "facts.messages[0].from"
    );
    assert!(matches!(
        OfferRequest::from_json("{\"tools\": [,]}"),
        Err(RequestError::Json { line: 1, .. })
    ));
}

#[test]
fn tool_lists_read_as_an_array_or_a_model_request_body() {
    let a = ToolDef::list_from_json(r#"[{"name": "x"}]"#).unwrap();
    let b = ToolDef::list_from_json(r#"{"model": "m", "tools": [{"name": "x"}]}"#).unwrap();
    assert_eq!(a, b);
    assert_eq!(a[0].name, "x");
    match ToolDef::list_from_json(r#"{"model": "m"}"#) {
        Err(RequestError::Schema { path, .. }) => assert_eq!(path, "tools"),
        other => panic!("{other:?}"),
    }
    match ToolDef::list_from_json(r#"[{"name": "x"}, {"name": 1}]"#) {
        Err(RequestError::Schema { path, .. }) => assert_eq!(path, "[1].name"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn offer_json_refuses_another_policy_and_round_trips() {
    let policy = compile("coach.gate", COACH);
    let err = policy
        .offer_json(r#"{"policy": "motor_claims", "tools": []}"#)
        .unwrap_err();
    assert!(matches!(err, RequestError::WrongPolicy { .. }), "{err:?}");
    let offer = policy
        .offer_json(r#"{"facts": {"stage": "coach"}, "tools": [{"name": "lookup_lesson", "input_schema": {"type": "object"}}]}"#)
        .unwrap();
    let text = serde_json::to_string(&offer).unwrap();
    let back: Offer = serde_json::from_str(&text).unwrap();
    assert_eq!(back, offer);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v["tools"][0],
        json!({"name": "lookup_lesson", "input_schema": {"type": "object"}})
    );
    assert_eq!(v["withheld"], json!([]));
}
