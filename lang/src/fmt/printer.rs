//! The line printer behind `format_source`: emits indented lines and places every comment.
//!
//! Each emitted line covers a byte range of the source. Comments are kept in a queue sorted
//! by position and placed as the lines go out:
//!
//! - a comment before a line's range goes on its own line above it (a leading comment);
//! - a comment inside a line's range (say, between two tokens of one condition) cannot stay
//!   there, because the line is rebuilt; it also goes above the line;
//! - a comment after the range, on the same source line and before the next thing printed,
//!   stays at the end of the line (a trailing comment).
//!
//! So every comment is printed exactly once, and a second run finds each one where the first
//! run put it: a leading comment stays leading and a trailing one trailing.

use crate::fmt::comments::Comment;

/// Two spaces per level, as in the examples and the docs.
const INDENT: &str = "  ";

/// Builds the formatted text.
pub(crate) struct Printer<'a> {
    src: &'a str,
    comments: Vec<Comment>,
    /// Index of the first comment not yet printed.
    next: usize,
    out: String,
    /// Source offset just past the last token or comment printed.
    last_end: usize,
    /// True right after a line that opens a block or list: no blank line may follow.
    at_open: bool,
}

/// Where a line's content lies in the source, for placing comments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Range {
    /// Start of the first token on the line.
    pub start: usize,
    /// End of the last token on the line.
    pub end: usize,
    /// Start of the next token printed after this line: a trailing comment must precede it.
    pub next: usize,
}

impl<'a> Printer<'a> {
    /// A printer over `src` with its comments (sorted by position).
    pub fn new(src: &'a str, comments: Vec<Comment>) -> Self {
        Printer {
            src,
            comments,
            next: 0,
            out: String::new(),
            last_end: 0,
            at_open: true,
        }
    }

    /// Whether a comment starts strictly between `open` and `close`.
    pub fn has_comment_between(&self, open: usize, close: usize) -> bool {
        self.comments[self.next..]
            .iter()
            .any(|c| c.start > open && c.start < close)
    }

    /// The first occurrence of `ch` at or after `from` that is not inside a comment. Only
    /// used between tokens, where nothing else (no string) can hold the character.
    pub fn find_outside_comments(&self, from: usize, ch: char) -> usize {
        let mut pos = from;
        while let Some(off) = self.src.get(pos..).and_then(|s| s.find(ch)) {
            let at = pos + off;
            match self.comments.iter().find(|c| c.start <= at && at < c.end) {
                Some(c) => pos = c.end,
                None => return at,
            }
        }
        self.src.len()
    }

    /// Emits one blank line, unless the output is empty, already ends with one, or a block
    /// was just opened.
    pub fn blank(&mut self) {
        if !self.at_open && !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    /// True when the source between `a` and `b` contains an empty line.
    pub fn has_blank_between(&self, a: usize, b: usize) -> bool {
        let Some(gap) = self.src.get(a.min(b)..b) else {
            return false;
        };
        let pieces: Vec<&str> = gap.split('\n').collect();
        pieces.len() > 2
            && pieces[1..pieces.len() - 1]
                .iter()
                .any(|p| p.trim().is_empty())
    }

    fn push_line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str(INDENT);
        }
        self.out.push_str(text);
        self.out.push('\n');
        self.at_open = false;
    }

    /// Prints, on their own lines at `depth`, every pending comment that starts before
    /// `upto`. With `keep_blanks`, an empty line written before a comment is kept (one at
    /// most).
    pub fn leading(&mut self, depth: usize, upto: usize, keep_blanks: bool) {
        while let Some(c) = self.comments.get(self.next) {
            if c.start >= upto {
                break;
            }
            let c = c.clone();
            if keep_blanks && self.has_blank_between(self.last_end, c.start) {
                self.blank();
            }
            self.push_line(depth, &c.text);
            self.last_end = self.last_end.max(c.end);
            self.next += 1;
        }
    }

    /// Prints `text` at `depth` as the rendering of the source range `r`, with the comments
    /// before and inside the range above it and a trailing comment after it. With
    /// `keep_blanks`, an empty line written before the construct is kept (one at most).
    pub fn line(&mut self, depth: usize, text: &str, r: Range, keep_blanks: bool) {
        self.leading(depth, r.start, keep_blanks);
        if keep_blanks && self.has_blank_between(self.last_end, r.start) {
            self.blank();
        }
        self.leading(depth, r.end, false);
        let mut line = text.to_string();
        self.last_end = self.last_end.max(r.end);
        if let Some(c) = self.comments.get(self.next) {
            let same_line = self
                .src
                .get(r.end..c.start)
                .is_some_and(|gap| !gap.contains('\n'));
            if c.start >= r.end && c.start < r.next && same_line {
                line.push_str("  ");
                line.push_str(&c.text);
                self.last_end = c.end;
                self.next += 1;
            }
        }
        self.push_line(depth, &line);
    }

    /// Like [`Printer::line`], for a line that opens a block or list: nothing blank follows.
    pub fn open_line(&mut self, depth: usize, text: &str, r: Range, keep_blanks: bool) {
        self.line(depth, text, r, keep_blanks);
        self.mark_open();
    }

    /// Records that the last line opened a block or list, so no blank line may follow it.
    pub fn mark_open(&mut self) {
        self.at_open = true;
    }

    /// Where the tokens of a construct spanning `start..end` really end: pest lets a rule that
    /// ends in a repetition (`write a, b`, a condition) swallow the whitespace and comments
    /// after it, which belong to the layout around it.
    pub fn token_end(&self, start: usize, end: usize) -> usize {
        let mut e = end;
        loop {
            let trimmed = self.source(start, e).trim_end().len();
            e = start + trimmed;
            match self
                .comments
                .iter()
                .find(|c| c.start >= start && c.start < e && c.end >= e)
            {
                Some(c) => e = c.start,
                None => return e,
            }
        }
    }

    /// The source text between two offsets.
    pub fn source(&self, start: usize, end: usize) -> &'a str {
        self.src.get(start..end).unwrap_or("")
    }

    /// Closes a block or list whose closing token is at `r.start`: the comments still
    /// pending inside it go at `depth + 1`, then `text` at `depth`. Comments between the
    /// closing token and the end of the line (`] # c {`) go inside too, where a second run
    /// will find them.
    pub fn close_line(&mut self, depth: usize, text: &str, r: Range) {
        self.leading(depth + 1, r.start, true);
        self.leading(depth + 1, r.end, false);
        self.line(depth, text, r, false);
    }

    /// Copies a construct the formatter does not know verbatim, dropping the comments
    /// inside it from the queue (they are part of the copied text).
    pub fn verbatim(&mut self, r: Range, keep_blanks: bool) {
        self.leading(0, r.start, keep_blanks);
        if keep_blanks && self.has_blank_between(self.last_end, r.start) {
            self.blank();
        }
        while self
            .comments
            .get(self.next)
            .is_some_and(|c| c.start < r.end)
        {
            self.next += 1;
        }
        let text = self.src.get(r.start..r.end).unwrap_or("").to_string();
        for l in text.lines() {
            self.push_line(0, l.trim_end());
        }
        self.last_end = r.end;
    }

    /// Prints the comments left at the end of the file and returns the text.
    pub fn finish(mut self) -> String {
        self.leading(0, usize::MAX, true);
        self.out
    }
}
