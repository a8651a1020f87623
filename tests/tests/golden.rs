//! Golden tests of rendered `check` diagnostics.
//!
//! Each `tests/golden/NAME.gate` is a broken policy; `NAME.expected` holds the exact text of
//! `Policy::compile("NAME.gate", ..).unwrap_err().render()`. Run with `TOOLGATE_BLESS=1` to
//! rewrite the `.expected` files after an intended change, then review the diff.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use toolgate_engine::Policy;

/// The least number of golden cases the suite must find.
const MIN_GOLDEN: usize = 12;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn cases() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(golden_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "gate"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

fn render(name: &str, text: &str) -> String {
    match Policy::compile(&format!("{name}.gate"), text) {
        Ok(_) => panic!("golden case `{name}` compiles, but every golden case must be broken"),
        Err(e) => {
            assert!(e.errors().count() > 0, "{name}: an error without errors");
            e.render()
        }
    }
}

#[test]
fn rendered_diagnostics_match_the_golden_files() {
    let bless = std::env::var_os("TOOLGATE_BLESS").is_some_and(|v| v == "1");
    let all = cases();
    assert!(
        all.len() >= MIN_GOLDEN,
        "expected at least {MIN_GOLDEN} golden cases, found {}",
        all.len()
    );
    let mut mismatches = Vec::new();
    for (name, text) in &all {
        let got = render(name, text);
        let path = golden_dir().join(format!("{name}.expected"));
        if bless {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
            panic!(
                "{} is missing; run with TOOLGATE_BLESS=1 to create it",
                path.display()
            )
        });
        if got != want {
            mismatches.push(format!("--- {name}.expected\n{want}\n+++ actual\n{got}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} golden mismatch(es) (TOOLGATE_BLESS=1 rewrites them):\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn every_expected_file_has_its_policy() {
    for entry in std::fs::read_dir(golden_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "expected") {
            assert!(
                path.with_extension("gate").exists(),
                "{} has no .gate beside it",
                path.display()
            );
        }
    }
}

#[test]
fn every_golden_diagnostic_has_the_documented_shape() {
    // `file:line:col: error: ...`, a gutter, the source line, a caret under the column, and
    // a hint (`= help:`): the spec asks for all of them on every diagnostic.
    let mut problems = Vec::new();
    for (name, text) in cases() {
        let err = Policy::compile(&format!("{name}.gate"), &text).unwrap_err();
        for d in &err.diagnostics {
            let out = d.render(&err.source_file);
            if let Err(why) = check_shape(&name, &text, &out) {
                problems.push(format!("{name}: {why}:\n{out}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn check_shape(name: &str, text: &str, out: &str) -> Result<(), String> {
    let lines: Vec<&str> = out.lines().collect();
    let first = lines[0];
    let prefix = format!("{name}.gate:");
    let rest = first
        .strip_prefix(&prefix)
        .ok_or("does not start with the file name")?;
    let parts: Vec<&str> = rest.splitn(3, ':').collect();
    let line: usize = parts[0].parse().map_err(|_| "no line number")?;
    let col: usize = parts[1].parse().map_err(|_| "no column number")?;
    if line == 0 || col == 0 {
        return Err("line and column are one-based".into());
    }
    if !(parts[2].starts_with(" error: ") || parts[2].starts_with(" warning: ")) {
        return Err("no severity after the location".into());
    }
    // The quoted source line is the line the location names.
    let src_line = text.lines().nth(line - 1).unwrap_or("");
    if lines.get(2).copied() != Some(format!("{line} | {src_line}").trim_end()) {
        return Err(format!("source line {line} is not quoted"));
    }
    // The caret sits under the named column.
    let caret_line = lines.get(3).ok_or("no caret line")?;
    let gutter = line.to_string().len() + 3;
    let caret_at = caret_line.find('^').ok_or("no caret")?;
    if caret_line[gutter..caret_at].chars().count() != col - 1 {
        return Err(format!("caret is not under column {col}"));
    }
    if !out.contains("= help: ") {
        return Err("no hint (`= help:` line)".into());
    }
    Ok(())
}

#[test]
fn several_syntax_errors_in_different_declarations_are_all_reported() {
    let text = std::fs::read_to_string(golden_dir().join("multi_error.gate")).unwrap();
    let err = Policy::compile("multi_error.gate", &text).unwrap_err();
    let lines: Vec<usize> = err
        .errors()
        .map(|d| err.source_file.line_col(d.span.start).line)
        .collect();
    // `max_turns two` on line 7 and the dangling `or` in the rule ending on line 16.
    assert!(lines.len() >= 2, "{lines:?}");
    assert!(lines.contains(&7), "{lines:?}");
    assert!(lines.iter().any(|l| (15..=16).contains(l)), "{lines:?}");
}

#[test]
fn every_diagnostic_carries_a_hint() {
    // Broken and suspicious policies beyond the golden files: every error and warning that
    // `check` prints must carry a hint, per the spec.
    let head = "module m\nwrite a\nread b\nstage s { tools [a, b] }\n";
    let snippets = [
        "rule r for a { require facts }",
        "rule r for a { require facts.stage.x == 1 }",
        "rule r for a { require facts.fields exists }",
        "rule r for a { require field_filled() }",
        "rule r for a { require called_before(tool: b, tool: b) }",
        "rule r for a { require min_client_messages() }",
        "rule r for a { require min_client_messages(1.5) }",
        "rule r for a { require client_sent_media(within: 10, kinds: []) }",
        "rule r for a { require client_sent_media(within: 10, kinds: image) }",
        "rule r for a { require client_sent_media(window: 10) }",
        "rule r for a { require field_filled(phone, email) }",
        "rule r for a { require args.x > true }",
        "rule r for a { require args.x matches \"(\" }",
        "rule r for a { require args.x in hosts h }",
        "rule r for a { }",
        "rule r for a { require args.x == 1 on_missing maybe }",
        "stage s2 { tools [a] max_turns -1 }",
        "stage s2 { tools [a] tools [b] }",
        "latch l { set_by ingest blocks write",
        "hosts h { schemes [\"ht tp\"] allow [\"a.com\"] }",
        "write",
        "rule r for a { require args.x == 'a' }",
        "rule r for a { require args.x == 1 || args.y == 2 }",
        "bogus line here",
    ];
    let mut missing = Vec::new();
    for snippet in snippets {
        let text = format!("{head}{snippet}\n");
        let Err(err) = Policy::compile("h.gate", &text) else {
            missing.push(format!("`{snippet}` compiled without an error"));
            continue;
        };
        for d in &err.diagnostics {
            if d.help.as_deref().is_none_or(|h| h.trim().is_empty()) {
                missing.push(format!("`{snippet}`: {}", d.message));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "diagnostics without a hint:\n{}",
        missing.join("\n")
    );
}

#[test]
fn carets_never_run_past_the_quoted_line() {
    // A multi-line span after multi-byte characters: the caret must stop at the line's end.
    let text = "module m\nwrite \"tööl\"\nstage s { tools [\"tööl\"] }\nrule r for \"tööl\" { require args.x in [\n] }\n";
    let p = toolgate_tests::compile_named("u.gate", text);
    assert!(!p.warnings().is_empty());
    for w in p.warnings() {
        let out = w.render(p.source());
        let lines: Vec<&str> = out.lines().collect();
        let quoted = lines[2].split_once(" | ").unwrap().1;
        let carets = lines[3].split_once(" | ").unwrap().1;
        let start = carets.find('^').unwrap();
        let width = carets[start..].chars().take_while(|c| *c == '^').count();
        assert!(
            start + width <= quoted.chars().count(),
            "caret runs past the line:\n{out}"
        );
    }
}
