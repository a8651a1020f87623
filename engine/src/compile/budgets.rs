//! `budget NAME for TOOLS { count|sum args.PATH <= N [within DURATION] per SCOPE }`: what
//! the allowed calls of a scope may consume together. Lowered to [`BudgetInfo`]s, and each
//! tool gets the list of the budgets it consumes from.
//!
//! Windows: `per batch` and `per turn` take none (the batch or turn is the window);
//! `per session` may take one; `per principal` and `per tenant` must (a count that never
//! expires grows without bound). A window runs from 1s to 31 days.

use super::*;
use crate::policy::BudgetInfo;
use toolgate_lang::ast::{BudgetMeasure, BudgetScope};

/// The most budgets a policy may declare (a tool's budget list holds `u16` indexes).
const MAX_BUDGETS: usize = 256;
/// The shortest window a budget may count over.
const MIN_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);
/// The longest window a budget may count over: a keeper holds every consumption this long.
const MAX_WINDOW: std::time::Duration = std::time::Duration::from_secs(31 * 24 * 3600);

impl Compiler {
    /// Every `budget` of the policy, in source order; fills each tool's `budgets`.
    pub(super) fn budgets(&mut self, ast: &ast::Policy, tools: &mut [ToolInfo]) -> Vec<BudgetInfo> {
        let mut out: Vec<BudgetInfo> = Vec::new();
        let mut spans: HashMap<String, Span> = HashMap::new();
        let mut per_tool: Vec<Vec<u16>> = vec![Vec::new(); tools.len()];
        for item in &ast.items {
            let Item::Budget(decl) = item else {
                continue;
            };
            if let Some(first) = spans.get(&decl.name.name).copied() {
                self.duplicate_name("budget", &decl.name, first);
                continue;
            }
            spans.insert(decl.name.name.clone(), decl.name.span);
            let targets = self.select(&decl.targets, &format!("budget `{}`", decl.name.name));
            let Some(info) = self.budget(decl) else {
                continue;
            };
            if out.len() == MAX_BUDGETS {
                self.error(
                    Diagnostic::error(decl.name.span, "a policy can declare at most 256 budgets")
                        .with_help("merge budgets that count the same tools"),
                );
                continue;
            }
            if targets.is_empty() {
                self.warn(
                    decl.name.span,
                    format!("budget `{}` counts no tool", decl.name.name),
                    "name the tools (or a class that has tools) it is for",
                );
            }
            let index = out.len() as u16;
            for t in targets {
                let list = &mut per_tool[t.index()];
                if !list.contains(&index) {
                    list.push(index);
                }
            }
            out.push(info);
        }
        for (tool, list) in tools.iter_mut().zip(per_tool) {
            tool.budgets = list.into_boxed_slice();
        }
        out
    }

    fn budget(&mut self, decl: &ast::BudgetDecl) -> Option<BudgetInfo> {
        let name = &decl.name.name;
        let Some(limit) = &decl.limit else {
            self.error(
                Diagnostic::error(decl.span, format!("budget `{name}` has no limit")).with_help(
                    "write e.g. `sum args.amount <= 100 per batch` or `count <= 5 per batch`",
                ),
            );
            return None;
        };
        let max = limit.max.node;
        if !(max.is_finite() && max >= 0.0) {
            self.error(
                Diagnostic::error(limit.max.span, "a budget's limit is a number of at least 0")
                    .with_help("write the most a batch may consume, e.g. `<= 100`"),
            );
            return None;
        }
        let scope = limit.per.node;
        let window = match (&limit.within, scope) {
            (Some(w), BudgetScope::Batch | BudgetScope::Turn) => {
                self.error(
                    Diagnostic::error(
                        w.span,
                        format!("a `per {}` budget has no window", scope.as_str()),
                    )
                    .with_help(format!(
                        "the {} is the window: drop `within`, or count `per session`",
                        scope.as_str()
                    )),
                );
                return None;
            }
            (None, BudgetScope::Principal | BudgetScope::Tenant) => {
                self.error(
                    Diagnostic::error(
                        limit.per.span,
                        format!("a `per {}` budget needs a window", scope.as_str()),
                    )
                    .with_help("add `within DURATION` before `per`, e.g. `within 24h`: a count that never expires grows without bound"),
                );
                return None;
            }
            (Some(w), _) => match w.node.seconds().map(std::time::Duration::from_secs) {
                Some(d) if (MIN_WINDOW..=MAX_WINDOW).contains(&d) => Some(d),
                _ => {
                    self.error(
                        Diagnostic::error(w.span, format!("a budget cannot count over {}", w.node))
                            .with_label("outside 1s to 31 days")
                            .with_help("give a window from `1s` to `744h`"),
                    );
                    return None;
                }
            },
            (None, _) => None,
        };
        let sum = match &limit.measure {
            BudgetMeasure::Count => None,
            BudgetMeasure::Sum(path) => {
                if path.root != PathRoot::Args || path.segments.is_empty() {
                    self.error(
                        Diagnostic::error(path.span, "a budget sums an argument")
                            .with_help("write `sum args.NAME`, e.g. `sum args.amount`"),
                    );
                    return None;
                }
                Some(self.path(path)?)
            }
        };
        let per = crate::budget::per_text(scope, limit.within.as_ref().map(|w| w.node));
        let refusal = match &decl.refusal {
            Some(r) => r.node.as_str().into(),
            None => match &sum {
                None => format!(
                    "budget `{name}` allows at most {} such calls {per}",
                    crate::text::number(max)
                ),
                Some(path) => format!(
                    "budget `{name}` allows at most {} of `{}` {per}",
                    crate::text::number(max),
                    path.text()
                ),
            }
            .into(),
        };
        Some(BudgetInfo {
            name: name.as_str().into(),
            sum,
            max,
            scope,
            window,
            refusal,
        })
    }
}
