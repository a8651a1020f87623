//! `format_source`: the one canonical layout of a policy file.
//!
//! The layout is the house style of `stdlib-rules/examples` and `docs/language.md`:
//!
//! - two-space indentation; one entry per line in blocks; an empty block is `{}`;
//! - a run of class declarations (adjacent lines) has its keywords padded to one width, so
//!   the tool lists line up;
//! - a blank line around every block declaration and after `module`; elsewhere a blank
//!   line the author wrote is kept (several become one);
//! - a `[..]` list stays on one line unless the line would pass 100 columns or a comment sits
//!   inside the brackets; then it is wrapped one item per line, with a trailing comma;
//! - tokens keep their text: strings stay quoted or raw as written, numbers as written;
//! - comments are kept, above or at the end of the line of the item or entry they were
//!   written before or after (see [`printer`]).
//!
//! The result is checked before it is returned: it must parse to the same tree (spans
//! aside) and hold the same comments, or the source is reported as not formattable.

mod comments;
mod expr;
mod printer;
mod spanless;

use crate::diagnostic::Diagnostic;
use crate::parser::{parse, parse_invariants, run_pest, Rule};
use crate::span::Span;
use comments::Comment;
use pest::iterators::Pair;
use printer::{Printer, Range};

/// Lines longer than this are wrapped where the layout allows (lists).
pub const MAX_WIDTH: usize = 100;

/// Formats a policy source. `name` is the file name, used in the message of the internal
/// check. A source with syntax errors is not formatted: its diagnostics are returned.
///
/// A separate invariants file (`invariants for MODULE`, see `docs/testing.md`) is formatted
/// the same way; it is recognised by its first line.
pub fn format_source(name: &str, src: &str) -> Result<String, Vec<Diagnostic>> {
    let top = if run_pest(Rule::invariants_file, src).is_ok() {
        Rule::invariants_file
    } else {
        Rule::file
    };
    let before = tree(top, src)?;
    let (out, comments_in) = layout(src, top)?;
    let same_meaning = tree(top, &out).is_ok_and(|after| after == before);
    let same_comments =
        layout_comments(&out, top).is_some_and(|c| texts(&c) == texts(&comments_in));
    if same_meaning && same_comments {
        Ok(out)
    } else {
        Err(vec![Diagnostic::error(
            Span::new(0, 0),
            format!("internal error: formatting `{name}` would change its meaning or lose a comment, so it was left as it is"),
        )
        .with_help("please report this file to the toolgate maintainers")])
    }
}

/// The span-free tree of a policy or an invariants file, for the meaning check.
fn tree(top: Rule, src: &str) -> Result<crate::ast::Policy, Vec<Diagnostic>> {
    let policy = if top == Rule::invariants_file {
        let f = parse_invariants(src)?;
        crate::ast::Policy {
            module: f.policy,
            items: f.items,
        }
    } else {
        parse(src)?
    };
    Ok(policy.without_spans())
}

fn texts(c: &[Comment]) -> Vec<&str> {
    c.iter().map(|c| c.text.as_str()).collect()
}

/// The comments of a source that parses, in source order.
fn layout_comments(src: &str, top: Rule) -> Option<Vec<Comment>> {
    let file = run_pest(top, src).ok()?.next()?;
    Some(comments_of(src, &file))
}

fn comments_of(src: &str, file: &Pair<'_, Rule>) -> Vec<Comment> {
    let strings: Vec<(usize, usize)> = file
        .clone()
        .into_inner()
        .flatten()
        .filter(|p| p.as_rule() == Rule::string)
        .map(|p| (p.as_span().start(), p.as_span().end()))
        .collect();
    comments::scan(src, &strings)
}

fn layout(src: &str, top: Rule) -> Result<(String, Vec<Comment>), Vec<Diagnostic>> {
    let internal = || {
        vec![Diagnostic::error(
            Span::new(0, 0),
            "the parser produced no tree",
        )]
    };
    let file = run_pest(top, src)
        .map_err(|_| internal())?
        .next()
        .ok_or_else(internal)?;
    let comments = comments_of(src, &file);
    let mut l = Layout {
        p: Printer::new(src, comments.clone()),
    };
    let parts: Vec<Pair<'_, Rule>> = file
        .into_inner()
        .filter(|p| p.as_rule() != Rule::EOI)
        .collect();
    l.file(&parts, src.len());
    Ok((l.p.finish(), comments))
}

struct Layout<'a> {
    p: Printer<'a>,
}

fn start(p: &Pair<'_, Rule>) -> usize {
    p.as_span().start()
}

/// Where the tokens of `p` end, without the trailing whitespace and comments pest may
/// have included in its span.
fn end(p: &Pair<'_, Rule>, printer: &Printer<'_>) -> usize {
    printer.token_end(p.as_span().start(), p.as_span().end())
}

fn text(p: &Pair<'_, Rule>) -> String {
    p.as_str().to_string()
}

fn is_block(p: &Pair<'_, Rule>) -> bool {
    !matches!(
        p.as_rule(),
        Rule::class_decl | Rule::module_decl | Rule::invariants_for | Rule::use_decl
    )
}

/// One element of a `[..]` list: its text and where it was written.
struct Elem {
    text: String,
    start: usize,
    end: usize,
}

fn elems<'i>(pairs: impl Iterator<Item = Pair<'i, Rule>>, printer: &Printer<'_>) -> Vec<Elem> {
    pairs
        .map(|p| Elem {
            text: text(&p),
            start: start(&p),
            end: end(&p, printer),
        })
        .collect()
}

impl Layout<'_> {
    fn file(&mut self, parts: &[Pair<'_, Rule>], eof: usize) {
        let widths = class_widths(parts, &self.p);
        for (i, part) in parts.iter().enumerate() {
            let next = parts.get(i + 1).map_or(eof, start);
            let after_module = i > 0
                && matches!(
                    parts[i - 1].as_rule(),
                    Rule::module_decl | Rule::invariants_for
                );
            if i > 0 && (is_block(part) || is_block(&parts[i - 1]) || after_module) {
                self.p.blank();
            }
            match part.as_rule() {
                Rule::module_decl | Rule::invariants_for => {
                    let keyword = if part.as_rule() == Rule::module_decl {
                        "module"
                    } else {
                        "invariants for"
                    };
                    let name = part
                        .clone()
                        .into_inner()
                        .next()
                        .map(|n| text(&n))
                        .unwrap_or_default();
                    let r = Range {
                        start: start(part),
                        end: end(part, &self.p),
                        next,
                    };
                    self.p.line(0, &format!("{keyword} {name}"), r, true);
                }
                Rule::class_decl => self.class_decl(part.clone(), widths[i], next),
                Rule::use_decl => self.use_decl(part.clone(), next),
                Rule::stage_decl
                | Rule::latch_decl
                | Rule::hosts_decl
                | Rule::rule_decl
                | Rule::budget_decl
                | Rule::provenance_decl
                | Rule::approvals_decl => self.block(part.clone(), next),
                Rule::detokenise_decl => self.detokenise(part.clone(), next),
                _ => {
                    let r = Range {
                        start: start(part),
                        end: end(part, &self.p),
                        next,
                    };
                    self.p.verbatim(r, true);
                }
            }
        }
    }

    /// `use SOURCE[::ITEM] [for TOOLS]` on one line (the `for` list wraps like any list).
    fn use_decl(&mut self, p: Pair<'_, Rule>, next: usize) {
        let r = Range {
            start: start(&p),
            end: end(&p, &self.p),
            next,
        };
        let mut head = String::from("use");
        let mut targets = None;
        for inner in p.into_inner() {
            match inner.as_rule() {
                Rule::use_source => {
                    head.push(' ');
                    head.push_str(inner.as_str().trim());
                }
                Rule::use_item => head.push_str(inner.as_str().trim()),
                Rule::use_for => targets = inner.into_inner().next(),
                _ => {}
            }
        }
        match targets {
            Some(t) => self.selectors(0, &format!("{head} for"), t, "", r),
            None => self.p.line(0, &head, r, true),
        }
    }

    fn class_decl(&mut self, p: Pair<'_, Rule>, width: usize, next: usize) {
        let r = Range {
            start: start(&p),
            end: end(&p, &self.p),
            next,
        };
        let mut inner = p.into_inner();
        let kw = inner.next().map(|k| text(&k)).unwrap_or_default();
        let tools: Vec<String> = inner.map(|t| text(&t)).collect();
        let line = format!("{kw:<width$} {}", tools.join(", "));
        self.p.line(0, &line, r, true);
    }

    /// A `stage`, `latch`, `hosts`, `rule` or (nameless) `approvals` block.
    fn block(&mut self, p: Pair<'_, Rule>, next: usize) {
        let item_start = start(&p);
        let close = end(&p, &self.p) - 1;
        let keyword = match p.as_rule() {
            Rule::stage_decl => "stage",
            Rule::latch_decl => "latch",
            Rule::hosts_decl => "hosts",
            Rule::approvals_decl => "approvals",
            Rule::budget_decl => "budget",
            Rule::provenance_decl => "provenance",
            _ => "rule",
        };
        let mut inner = p.into_inner();
        let head = if keyword == "approvals" || keyword == "provenance" {
            keyword.to_string()
        } else {
            let name = inner.next().map(|n| text(&n)).unwrap_or_default();
            format!("{keyword} {name}")
        };
        let mut targets = None;
        if keyword == "rule" || keyword == "budget" || keyword == "provenance" {
            targets = inner.next();
        }
        let entries: Vec<Pair<'_, Rule>> = inner.collect();
        let after_head = targets.as_ref().map_or(item_start, |t| end(t, &self.p));
        let open = self.p.find_outside_comments(after_head, '{');
        let empty = entries.is_empty() && !self.p.has_comment_between(open, close);
        let first = entries.first().map_or(close, start);
        let suffix = if empty { " {}" } else { " {" };
        let head_range = if empty {
            Range {
                start: item_start,
                end: close + 1,
                next,
            }
        } else {
            Range {
                start: item_start,
                end: open + 1,
                next: first,
            }
        };
        match targets {
            Some(t) => self.selectors(0, &format!("{head} for"), t, suffix, head_range),
            None => self.p.line(0, &format!("{head}{suffix}"), head_range, true),
        }
        if empty {
            return;
        }
        self.p.mark_open();
        for (i, e) in entries.iter().enumerate() {
            let next_entry = entries.get(i + 1).map_or(close, start);
            self.entry(e.clone(), next_entry);
        }
        self.close_brace(close, next);
    }

    /// `detokenise TOOL { args [PATH: KIND, ..] }` on one line when it fits, else as a block
    /// whose `args` list wraps like any list. One with a comment inside is copied as written.
    fn detokenise(&mut self, p: Pair<'_, Rule>, next: usize) {
        let r = Range {
            start: start(&p),
            end: end(&p, &self.p),
            next,
        };
        let close = r.end - 1;
        if self.p.has_comment_between(r.start, close) {
            self.p.verbatim(r, true);
            return;
        }
        let mut inner = p.into_inner();
        let tool = inner.next().map(|t| text(&t)).unwrap_or_default();
        let Some(args) = inner.next() else {
            self.p.verbatim(r, true);
            return;
        };
        let (list_open, list_close) = (start(&args), end(&args, &self.p) - 1);
        let items: Vec<Elem> = args
            .into_inner()
            .map(|path| Elem {
                start: start(&path),
                end: end(&path, &self.p),
                text: detokenise_path(path),
            })
            .collect();
        let joined: Vec<&str> = items.iter().map(|e| e.text.as_str()).collect();
        let one = format!("detokenise {tool} {{ args [{}] }}", joined.join(", "));
        if one.chars().count() <= MAX_WIDTH {
            self.p.line(0, &one, r, true);
            return;
        }
        let open = self.p.find_outside_comments(r.start, '{');
        let args_kw = self.p.find_outside_comments(open + 1, 'a');
        self.p.open_line(
            0,
            &format!("detokenise {tool} {{"),
            Range {
                start: r.start,
                end: open + 1,
                next: args_kw,
            },
            true,
        );
        self.list(
            1,
            "args",
            list_open,
            list_close,
            &items,
            "",
            Range {
                start: args_kw,
                end: list_close + 1,
                next: close,
            },
        );
        self.close_brace(close, next);
    }

    /// The `}` at `close` that ends a top-level block, with the comments around it.
    fn close_brace(&mut self, close: usize, next: usize) {
        let r = Range {
            start: close,
            end: close + 1,
            next,
        };
        self.p.close_line(0, "}", r);
    }

    fn entry(&mut self, e: Pair<'_, Rule>, next: usize) {
        let r = Range {
            start: start(&e),
            end: end(&e, &self.p),
            next,
        };
        let rule = e.as_rule();
        let mut inner = e.into_inner();
        match rule {
            Rule::stage_tools | Rule::schemes | Rule::allow_hosts | Rule::metadata => {
                let kw = match rule {
                    Rule::stage_tools => "tools",
                    Rule::schemes => "schemes",
                    Rule::metadata => "metadata",
                    _ => "allow",
                };
                let open = self.p.find_outside_comments(r.start, '[');
                let close = r.end - 1;
                self.list(1, kw, open, close, &elems(inner, &self.p), "", r);
            }
            Rule::set_by | Rule::blocks | Rule::blocks_tainted | Rule::asks => {
                let kw = match rule {
                    Rule::set_by => "set_by",
                    Rule::blocks => "blocks",
                    Rule::blocks_tainted => "blocks tainted",
                    _ => "asks",
                };
                if let Some(sel) = inner.find(|x| x.as_rule() == Rule::selectors) {
                    self.selectors(1, kw, sel, "", r);
                }
            }
            Rule::max_turns
            | Rule::refusal
            | Rule::on_missing
            | Rule::userinfo
            | Rule::idn
            | Rule::valid_for => {
                let kw = match rule {
                    Rule::max_turns => "max_turns",
                    Rule::valid_for => "valid_for",
                    Rule::refusal => "refusal",
                    Rule::userinfo => "userinfo",
                    Rule::idn => "idn",
                    _ => "on_missing",
                };
                let value = inner.next().map(|v| text(&v)).unwrap_or_default();
                self.p.line(1, &format!("{kw} {value}"), r, true);
            }
            Rule::budget_limit => {
                // `count <= 20 within 1h per session`: each part as written, one space apart.
                let words: Vec<String> = inner
                    .flat_map(|part| {
                        let lead = match part.as_rule() {
                            Rule::budget_within => Some("within"),
                            Rule::budget_per => Some("per"),
                            Rule::number => Some("<="),
                            _ => None,
                        };
                        let rest: Vec<String> = match part.as_rule() {
                            Rule::number => vec![text(&part)],
                            // `count`, or `sum PATH` (its keyword and path).
                            Rule::budget_measure => part
                                .into_inner()
                                .flat_map(|m| match m.as_rule() {
                                    Rule::budget_sum => {
                                        m.into_inner().map(|x| text(&x)).collect::<Vec<_>>()
                                    }
                                    _ => vec![text(&m)],
                                })
                                .collect(),
                            _ => part.into_inner().map(|x| text(&x)).collect(),
                        };
                        lead.map(String::from).into_iter().chain(rest)
                    })
                    .collect();
                self.p.line(1, &words.join(" "), r, true);
            }
            Rule::shadow_mark => self.p.line(1, "shadow", r, true),
            Rule::require => {
                let cond = inner.next().map(expr::top).unwrap_or_default();
                self.p.line(1, &format!("require {cond}"), r, true);
            }
            Rule::ask_when => {
                let cond = inner
                    .find(|p| p.as_rule() == Rule::expr)
                    .map(expr::top)
                    .unwrap_or_default();
                self.p.line(1, &format!("ask when {cond}"), r, true);
            }
            _ => self.p.line(1, e_text(&self.p, r).trim(), r, true),
        }
    }

    /// `PREFIX SELECTORS SUFFIX`, where the selectors are one selector or a `[..]` list.
    /// `r` covers the prefix to the suffix.
    fn selectors(
        &mut self,
        depth: usize,
        prefix: &str,
        sel: Pair<'_, Rule>,
        suffix: &str,
        r: Range,
    ) {
        let bracketed = sel.as_str().starts_with('[');
        let (sel_start, sel_end) = (start(&sel), end(&sel, &self.p));
        let items = elems(sel.into_inner(), &self.p);
        if bracketed {
            self.list(depth, prefix, sel_start, sel_end - 1, &items, suffix, r);
        } else {
            let one = items.first().map(|e| e.text.clone()).unwrap_or_default();
            self.p
                .line(depth, &format!("{prefix} {one}{suffix}"), r, true);
        }
    }

    /// `PREFIX [a, b]SUFFIX` on one line, or wrapped one item per line. `open` and `close` are
    /// the offsets of the brackets; `r` covers the whole construct.
    #[allow(clippy::too_many_arguments)]
    fn list(
        &mut self,
        depth: usize,
        prefix: &str,
        open: usize,
        close: usize,
        items: &[Elem],
        suffix: &str,
        r: Range,
    ) {
        let joined: Vec<&str> = items.iter().map(|e| e.text.as_str()).collect();
        let one_line = format!("{prefix} [{}]{suffix}", joined.join(", "));
        let width = depth * 2 + one_line.chars().count();
        if width <= MAX_WIDTH && !self.p.has_comment_between(open, close) {
            self.p.line(depth, &one_line, r, true);
            return;
        }
        let first = items.first().map_or(close, |e| e.start);
        self.p.open_line(
            depth,
            &format!("{prefix} ["),
            Range {
                start: r.start,
                end: open + 1,
                next: first,
            },
            true,
        );
        for (i, e) in items.iter().enumerate() {
            let next = items.get(i + 1).map_or(close, |n| n.start);
            self.p.line(
                depth + 1,
                &format!("{},", e.text),
                Range {
                    start: e.start,
                    end: e.end,
                    next,
                },
                false,
            );
        }
        self.p.close_line(
            depth,
            &format!("]{suffix}"),
            Range {
                start: close,
                end: r.end,
                next: r.next,
            },
        );
    }
}

/// `PATH: KIND` or `PATH: [KIND, ..]` with single spaces (no comment lies inside).
fn detokenise_path(p: Pair<'_, Rule>) -> String {
    let mut inner = p.into_inner();
    let mut out = inner.next().map(|path| text(&path)).unwrap_or_default();
    if let Some(kinds) = inner.next() {
        let bracketed = kinds.as_str().starts_with('[');
        let names: Vec<String> = kinds.into_inner().map(|k| text(&k)).collect();
        out.push_str(": ");
        if bracketed {
            out.push_str(&format!("[{}]", names.join(", ")));
        } else {
            out.push_str(&names.concat());
        }
    }
    out
}

fn e_text(p: &Printer<'_>, r: Range) -> String {
    p.source(r.start, r.end).to_string()
}

/// For each part, the keyword width its run of adjacent class declarations pads to.
fn class_widths(parts: &[Pair<'_, Rule>], p: &Printer<'_>) -> Vec<usize> {
    let mut widths = vec![0; parts.len()];
    let mut i = 0;
    while i < parts.len() {
        if parts[i].as_rule() != Rule::class_decl {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < parts.len()
            && parts[j].as_rule() == Rule::class_decl
            && !p.has_blank_between(end(&parts[j - 1], p), start(&parts[j]))
        {
            j += 1;
        }
        let kw_len = |p: &Pair<'_, Rule>| {
            p.clone()
                .into_inner()
                .next()
                .map_or(0, |k| k.as_str().len())
        };
        let w = parts[i..j].iter().map(kw_len).max().unwrap_or(0);
        widths[i..j].iter_mut().for_each(|x| *x = w);
        i = j;
    }
    widths
}
