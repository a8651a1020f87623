//! No import circle between the modules of a library crate (issue 23): a module that needs
//! another's item and is needed back by it is one module in two files, and every change to
//! either touches both. Each crate's top-level modules form a graph by their `crate::NAME`
//! references (and a top-level file's `super::NAME`, and every name of a `crate::{A, B}`
//! group); the graph must have no cycle. The last two (the server's state and the components
//! it holds, the engine's `Policy` and its invariants) went with issue 23: a component reaches
//! the state through a trait or a leaf it holds (`reload_gate::Installer`, `origins.rs`,
//! `decisions.rs`), and judging an invariant (`invariant_check.rs`) is apart from what one is.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const CRATES: &[&str] = &[
    "lang", "engine", "turns", "hooks", "loader", "bundle", "prove", "server", "mcp",
];

/// Top-level module -> the top-level modules it names.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let top = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            if top == "lib" || top == "main" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests may reach anywhere.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let mut refs = names_after(code, "crate::");
            if rel.components().count() == 1 {
                refs.extend(names_after(code, "super::"));
            }
            refs.remove(&top);
            edges.entry(top).or_default().extend(refs);
        }
    }
    let modules: BTreeSet<String> = edges.keys().cloned().collect();
    for deps in edges.values_mut() {
        deps.retain(|d| modules.contains(d));
    }
    edges
}

/// The identifiers that follow `prefix` in `code`: `prefix::a`, and each of `a`, `b` in
/// `prefix::{a, b::C}`.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let ident = |s: &str| {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<String>()
    };
    code.match_indices(prefix)
        .filter(|(i, _)| {
            !code[..*i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .flat_map(|(i, _)| {
            let rest = &code[i + prefix.len()..];
            let Some(group) = rest.strip_prefix('{') else {
                return vec![ident(rest)];
            };
            // The group's top-level items, up to its closing brace.
            let (mut depth, mut start, mut items) = (0usize, 0, Vec::new());
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        items.push(ident(&group[start..j]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(ident(&group[start..j]));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            items
        })
        .filter(|n| !n.is_empty())
        .collect()
}

/// The graph's strongly connected components of more than one module (Tarjan).
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in &t.g[v] {
            if !t.index.contains_key(w.as_str()) {
                visit(t, w);
                let lw = t.low[w.as_str()];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w.as_str()) {
                let iw = t.index[w.as_str()];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn library_crates_have_no_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for krate in CRATES {
        let g = graph(&root.join(krate).join("src"));
        assert!(g.len() > 1 || *krate == "hooks", "{krate}: read no modules");
        for comp in cycles(&g) {
            found.push((krate.to_string(), comp));
        }
    }
    assert_eq!(
        found,
        Vec::<(String, Vec<String>)>::new(),
        "import circles between modules (crate, modules)"
    );
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let g: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .iter()
        .map(|(k, v)| (k.to_string(), BTreeSet::from([v.to_string()])))
        .collect();
    assert_eq!(cycles(&g), vec![vec!["a", "b", "c"]]);
    assert_eq!(
        names_after("use crate::x::Y; my_crate::z", "crate::"),
        BTreeSet::from(["x".to_string()])
    );
    assert_eq!(
        names_after("use super::{a, b::{C, D}, e};", "super::"),
        BTreeSet::from(["a".to_string(), "b".to_string(), "e".to_string()])
    );
}
