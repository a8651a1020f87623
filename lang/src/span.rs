//! Byte spans into a policy source and their translation to lines and columns.

use std::fmt;

/// A half-open byte range `start..end` into a policy source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// First byte of the range.
    pub start: usize,
    /// One past the last byte of the range.
    pub end: usize,
}

impl Span {
    /// Makes a span from two byte offsets.
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }

    /// Translates a pest span into ours, shifted by `base` bytes.
    pub(crate) fn from_pest(span: pest::Span<'_>, base: usize) -> Self {
        Span::new(span.start() + base, span.end() + base)
    }
}

/// A one-based line and column (counted in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineCol {
    /// One-based line number.
    pub line: usize,
    /// One-based column, counted in Unicode scalar values.
    pub col: usize,
}

impl fmt::Display for LineCol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A named policy source: what diagnostics are rendered against.
///
/// It may hold several files one after another (a policy, then the modules it imports: see
/// [`SourceFile::push_part`]); spans are byte offsets into the whole, and each offset is
/// reported against the file it falls in, with that file's own lines and columns.
#[derive(Debug, Clone)]
pub struct SourceFile {
    name: String,
    text: String,
    line_starts: Vec<usize>,
    /// Files appended after the first: (start offset, index of its first line, name).
    parts: Vec<(usize, usize, String)>,
}

impl SourceFile {
    /// Wraps `text` read from `name` (a path, or a label such as `<stdin>`).
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceFile {
            name: name.into(),
            text,
            line_starts,
            parts: Vec::new(),
        }
    }

    /// Appends another file (an imported module) on a fresh line and returns the byte offset
    /// where it starts: parse it with [`crate::parse_at`] at that offset.
    pub fn push_part(&mut self, name: impl Into<String>, text: &str) -> usize {
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.text.push('\n');
            self.line_starts.push(self.text.len());
        }
        let base = self.text.len();
        // The line starting at `base` is already recorded (or is line 0 of an empty text).
        let first_line = self.line_starts.len() - 1;
        self.text.push_str(text);
        self.line_starts
            .extend(text.match_indices('\n').map(|(i, _)| base + i + 1));
        self.parts.push((base, first_line, name.into()));
        base
    }

    /// The file name given at construction.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The text of the first file only (the policy itself, without imported modules).
    pub fn own_text(&self) -> &str {
        let end = self.parts.first().map_or(self.text.len(), |p| p.0);
        &self.text[..end]
    }

    /// The name of the file that byte `offset` falls in.
    pub fn name_at(&self, offset: usize) -> &str {
        self.part_at(offset).map_or(&self.name, |p| &p.2)
    }

    /// `file:line:col` of a byte offset.
    pub fn location(&self, offset: usize) -> String {
        format!("{}:{}", self.name_at(offset), self.line_col(offset))
    }

    fn part_at(&self, offset: usize) -> Option<&(usize, usize, String)> {
        self.parts.iter().rev().find(|p| offset >= p.0)
    }

    /// The zero-based global line index of a (clamped) offset.
    fn line_index(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// The text of the line holding byte `offset`, without its line break, and where it starts.
    pub fn line_at(&self, offset: usize) -> (&str, usize) {
        let i = self.line_index(self.clamp(offset));
        let start = self.line_starts[i];
        (self.line_text(i + 1), start)
    }

    /// The whole source text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The line and column of a byte offset (clamped to the text).
    pub fn line_col(&self, offset: usize) -> LineCol {
        let offset = self.clamp(offset);
        let line = self.line_index(offset);
        let start = self.line_starts[line];
        let col = self.text[start..offset].chars().count() + 1;
        let first = self.part_at(offset).map_or(0, |p| p.1);
        LineCol {
            line: line - first + 1,
            col,
        }
    }

    /// The text of a one-based line of the whole text, without its line break.
    pub fn line_text(&self, line: usize) -> &str {
        let Some(&start) = self.line_starts.get(line.saturating_sub(1)) else {
            return "";
        };
        let end = self
            .line_starts
            .get(line)
            .map_or(self.text.len(), |&next| next - 1);
        self.text[start..end.max(start)].trim_end_matches('\r')
    }

    /// The byte offset where a one-based line starts (the text's end past the last line).
    pub fn line_start(&self, line: usize) -> usize {
        self.line_starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(self.text.len())
    }

    fn clamp(&self, offset: usize) -> usize {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one_and_in_chars() {
        let src = SourceFile::new("t.gate", "ab\nçd\n");
        assert_eq!(src.line_col(0), LineCol { line: 1, col: 1 });
        assert_eq!(src.line_col(3), LineCol { line: 2, col: 1 });
        assert_eq!(src.line_col(5), LineCol { line: 2, col: 2 });
        assert_eq!(src.line_text(2), "çd");
        assert_eq!(src.line_col(999), LineCol { line: 3, col: 1 });
    }

    #[test]
    fn appended_parts_keep_their_own_names_and_lines() {
        let mut src = SourceFile::new("a.gate", "module a\nread x");
        let base = src.push_part("stdlib::m", "module m\nlatch l {}\n");
        assert_eq!(base, 16);
        assert_eq!(src.own_text(), "module a\nread x\n");
        assert_eq!(src.location(9), "a.gate:2:1");
        assert_eq!(src.location(base + 9), "stdlib::m:2:1");
        assert_eq!(src.line_at(base + 15), ("latch l {}", base + 9));
    }
}
