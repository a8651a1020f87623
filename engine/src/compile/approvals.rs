//! `approvals { valid_for DURATION }`: how long a person's approval of an ask may be used.

use super::*;
use std::time::Duration;

/// An approval's window when the policy sets none.
pub(crate) const DEFAULT_WINDOW: Duration = Duration::from_secs(10 * 60);
/// The shortest window a policy may set: shorter would expire before a person could answer.
const MIN_WINDOW: Duration = Duration::from_secs(1);
/// The longest window a policy may set: an approval is for this call now, not a standing
/// grant (a standing grant is a rule).
const MAX_WINDOW: Duration = Duration::from_secs(24 * 3600);

impl Compiler {
    /// The policy's approval window: its one `approvals` block's `valid_for`, else
    /// [`DEFAULT_WINDOW`]. A second block, or a window outside 1s..=24h, is an error.
    pub(super) fn approval_window(&mut self, ast: &ast::Policy) -> Duration {
        let mut first: Option<Span> = None;
        let mut window = DEFAULT_WINDOW;
        for item in &ast.items {
            let Item::Approvals(decl) = item else {
                continue;
            };
            if let Some(at) = first {
                self.error(
                    Diagnostic::error(decl.span, "`approvals` is declared twice")
                        .with_label("declared again here")
                        .with_note(at, "first declared here")
                        .with_help("write one `approvals { .. }` block"),
                );
                continue;
            }
            first = Some(decl.span);
            let Some(valid_for) = &decl.valid_for else {
                continue;
            };
            match valid_for.node.seconds().map(Duration::from_secs) {
                Some(d) if (MIN_WINDOW..=MAX_WINDOW).contains(&d) => window = d,
                _ => self.error(
                    Diagnostic::error(
                        valid_for.span,
                        format!(
                            "an approval cannot stay valid for {}",
                            valid_for.node
                        ),
                    )
                    .with_label("outside 1s to 24h")
                    .with_help("an approval is for one call now: give a window from `1s` to `24h`; a standing permission is a rule"),
                ),
            }
        }
        window
    }
}
