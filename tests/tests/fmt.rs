//! `toolgate fmt`: the formatter keeps meaning and comments, and is idempotent, on generated
//! policies (random layouts, comments between any two tokens) and on every `.gate` file in
//! the repository; the CLI's `--check`, in-place and stdin modes and exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use toolgate_lang::{format_source, parse};
use toolgate_tests::gen;
use toolgate_tests::{proptest_config, repo_root};

fn fmt(src: &str) -> String {
    match format_source("gen.gate", src) {
        Ok(out) => out,
        Err(d) => panic!("format_source failed: {d:?}\n--- source:\n{src}"),
    }
}

/// Asserts the three properties on one source and returns the formatted text.
fn check_properties(src: &str) -> String {
    let before = parse(src).unwrap_or_else(|d| panic!("source does not parse: {d:?}\n{src}"));
    let once = fmt(src);
    let after = parse(&once).unwrap_or_else(|d| panic!("output does not parse: {d:?}\n{once}"));
    assert_eq!(
        after.without_spans(),
        before.without_spans(),
        "formatting changed the tree\n--- source:\n{src}\n--- formatted:\n{once}"
    );
    let twice = fmt(&once);
    assert_eq!(
        twice, once,
        "not idempotent\n--- first:\n{once}\n--- second:\n{twice}"
    );
    for line in once.lines() {
        assert_eq!(line, line.trim_end(), "trailing whitespace in {line:?}");
    }
    once
}

proptest! {
    #![proptest_config(proptest_config(64))]

    #[test]
    fn generated_policies_keep_meaning_and_comments(
        spec in gen::spec(),
        seps in prop::collection::vec(any::<u8>(), 1..64),
    ) {
        let src = spec.render_with(&seps);
        let out = check_properties(&src);
        // Every comment the generator wrote (`cN`, numbered) is in the output exactly once,
        // and nothing else looks like one of them.
        let n = spec.comment_count(&seps);
        for i in 0..n {
            let slash = format!("// c{i}\n");
            let hash = format!("# c{i}\n");
            let found = out.matches(&slash).count() + out.matches(&hash).count();
            prop_assert_eq!(found, 1, "comment c{} found {} times\n--- source:\n{}\n--- formatted:\n{}", i, found, src, out);
        }
        let extra = format!("c{n}\n");
        prop_assert!(!out.contains(&extra));
    }

    #[test]
    fn plain_rendering_is_stable(spec in gen::spec()) {
        check_properties(&spec.render());
    }
}

fn gate_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                gate_files(&p, out);
            }
        } else if name.ends_with(".gate") {
            out.push(p);
        }
    }
}

#[test]
fn every_gate_file_in_the_repository_formats_faithfully() {
    let mut files = Vec::new();
    gate_files(&repo_root(), &mut files);
    let mut formatted = 0;
    for path in &files {
        // Fuzz regression inputs may not even be UTF-8; the formatter never sees those.
        let Ok(src) = String::from_utf8(std::fs::read(path).unwrap()) else {
            continue;
        };
        if let Ok(inv) = toolgate_lang::parse_invariants(&src) {
            // An invariants file: same tree, idempotent, every comment kept.
            let out = format_source("x.invariants.gate", &src).unwrap();
            let again = toolgate_lang::parse_invariants(&out).unwrap();
            assert_eq!(again.items.len(), inv.items.len(), "{}", path.display());
            assert_eq!(format_source("x", &out).unwrap(), out, "{}", path.display());
            assert_eq!(out.matches("//").count(), src.matches("//").count());
            formatted += 1;
            continue;
        }
        if parse(&src).is_err() {
            // Golden files with syntax errors: the formatter must refuse them, not guess.
            assert!(format_source("x.gate", &src).is_err(), "{}", path.display());
            continue;
        }
        let out = check_properties(&src);
        let comments = |s: &str| -> Vec<String> {
            s.lines()
                .filter_map(|l| {
                    l.find("//")
                        .or_else(|| l.find('#'))
                        .map(|i| l[i..].trim_end().to_string())
                })
                .collect()
        };
        // These files have no `//` or `#` inside strings, so a line scan finds their comments.
        if !src.contains("\"#") && !src.contains("//\"") {
            assert_eq!(
                comments(&out).len(),
                comments(&src).len(),
                "{}",
                path.display()
            );
        }
        formatted += 1;
    }
    assert!(
        formatted >= 10,
        "expected the examples and golden files, formatted {formatted}"
    );
}

#[test]
fn examples_are_formatted() {
    for name in toolgate_tests::EXAMPLES {
        let path = toolgate_tests::example_path(name);
        let src = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            fmt(&src),
            src,
            "{} is not fmt-clean: run toolgate fmt on it",
            path.display()
        );
    }
}

#[test]
fn house_style() {
    let src = "module m # top\nwrite a,b\n  ingest \"x.y\"\nread c\nstage s {tools [a,\"x.y\", c] max_turns 2}\nstage e { }\n\
               latch l {set_by ingest blocks [write]}\nrule r for [a] {require (args.n > 1e3 or not args.s matches r\"^\\d$\") and ((args.m exists))}\n";
    let want = "module m  # top\n\nwrite  a, b\ningest \"x.y\"\nread   c\n\nstage s {\n  tools [a, \"x.y\", c]\n  max_turns 2\n}\n\n\
                stage e {}\n\nlatch l {\n  set_by ingest\n  blocks [write]\n}\n\n\
                rule r for [a] {\n  require (args.n > 1e3 or not args.s matches r\"^\\d$\") and args.m exists\n}\n";
    assert_eq!(fmt(src), want);
}

#[test]
fn long_lists_wrap_one_item_per_line_and_comments_stay_with_their_item() {
    let tools: Vec<String> = (0..12).map(|i| format!("tool_number_{i}")).collect();
    let src = format!(
        "module m\nread {}\nstage s {{ tools [{}] }}\nhosts h {{ allow [\"a.com\", // the main one\n \".a.com\"] }}\n",
        tools.join(", "),
        tools.join(", ")
    );
    let out = fmt(&src);
    for t in &tools {
        assert!(
            out.contains(&format!("\n    {t},\n")),
            "{t} on its own line:\n{out}"
        );
    }
    assert!(
        out.contains("  allow [\n    \"a.com\",  // the main one\n    \".a.com\",\n  ]\n"),
        "{out}"
    );
}

#[test]
fn syntax_errors_are_reported_not_formatted() {
    let err = format_source(
        "bad.gate",
        "module m\nrule r for a { require args.x = 1 }\n",
    )
    .unwrap_err();
    assert!(
        err.iter().any(|d| d.message.contains("found `=`")),
        "{err:?}"
    );
}

/// The `toolgate` binary, built once (it belongs to another package of the workspace, so
/// Cargo does not build it for this one's tests).
fn toolgate() -> Command {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let bin = BIN.get_or_init(|| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "toolgate"])
            .current_dir(repo_root())
            .status()
            .unwrap();
        assert!(status.success(), "cargo build -p toolgate failed");
        // target/debug/deps/it-HASH -> target/debug/toolgate
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap().parent().unwrap();
        dir.join(format!("toolgate{}", std::env::consts::EXE_SUFFIX))
    });
    Command::new(bin)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolgate-fmt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const MESSY: &str = "module m\nwrite a,b // keep me\nstage s {tools [a]}\n";
const CLEAN: &str = "module m\n\nwrite a, b  // keep me\n\nstage s {\n  tools [a]\n}\n";

#[test]
fn cli_check_exit_codes_name_the_files_that_differ() {
    let dir = temp_dir("check");
    let clean = dir.join("clean.gate");
    let messy = dir.join("messy.gate");
    std::fs::write(&clean, CLEAN).unwrap();
    std::fs::write(&messy, MESSY).unwrap();

    let ok = toolgate()
        .arg("fmt")
        .arg("--check")
        .arg(&clean)
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");

    let bad = toolgate()
        .arg("fmt")
        .arg("--check")
        .arg(&clean)
        .arg(&messy)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    let stdout = String::from_utf8_lossy(&bad.stdout);
    assert!(stdout.contains("messy.gate"), "{stdout}");
    assert!(!stdout.contains("clean.gate"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(&messy).unwrap(),
        MESSY,
        "--check must not write"
    );
}

#[test]
fn cli_rewrites_in_place() {
    let dir = temp_dir("inplace");
    let messy = dir.join("messy.gate");
    std::fs::write(&messy, MESSY).unwrap();
    let out = toolgate().arg("fmt").arg(&messy).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(std::fs::read_to_string(&messy).unwrap(), CLEAN);
    let again = toolgate()
        .arg("fmt")
        .arg("--check")
        .arg(&messy)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{again:?}");
}

#[test]
fn cli_stdin_to_stdout() {
    let mut child = toolgate()
        .args(["fmt", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(MESSY.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), CLEAN);
}

#[test]
fn cli_syntax_error_prints_diagnostics_and_exits_2() {
    let dir = temp_dir("syntax");
    let bad = dir.join("bad.gate");
    let text = "module m\nrule r for a { require args.x = 1 }\n";
    std::fs::write(&bad, text).unwrap();
    let out = toolgate().arg("fmt").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.gate:2:31: error:"), "{stderr}");
    assert!(stderr.contains("help: compare with `==`"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&bad).unwrap(),
        text,
        "a broken file is left alone"
    );
}
