//! The equivalence gate as a test, so CI can smoke it in debug mode: every engine gives the
//! same `allow | rule id` on every case, and the expected answer where the case has one.

use toolgate_bench::cases;
use toolgate_bench::equivalence::check_all;
use toolgate_bench::verdict::Verdict;

#[test]
fn all_engines_agree_on_every_case() {
    let all = cases::all();
    let summary = check_all(&all).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{summary:?}");
    assert_eq!(summary.cases, all.len());
    assert!(summary.cases >= 500, "only {} cases", summary.cases);
    assert!(summary.allowed > 50 && summary.denied > 50, "{summary:?}");
}

#[test]
fn hand_written_cases_cover_every_verdict() {
    let seen: std::collections::BTreeSet<Verdict> = cases::hand_written()
        .into_iter()
        .flat_map(|d| d.expected.unwrap_or_default())
        .collect();
    assert_eq!(seen.len(), Verdict::ALL.len(), "{seen:?}");
}

#[test]
fn a_wrong_expectation_is_reported_with_the_case() {
    let mut doc = cases::hand_written().remove(0);
    doc.expected = Some(vec![Verdict::Allow]);
    let err = check_all(&[doc]).expect_err("must disagree").to_string();
    assert!(err.contains("unknown tool"), "{err}");
    assert!(err.contains("R1_stage_whitelist"), "{err}");
}
