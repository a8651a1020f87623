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

/// The optimal-string-alignment distance of two short byte strings (inserts, deletes,
/// substitutions, adjacent swaps), when it is at most `limit`; `None` past it, or when a
/// string is longer than the stack rows hold (32 bytes). It allocates nothing, for callers on
/// a hot path (`toolgate_engine::schema::near_standard_fact`).
pub fn edit_distance_within(a: &[u8], b: &[u8], limit: usize) -> Option<usize> {
    const MAX: usize = 32;
    if a.len() > MAX || b.len() > MAX || a.len().abs_diff(b.len()) > limit {
        return None;
    }
    let mut before = [0usize; MAX + 1];
    let mut prev = [0usize; MAX + 1];
    let mut row = [0usize; MAX + 1];
    for (j, cell) in prev.iter_mut().enumerate().take(b.len() + 1) {
        *cell = j;
    }
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(row[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            row[j] = d;
        }
        before = prev;
        prev = row;
    }
    let d = prev[b.len()];
    (d <= limit).then_some(d)
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

    #[test]
    fn the_stack_distance_agrees_with_the_allocating_one_within_its_limit() {
        use super::edit_distance_within;
        for (a, b) in [
            ("latch", "latched"),
            ("stgae", "stage"),
            ("caled", "called"),
            ("x", "fields"),
            ("", "stage"),
        ] {
            let d = strsim::osa_distance(a, b);
            for limit in 0..4 {
                let want = (d <= limit).then_some(d);
                assert_eq!(
                    edit_distance_within(a.as_bytes(), b.as_bytes(), limit),
                    want,
                    "{a} {b} {limit}"
                );
            }
        }
    }
}
