//! `budget NAME for TOOLS { count|sum PATH <= N per batch }`: what a batch's allowed calls
//! may consume together. Lowered to [`BudgetInfo`]s, and each tool gets the list of the
//! budgets it consumes from.
//!
//! Only `per batch` is compiled today: it needs no state. The other scopes (`turn`,
//! `session`, `principal`, `tenant`) and `within` windows parse, and are refused here with a
//! clear error until a keeper that holds their counts across batches exists; a budget that
//! silently counted one batch where the author wrote a day would allow far more than written.

use super::*;
use crate::policy::BudgetInfo;
use toolgate_lang::ast::{BudgetMeasure, BudgetScope};

/// The most budgets a policy may declare (a tool's budget list holds `u16` indexes).
const MAX_BUDGETS: usize = 256;

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
        if limit.per.node != BudgetScope::Batch {
            self.error(
                Diagnostic::error(
                    limit.per.span,
                    format!(
                        "`per {}` budgets are not supported yet",
                        limit.per.node.as_str()
                    ),
                )
                .with_label("only `per batch` is judged today")
                .with_help("a budget over several batches needs a store that keeps its count between them, which toolgate does not have yet; write `per batch`, or keep the count in the executor and pass it as a custom fact to a rule"),
            );
            return None;
        }
        if let Some(w) = &limit.within {
            self.error(
                Diagnostic::error(w.span, "a `per batch` budget has no window")
                    .with_help("a batch is judged at once: drop `within`"),
            );
            return None;
        }
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
        let refusal = match &decl.refusal {
            Some(r) => r.node.as_str().into(),
            None => match &sum {
                None => format!(
                    "budget `{name}` allows at most {} such calls in one batch",
                    crate::text::number(max)
                ),
                Some(path) => format!(
                    "budget `{name}` allows at most {} of `{}` in one batch",
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
            scope: limit.per.node,
            refusal,
        })
    }
}
