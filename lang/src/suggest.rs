//! "Did you mean ...?": the one place that decides which declared name a misspelt one was
//! meant to be, for every diagnostic that names an unknown tool, stage, latch or list.

/// The candidate closest to `name`, if one is close enough to be a likely misspelling:
/// a case-insensitive equal, or one within an edit distance (Damerau-Levenshtein: inserts,
/// deletes, substitutions and swaps of adjacent characters) of a third of the name's length
/// (at least 1). Ties go to the alphabetically first candidate, so the hint is stable.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = name.chars().count().max(3) / 3;
    candidates
        .into_iter()
        .filter(|c| *c != name && c.len().abs_diff(name.len()) <= limit * 4)
        .filter_map(|c| {
            let d = if c.eq_ignore_ascii_case(name) {
                0
            } else {
                strsim::damerau_levenshtein(name, c)
            };
            (d <= limit).then_some((d, c))
        })
        .min()
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::did_you_mean;

    #[test]
    fn suggests_close_names_only() {
        let tools = ["send_email", "lookup_patient", "authorise_bacs_payout"];
        assert_eq!(did_you_mean("send_emails", tools), Some("send_email"));
        assert_eq!(did_you_mean("Send_Email", tools), Some("send_email"));
        assert_eq!(
            did_you_mean("lookup_pateint", tools),
            Some("lookup_patient")
        );
        assert_eq!(
            did_you_mean("authorise_bac_payout", tools),
            Some("authorise_bacs_payout")
        );
        assert_eq!(did_you_mean("delete_everything", tools), None);
        assert_eq!(did_you_mean("x", tools), None);
        assert_eq!(
            did_you_mean("send_email", tools),
            None,
            "an exact name is not a misspelling"
        );
        assert_eq!(did_you_mean("ab", ["ac", "ab_long"]), Some("ac"));
    }
}
