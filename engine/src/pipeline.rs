//! `Policy::compile`: the one path from text to a policy. The steps, in order: the size
//! limit, the parse (`toolgate-lang`), the imports expanded (`imports.rs`), the tables
//! compiled (`compile/`), and the policy's own invariants attached (`invariant.rs`). Each step
//! either passes or ends the compile with every diagnostic it found.

use crate::error::CompileError;
use crate::imports::Resolver;
use crate::limits::MAX_SOURCE_BYTES;
use crate::policy::Policy;
use toolgate_lang::{Diagnostic, SourceFile, Span};

impl Policy {
    /// Compiles policy `text`, naming it `file_name` in diagnostics.
    ///
    /// On success the policy may still carry [`Policy::warnings`]. On failure the error holds
    /// every diagnostic found, each with a span into the source.
    pub fn compile(file_name: &str, text: &str) -> Result<Policy, CompileError> {
        Policy::compile_with(file_name, text, &crate::imports::resolve_stdlib)
    }

    /// Compiles policy `text` like [`Policy::compile`], resolving each `use` with `resolve`:
    /// it is handed `stdlib::NAME` or a file path with the importing file's name, and returns
    /// the module's text or why it cannot. The engine itself never reads a file.
    /// [`resolve_stdlib`](crate::resolve_stdlib) resolves the embedded standard library.
    pub fn compile_with(
        file_name: &str,
        text: &str,
        resolve: &Resolver<'_>,
    ) -> Result<Policy, CompileError> {
        let source = SourceFile::new(file_name, text);
        if text.len() > MAX_SOURCE_BYTES {
            return Err(CompileError {
                diagnostics: vec![Diagnostic::error(
                    Span::new(0, 0),
                    format!("policy is larger than {} MiB", MAX_SOURCE_BYTES >> 20),
                )
                .with_help("split it into several policies")],
                source_file: source,
            });
        }
        let mut ast = match toolgate_lang::parse(text) {
            Ok(ast) => ast,
            Err(diagnostics) => {
                return Err(CompileError {
                    source_file: source,
                    diagnostics,
                })
            }
        };
        let (source, imported) = match crate::imports::expand(&mut ast, source, resolve) {
            Ok(done) => done,
            Err((source_file, diagnostics)) => {
                return Err(CompileError {
                    source_file,
                    diagnostics,
                })
            }
        };
        let mut policy = crate::compile::tables(&ast, source, &imported)?;
        // Invariants are compiled against the finished tables; they never change them.
        crate::compile::attach_inline(&mut policy, &ast).map_err(|diagnostics| CompileError {
            source_file: policy.source().clone(),
            diagnostics,
        })?;
        Ok(policy)
    }
}
