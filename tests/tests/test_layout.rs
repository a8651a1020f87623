//! One integration-test binary per crate (issue 23): `toolgate-tests`, `toolgate-server` and
//! `toolgate` (cli/) build only `tests/main.rs` (`autotests = false`), which declares each
//! topic file as a module. A `tests/*.rs` file it does not declare would never be compiled nor
//! run, with no warning; this fails for one.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;

/// The module names `main.rs` declares (`mod NAME;`, behind any attributes).
fn declared(main: &str) -> BTreeSet<String> {
    main.lines()
        .filter_map(|line| line.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_test_file_is_a_module_of_the_one_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for krate in ["tests", "server", "cli"] {
        let dir = root.join(krate).join("tests");
        let main = std::fs::read_to_string(dir.join("main.rs")).unwrap();
        let modules = declared(&main);
        let mut files = BTreeSet::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
                if stem != "main" {
                    files.insert(stem);
                }
            }
        }
        assert!(files.len() > 1, "{krate}/tests: read no test files");
        let missing: Vec<&String> = files.difference(&modules).collect();
        assert!(
            missing.is_empty(),
            "{krate}/tests/main.rs does not declare {missing:?}: add `mod NAME;` there"
        );
    }
    assert_eq!(
        declared("//! x\n#[cfg(feature = \"jwt\")]\nmod bearer;\nmod support;\n"),
        BTreeSet::from(["bearer".to_string(), "support".to_string()])
    );
}
