//! The workspace's module graph is a DAG: no file's module reaches itself through the paths
//! its code names. Every crate of the workspace (each `crates/*/src` tree and the binary's
//! `src`) is read with `syn`; a module is one file (or one inline `mod { }` block), and it
//! depends on another when its code names that module or an item in it: `use` trees, paths in
//! expressions, types and patterns, and `crate::`/`super::`/`self::` paths inside macro calls.
//! A path is resolved to the deepest module it names, so `super::sibling::f` is an edge to
//! `sibling`, not to the parent. Declaring a child (`mod x;`) is not an edge; naming its items
//! is. A module naming one of its own ancestors is not counted either: a child is part of its
//! parent's implementation (Rust lets it see the parent's private items), so only a parent's
//! use of its children and uses across the tree can close a cycle.
//!
//! `TAMER_MODULE_GRAPH=1 cargo test --test module_graph -- --nocapture` prints each crate's
//! files per folder and edges; `TAMER_MODULE_GRAPH_ROOT=DIR` reads another checkout.
//!
//! Mutation caught: any new cycle, e.g. a child calling a helper of its parent
//! (`super::helper`) while the parent calls into that child.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// A module: its path from the crate root (`["commands", "strings"]`).
type ModPath = Vec<String>;

/// One crate's modules, where each came from, and the edges between them.
#[derive(Default)]
struct Graph {
    files: BTreeMap<ModPath, PathBuf>,
    /// Each module's declared children (file or inline).
    children: BTreeMap<ModPath, BTreeSet<String>>,
    edges: BTreeMap<ModPath, BTreeSet<ModPath>>,
    /// Each module's imports: the name it brings in, and the path it names.
    imports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>>,
}

impl Graph {
    fn is_module(&self, path: &[String]) -> bool {
        self.files.contains_key(path)
    }

    /// The module that defines what a path names, from module `at`: `crate::a::b::f` →
    /// `a::b` if that is a module defining `f`; a first segment that is a child of `at`
    /// resolves under `at`; a name a module imports (a re-export such as the crate root's
    /// `pub use`) is followed to where it comes from, as a reader following it would.
    fn resolve(&self, at: &[String], segments: &[String]) -> Option<ModPath> {
        self.resolve_bounded(at, segments, 16)
    }

    fn resolve_bounded(&self, at: &[String], segments: &[String], depth: u32) -> Option<ModPath> {
        let (mut base, rest): (ModPath, &[String]) = match segments.first()?.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "self" => (at.to_vec(), &segments[1..]),
            "super" => {
                let mut base = at.to_vec();
                let mut i = 0;
                // Bounded by the path's length.
                while segments.get(i).map(String::as_str) == Some("super") {
                    base.pop()?;
                    i += 1;
                }
                (base, &segments[i..])
            }
            first if self.children.get(at).is_some_and(|c| c.contains(first)) => {
                (at.to_vec(), segments)
            }
            first => {
                // A name this module imports (`use crate::commands; commands::f()`).
                let target = self.imports.get(at)?.get(first)?;
                if depth == 0 || target.first() == Some(&segments[0]) {
                    return None;
                }
                let mut through = target.clone();
                through.extend_from_slice(&segments[1..]);
                return self.resolve_bounded(at, &through, depth - 1);
            }
        };
        for (i, segment) in rest.iter().enumerate() {
            let mut next = base.clone();
            next.push(segment.clone());
            if self.is_module(&next) {
                base = next;
                continue;
            }
            let imported = self.imports.get(&base).and_then(|m| m.get(segment));
            if let Some(target) = imported.filter(|_| depth > 0) {
                let mut through = target.clone();
                through.extend_from_slice(&rest[i + 1..]);
                if let Some(found) = self.resolve_bounded(&base, &through, depth - 1) {
                    return Some(found);
                }
            }
            break;
        }
        Some(base)
    }

    fn add_edge(&mut self, from: &[String], to: ModPath) {
        // A module naming itself or one of its ancestors is no edge: a child is part of its
        // parent's implementation (it sees the parent's private items).
        if !from.starts_with(&to) {
            self.edges.entry(from.to_vec()).or_default().insert(to);
        }
    }

    /// Cycles, each as the modules on it (one per strongly connected component).
    fn cycles(&self) -> Vec<Vec<ModPath>> {
        let nodes: Vec<&ModPath> = self.files.keys().collect();
        let index: BTreeMap<&ModPath, usize> =
            nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let adjacency: Vec<Vec<usize>> = nodes
            .iter()
            .map(|n| {
                self.edges
                    .get(*n)
                    .map(|to| to.iter().filter_map(|t| index.get(t).copied()).collect())
                    .unwrap_or_default()
            })
            .collect();
        strongly_connected(&adjacency)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| c.into_iter().map(|i| nodes[i].clone()).collect())
            .collect()
    }
}

/// Tarjan's strongly connected components, iteratively (no recursion limit on deep graphs).
fn strongly_connected(adjacency: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = adjacency.len();
    let (mut index, mut low) = (vec![usize::MAX; n], vec![0; n]);
    let (mut on_stack, mut stack, mut out) = (vec![false; n], Vec::new(), Vec::new());
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        // Bounded: each node is pushed once and each edge followed once.
        while let Some((v, edge)) = work.pop() {
            if edge == 0 {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = adjacency[v].get(edge) {
                work.push((v, edge + 1));
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                // Bounded by the stack.
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(component);
            }
        }
    }
    out
}

/// Reads the module tree of a crate rooted at `root_file`, recording every module's file.
fn read_tree(graph: &mut Graph, path: ModPath, file: &Path, dir: &Path) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    graph.files.insert(path.clone(), file.to_path_buf());
    declare_items(graph, &path, &parsed.items, dir);
}

/// Records the modules `items` declare (files and inline blocks) under module `path`, whose
/// children's files live in `dir`.
fn declare_items(graph: &mut Graph, path: &[String], items: &[syn::Item], dir: &Path) {
    for item in items {
        if let syn::Item::Use(u) = item {
            let imports = graph.imports.entry(path.to_vec()).or_default();
            collect_imports(&mut Vec::new(), &u.tree, imports);
        }
    }
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        let name = m.ident.to_string();
        graph
            .children
            .entry(path.to_vec())
            .or_default()
            .insert(name.clone());
        let mut child = path.to_vec();
        child.push(name.clone());
        let explicit = m.attrs.iter().find_map(|a| {
            let syn::Meta::NameValue(nv) = &a.meta else {
                return None;
            };
            if !nv.path.is_ident("path") {
                return None;
            }
            match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(dir.join(s.value())),
                _ => None,
            }
        });
        match &m.content {
            Some((_, inner)) => {
                graph.files.insert(child.clone(), PathBuf::from("(inline)"));
                declare_items(graph, &child, inner, &dir.join(&name));
            }
            None => {
                let file = explicit.unwrap_or_else(|| {
                    let flat = dir.join(format!("{name}.rs"));
                    if flat.exists() {
                        flat
                    } else {
                        dir.join(&name).join("mod.rs")
                    }
                });
                read_tree(graph, child, &file, &dir.join(&name));
            }
        }
    }
}

/// The names a `use` tree brings in, each with the path it names (globs left out).
fn collect_imports(
    prefix: &mut Vec<String>,
    tree: &syn::UseTree,
    out: &mut BTreeMap<String, Vec<String>>,
) {
    let mut named = |ident: &syn::Ident, alias: &syn::Ident| {
        let mut full = prefix.clone();
        if ident != "self" {
            full.push(ident.to_string());
        }
        let name = if alias == "self" {
            prefix.last().cloned().unwrap_or_default()
        } else {
            alias.to_string()
        };
        out.insert(name, full);
    };
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            collect_imports(prefix, &p.tree, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => named(&n.ident, &n.ident),
        syn::UseTree::Rename(r) => named(&r.ident, &r.rename),
        syn::UseTree::Glob(_) => {}
        syn::UseTree::Group(g) => {
            for t in &g.items {
                collect_imports(prefix, t, out);
            }
        }
    }
}

/// Collects the paths one module's code names (not descending into child modules).
struct Names<'g> {
    graph: &'g Graph,
    at: ModPath,
    found: Vec<ModPath>,
}

impl Names<'_> {
    fn segments(path: &syn::Path) -> Vec<String> {
        path.segments.iter().map(|s| s.ident.to_string()).collect()
    }

    fn note(&mut self, segments: &[String]) {
        if let Some(to) = self.graph.resolve(&self.at, segments) {
            self.found.push(to);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                if n.ident != "self" {
                    full.push(n.ident.to_string());
                }
                self.note(&full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                if r.ident != "self" {
                    full.push(r.ident.to_string());
                }
                self.note(&full);
            }
            syn::UseTree::Glob(_) => self.note(prefix),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// `crate::a::b`, `super::x` and `self::y` inside a macro call's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        // Bounded by the token count: every pass advances `i`.
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if ["crate", "super", "self"].contains(&&*id.to_string()) => {
                    let mut segments = vec![id.to_string()];
                    let mut j = i + 1;
                    // `::` is two joint punctuation tokens, then an identifier.
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) =
                        (trees.get(j), trees.get(j + 1))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        let Some(TokenTree::Ident(next)) = trees.get(j + 2) else {
                            break;
                        };
                        segments.push(next.to_string());
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.note(&segments);
                    }
                    i = j.max(i + 1);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Names<'_> {
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // A child module's code is its own node.
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = Self::segments(path);
        if segments.len() > 1 {
            self.note(&segments);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }
}

/// Finds the code of module `path` (a file's items, or an inline block's).
fn module_items(graph: &Graph, path: &ModPath) -> Vec<syn::Item> {
    // Walk down from the nearest file.
    let mut file_path = path.clone();
    let mut inline = Vec::new();
    // Bounded by the path's depth.
    while graph.files.get(&file_path).map(|f| f.as_os_str()) == Some("(inline)".as_ref()) {
        inline.push(file_path.pop().expect("an inline module has a parent"));
    }
    let file = &graph.files[&file_path];
    let text = std::fs::read_to_string(file).expect("read before");
    let mut items = syn::parse_file(&text).expect("parsed before").items;
    // Bounded by the inline depth.
    while let Some(name) = inline.pop() {
        items = items
            .into_iter()
            .find_map(|i| match i {
                syn::Item::Mod(m) if m.ident == name => m.content.map(|(_, c)| c),
                _ => None,
            })
            .expect("declared before");
    }
    items
}

fn crate_graph(root_file: &Path) -> Graph {
    let mut graph = Graph::default();
    read_tree(
        &mut graph,
        Vec::new(),
        root_file,
        root_file.parent().expect("a crate root is in a folder"),
    );
    let modules: Vec<ModPath> = graph.files.keys().cloned().collect();
    for module in modules {
        let items = module_items(&graph, &module);
        let mut names = Names {
            graph: &graph,
            at: module.clone(),
            found: Vec::new(),
        };
        for item in &items {
            names.visit_item(item);
        }
        let found = std::mem::take(&mut names.found);
        for to in found {
            graph.add_edge(&module, to);
        }
    }
    graph
}

fn show(path: &ModPath) -> String {
    if path.is_empty() {
        "crate".to_string()
    } else {
        path.join("::")
    }
}

/// Every crate root of the workspace: (name, root file).
fn crate_roots(root: &Path) -> Vec<(String, PathBuf)> {
    let mut roots = vec![("tamer".to_string(), root.join("src/main.rs"))];
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.sort();
    for dir in dirs {
        let lib = dir.join("src/lib.rs");
        if lib.exists() {
            let name = dir
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            roots.push((name, lib));
        }
    }
    roots
}

/// How many files sit in each folder of a crate's source tree.
fn files_per_folder(graph: &Graph, src: &Path) -> BTreeMap<String, usize> {
    let mut per = BTreeMap::new();
    for file in graph.files.values().filter(|f| f.as_os_str() != "(inline)") {
        let rel = file.strip_prefix(src).unwrap_or(file);
        let folder = rel
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| ".".to_string());
        *per.entry(folder).or_insert(0) += 1;
    }
    per
}

#[test]
fn no_module_reaches_itself() {
    let root = std::env::var_os("TAMER_MODULE_GRAPH_ROOT")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let verbose = std::env::var_os("TAMER_MODULE_GRAPH").is_some();
    let mut failures = Vec::new();
    for (name, root_file) in crate_roots(&root) {
        let graph = crate_graph(&root_file);
        let cycles = graph.cycles();
        if verbose {
            let src = root_file.parent().expect("src");
            let edges: usize = graph.edges.values().map(BTreeSet::len).sum();
            println!(
                "{name}: {} modules, {edges} edges, {} cycles; files per folder {:?}",
                graph.files.len(),
                cycles.len(),
                files_per_folder(&graph, src)
            );
            for (from, to) in &graph.edges {
                let to: Vec<String> = to.iter().map(show).collect();
                println!("  {} -> {}", show(from), to.join(", "));
            }
        }
        for cycle in cycles {
            let names: Vec<String> = cycle.iter().map(show).collect();
            failures.push(format!("{name}: {}", names.join(" <-> ")));
        }
    }
    assert!(
        failures.is_empty(),
        "import cycles (each a set of modules that reach one another):\n{}",
        failures.join("\n")
    );
}

/// The server's folders, top layer first: each uses only the ones after it.
const SERVER_LAYERS: &[&str] = &[
    "net", "session", "commands", "stats", "acl", "pubsub", "keyspace", "resp", "config", "glob",
];

/// The server's folders are layers (`crates/server/src/lib.rs`): no module of a folder names
/// a module of a folder above it, tests included. Mutation caught: a keyspace module calling
/// into `commands`, or `stats` holding a type of `net`.
#[test]
fn server_folders_are_layers() {
    let root = std::env::var_os("TAMER_MODULE_GRAPH_ROOT")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let graph = crate_graph(&root.join("crates/server/src/lib.rs"));
    let layer = |m: &ModPath| {
        m.first()
            .and_then(|top| SERVER_LAYERS.iter().position(|l| l == top))
    };
    let mut upward = Vec::new();
    for (from, targets) in &graph.edges {
        for to in targets {
            if let (Some(a), Some(b)) = (layer(from), layer(to)) {
                if b < a {
                    upward.push(format!("{} -> {}", show(from), show(to)));
                }
            }
        }
    }
    let folders: BTreeSet<&str> = graph
        .files
        .keys()
        .filter_map(|m| m.first().map(String::as_str))
        .collect();
    for folder in folders {
        assert!(
            SERVER_LAYERS.contains(&folder),
            "the server's module '{folder}' is in no layer: add it to SERVER_LAYERS"
        );
    }
    assert!(
        upward.is_empty(),
        "uses of a layer above:\n{}",
        upward.join("\n")
    );
}
