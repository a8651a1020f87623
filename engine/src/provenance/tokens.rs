//! The distinctive values inside free text: URLs, bare domains, e-mail addresses, IBANs and
//! long numbers. An injected destination hides in a sentence ("send it to
//! mark@evil.example first"); these are what an argument can carry away from one.
//!
//! What a token is, is defined by one regular expression, [`TOKEN`]: the specification. The
//! search itself is a hand-written scanner that finds exactly the regex's matches (the tests
//! below compare the two token for token on generated text), at a fraction of the cost: a
//! regex whose matches may start at almost any letter keeps its lazy DFA busy on every byte,
//! about 2 ns a byte, while most prose holds no token at all. The scanner skips ahead to the
//! next *trigger* byte (a digit, `@`, `:`, or a `.` before a non-space: every token holds
//! one) and tries the regex's alternatives by hand only in the whitespace-delimited chunk
//! around it. A chunk the hand matcher does not cover exactly goes to the regex itself,
//! restricted to that chunk: one longer than [`MAX_CHUNK`] (so hostile text costs linear
//! time), or one holding `ſ` or `K`, the two non-ASCII characters the regex's
//! case-insensitive `[a-z]` also matches.
//!
//! Within a chunk every try is amortised constant time (runs of local-part and label
//! characters, and domain walks, are remembered), so the scan is linear on any text.
//!
//! On the 100 KB inbox of `bench/benches/provenance.rs` (`provenance_cost` example) the whole
//! index went from 4.55 to 0.96 µs per KB with this scanner and the key map of [`super`]; the
//! regex alone had taken about 2 µs per KB of it. On outputs made to be hard to scan (1 MB of
//! one repeated piece such as `a.b.c.d.e.f `) indexing costs at most about 11 µs per KB, the
//! regex's worst was about 15.

use regex::Regex;
use std::sync::LazyLock;

/// The specification of a token. One pass over the text finds every kind; ASCII word
/// boundaries keep it in the regex crate's fast engines on any input. The pattern is a
/// constant: compiling it either always works or never does, and `finds_destinations_in_prose`
/// below compiles it, so the `expect` cannot fire on a request.
#[allow(clippy::expect_used)]
static TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        // A URL with a scheme, or starting `www.`.
        r"(?i:(?:https?://|www\.)[^\s<>()\[\]{}'`]+)",
        // An e-mail address.
        r"|(?i:[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+)",
        // An IBAN, written solid or in groups of four.
        r"|(?-u:\b)[A-Z]{2}[0-9]{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)(?-u:\b)",
        // A bare domain, with an optional path.
        r"|(?-u:\b)(?i:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.[a-z]{2,})(?-u:\b)(?:/[^\s<>()\[\]{}'`]*)?",
        // A long number.
        r"|(?-u:\b)[0-9]{6,}(?-u:\b)",
    ))
    .expect("the token pattern compiles")
});

/// The longest chunk (a run of text between ASCII whitespace) the hand matcher searches: its
/// per-position tries can rescan a chunk, so a longer one goes to the regex, which is linear.
const MAX_CHUNK: usize = 256;

/// How far past its chunk a token may reach, and the bytes it may look at: only an IBAN in
/// groups crosses a space, and it is at most 43 bytes long.
const LOOKAHEAD: usize = 64;

/// Each token in `text`, in order (as written; [`super::key::of`] normalises them): the
/// matches of [`TOKEN`].
pub(crate) fn find(text: &str) -> Tokens<'_> {
    Tokens::new(text, MAX_CHUNK)
}

/// The iterator of [`find`].
pub(crate) struct Tokens<'t> {
    text: &'t str,
    /// Where the search goes on: no token starts in `text[..pos]` that was not returned.
    pos: usize,
    /// The end of the chunk being searched (`pos` at or past it: find the next trigger).
    chunk_end: usize,
    /// Whether that chunk goes to the regex.
    by_regex: bool,
    /// The longest chunk searched by hand.
    max_chunk: usize,
    /// The last run of e-mail local-part characters tried: its start and end, and the end
    /// of the address it begins (`None`: it begins none). Every position in a run ends the
    /// local part at the same place, so a run is read once.
    local: (usize, usize, Option<usize>),
    /// The last run of `[a-z0-9-]` read: its start and end (every start inside ends it there).
    label_run: (usize, usize),
    /// The last domain walk ([`Tokens::domain`]): it passed every label from `.0` up to `.1`,
    /// and `.2` is the last dot in that stretch with a top-level label after it (and where that
    /// label ends). A start inside the stretch walks the rest of it, so its answer is `.2` when
    /// that dot lies after the start, else none: each label is walked once.
    walk: (usize, usize, Option<(usize, usize)>),
}

impl<'t> Tokens<'t> {
    fn new(text: &'t str, max_chunk: usize) -> Self {
        Tokens {
            text,
            pos: 0,
            chunk_end: 0,
            by_regex: false,
            max_chunk,
            local: (0, 0, None),
            label_run: (0, 0),
            walk: (0, 0, None),
        }
    }
}

impl<'t> Iterator for Tokens<'t> {
    type Item = &'t str;

    fn next(&mut self) -> Option<&'t str> {
        let b = self.text.as_bytes();
        loop {
            if self.pos >= self.chunk_end {
                let Some(t) = next_trigger(b, self.pos) else {
                    self.pos = b.len();
                    self.chunk_end = b.len();
                    return None;
                };
                let start = chunk_start(b, self.pos, t);
                let end = chunk_end(b, t);
                self.pos = start;
                self.chunk_end = end;
                self.by_regex = end - start > self.max_chunk || has_fold(&b[start..end]);
            }
            if self.by_regex {
                // Every match starting in the chunk, and everything the regex looks at to find
                // it, lies before `cut`: the regex on `text[..cut]` finds the same ones.
                let mut cut = (self.chunk_end + LOOKAHEAD).min(b.len());
                while !self.text.is_char_boundary(cut) {
                    cut += 1;
                }
                match TOKEN.find_at(&self.text[..cut], self.pos) {
                    Some(m) if m.start() < self.chunk_end => {
                        self.pos = m.end();
                        return Some(m.as_str());
                    }
                    _ => self.pos = self.chunk_end,
                }
                continue;
            }
            while self.pos < self.chunk_end {
                let p = self.pos;
                if let Some(end) = self.match_at(p) {
                    self.pos = end;
                    return Some(&self.text[p..end]);
                }
                self.pos += 1;
            }
        }
    }
}

/// Whether `c` may start a token, or sit in one: a digit, `@`, `:`, `.` (a `.` counts only
/// before a byte that is not ASCII whitespace, see [`next_trigger`]). Arithmetic, not a
/// table, so a block of bytes is tested in vector registers.
fn is_trigger(c: u8) -> bool {
    (c.wrapping_sub(b'0') <= b':' - b'0') | (c == b'@') | (c == b'.')
}

/// The first trigger at or after `from`. Every token holds one in the chunk it starts in: a
/// URL its `:` or the `.` of `www.` (before a character of the URL), an address its `@`, an
/// IBAN its check digits, a domain the `.` before its last label, a number its digits. A `.`
/// before whitespace or at the end (a sentence's full stop) is none of those.
///
/// Prose is skipped 8 bytes at a time: a word of 8 bytes is tested with integer arithmetic
/// ([`lanes`]), and the first trigger is its lowest lane left.
fn next_trigger(b: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    let mut words = b.get(from..)?.chunks_exact(8);
    for word in &mut words {
        let x = u64::from_le_bytes(word.try_into().unwrap_or_default());
        // `.` to `@` holds every trigger (and `/;<=>?`, rare in prose): one test skips a word
        // of prose, and only a word that passes is tested exactly.
        if lanes::range(x, b'.', b'@') != 0 {
            let candidates = lanes::range(x, b'0', b':') | lanes::eq(x, b'@') | lanes::eq(x, b'.');
            // A `.` before whitespace, or at the end of the text, is no trigger.
            let after = b.get(at + 8).is_none_or(u8::is_ascii_whitespace);
            let before_space = (lanes::space(x) >> 8) | (u64::from(after) << 63);
            let found = candidates & !(lanes::eq(x, b'.') & before_space);
            if found != 0 {
                return Some(at + found.trailing_zeros() as usize / 8);
            }
        }
        at += 8;
    }
    words.remainder().iter().enumerate().find_map(|(j, &c)| {
        let i = at + j;
        (is_trigger(c) && (c != b'.' || b.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace())))
            .then_some(i)
    })
}

/// Byte tests on 8 bytes at once, a byte to a lane of a `u64`: each sets the high bit of the
/// lanes whose byte passes, and no other bit. No lane carries into the next, so the answer is
/// exact for every lane.
mod lanes {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const HIGH: u64 = 0x8080_8080_8080_8080;

    fn splat(c: u8) -> u64 {
        u64::from(c) * 0x0101_0101_0101_0101
    }

    /// Lanes below `n` (at most 128): a lane's low seven bits plus `128 - n` reach 128 exactly
    /// when they are `n` or more, and the sum stays under 256; a byte of 128 or more is none.
    pub(super) fn lt(x: u64, n: u8) -> u64 {
        !((x & LOW7) + splat(128 - n)) & !x & HIGH
    }

    /// Lanes equal to `c`.
    pub(super) fn eq(x: u64, c: u8) -> u64 {
        lt(x ^ splat(c), 1)
    }

    /// Lanes from `lo` to `hi` (both at most 127).
    pub(super) fn range(x: u64, lo: u8, hi: u8) -> u64 {
        lt(x, hi + 1) & !lt(x, lo) & HIGH
    }

    /// Lanes of ASCII whitespace: space, tab, line feed, form feed, carriage return.
    pub(super) fn space(x: u64) -> u64 {
        eq(x, b' ') | eq(x, b'\t') | eq(x, b'\n') | eq(x, 0x0C) | eq(x, b'\r')
    }
}

/// The start of the chunk holding `t`, but not before `from`: past the last ASCII whitespace.
fn chunk_start(b: &[u8], from: usize, t: usize) -> usize {
    b[from..t]
        .iter()
        .rposition(u8::is_ascii_whitespace)
        .map_or(from, |i| from + i + 1)
}

/// The end of the chunk holding `t`: the next ASCII whitespace, or the end of the text.
fn chunk_end(b: &[u8], t: usize) -> usize {
    b[t..]
        .iter()
        .position(u8::is_ascii_whitespace)
        .map_or(b.len(), |i| t + i)
}

/// Whether `chunk` holds `ſ` (U+017F) or `K` (U+212A), which the regex's case-insensitive
/// `[a-z]` matches as `s` and `k` (a test checks that no other non-ASCII character does).
fn has_fold(chunk: &[u8]) -> bool {
    !chunk.is_ascii()
        && (chunk.windows(2).any(|w| w == [0xC5, 0xBF])
            || chunk.windows(3).any(|w| w == [0xE2, 0x84, 0xAA]))
}

/// `[A-Za-z0-9_]`: what the regex's ASCII `\b` counts as a word byte.
fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The e-mail local part's `[a-z0-9._%+-]`, case-insensitive.
fn is_local(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'%' | b'+' | b'-')
}

/// A domain label's `[a-z0-9-]`, case-insensitive.
fn is_label(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

/// An IBAN's `[A-Z0-9]`.
fn is_iban(c: u8) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit()
}

/// The end of the run of bytes from `i` that `f` accepts.
fn run(b: &[u8], i: usize, f: impl Fn(u8) -> bool) -> usize {
    b[i.min(b.len())..]
        .iter()
        .position(|&c| !f(c))
        .map_or(b.len(), |n| i + n)
}

/// Whether the regex's `\b` holds at `i`, right after a word byte: no word byte follows.
fn ends_word(b: &[u8], i: usize) -> bool {
    b.get(i).is_none_or(|&c| !is_word(c))
}

impl Tokens<'_> {
    /// The end of the token starting at `p`: the regex's alternatives tried in its order, each
    /// with the match a backtracking search would give it (leftmost-first).
    fn match_at(&mut self, p: usize) -> Option<usize> {
        let b = self.text.as_bytes();
        let c = b[p];
        if !c.is_ascii() {
            return None;
        }
        if matches!(c, b'h' | b'H' | b'w' | b'W') {
            if let Some(end) = self.url(p) {
                return Some(end);
            }
        }
        if is_local(c) {
            if let Some(end) = self.email(p) {
                return Some(end);
            }
        }
        if p > 0 && is_word(b[p - 1]) {
            return None;
        }
        if c.is_ascii_uppercase() {
            if let Some(end) = iban(b, p) {
                return Some(end);
            }
        }
        if c.is_ascii_alphanumeric() {
            if let Some(end) = self.domain(p) {
                return Some(end);
            }
        }
        if c.is_ascii_digit() {
            let end = run(b, p, |c| c.is_ascii_digit());
            if end - p >= 6 && ends_word(b, end) {
                return Some(end);
            }
        }
        None
    }

    /// `(?i:(?:https?://|www\.)[^\s<>()\[\]{}'`]+)`.
    fn url(&self, p: usize) -> Option<usize> {
        let b = &self.text.as_bytes()[p..];
        let starts = |prefix: &[u8]| {
            b.len() >= prefix.len() && b[..prefix.len()].eq_ignore_ascii_case(prefix)
        };
        let scheme = if starts(b"https://") {
            8
        } else if starts(b"http://") {
            7
        } else if starts(b"www.") {
            4
        } else {
            return None;
        };
        let end = self.url_run(p + scheme);
        (end > p + scheme).then_some(end)
    }

    /// The end of the run of `[^\s<>()\[\]{}'`]` from `i` (Unicode whitespace).
    fn url_run(&self, i: usize) -> usize {
        let b = self.text.as_bytes();
        let mut j = i;
        while j < b.len() {
            let c = b[j];
            if c.is_ascii() {
                if c.is_ascii_whitespace()
                    || c == 0x0B
                    || matches!(
                        c,
                        b'<' | b'>' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'\'' | b'`'
                    )
                {
                    break;
                }
                j += 1;
            } else {
                let Some(ch) = self.text[j..].chars().next() else {
                    break;
                };
                if ch.is_whitespace() {
                    break;
                }
                j += ch.len_utf8();
            }
        }
        j
    }

    /// `(?i:[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+)`. The local part ends where its run
    /// does (`@` is not in it), so every start inside one run gives the same address end.
    fn email(&mut self, p: usize) -> Option<usize> {
        let (start, end, found) = self.local;
        if start <= p && p < end {
            return found;
        }
        let b = self.text.as_bytes();
        let r = run(b, p, is_local);
        let found = (b.get(r) == Some(&b'@'))
            .then(|| {
                let mut e = run(b, r + 1, is_label);
                if e == r + 1 {
                    return None;
                }
                let mut labels = 0;
                while b.get(e) == Some(&b'.') && b.get(e + 1).copied().is_some_and(is_label) {
                    e = run(b, e + 1, is_label);
                    labels += 1;
                }
                (labels > 0).then_some(e)
            })
            .flatten();
        self.local = (p, r, found);
        found
    }

    /// `\b(?i:LABEL(?:\.LABEL)*\.[a-z]{2,})\b(?:/[^\s<>()\[\]{}'`]*)?` with `LABEL` =
    /// `[a-z0-9](?:[a-z0-9-]*[a-z0-9])?`, after the `\b` at `p` held. The text from `p` is
    /// runs of `[a-z0-9-]` between single dots; a label is followed by a dot, so it is a whole
    /// run, starting and ending with a letter or digit. The loop prefers more labels; the
    /// last dot must be followed by two or more letters and then no word byte.
    fn domain(&mut self, p: usize) -> Option<usize> {
        let b = self.text.as_bytes();
        let (from, to, last) = self.walk;
        let tld = if from <= p && p < to {
            last.filter(|&(dot, _)| dot > p).map(|(_, end)| end)
        } else {
            let mut last = None;
            let mut i = p;
            loop {
                let e = self.label_end(i);
                let label =
                    e > i && b[i].is_ascii_alphanumeric() && b[e - 1].is_ascii_alphanumeric();
                if !label || b.get(e) != Some(&b'.') {
                    break;
                }
                // The labels so far, then this dot and the last label: the later such end wins.
                let tld = run(b, e + 1, |c| c.is_ascii_alphabetic());
                if tld - (e + 1) >= 2 && ends_word(b, tld) {
                    last = Some((e, tld));
                }
                i = e + 1;
            }
            self.walk = (p, i, last);
            last.map(|(_, end)| end)
        }?;
        Some(if b.get(tld) == Some(&b'/') {
            self.url_run(tld + 1)
        } else {
            tld
        })
    }

    /// The end of the run of `[a-z0-9-]` from `i`, read once for all starts inside it.
    fn label_end(&mut self, i: usize) -> usize {
        let (start, end) = self.label_run;
        if start <= i && i < end {
            return end;
        }
        let end = run(self.text.as_bytes(), i, is_label);
        self.label_run = (i, end);
        end
    }
}

/// `\b[A-Z]{2}[0-9]{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)\b`, after
/// the `\b` at `p` held.
fn iban(b: &[u8], p: usize) -> Option<usize> {
    let head = b.get(p..p + 4)?;
    if !(head[0].is_ascii_uppercase()
        && head[1].is_ascii_uppercase()
        && head[2].is_ascii_digit()
        && head[3].is_ascii_digit())
    {
        return None;
    }
    let q = p + 4;
    // Solid: the whole run, 11 to 30 long, then no word byte (a shorter take is followed by
    // a word byte, a longer one is refused).
    let solid = run(&b[..(q + 31).min(b.len())], q, is_iban);
    if (11..=30).contains(&(solid - q)) && ends_word(b, solid) {
        return Some(solid);
    }
    // Grouped: as many groups of four as there are (up to seven), then the longest tail, and
    // fewer of each until `\b` holds.
    let group = |at: usize| {
        b.get(at) == Some(&b' ')
            && b.get(at + 1..at + 5)
                .is_some_and(|g| g.iter().all(|&c| is_iban(c)))
    };
    let mut groups = 0;
    while groups < 7 && group(q + 5 * groups) {
        groups += 1;
    }
    for g in (2..=groups).rev() {
        let e = q + 5 * g;
        if b.get(e) == Some(&b' ') {
            let tail = run(b, e + 1, is_iban).min(e + 5) - (e + 1);
            for t in (1..=tail.min(3)).rev() {
                if ends_word(b, e + 1 + t) {
                    return Some(e + 1 + t);
                }
            }
        }
        if ends_word(b, e) {
            return Some(e);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(text: &str) -> Vec<&str> {
        find(text).collect()
    }

    /// The regex's tokens: the specification.
    fn reference(text: &str) -> Vec<&str> {
        TOKEN.find_iter(text).map(|m| m.as_str()).collect()
    }

    /// The tokens with every chunk searched by hand (unless it holds `ſ` or `K`).
    fn by_hand(text: &str) -> Vec<&str> {
        Tokens::new(text, usize::MAX).collect()
    }

    #[test]
    fn finds_destinations_in_prose() {
        assert_eq!(
            all("Send the file to mark.black-2134@gmail.com, then visit www.secure-systems-252.com."),
            ["mark.black-2134@gmail.com", "www.secure-systems-252.com."]
        );
        assert_eq!(
            all("pay US133000000121212121212 or DE89 3704 0044 0532 0130 00 now"),
            ["US133000000121212121212", "DE89 3704 0044 0532 0130 00"]
        );
        assert_eq!(
            all("see https://evil.example/a?b=c and phone 5551234567"),
            ["https://evil.example/a?b=c", "5551234567"]
        );
        assert_eq!(
            all("go to true-informations.com/page now"),
            ["true-informations.com/page"]
        );
        assert!(all("Meet at 10:30 on Monday, bring 50 dollars.").is_empty());
    }

    #[test]
    fn lane_tests_are_exact_for_every_byte() {
        for c in 0..=255u8 {
            for (i, other) in [0u8, b'.', b'0', 0x80, 0xFF, b' '].into_iter().enumerate() {
                let mut word = [other; 8];
                word[i + 1] = c;
                let x = u64::from_le_bytes(word);
                let lane = |m: u64| {
                    word.map(|_| 0)
                        .iter()
                        .enumerate()
                        .map(|(j, _)| m >> (8 * j + 7) & 1 == 1)
                        .collect::<Vec<_>>()
                };
                let want = |f: &dyn Fn(u8) -> bool| word.iter().map(|&b| f(b)).collect::<Vec<_>>();
                assert_eq!(lane(lanes::eq(x, b'@')), want(&|b| b == b'@'), "{c}");
                assert_eq!(
                    lane(lanes::range(x, b'0', b':')),
                    want(&|b| (b'0'..=b':').contains(&b)),
                    "{c}"
                );
                assert_eq!(
                    lane(lanes::space(x)),
                    want(&|b| b.is_ascii_whitespace()),
                    "{c}"
                );
                for n in [1, 48, 59, 128] {
                    assert_eq!(lane(lanes::lt(x, n)), want(&|b| b < n), "{c} {n}");
                }
                assert_eq!(lanes::eq(x, b'@') & !0x8080_8080_8080_8080, 0);
            }
        }
    }

    #[test]
    fn the_next_trigger_is_the_first() {
        let text = "ab. cd.\tef ghij klmn opqr stuv wxyz. x.y 1 @ : .";
        let b = text.as_bytes();
        for from in 0..=b.len() {
            let want = (from..b.len()).find(|&i| {
                is_trigger(b[i])
                    && (b[i] != b'.' || b.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()))
            });
            assert_eq!(next_trigger(b, from), want, "{from}");
        }
    }

    /// The scanner's shortcuts rest on two facts about the regex's Unicode classes.
    #[test]
    fn the_unicode_the_scanner_relies_on() {
        let folded = Regex::new(r"^(?i:[a-z0-9._%+-])$").unwrap();
        let space = Regex::new(r"^\s$").unwrap();
        let mut odd = Vec::new();
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let mut buf = [0; 4];
            let s = c.encode_utf8(&mut buf);
            if !c.is_ascii() && folded.is_match(s) {
                odd.push(c);
            }
            assert_eq!(space.is_match(s), c.is_whitespace(), "{c:?}");
        }
        assert_eq!(odd, ['\u{17F}', '\u{212A}']);
        // Nothing else in the pattern folds: the scheme and `www` are in `[a-z]`.
    }

    #[test]
    fn agrees_with_the_regex_on_edge_cases() {
        for text in [
            "",
            "x",
            "123456",
            "12345",
            "1234567_",
            "a123456",
            "123456a",
            "123456.com",
            "123456-",
            "a.b.c.de",
            "a..com",
            "a-.com",
            "-a.com",
            "a.b-.com",
            "a.com-x",
            "a.com_x",
            "a.co1",
            "a.c",
            "example.com/",
            "example.com/path(x)",
            "x.example.com.",
            "https://",
            "https:// x",
            "http://a",
            "HTTPS://A.B",
            "httpſ://a",
            "xhttps://a.b",
            "www.",
            "www.x",
            "WWW.(x)",
            "a@b",
            "a@b.",
            "a@b.c",
            "a@b..c",
            ".a@b.c.",
            "a@@b.c",
            "a@b.c@d.e",
            "K@x.com",
            "xK.com",
            "ſ.com mark.ſ@x.com",
            "DE89370400440532013000",
            "DE89370400440532013000x",
            "DE8937040044053201300012345678901",
            "DE89 3704 0044 0532 0130 00",
            "DE89 3704 0044 0532 0130 0",
            "DE89 3704 0044 0532 0130 0000",
            "DE89 3704 0044 0532 0130 00000",
            "DE89 3704 0044 0532 0130 0000x",
            "DE89 3704 0044 0532 01300 00",
            "DE89 3704",
            "DE89 3704 0044",
            "DE89 3704 0044 0532 0130 0000 1111 2222 3333 4444",
            "DE89 3704 0044 0532 0130 0000 1111 2222 3333",
            "DE89 3704 0044 0532 0130 0000 1111 222",
            "xDE89 3704 0044 0532",
            "DE89 3704 0044 0532.a@b.com",
            "DE89 3704 0044 0532 0130 00.x@y.com",
            "GB01NWBK60161331920001.",
            "a\u{a0}www.x\u{a0}b",
            "www.x\u{2003}y",
            "www.x\u{b}y https://a\u{c}b http://a\u{1c}b",
            "https://ex.com/é?q=ü",
            "é123456é",
            "_123456",
            "…example.com…",
            "(https://a.b/c)",
            "'www.a.b'",
            "mail:a@b.cd:80",
        ] {
            assert_eq!(all(text), reference(text), "{text:?}");
            assert_eq!(by_hand(text), reference(text), "{text:?}");
        }
    }

    #[test]
    fn agrees_with_the_regex_on_long_and_hostile_text() {
        let texts = [
            "a.".repeat(5_000),
            "a-".repeat(5_000),
            "1".repeat(10_000),
            ".".repeat(10_000),
            "a".repeat(10_000) + "@x.com",
            "x@".repeat(3_000),
            "DE89 ".repeat(2_000),
            "AB12 CDEF ".repeat(1_000),
            format!("https://x.com/{}", "y".repeat(10_000)),
            "www.a.b ".repeat(1_000),
            "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.".repeat(10) + "com",
            "1.2.3.4.5.6.7.8.9.0.".repeat(100),
            "é.ü.".repeat(1_000) + "com",
            "\u{212A}.".repeat(1_000),
        ];
        for text in &texts {
            assert_eq!(
                all(text),
                reference(text),
                "{:?}",
                &text[..40.min(text.len())]
            );
            assert_eq!(
                by_hand(text),
                reference(text),
                "{:?}",
                &text[..40.min(text.len())]
            );
        }
    }

    /// Pieces of prose that make and unmake tokens.
    const PIECES: &[&str] = &[
        " ",
        " ",
        " ",
        "  ",
        "\n",
        "\t",
        "\r",
        "\u{b}",
        "\u{c}",
        "\u{1c}",
        "\u{a0}",
        "\u{2003}",
        "\u{3000}",
        ".",
        ".",
        "..",
        ",",
        ";",
        ":",
        "!",
        "?",
        "-",
        "--",
        "_",
        "%",
        "+",
        "/",
        "//",
        "@",
        "@",
        "'",
        "`",
        "\"",
        "(",
        ")",
        "<",
        ">",
        "[",
        "]",
        "{",
        "}",
        "#",
        "=",
        "&",
        "a",
        "b",
        "x",
        "Z",
        "é",
        "ü",
        "Ω",
        "ſ",
        "\u{212A}",
        "k",
        "K",
        "s",
        "S",
        "日本",
        "😀",
        "’",
        "“",
        "”",
        "…",
        "the",
        "pay",
        "com",
        "COM",
        "org",
        "io",
        "co",
        "example",
        "evil",
        "Mark",
        "mark",
        "black-2134",
        "bank",
        "http",
        "https",
        "HTTP",
        "Https",
        "://",
        "http://",
        "https://",
        "www",
        "www.",
        "WWW.",
        "0",
        "1",
        "12",
        "123",
        "1234",
        "12345",
        "123456",
        "1234567",
        "000000000000",
        "4444",
        "DE",
        "GB",
        "US",
        "89",
        "DE89",
        "GB82",
        "NWBK",
        "WEST",
        "3704",
        "0044",
        "AB1",
        "DE89 3704 0044 0532 0130 00",
        "GB82 WEST 1234 5698 7654 32",
        "DE89370400440532013000",
        "US133000000121212121212",
        "mark@evil.example",
        "evil.example/pay",
        "https://evil.example/a?b=c",
        "www.secure-systems-252.com",
    ];

    fn prose() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(PIECES), 0..40).prop_map(|p| p.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4_000))]

        #[test]
        fn the_scanner_finds_the_regexs_tokens(text in prose()) {
            prop_assert_eq!(all(&text), reference(&text));
            prop_assert_eq!(by_hand(&text), reference(&text));
        }

        #[test]
        fn the_scanner_agrees_on_any_text(text in "[ -~\u{a0}\u{b}\u{17f}\u{212a}é]{0,60}") {
            prop_assert_eq!(all(&text), reference(&text));
            prop_assert_eq!(by_hand(&text), reference(&text));
        }

        #[test]
        fn the_scanner_agrees_on_small_alphabets(text in "[a.@ 1A-]{0,40}|[A1 ]{0,60}|[a1./:hw]{0,40}") {
            prop_assert_eq!(all(&text), reference(&text));
            prop_assert_eq!(by_hand(&text), reference(&text));
        }
    }
}
