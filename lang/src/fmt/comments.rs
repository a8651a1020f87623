//! Finding the `//` and `#` comments of a policy source, which the grammar skips.
//!
//! The grammar treats comments as whitespace, so they are not in the parse tree. They can
//! only sit between tokens, never inside a string or a path, so a scan that skips the
//! source's string literals finds exactly the comments the parser skipped.

/// One comment as written, from its `//` or `#` to the end of its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Comment {
    /// Byte offset of the `//` or `#`.
    pub start: usize,
    /// Byte offset just past the comment text (the `\n` or the end of the source).
    pub end: usize,
    /// The comment text with trailing whitespace removed.
    pub text: String,
}

/// The comments of `src`, in source order. `strings` are the byte ranges of every string
/// literal in the parse tree, sorted by start; comment markers inside them are not comments.
pub(crate) fn scan(src: &str, strings: &[(usize, usize)]) -> Vec<Comment> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut next_string = 0;
    let mut i = 0;
    while i < bytes.len() {
        while next_string < strings.len() && strings[next_string].1 <= i {
            next_string += 1;
        }
        if let Some(&(s, e)) = strings.get(next_string) {
            if s <= i {
                i = e;
                continue;
            }
        }
        let starts_comment =
            bytes[i] == b'#' || (bytes[i] == b'/' && bytes.get(i + 1) == Some(&b'/'));
        if starts_comment {
            let end = src[i..].find('\n').map_or(src.len(), |n| i + n);
            out.push(Comment {
                start: i,
                end,
                text: src[i..end].trim_end().to_string(),
            });
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_markers_inside_strings() {
        let src = "module m # one\nwrite \"a#b//c\" // two\n";
        let s = src.find('"').unwrap_or(0);
        let e = src[s + 1..].find('"').map_or(0, |n| s + n + 2);
        let found: Vec<String> = scan(src, &[(s, e)]).into_iter().map(|c| c.text).collect();
        assert_eq!(found, vec!["# one", "// two"]);
    }

    #[test]
    fn comment_at_end_of_file_without_newline() {
        let found = scan("module m //x  ", &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].text, "//x");
        assert_eq!(found[0].end, 14);
    }
}
