//! "Did you mean": the declared name closest to a name nobody declared.
//!
//! Used wherever a name the author or the executor wrote must match a declared one (latch
//! names in requests, tools and stages in policies), so a typo is refused with the likely fix
//! instead of silently matching nothing.

/// The candidate closest to `name`, if one is close enough to be a likely typo: a different
/// case only, or an edit distance (Damerau-Levenshtein, so a swapped pair counts once) of at
/// most a third of the name's length, and at least 1.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| {
            let distance = if c.eq_ignore_ascii_case(name) {
                0
            } else {
                strsim::damerau_levenshtein(name, c)
            };
            (distance, c)
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn close_names_are_suggested_and_far_ones_are_not() {
        let names = ["untrusted", "manual_review", "send_email"];
        assert_eq!(closest("Untrusted", names), Some("untrusted"));
        assert_eq!(closest("manual_reveiw", names), Some("manual_review"));
        assert_eq!(closest("send_emails", names), Some("send_email"));
        assert_eq!(closest("zzz", names), None);
        assert_eq!(closest("refund", names), None);
        assert_eq!(closest("untrusted", names), None);
    }
}
