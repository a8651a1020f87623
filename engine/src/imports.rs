//! `use` imports: the embedded standard library and the expansion of imported modules.
//!
//! An import is resolved before the compiler runs: each `use` item is replaced, in place, by
//! the declarations of the module it names (latches, host lists, rules, invariants), as if
//! they had been written there. The module's text is appended to the policy's
//! [`SourceFile`], so every diagnostic about an imported declaration points into the module
//! with its own `file:line:col`, and the revision hash covers the modules too.
//!
//! The engine never reads a file: `stdlib::NAME` comes from the copy embedded in the library
//! ([`STDLIB`]), and `use "path.gate"` is handed to a resolver the caller supplies
//! ([`Policy::compile_with`](crate::Policy::compile_with)); the `toolgate` CLI resolves it
//! relative to the importing file.

use std::collections::HashSet;
use toolgate_lang::ast::{self, Item, Selector, Spanned, ToolClass, UseDecl, UseSource};
use toolgate_lang::{Diagnostic, SourceFile, Span};

/// The standard library: `(module name, source)`, embedded at build time from
/// `stdlib-rules/lib/NAME.gate`, so no file is needed at run time.
pub const STDLIB: &[(&str, &str)] = &[
    (
        "untrusted_content_latch",
        include_str!("../../stdlib-rules/lib/untrusted_content_latch.gate"),
    ),
    (
        "exfiltration_guard",
        include_str!("../../stdlib-rules/lib/exfiltration_guard.gate"),
    ),
    (
        "vendor_docs",
        include_str!("../../stdlib-rules/lib/vendor_docs.gate"),
    ),
    (
        "money_preconditions",
        include_str!("../../stdlib-rules/lib/money_preconditions.gate"),
    ),
];

/// The source of standard-library module `name`, if there is one.
pub fn stdlib_module(name: &str) -> Option<&'static str> {
    STDLIB.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

use crate::limits::MAX_IMPORT_DEPTH;

/// What a `use` asks for, as handed to a resolver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportTarget<'a> {
    /// `use stdlib::NAME`.
    Stdlib(&'a str),
    /// `use "PATH"`, written in the file named `importer` (the name it was compiled under).
    File {
        /// The path as written.
        path: &'a str,
        /// The name of the importing file, to resolve `path` against.
        importer: &'a str,
    },
}

/// A module's text, as found by a resolver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleText {
    /// The name diagnostics use for it (a path, or `stdlib::NAME`). Two imports that resolve
    /// to the same name are the same module, brought in once.
    pub name: String,
    /// The module's source.
    pub text: String,
}

/// Why a resolver could not supply a module. Its text is the help line of the `cannot
/// import` diagnostic, so it is written for the policy's author.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// `use stdlib::NAME` names no module of the standard library.
    #[error(
        "the standard library has no module `{name}`; it has {}",
        stdlib_names()
    )]
    UnknownStdlib {
        /// The name written.
        name: String,
    },
    /// A file import, handed to a resolver that reads no files.
    #[error("cannot read `{path}`: this caller resolves only `stdlib::` imports ({hint})")]
    NoFiles {
        /// The path as written.
        path: String,
        /// What resolves files instead.
        hint: &'static str,
    },
    /// A standard-library module imports a file.
    #[error("a standard-library module cannot import files")]
    FileFromStdlib,
    /// The file could not be read.
    #[error("cannot read `{path}`: {reason}")]
    Unreadable {
        /// The file, as the resolver looked for it.
        path: String,
        /// Why (the operating system's words).
        reason: String,
    },
    /// An import from a bundle that is not a relative `/`-separated path.
    #[error("`{path}`: a bundled import is a relative `/`-separated path")]
    NotRelative {
        /// The path as written.
        path: String,
    },
    /// An import that climbs above the policy directory (or the bundle's root).
    #[error("`{path}` (imported by `{importer}`) is outside the policy directory")]
    OutsideRoot {
        /// The path as written.
        path: String,
        /// The importing file.
        importer: String,
    },
    /// A bundle that does not hold the file.
    #[error("the bundle holds no file `{name}`")]
    NotInBundle {
        /// The bundle path looked for.
        name: String,
    },
    /// An embedder's own resolver's reason.
    #[error("{0}")]
    Other(String),
}

/// The standard library's module names, for [`ImportError::UnknownStdlib`].
fn stdlib_names() -> String {
    STDLIB
        .iter()
        .map(|(n, _)| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A resolver: the module a `use` names, or why it cannot be had.
pub type Resolver<'r> = dyn Fn(&ImportTarget<'_>) -> Result<ModuleText, ImportError> + 'r;

/// The resolver [`Policy::compile`](crate::Policy::compile) uses: the embedded standard
/// library only; a file import is an error that says a file resolver is needed.
pub fn resolve_stdlib(target: &ImportTarget<'_>) -> Result<ModuleText, ImportError> {
    match target {
        ImportTarget::Stdlib(name) => match stdlib_module(name) {
            Some(text) => Ok(ModuleText {
                name: format!("stdlib::{name}"),
                text: text.to_string(),
            }),
            None => Err(ImportError::UnknownStdlib {
                name: (*name).to_string(),
            }),
        },
        ImportTarget::File { path, .. } => Err(ImportError::NoFiles {
            path: (*path).to_string(),
            hint: "the `toolgate` CLI and server read files; embedders pass a resolver to `Policy::compile_with`",
        }),
    }
}

/// One import, kept for the checks that need the finished tool table.
pub(crate) struct Imported {
    /// The `use` item.
    pub(crate) use_span: Span,
    /// `stdlib::x` or the path, as written.
    pub(crate) shown: String,
    /// The classes the imported latches and rules select.
    pub(crate) classes: Vec<ToolClass>,
}

struct Expander<'r> {
    resolver: &'r Resolver<'r>,
    source: SourceFile,
    diags: Vec<Diagnostic>,
    /// (module name, item) pairs already brought in; `None` is the whole module.
    seen: HashSet<(String, Option<String>)>,
    imported: Vec<Imported>,
    total_bytes: usize,
}

/// Replaces every `use` of `policy` by the declarations it imports. Returns the combined
/// source and what was imported, or every diagnostic found.
pub(crate) fn expand(
    policy: &mut ast::Policy,
    source: SourceFile,
    resolver: &Resolver<'_>,
) -> Result<(SourceFile, Vec<Imported>), (SourceFile, Vec<Diagnostic>)> {
    if !policy.items.iter().any(|i| matches!(i, Item::Use(_))) {
        return Ok((source, Vec::new()));
    }
    let importer = source.name().to_string();
    let mut x = Expander {
        resolver,
        total_bytes: source.text().len(),
        source,
        diags: Vec::new(),
        seen: HashSet::new(),
        imported: Vec::new(),
    };
    let items = std::mem::take(&mut policy.items);
    policy.items = x.items(items, &importer, 0);
    if x.diags.iter().any(Diagnostic::is_error) {
        x.diags.sort_by_key(|d| d.span.start);
        Err((x.source, x.diags))
    } else {
        Ok((x.source, x.imported))
    }
}

impl Expander<'_> {
    fn items(&mut self, items: Vec<Item>, importer: &str, depth: usize) -> Vec<Item> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Item::Use(u) => out.extend(self.import(&u, importer, depth)),
                other => out.push(other),
            }
        }
        out
    }

    fn import(&mut self, u: &UseDecl, importer: &str, depth: usize) -> Vec<Item> {
        if depth >= MAX_IMPORT_DEPTH {
            self.diags.push(
                Diagnostic::error(
                    u.span,
                    format!("modules import each other more than {MAX_IMPORT_DEPTH} deep"),
                )
                .with_help("flatten the chain of imports"),
            );
            return Vec::new();
        }
        let target = match &u.source {
            UseSource::Stdlib(n) => ImportTarget::Stdlib(&n.name),
            UseSource::File(p) => ImportTarget::File {
                path: &p.node,
                importer,
            },
        };
        let module = match (self.resolver)(&target) {
            Ok(m) => m,
            Err(why) => {
                self.diags.push(
                    Diagnostic::error(u.span, format!("cannot import `{}`", u.display()))
                        .with_label("imported here")
                        .with_help(why.to_string()),
                );
                return Vec::new();
            }
        };
        let key = (module.name.clone(), u.item.as_ref().map(|i| i.name.clone()));
        let whole = (module.name.clone(), None);
        if self.seen.contains(&key) || self.seen.contains(&whole) {
            // Already brought in (directly, or through another module): once is enough.
            return Vec::new();
        }
        self.seen.insert(key);
        self.total_bytes += module.text.len();
        if self.total_bytes > crate::limits::MAX_SOURCE_BYTES {
            self.diags.push(Diagnostic::error(
                u.span,
                format!(
                    "the policy and its imports are larger than {} MiB",
                    crate::limits::MAX_SOURCE_BYTES >> 20
                ),
            ));
            return Vec::new();
        }
        let base = self.source.push_part(module.name.as_str(), &module.text);
        let parsed = match toolgate_lang::parse_at(&module.text, base) {
            Ok(p) => p,
            Err(diags) => {
                self.diags.extend(diags);
                self.diags.push(
                    Diagnostic::error(u.span, format!("module `{}` does not parse", module.name))
                        .with_label("imported here")
                        .with_help("fix the module's syntax errors reported with it"),
                );
                return Vec::new();
            }
        };
        if let UseSource::Stdlib(n) = &u.source {
            if parsed.module.name != n.name {
                self.diags.push(
                    Diagnostic::error(
                        u.span,
                        format!(
                            "module `{}` names itself `{}`",
                            module.name, parsed.module.name
                        ),
                    )
                    .with_note(parsed.module.span, "declared here"),
                );
            }
        }
        for item in &parsed.items {
            let (what, span) = match item {
                Item::Class(c) => ("classifies tools", c.class.span),
                Item::Stage(s) => ("declares a stage", s.name.span),
                Item::Approvals(a) => ("sets how long approvals last", a.span),
                _ => continue,
            };
            self.diags.push(
                Diagnostic::error(u.span, format!("module `{}` {what}", module.name))
                    .with_label("imported here")
                    .with_note(span, "here")
                    .with_help("classes, stages and `approvals` belong to the importing policy; a module brings only latches, host lists, rules and invariants"),
            );
        }
        let mut items = self.items(parsed.items, &module.name, depth + 1);
        if let Some(wanted) = &u.item {
            items.retain(|i| item_name(i) == Some(wanted.name.as_str()));
            if items.is_empty() {
                self.diags.push(
                    Diagnostic::error(
                        wanted.span,
                        format!(
                            "module `{}` declares no latch, host list, rule or invariant `{}`",
                            module.name, wanted.name
                        ),
                    )
                    .with_help("check the module's declarations, or import the whole module"),
                );
            }
        }
        if let Some(targets) = &u.retarget {
            let mut any_rule = false;
            for item in &mut items {
                if let Item::Rule(r) = item {
                    r.targets = targets.clone();
                    any_rule = true;
                }
            }
            if !any_rule {
                self.diags.push(
                    Diagnostic::warning(
                        u.span,
                        format!("`for` retargets rules, but `{}` imports none", u.display()),
                    )
                    .with_help("drop `for ..`: latches and host lists keep their own targets"),
                );
            }
        }
        let mut classes = Vec::new();
        for item in &items {
            let selectors: Vec<&Selector> = match item {
                Item::Latch(l) => l.set_by.iter().chain(&l.blocks).collect(),
                Item::Rule(r) => r.targets.iter().collect(),
                _ => continue,
            };
            for s in selectors {
                if let Selector::Class(Spanned { node, .. }) = s {
                    if !classes.contains(node) {
                        classes.push(*node);
                    }
                }
            }
        }
        self.imported.push(Imported {
            use_span: u.span,
            shown: u.display(),
            classes,
        });
        items
    }
}

/// The name of a named declaration.
fn item_name(item: &Item) -> Option<&str> {
    match item {
        Item::Latch(l) => Some(&l.name.name),
        Item::Hosts(h) => Some(&h.name.name),
        Item::Rule(r) => Some(&r.name.name),
        Item::Invariant(i) => Some(&i.name.name),
        Item::Use(_)
        | Item::Class(_)
        | Item::Stage(_)
        | Item::Detokenise(_)
        | Item::SanitiseOutput(_)
        | Item::Provenance(_)
        | Item::Approvals(_) => None,
        Item::Budget(b) => Some(&b.name.name),
    }
}
