//! The compiler's checks for what would silently unguard a tool (issue 11): a tool name that
//! is never classified (an error, with a did-you-mean), and the warnings for guards that never
//! deny. `--deny-warnings` turns the warnings into errors ([`Policy::deny_warnings`]).

use super::Compiler;
use crate::error::CompileError;
use crate::ids::RuleId;
use crate::policy::{Policy, RuleInfo};
use toolgate_lang::ast::{self, Spanned, ToolClass};
use toolgate_lang::{did_you_mean, Diagnostic};

impl Policy {
    /// The policy, or, when it carries any warning, a [`CompileError`] holding every warning
    /// as an error: what `--deny-warnings` does. A warning names something that compiles but
    /// probably does not guard what its author meant; a deployment that cannot afford that
    /// refuses the policy instead.
    pub fn deny_warnings(self) -> Result<Policy, CompileError> {
        if self.cold.warnings.is_empty() {
            return Ok(self);
        }
        let diagnostics = self
            .cold
            .warnings
            .iter()
            .cloned()
            .map(|mut d| {
                d.severity = toolgate_lang::Severity::Error;
                let help = d.help.take().unwrap_or_default();
                d.with_help(format!("{help} (a warning, denied by `--deny-warnings`)"))
            })
            .collect();
        Err(CompileError {
            source_file: self.cold.source.clone(),
            diagnostics,
        })
    }
}

impl Compiler {
    /// Reports a tool name that is never classified, used by `what` (`rule \`r\``, ...).
    ///
    /// An error, not a warning: the name is almost always a misspelling of a classified tool,
    /// and the guard it was written for would silently not apply to that tool.
    pub(crate) fn unclassified_tool(&mut self, t: &ast::Ident, what: &str) {
        let d = self.unclassified_diagnostic(t, what);
        self.error(d);
    }

    /// The diagnostic [`Compiler::unclassified_tool`] reports, for callers that add to it.
    pub(crate) fn unclassified_diagnostic(&mut self, t: &ast::Ident, what: &str) -> Diagnostic {
        // Each suggestion scans every classified name; a hostile policy with thousands of
        // unknown names against thousands of tools gets suggestions for the first few only.
        let close = if self.suggestions_left > 0 {
            self.suggestions_left -= 1;
            did_you_mean(&t.name, self.tools.iter().map(|(n, _, _)| n.as_str())).map(str::to_string)
        } else {
            None
        };
        let help = match close {
            Some(close) => format!("did you mean `{close}`?"),
            None => format!(
                "classify it (`write {0}`, `egress {0}`, `ingest {0}` or `read {0}`), or fix the name",
                t.name
            ),
        };
        Diagnostic::error(
            t.span,
            format!("{what} names tool `{}`, which is never classified", t.name),
        )
        .with_label("never classified")
        .with_help(help)
    }

    /// Warns about each `write`/`egress` tool whose every rule fails open, when one of them
    /// does so only by default: a request without the facts those rules read lets every
    /// call of the tool through, and nobody wrote that down.
    pub(super) fn check_fail_open_guards(
        &mut self,
        tool_rules: &[Vec<RuleId>],
        rules: &[RuleInfo],
        open_by_default: &[bool],
    ) {
        for (i, (name, class, span)) in self.tools.clone().iter().enumerate() {
            let ids = &tool_rules[i];
            let consequential = matches!(class, ToolClass::Write | ToolClass::Egress);
            let all_open = ids.iter().all(|r| rules[r.index()].fail_open);
            let silent = ids.iter().any(|r| open_by_default[r.index()]);
            if !consequential || ids.is_empty() || !all_open || !silent {
                continue;
            }
            let names: Vec<String> = ids
                .iter()
                .map(|r| format!("`{}`", rules[r.index()].name))
                .collect();
            self.warn(
                *span,
                format!(
                    "`{}` tool `{name}` is guarded only by rules that fail open ({}): a request without the facts they read lets every call through",
                    class.as_str(),
                    names.join(", ")
                ),
                "write `on_missing deny` in one of them (or add a rule that fails closed) so such a request is refused, or `on_missing allow` in each to say failing open is intended",
            );
        }
    }

    /// Warns about a `require` line that can never deny a call.
    /// `owner` names what the `require` belongs to: "rule `x`" or "stage `x`".
    pub(super) fn check_always_true(&mut self, e: &ast::Expr, owner: &str) {
        match crate::lint::always_true(e) {
            Some(crate::lint::Constant::Always(_)) => self.warn(
                e.span,
                format!("this `require` is always true, so it never denies a call of {owner}"),
                "a `true` branch makes a whole `or` true; remove it, or write the condition that must hold",
            ),
            Some(crate::lint::Constant::WhenKnown(_)) => self.warn(
                e.span,
                format!("this `require` is true whenever the values it reads are present and of the type it tests (a condition or its own negation), so {owner} denies only calls that lack them"),
                "remove the negated branch, or write the condition that must hold",
            ),
            None => {}
        }
    }

    /// Lints the `matches` patterns of a `require` line where they decide what passes: under
    /// an even number of `not`s (`positive`). Under `not`, a Unicode class or a missing anchor
    /// only makes the rule stricter (`not args.x matches "[<>]+"` must stay unanchored).
    pub(super) fn check_patterns(&mut self, e: &ast::Expr, positive: bool) {
        match &e.kind {
            ast::ExprKind::Not(inner) => self.check_patterns(inner, !positive),
            ast::ExprKind::And(parts) | ast::ExprKind::Or(parts) => {
                for p in parts {
                    self.check_patterns(p, positive);
                }
            }
            ast::ExprKind::Predicate(_, ast::Predicate::Matches(re)) if positive => {
                self.check_regex(re)
            }
            _ => {}
        }
    }

    /// Warns about a `matches` pattern that accepts more than it seems to: Unicode classes
    /// where ASCII was meant, and an identifier shape that is not anchored.
    fn check_regex(&mut self, re: &Spanned<String>) {
        let found = crate::lint::regex(&re.node);
        for class in &found.unicode_classes {
            let (what, instead) = match class.to_ascii_lowercase().as_str() {
                "\\d" => ("any Unicode digit (`٣`, `５`) where `0-9` was likely meant", "[0-9]"),
                "\\w" => (
                    "letters and digits of every script (`é`, `ж`, `٣`) where `A-Za-z0-9_` was likely meant",
                    "[A-Za-z0-9_]",
                ),
                _ => (
                    "every Unicode space (U+00A0, U+2003, U+3000, ...) where ASCII whitespace was likely meant",
                    "[ \\t\\r\\n]",
                ),
            };
            self.warn(
                re.span,
                format!("`{class}` in a regex is a Unicode class, so the pattern accepts {what}"),
                format!(
                    "write `{instead}` for the ASCII class, or `\\p{{..}}` if Unicode is meant"
                ),
            );
        }
        if found.repeats_a_class && !found.anchored {
            let p = re.node.as_str();
            let core = p.strip_prefix('^').unwrap_or(p);
            let core = match core.strip_suffix('$') {
                Some(c) if !c.ends_with('\\') => c,
                _ => core,
            };
            self.warn(
                re.span,
                "this pattern checks the shape of a value but is not anchored at both ends, so a value that merely contains a match passes (`matches` finds the pattern anywhere)",
                format!("anchor every alternative: `^(?:{core})$`"),
            );
        }
    }
}
