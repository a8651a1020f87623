//! Checks for conditions that compile but probably do not guard what their author meant:
//! a `require` that can never deny, and `matches` patterns that accept more than they seem
//! to. The compiler turns the findings into warnings (docs/language.md, "Diagnostics").

use regex_syntax::ast::{
    self, Ast, ClassPerlKind, ClassSet, ClassSetBinaryOpKind, ClassSetItem, Flag, FlagsItemKind,
};
use regex_syntax::hir::Look;
use toolgate_lang::ast::{Expr, ExprKind};

/// How a condition is constant, when it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Constant {
    /// It has this value whatever the request holds (`x or true`).
    Always(bool),
    /// It has this value whenever the values it reads are present and well typed
    /// (`x or not x`); with one missing it is unknown, like any test of it.
    WhenKnown(bool),
}

impl Constant {
    fn value(self) -> bool {
        match self {
            Constant::Always(v) | Constant::WhenKnown(v) => v,
        }
    }
}

/// Whether `e` is constant, by Kleene logic over its syntax: literals, `not`, an `or` with
/// a true part, an `and` with a false part, all parts constant, or a part next to its own
/// negation (`x or not x`, `x and not x`, compared without spans). Tests and built-ins are
/// never constant by themselves. One bottom-up pass: linear in the size of `e`.
pub(crate) fn constant(e: &Expr) -> Option<Constant> {
    info(e).constant
}

/// What one pass learns about a node: whether it is constant, a hash of its span-free tree,
/// and for `not X` the hash of `X`.
struct Info {
    constant: Option<Constant>,
    hash: u64,
    negates: Option<u64>,
}

fn hash_of(tag: u8, parts: impl IntoIterator<Item = u64>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tag.hash(&mut h);
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

fn info(e: &Expr) -> Info {
    match &e.kind {
        ExprKind::Bool(b) => Info {
            constant: Some(Constant::Always(*b)),
            hash: hash_of(1, [u64::from(*b)]),
            negates: None,
        },
        ExprKind::Not(inner) => {
            let i = info(inner);
            Info {
                constant: i.constant.map(|c| match c {
                    Constant::Always(v) => Constant::Always(!v),
                    Constant::WhenKnown(v) => Constant::WhenKnown(!v),
                }),
                hash: hash_of(2, [i.hash]),
                negates: Some(i.hash),
            }
        }
        ExprKind::Or(parts) => junction(parts, true),
        ExprKind::And(parts) => junction(parts, false),
        ExprKind::Call(_) | ExprKind::Predicate(..) => {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            format!("{:?}", e.without_spans()).hash(&mut h);
            Info {
                constant: None,
                hash: h.finish(),
                negates: None,
            }
        }
    }
}

/// `or` (`absorbing` = true) or `and` (`absorbing` = false).
fn junction(parts: &[Expr], absorbing: bool) -> Info {
    let infos: Vec<Info> = parts.iter().map(info).collect();
    let hash = hash_of(if absorbing { 3 } else { 4 }, infos.iter().map(|i| i.hash));
    let done = |constant| Info {
        constant,
        hash,
        negates: None,
    };
    let consts: Vec<Option<Constant>> = infos.iter().map(|i| i.constant).collect();
    if consts.contains(&Some(Constant::Always(absorbing))) {
        return done(Some(Constant::Always(absorbing)));
    }
    if consts.contains(&Some(Constant::WhenKnown(absorbing))) || has_complement(parts, &infos) {
        return done(Some(Constant::WhenKnown(absorbing)));
    }
    // Every part has the other value: so has the whole, exactly if every part is exact.
    let mut exact = true;
    for c in &consts {
        match c {
            Some(Constant::Always(v)) if *v != absorbing => {}
            Some(Constant::WhenKnown(v)) if *v != absorbing => exact = false,
            _ => return done(None),
        }
    }
    done(Some(if exact {
        Constant::Always(!absorbing)
    } else {
        Constant::WhenKnown(!absorbing)
    }))
}

/// True when one part is `not` of another: found by hash, confirmed on the span-free trees.
fn has_complement(parts: &[Expr], infos: &[Info]) -> bool {
    let by_hash: std::collections::HashMap<u64, usize> =
        infos.iter().enumerate().map(|(i, x)| (x.hash, i)).collect();
    infos.iter().zip(parts).any(|(info, part)| {
        let (Some(h), ExprKind::Not(inner)) = (info.negates, &part.kind) else {
            return false;
        };
        by_hash
            .get(&h)
            .is_some_and(|&j| parts[j].without_spans() == inner.without_spans())
    })
}

/// True when `e` is true for every request (or every request that has what it reads).
pub(crate) fn always_true(e: &Expr) -> Option<Constant> {
    constant(e).filter(|c| c.value())
}

/// What a `matches` pattern accepts beyond what it seems to.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct RegexFindings {
    /// Perl classes that, read as Unicode, let the pattern match more than the ASCII class
    /// would (`\d`, `\w`, `\s` outside `(?-u)` and outside `[^..]`), as written.
    pub(crate) unicode_classes: Vec<&'static str>,
    /// The pattern repeats a character class (`[A-Z]{3}`, `\d+`, `[0-9]*`): it describes the
    /// shape of a value, as an identifier check does.
    pub(crate) repeats_a_class: bool,
    /// Every match must start at the start of the value and end at its end (`^`/`\A` and
    /// `$`/`\z` around every alternative, not multi-line `(?m)` anchors).
    pub(crate) anchored: bool,
}

/// Lints one `matches` pattern, read with the same defaults as the `regex` crate. A pattern
/// that does not parse yields no findings (the compiler reports it as an error).
pub(crate) fn regex(pattern: &str) -> RegexFindings {
    let Ok(tree) = ast::parse::Parser::new().parse(pattern) else {
        return RegexFindings {
            anchored: true,
            ..RegexFindings::default()
        };
    };
    let mut out = RegexFindings::default();
    let mut unicode = true;
    walk(&tree, &mut unicode, &mut out);
    out.anchored = match regex_syntax::Parser::new().parse(pattern) {
        Ok(hir) => {
            let p = hir.properties();
            p.look_set_prefix().contains(Look::Start) && p.look_set_suffix().contains(Look::End)
        }
        Err(_) => true,
    };
    out
}

fn perl(c: &ast::ClassPerl) -> &'static str {
    match (&c.kind, c.negated) {
        (ClassPerlKind::Digit, false) => "\\d",
        (ClassPerlKind::Word, false) => "\\w",
        (ClassPerlKind::Space, false) => "\\s",
        (ClassPerlKind::Digit, true) => "\\D",
        (ClassPerlKind::Word, true) => "\\W",
        (ClassPerlKind::Space, true) => "\\S",
    }
}

/// Notes a Perl class that, read as Unicode, lets the pattern match more than its ASCII
/// reading would: `\d` where it adds to what matches (`widening`), or `\D` where it is taken
/// away (`[^\D]`). Where a Unicode class only makes the pattern stricter, nothing is noted.
fn note_perl(c: &ast::ClassPerl, unicode: bool, widening: bool, out: &mut RegexFindings) {
    let name = perl(c);
    if unicode && widening != c.negated && !out.unicode_classes.contains(&name) {
        out.unicode_classes.push(name);
    }
}

/// Applies `(?flags)` to the Unicode switch.
fn apply(flags: &ast::Flags, unicode: &mut bool) {
    let mut on = true;
    for item in &flags.items {
        match item.kind {
            FlagsItemKind::Negation => on = false,
            FlagsItemKind::Flag(Flag::Unicode) => *unicode = on,
            FlagsItemKind::Flag(_) => {}
        }
    }
}

fn walk(a: &Ast, unicode: &mut bool, out: &mut RegexFindings) {
    match a {
        Ast::Flags(f) => apply(&f.flags, unicode),
        Ast::ClassPerl(c) => note_perl(c, *unicode, true, out),
        Ast::ClassBracketed(c) => class_set(&c.kind, *unicode, !c.negated, out),
        Ast::Repetition(r) => {
            if matches!(
                &*r.ast,
                Ast::ClassPerl(_) | Ast::ClassBracketed(_) | Ast::ClassUnicode(_)
            ) {
                out.repeats_a_class = true;
            }
            walk(&r.ast, unicode, out);
        }
        Ast::Group(g) => {
            let mut inner = *unicode;
            if let Some(flags) = g.flags() {
                apply(flags, &mut inner);
            }
            walk(&g.ast, &mut inner, out);
        }
        Ast::Alternation(x) => x.asts.iter().for_each(|a| walk(a, unicode, out)),
        Ast::Concat(x) => x.asts.iter().for_each(|a| walk(a, unicode, out)),
        Ast::Empty(_)
        | Ast::Literal(_)
        | Ast::Dot(_)
        | Ast::Assertion(_)
        | Ast::ClassUnicode(_) => {}
    }
}

/// A bracketed class; `widening` is false inside a negation (`[^..]`) or a subtracted set.
fn class_set(set: &ClassSet, unicode: bool, widening: bool, out: &mut RegexFindings) {
    match set {
        ClassSet::Item(item) => class_item(item, unicode, widening, out),
        ClassSet::BinaryOp(op) => {
            class_set(&op.lhs, unicode, widening, out);
            match op.kind {
                ClassSetBinaryOpKind::Intersection => class_set(&op.rhs, unicode, widening, out),
                ClassSetBinaryOpKind::Difference => class_set(&op.rhs, unicode, !widening, out),
                // `~~` both adds and takes away.
                ClassSetBinaryOpKind::SymmetricDifference => {
                    class_set(&op.lhs, unicode, !widening, out);
                    class_set(&op.rhs, unicode, widening, out);
                    class_set(&op.rhs, unicode, !widening, out);
                }
            }
        }
    }
}

fn class_item(item: &ClassSetItem, unicode: bool, widening: bool, out: &mut RegexFindings) {
    match item {
        ClassSetItem::Perl(c) => note_perl(c, unicode, widening, out),
        ClassSetItem::Bracketed(b) => class_set(&b.kind, unicode, widening != b.negated, out),
        ClassSetItem::Union(u) => u
            .items
            .iter()
            .for_each(|i| class_item(i, unicode, widening, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(src: &str) -> Expr {
        let p = toolgate_lang::parse(&format!("module m\nrule r for [] {{ require {src} }}"))
            .expect("the test condition parses");
        match p.items.into_iter().next() {
            Some(toolgate_lang::ast::Item::Rule(r)) => r.requires[0].clone(),
            other => panic!("not a rule: {other:?}"),
        }
    }

    #[test]
    fn finds_constant_conditions() {
        use Constant::*;
        for (src, want) in [
            ("true", Some(Always(true))),
            ("args.x == 1 or true", Some(Always(true))),
            ("true or args.x == 1", Some(Always(true))),
            ("not false", Some(Always(true))),
            ("(args.x == 1 or true) and not false", Some(Always(true))),
            ("args.x == 1 or not args.x == 1", Some(WhenKnown(true))),
            ("not args.x == 1 or args.x == 1", Some(WhenKnown(true))),
            (
                "args.a > 2 or field_filled(p) or not field_filled(p)",
                Some(WhenKnown(true)),
            ),
            (
                "(args.x == 1 or not args.x == 1) and true",
                Some(WhenKnown(true)),
            ),
            (
                "not (args.x == 1 and not args.x == 1)",
                Some(WhenKnown(true)),
            ),
            ("args.x == 1 and false", Some(Always(false))),
            ("args.x == 1", None),
            ("args.x == 1 or not args.x == 2", None),
            ("args.x == 1 or args.y == 1", None),
            ("args.x == 1 and true", None),
            ("not args.x == 1", None),
        ] {
            assert_eq!(constant(&cond(src)), want, "{src}");
        }
    }

    #[test]
    fn finds_unicode_classes_outside_ascii_mode() {
        for (p, want) in [
            (r"^\d+$", vec!["\\d"]),
            (r"^[\w.-]+@\S+$", vec!["\\w"]),
            (r"\s\d\w\d", vec!["\\s", "\\d", "\\w"]),
            (r"[[:digit:]]\D\W\S", vec![]),
            (r"(?-u:\d)+", vec![]),
            (r"(?-u)\d\w", vec![]),
            (r"(?-u:\d)\d", vec!["\\d"]),
            (r"\\d", vec![]),
            (r"[0-9]", vec![]),
            (r"[a-z&&\w]", vec!["\\w"]),
            (r"\p{Nd}", vec![]),
            (r"^[^\s]+$", vec![]),
            (r"^[^<\d>]+$", vec![]),
            (r"^[^\D]+$", vec!["\\D"]),
            (r"^[a-z--\d]+$", vec![]),
            (r"^[[^\d]a]+$", vec![]),
            (r"^[^[^\w]]+$", vec!["\\w"]),
        ] {
            assert_eq!(regex(p).unicode_classes, want, "{p}");
        }
    }

    #[test]
    fn finds_anchoring_and_class_repetition() {
        for (p, anchored, repeats) in [
            ("^POL-[0-9]{6}$", true, true),
            ("POL-[0-9]{6}", false, true),
            ("^POL-[0-9]{6}", false, true),
            ("POL-[0-9]{6}$", false, true),
            (r"\APOL-[0-9]{6}\z", true, true),
            ("^(?:POL|ADM)-[0-9]+$", true, true),
            ("^POL-[0-9]+|ADM-[0-9]+$", false, true),
            ("(?m)^POL-[0-9]+$", false, true),
            ("^[A-Z]*$", true, true),
            ("urgent", false, false),
            ("^https://.*", false, false),
            ("a+", false, false),
        ] {
            let f = regex(p);
            assert_eq!((f.anchored, f.repeats_a_class), (anchored, repeats), "{p}");
        }
    }
}
