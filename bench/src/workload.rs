//! The workload's vocabulary, shared by the case generator and the scaling policy.

/// Write tools.
pub const WRITE: [&str; 6] = [
    "authorise_bacs_payout",
    "update_claim_notes",
    "update_memory",
    "grade_attempt",
    "schedule_review",
    "send_email",
];
/// Ingest tools.
pub const INGEST: [&str; 4] = [
    "search_aws_docs",
    "search_cloudflare_docs",
    "web_fetch",
    "query_policy_handbook_rag",
];
/// Read tools.
pub const READ: [&str; 10] = [
    "verify_identity",
    "lookup_lesson",
    "get_progress",
    "get_claim",
    "get_policy_document",
    "list_claim_documents",
    "get_customer_profile",
    "check_payment_status",
    "get_vehicle_details",
    "lookup_ncd_years",
];
/// The four stages.
pub const STAGES: [&str; 4] = [
    "intake_claim",
    "ncd_policy_faq",
    "tier_auto_payout",
    "coach",
];

/// The whitelist of a stage (empty for an unknown one).
pub fn whitelist(stage: &str) -> &'static [&'static str] {
    match stage {
        "ncd_policy_faq" => &["query_policy_handbook_rag"],
        "tier_auto_payout" => &["authorise_bacs_payout", "verify_identity"],
        "coach" => &[
            "update_memory",
            "grade_attempt",
            "schedule_review",
            "search_aws_docs",
            "search_cloudflare_docs",
            "web_fetch",
            "lookup_lesson",
            "get_progress",
        ],
        _ => &[],
    }
}

/// Every classified tool.
pub fn all_tools() -> impl Iterator<Item = &'static str> {
    WRITE.into_iter().chain(INGEST).chain(READ)
}

/// True for a write tool.
pub fn is_write(tool: &str) -> bool {
    WRITE.contains(&tool)
}

/// True for an ingest tool.
pub fn is_ingest(tool: &str) -> bool {
    INGEST.contains(&tool)
}
