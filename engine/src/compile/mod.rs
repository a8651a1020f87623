//! The compiler: checks a parsed policy and lowers it into the tables of [`Policy`].
//!
//! Everything that can be decided before a request arrives is decided here: names are
//! interned to ids, stage whitelists become bit sets, regexes and host matchers are built,
//! each tool gets the list of its own rules, and every refusal text is written.

use crate::builtins::{self, Arg, Param, ParamKind};
use crate::cond::{Cond, Lit, Root, Seg, Test, ValuePath};
use crate::error::CompileError;
use crate::hosts::{parse_entry, HostList};
use crate::ids::{HostListId, RuleId, StageId, ToolId, MAX_LATCHES};
use crate::imports::Imported;
use crate::name_table::NameTable;
use crate::policy::{Cold, FixedRefusals, LatchInfo, Policy, RuleInfo, StageInfo, ToolInfo};
use crate::refusal;
use crate::strict_url::{self, Ambiguity};
use crate::tool_set::ToolSet;
use crate::wire::response::DenyKind;
use crate::wire::schema;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use toolgate_lang::ast::{
    self, CallValue, CmpOp, ExprKind, Item, Literal, PathRoot, PathSegment, Selector, Spanned,
    ToolClass,
};
use toolgate_lang::{Diagnostic, SourceFile, Span};

mod approvals;
mod budgets;
mod checks;
mod declarations;
mod invariants;

pub(crate) use invariants::attach_inline;
mod detokenise;
mod lower;

use lower::Categories;

use crate::builtins::{clamp_window, DEFAULT_WINDOW, MAX_WINDOW};

/// How many unknown tool names get a did-you-mean search, per policy.
const MAX_SUGGESTIONS: usize = 8;
/// The size limit handed to the regex compiler for each `matches` pattern.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Compiles an expanded syntax tree (every `use` already replaced by what it imports) into
/// a policy's tables: every diagnostic, or the policy with its warnings and no invariants
/// yet (`pipeline.rs` attaches them).
pub(crate) fn tables(
    ast: &ast::Policy,
    source: SourceFile,
    imported: &[Imported],
) -> Result<Policy, CompileError> {
    let text = source.text().to_string();
    let text = text.as_str();
    let mut c = Compiler {
        source: source.clone(),
        diags: Vec::new(),
        tool_index: HashMap::new(),
        tools: Vec::new(),
        host_index: HashMap::new(),
        host_lists: Vec::new(),
        host_spans: HashMap::new(),
        in_untargeted_rule: false,
        suggestions_left: MAX_SUGGESTIONS,
    };
    let built = c.policy(ast);
    c.check_imports(imported);
    let (errors, warnings): (Vec<_>, Vec<_>) = c.diags.into_iter().partition(Diagnostic::is_error);
    match built {
        Some(parts) if errors.is_empty() => {
            let mut warnings = warnings;
            warnings.sort_by_key(|d| d.span.start);
            Ok(parts.finish(ast, text, warnings, source))
        }
        _ => {
            let mut diagnostics = errors;
            diagnostics.extend(warnings);
            diagnostics.sort_by_key(|d| (d.span.start, !d.is_error()));
            Err(CompileError {
                source_file: source,
                diagnostics,
            })
        }
    }
}

pub(crate) struct Compiler {
    source: SourceFile,
    diags: Vec<Diagnostic>,
    tool_index: HashMap<String, ToolId>,
    tools: Vec<(String, ToolClass, Span)>,
    host_index: HashMap<String, HostListId>,
    host_lists: Vec<HostList>,
    host_spans: HashMap<String, Span>,
    /// True while lowering the conditions of a rule that applies to no tool.
    in_untargeted_rule: bool,
    /// How many more did-you-mean searches may run (see `unclassified_diagnostic`).
    suggestions_left: usize,
}

/// Everything compiled, before it is frozen into a [`Policy`].
struct Parts {
    tool_index: HashMap<String, ToolId>,
    tools: Vec<ToolInfo>,
    stage_index: HashMap<String, StageId>,
    stages: Vec<StageInfo>,
    latches: Vec<LatchInfo>,
    rules: Vec<RuleInfo>,
    host_lists: Vec<HostList>,
    approval_window: std::time::Duration,
    budgets: Vec<crate::policy::BudgetInfo>,
}

impl Parts {
    fn finish(
        self,
        ast: &ast::Policy,
        text: &str,
        warnings: Vec<Diagnostic>,
        source: SourceFile,
    ) -> Policy {
        let digest = Sha256::digest(text.as_bytes());
        let revision: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let vault_aware = self.tools.iter().any(|t| !t.detokenise.is_empty());
        let mut custom_facts = Vec::new();
        for rule in &self.rules {
            rule.cond.collect_custom_facts(&mut custom_facts);
        }
        for stage in &self.stages {
            if let Some(c) = &stage.require {
                c.collect_custom_facts(&mut custom_facts);
            }
        }
        Policy {
            module: ast.module.name.as_str().into(),
            revision: revision.into(),
            tool_index: NameTable::new(self.tool_index.iter().map(|(k, v)| (k.as_str(), v.0))),
            tools: self.tools,
            stage_index: NameTable::new(self.stage_index.iter().map(|(k, v)| (k.as_str(), v.0))),
            stages: self.stages,
            latches: self.latches,
            rules: self.rules,
            budgets: self.budgets.into_boxed_slice(),
            host_lists: self.host_lists,
            custom_facts: custom_facts.into_boxed_slice(),
            vault_aware,
            fixed: FixedRefusals {
                unclassified: refusal::unclassified().into(),
                unknown_stage: refusal::unknown_stage().into(),
                no_stage: refusal::no_stage().into(),
                rule_unclassified: "unclassified".into(),
                rule_no_stage: "stage".into(),
            },
            cold: Box::new(Cold {
                warnings,
                source,
                syntax: ast.clone(),
                invariants: Default::default(),
                approval_window: self.approval_window,
            }),
        }
    }
}

/// The hooks `invariant.rs` compiles invariants with: the policy's names, host lists and
/// condition lowering, without a second copy of any of them.
impl Compiler {
    /// A compiler that knows the tools and host lists of an already compiled policy.
    pub(crate) fn for_policy(policy: &Policy, source: SourceFile) -> Compiler {
        let tools: Vec<(String, ToolClass, Span)> = policy
            .tools
            .iter()
            .map(|t| (t.name.to_string(), t.class, Span::default()))
            .collect();
        Compiler {
            source,
            diags: Vec::new(),
            tool_index: policy
                .tools
                .iter()
                .enumerate()
                .map(|(i, t)| (t.name.to_string(), ToolId(i as u32)))
                .collect(),
            tools,
            host_index: policy
                .host_lists
                .iter()
                .enumerate()
                .map(|(i, h)| (h.name.to_string(), HostListId(i as u32)))
                .collect(),
            host_lists: policy.host_lists.clone(),
            host_spans: HashMap::new(),
            in_untargeted_rule: false,
            suggestions_left: MAX_SUGGESTIONS,
        }
    }

    /// Lowers a rule-language condition, reporting errors like a rule's `require` would.
    pub(crate) fn lower_condition(&mut self, e: &ast::Expr) -> Option<Cond> {
        self.cond(e, &mut Categories::default())
    }

    /// Declares a host list (an invariants file may declare its own).
    pub(crate) fn declare_host_list(&mut self, decl: &ast::HostsDecl) {
        self.host_list(decl);
    }

    /// Reports an error (a hint is added when it has none).
    pub(crate) fn report(&mut self, d: Diagnostic) {
        self.error(d);
    }

    /// Reports a warning.
    pub(crate) fn report_warning(&mut self, span: Span, message: String, help: &str) {
        self.warn(span, message, help);
    }

    /// The id of a classified tool.
    pub(crate) fn tool_id(&self, name: &str) -> Option<ToolId> {
        self.tool_index.get(name).copied()
    }

    /// The diagnostics and the host lists (the policy's, then any declared since).
    pub(crate) fn into_results(self) -> (Vec<Diagnostic>, Vec<HostList>) {
        (self.diags, self.host_lists)
    }
}

impl Compiler {
    fn error(&mut self, d: Diagnostic) {
        let d = if d.help.is_none() {
            let help = fallback_help(&d.message);
            d.with_help(help)
        } else {
            d
        };
        self.diags.push(d);
    }

    fn warn(&mut self, span: Span, message: impl Into<String>, help: impl Into<String>) {
        self.diags
            .push(Diagnostic::warning(span, message).with_help(help));
    }
}

/// A hint for errors whose site gave none, so every diagnostic tells the author what to do.
fn fallback_help(message: &str) -> String {
    if message.contains("has no fields") {
        "`facts.stage` and `facts.stage_turns` are single values; compare them directly".into()
    } else if message.contains("given twice") {
        "give each parameter once".into()
    } else if message.contains("needs") {
        format!("the built-ins are {}", builtins::signatures())
    } else if message.contains("tool name is empty") {
        "write a tool name, quoted if it has unusual characters".into()
    } else {
        "see docs/language.md for this construct".into()
    }
}
