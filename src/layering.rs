//! The layering rule, enforced: every `crate::<module>` a top-level module names (outside
//! comments and tests) is in a strictly lower layer of [`LAYERS`], so there is no import
//! circle and no upward edge between top-level modules; and inside `server` the rooms
//! import one way (`boot` → `client` → `front` → `runtime`); and a few modules keep off
//! lower ones they could reach but must not ([`KEEP_OFF`]: the console reads the picture,
//! never the database). docs/ARCHITECTURE.md says how to read the same graph by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules by layer, lowest first. A module may import only those of lower
/// layers. A new module needs a line here; an edge the table forbids is a design change.
const LAYERS: &[&[&str]] = &[
    &["model", "duration", "visible", "counted", "wire"],
    &["config"],
    &["sched", "exec", "access"],
    &["replay"],
    &["events", "forecast"],
    &["snapshot"],
    &["store", "metrics"],
    &["report", "whatif"],
    &["server"],
    &["tui"],
    &["cli"],
];

/// Lower modules a module must not name although its layer could: (module, kept off).
/// The console reads what the scheduler publishes (`snapshot`, answers of `server`),
/// never the state database, so it shows the same whether it runs beside the scheduler
/// or attaches to one elsewhere.
const KEEP_OFF: &[(&str, &[&str])] = &[("tui", &["store"])];

/// `server`'s rooms, lowest first.
const SERVER_ROOMS: &[&str] = &["runtime", "front", "client", "boot"];

/// `exec`'s rooms, lowest first: a room imports only itself and rooms before it.
const EXEC_ROOMS: &[&str] = &[
    "containment",
    "state",
    "supervisor",
    "start",
    "backend",
    "local",
    "slurm",
    "scripted",
    "choice",
    "gpu",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The `.rs` files of a module (a file or a directory).
fn files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    let mut dirs = vec![path.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// Every `<prefix><name>` a file names in its code (comments and the tests at its end
/// left out; a `tests.rs` file is all tests).
fn named(file: &Path, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if file.file_name().is_some_and(|n| n == "tests.rs") {
        return out;
    }
    for line in std::fs::read_to_string(file).unwrap().lines() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        let mut rest = t;
        while let Some(i) = rest.find(prefix) {
            rest = &rest[i + prefix.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            out.insert(name);
        }
    }
    out
}

fn module_name(p: &Path) -> Option<String> {
    let name = p.file_name()?.to_str()?;
    match name.strip_suffix(".rs") {
        Some("lib" | "main" | "layering") => None,
        Some(m) => Some(m.to_string()),
        None if p.is_dir() => Some(name.to_string()),
        None => None,
    }
}

#[test]
fn top_level_modules_import_only_lower_layers() {
    let layer: BTreeMap<&str, usize> = LAYERS
        .iter()
        .enumerate()
        .flat_map(|(i, ms)| ms.iter().map(move |m| (*m, i)))
        .collect();
    let mut wrong = Vec::new();
    for e in std::fs::read_dir(src()).unwrap().flatten() {
        let Some(m) = module_name(&e.path()) else {
            continue;
        };
        let Some(&mine) = layer.get(m.as_str()) else {
            wrong.push(format!("`{m}` is in no layer of LAYERS"));
            continue;
        };
        for f in files(&e.path()) {
            for dep in named(&f, "crate::") {
                match layer.get(dep.as_str()) {
                    Some(&theirs) if dep == m || theirs < mine => {}
                    Some(_) => wrong.push(format!(
                        "{}: `{m}` (layer {mine}) imports `{dep}`",
                        f.display()
                    )),
                    None => {}
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "upward or sideways edges:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn modules_keep_off_what_they_must_not_read() {
    let mut wrong = Vec::new();
    for (m, off) in KEEP_OFF {
        let path = match src().join(m) {
            d if d.is_dir() => d,
            _ => src().join(format!("{m}.rs")),
        };
        let found = files(&path);
        assert!(
            !found.is_empty(),
            "KEEP_OFF names `{m}`, which has no files"
        );
        for f in found {
            for dep in named(&f, "crate::") {
                if off.contains(&dep.as_str()) {
                    wrong.push(format!("{}: `{m}` names `{dep}`", f.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every import of a later room by a file of `module`'s rooms (`rooms`, lowest first).
fn rooms_importing_later(module: &str, rooms: &[&str]) -> Vec<String> {
    let dir = src().join(module);
    let prefix = format!("{module}::");
    let mut wrong = Vec::new();
    for (i, room) in rooms.iter().enumerate() {
        let path = match dir.join(room) {
            d if d.is_dir() => d,
            _ => dir.join(format!("{room}.rs")),
        };
        assert!(path.exists(), "{}: no such room", path.display());
        for f in files(&path) {
            let mut deps = named(&f, &prefix);
            if f.parent() == Some(dir.as_path()) || f == dir.join(room).join("mod.rs") {
                // In a room's own file (or its folder's mod.rs) `super::` is the module.
                deps.extend(named(&f, "super::"));
            }
            for dep in deps {
                if let Some(j) = rooms.iter().position(|r| *r == dep.as_str())
                    && j > i
                {
                    wrong.push(format!("{}: `{room}` imports `{dep}`", f.display()));
                }
            }
        }
    }
    wrong
}

#[test]
fn server_rooms_import_one_way() {
    let wrong = rooms_importing_later("server", SERVER_ROOMS);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn exec_rooms_import_one_way() {
    let wrong = rooms_importing_later("exec", EXEC_ROOMS);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every `.rs` file under `exec/` is in one of [`EXEC_ROOMS`] (or is `exec/mod.rs`).
#[test]
fn every_exec_file_is_in_a_room() {
    let dir = src().join("exec");
    let mut loose = Vec::new();
    for f in files(&dir) {
        let rel = f.strip_prefix(&dir).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let room = first.trim_end_matches(".rs");
        if rel != Path::new("mod.rs") && !EXEC_ROOMS.contains(&room) {
            loose.push(rel.display().to_string());
        }
    }
    assert!(loose.is_empty(), "in no room of EXEC_ROOMS: {loose:?}");
}
