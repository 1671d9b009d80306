//! The source layout's rules, read from `src/` (docs/ARCHITECTURE.md
//! "Folders and what they may import"): each top-level module imports only
//! the modules its rule names, and no two modules import each other, directly
//! or around a longer circle. A module using its own ancestors (a child of
//! `proxy/` using the `Gateway` of `proxy/mod.rs`) is how Rust nests and is
//! not counted. Test code (from a file's first `#[cfg(test)]`) is not read.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What each top-level module of `src/` may import (besides itself).
const RULES: &[(&str, &[&str])] = &[
    ("util", &[]),
    ("family", &[]),
    ("adjust", &[]),
    ("sse", &[]),
    ("eventstream", &["sse", "util"]),
    ("config", &["family", "util"]),
    ("secrets", &["config"]),
    ("error", &["secrets"]),
    ("ir", &["family", "util"]),
    (
        "protocol",
        &[
            "adjust",
            "config",
            "error",
            "eventstream",
            "family",
            "ir",
            "sse",
            "util",
        ],
    ),
    (
        "admit",
        &[
            "adjust", "config", "error", "family", "ir", "protocol", "util",
        ],
    ),
    (
        "translate",
        &[
            "adjust",
            "config",
            "error",
            "eventstream",
            "family",
            "ir",
            "protocol",
            "sse",
            "util",
        ],
    ),
    ("upstream", &["config", "error", "family", "util"]),
    ("identity", &["config", "error", "upstream", "util"]),
    (
        "runtime",
        &[
            "config", "family", "protocol", "secrets", "upstream", "util",
        ],
    ),
    ("obs", &["adjust", "error", "family", "util"]),
    ("state", &["config", "error", "family", "ir", "obs", "util"]),
    ("listener", &["error", "util"]),
    (
        "admin",
        &[
            "config", "error", "family", "identity", "listener", "obs", "runtime", "state",
            "upstream", "util",
        ],
    ),
    (
        "proxy",
        &[
            "adjust",
            "admit",
            "config",
            "error",
            "eventstream",
            "family",
            "identity",
            "ir",
            "listener",
            "obs",
            "protocol",
            "runtime",
            "secrets",
            "state",
            "translate",
            "upstream",
            "util",
        ],
    ),
    (
        "cli",
        &[
            "admin", "config", "identity", "listener", "obs", "proxy", "state", "upstream", "util",
        ],
    ),
];

/// Folders that know no async runtime: synchronous code, testable without tokio.
const NO_TOKIO: &[&str] = &[
    "protocol",
    "translate",
    "admit",
    "ir",
    "sse",
    "eventstream",
    "util",
];

type Module = Vec<String>;

struct Source {
    module: Module,
    /// The file's text before its tests, without comments.
    code: String,
    path: String,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(&root).unwrap();
            let mut module: Module = rel
                .iter()
                .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            match module.last().map(String::as_str) {
                Some("main") if module.len() == 1 => continue,
                Some("lib") if module.len() == 1 => module.clear(),
                Some("mod") => {
                    module.pop();
                }
                _ => {}
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let before_tests = text.split("#[cfg(test)]").next().unwrap_or("");
            let code = before_tests
                .lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            out.push(Source {
                module,
                code,
                path: rel.display().to_string(),
            });
        }
    }
    out
}

fn ident_len(s: &str) -> usize {
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len())
}

/// The paths after `start` in `code` (`crate::a::b`, `super::c`), with one
/// level of braces expanded (`crate::{a, b::c}` gives `a` and `b::c`).
fn paths_after(code: &str, start: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices(start) {
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut rest = &code[at + start.len()..];
        let mut prefix = Vec::new();
        loop {
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let mut p = prefix.clone();
                    p.extend(
                        item.split("::")
                            .map(|s| s.trim().to_string())
                            .take_while(|s| !s.is_empty() && ident_len(s) == s.len()),
                    );
                    out.push(p);
                }
                break;
            }
            let n = ident_len(rest);
            if n == 0 {
                out.push(prefix);
                break;
            }
            prefix.push(rest[..n].to_string());
            rest = &rest[n..];
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => {
                    out.push(prefix);
                    break;
                }
            }
        }
    }
    out
}

/// Every module's imports of other modules (not its ancestors, not itself).
fn graph(sources: &[Source]) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules: BTreeSet<Module> = sources.iter().map(|s| s.module.clone()).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for s in sources {
        let mut targets = paths_after(&s.code, "crate::");
        for p in paths_after(&s.code, "super::") {
            let mut base = s.module.clone();
            base.pop();
            let mut p = p.as_slice();
            while p.first().is_some_and(|x| x == "super") {
                base.pop();
                p = &p[1..];
            }
            base.extend(p.iter().cloned());
            targets.push(base);
        }
        for t in targets {
            // The longest prefix that is a module.
            let Some(target) = (0..=t.len())
                .rev()
                .map(|n| t[..n].to_vec())
                .find(|m| modules.contains(m))
            else {
                continue;
            };
            if s.module.starts_with(&target) {
                continue;
            }
            edges.entry(s.module.clone()).or_default().insert(target);
        }
    }
    edges
}

#[test]
fn every_folder_imports_only_what_its_rule_names() {
    let rules: BTreeMap<&str, &[&str]> = RULES.iter().copied().collect();
    let sources = sources();
    let mut broken = Vec::new();
    for s in &sources {
        let Some(top) = s.module.first() else {
            continue;
        };
        let Some(allowed) = rules.get(top.as_str()) else {
            broken.push(format!(
                "{}: `{top}` has no rule in tests/layout.rs",
                s.path
            ));
            continue;
        };
        for t in paths_after(&s.code, "crate::") {
            let Some(first) = t.first() else { continue };
            if first != top && !allowed.contains(&first.as_str()) {
                broken.push(format!("{}: imports crate::{}", s.path, t.join("::")));
            }
        }
        if NO_TOKIO.contains(&top.as_str()) && s.code.contains("tokio::") {
            broken.push(format!("{}: uses tokio", s.path));
        }
    }
    broken.sort();
    broken.dedup();
    assert!(
        broken.is_empty(),
        "layout rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn no_module_imports_itself_around_a_circle() {
    let edges = graph(&sources());
    // Tarjan's strongly connected components; any of two or more is a circle.
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, (usize, usize)>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        next: usize,
        circles: Vec<Vec<String>>,
    }
    fn visit<'a>(st: &mut State<'a>, v: &'a Module) {
        st.index.insert(v, (st.next, st.next));
        st.next += 1;
        st.stack.push(v);
        st.on_stack.insert(v);
        if let Some(ws) = st.edges.get(v) {
            for w in ws {
                if !st.index.contains_key(w) {
                    visit(st, w);
                    let low = st.index[w].1.min(st.index[v].1);
                    st.index.get_mut(v).unwrap().1 = low;
                } else if st.on_stack.contains(w) {
                    let low = st.index[w].0.min(st.index[v].1);
                    st.index.get_mut(v).unwrap().1 = low;
                }
            }
        }
        if st.index[v].0 == st.index[v].1 {
            let mut component = Vec::new();
            while let Some(w) = st.stack.pop() {
                st.on_stack.remove(w);
                component.push(w.join("::"));
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                st.circles.push(component);
            }
        }
    }
    let mut st = State {
        edges: &edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        circles: Vec::new(),
    };
    for v in edges.keys() {
        if !st.index.contains_key(v) {
            visit(&mut st, v);
        }
    }
    let circles: Vec<String> = st.circles.iter().map(|c| c.join(" <-> ")).collect();
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_reader_finds_imports_and_circles() {
    let code = "use crate::{a::b, c};\nuse super::super::d::e;\nfn f() { crate::g::h(); }";
    assert_eq!(
        paths_after(code, "crate::"),
        vec![vec!["a", "b"], vec!["c"], vec!["g", "h"]]
    );
    assert_eq!(paths_after(code, "super::"), vec![vec!["super", "d", "e"]]);
}
