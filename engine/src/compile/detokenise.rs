//! Lowering `detokenise` paths: an argument path and the token kinds it accepts.

use super::Compiler;
use crate::vault::{Kinds, Permit};
use toolgate_lang::ast::{self, PathRoot};
use toolgate_lang::Diagnostic;

impl Compiler {
    /// One `detokenise` path: an argument path and the token kinds it accepts.
    pub(super) fn detokenise_path(&mut self, p: &ast::DetokenisePath) -> Option<Permit> {
        let path = &p.path;
        if path.root != PathRoot::Args || path.segments.is_empty() {
            self.error(
                Diagnostic::error(path.span, "a `detokenise` path must name an argument")
                    .with_help("write `args.NAME: KIND` (or a deeper path such as `args.patient.nhs_number: NHS_NUMBER`)"),
            );
            return None;
        }
        let segs = self.path(path)?.segs;
        let shown = self
            .source
            .text()
            .get(path.span.start..path.span.end)
            .unwrap_or("args")
            .to_string();
        let Some(kinds) = &p.kinds else {
            self.error(
                Diagnostic::error(path.span, format!("`{shown}` does not say which token kinds it unwraps"))
                    .with_label("no kinds")
                    .with_help(format!("write `{shown}: KIND` (a token's name without its `_NN` index: `SORT_CODE` for `<VAULT:SORT_CODE_01>`), `{shown}: [KIND, ..]`, or `{shown}: any` for free text that may carry every kind; without kinds a model could route any token here and have its cleartext sent")),
            );
            return None;
        };
        if kinds.node.is_empty() {
            self.error(
                Diagnostic::error(kinds.span, format!("`{shown}` accepts no token kind"))
                    .with_help("name at least one kind, or remove the path"),
            );
            return None;
        }
        let mut named: Vec<Box<str>> = Vec::new();
        let mut any = None;
        for k in &kinds.node {
            match &k.node {
                ast::TokenKind::Any => any = Some(k.span),
                ast::TokenKind::Named(name) => {
                    if !crate::vault::is_token_kind(name) {
                        self.error(
                            Diagnostic::error(k.span, format!("`{name}` can never be a token kind"))
                                .with_help("a kind is made of letters, digits, `_`, `-` and `:`, as in the token `<VAULT:KIND_01>`"),
                        );
                        return None;
                    }
                    if crate::vault::kind_of(name) != name {
                        self.warn(
                            k.span,
                            format!("token kind `{name}` ends in an index, so it matches only tokens such as `<VAULT:{name}_01>`"),
                            format!("a token's kind is its name without the trailing `_NN`; write `{}`", crate::vault::kind_of(name)),
                        );
                    }
                    named.push(name.as_str().into());
                }
            }
        }
        let kinds = match any {
            Some(span) => {
                if !named.is_empty() {
                    self.warn(
                        span,
                        format!("`{shown}` lists kinds and `any`, so it unwraps every kind"),
                        "keep `any` alone, or list only the kinds the argument should receive",
                    );
                }
                Kinds::Any
            }
            None => Kinds::Only(named.into_boxed_slice()),
        };
        Some(Permit { path: segs, kinds })
    }
}
