//! A project as its text files, path (relative to the project) → text: what an NF stores as
//! one version, uploads as JSON and diffs against another. [`crate::Project::from_files`] and
//! [`crate::testcase::load_cases_from`] read a project from it exactly as from a directory, so
//! a stored version decides as its directory did.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use similar::TextDiff;

use crate::project::CheckError;

/// The text files of a project.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectFiles {
    files: BTreeMap<String, String>,
}

/// How a file differs between two versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Removed,
    Changed,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Removed => "removed",
            Change::Changed => "changed",
        }
    }
}

/// One file that differs: its path, how, and a unified diff (`--- a/path`, `+++ b/path`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    pub path: String,
    pub change: Change,
    pub unified: String,
}

/// Why a path cannot name a file of a project: absolute, `..`, `.`, empty segments, a
/// backslash or a hidden name (`.git` is the repository's, not the project's).
pub fn bad_path(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("an empty path");
    }
    if path.contains('\\') || path.contains('\0') {
        return Some("a path uses `/` between its segments");
    }
    if path.starts_with('/') {
        return Some("a path is relative to the project");
    }
    if path.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Some("a path has no empty, `.` or `..` segments");
    }
    if path.split('/').any(|s| s.starts_with('.')) {
        return Some("a hidden file is not part of a project");
    }
    None
}

impl ProjectFiles {
    /// The files given as path → text, each path checked ([`bad_path`]): a check error per bad
    /// one, named by its path.
    pub fn new(files: BTreeMap<String, String>) -> Result<Self, Vec<CheckError>> {
        let errors: Vec<CheckError> = files
            .keys()
            .filter_map(|p| {
                bad_path(p).map(|m| CheckError { file: p.clone(), line: 0, message: m.into() })
            })
            .collect();
        if errors.is_empty() {
            Ok(ProjectFiles { files })
        } else {
            Err(errors)
        }
    }

    /// Every file below `dir` but hidden ones (`.git`, editors' swap files), read as UTF-8
    /// text: a project is text, so a file that is not is an error naming it.
    pub fn read_dir(dir: &Path) -> Result<Self, Vec<CheckError>> {
        let mut files = BTreeMap::new();
        let mut errors = Vec::new();
        if !dir.is_dir() {
            return Err(vec![CheckError {
                file: dir.display().to_string(),
                line: 0,
                message: "not a directory".into(),
            }]);
        }
        let mut todo: Vec<(PathBuf, String)> = vec![(dir.to_path_buf(), String::new())];
        while let Some((d, prefix)) = todo.pop() {
            let entries = match std::fs::read_dir(&d) {
                Ok(e) => e,
                Err(e) => {
                    let file = if prefix.is_empty() { ".".into() } else { prefix.clone() };
                    errors.push(CheckError { file, line: 0, message: e.to_string() });
                    continue;
                }
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
                let p = e.path();
                // Follows links: a project may link a shared list or table in.
                match std::fs::metadata(&p) {
                    Ok(m) if m.is_dir() => todo.push((p, rel)),
                    Ok(m) if m.is_file() => match std::fs::read(&p) {
                        Ok(bytes) => match String::from_utf8(bytes) {
                            Ok(t) => {
                                files.insert(rel, t);
                            }
                            Err(_) => errors.push(CheckError {
                                file: rel,
                                line: 0,
                                message: "not UTF-8 text".into(),
                            }),
                        },
                        Err(e) => {
                            errors.push(CheckError { file: rel, line: 0, message: e.to_string() })
                        }
                    },
                    Ok(_) => {}
                    Err(e) => {
                        errors.push(CheckError { file: rel, line: 0, message: e.to_string() })
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(ProjectFiles { files })
        } else {
            errors.sort_by(|a, b| a.file.cmp(&b.file));
            Err(errors)
        }
    }

    pub fn get(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(String::as_str)
    }

    pub fn map(&self) -> &BTreeMap<String, String> {
        &self.files
    }

    pub fn into_map(self) -> BTreeMap<String, String> {
        self.files
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The names without extension of the files directly in `dir` ending `.ext`, sorted (a
    /// project's order is stable): what a directory listing gives the loader.
    pub(crate) fn stems(&self, dir: &str, ext: &str) -> Vec<String> {
        let prefix = format!("{dir}/");
        let suffix = format!(".{ext}");
        self.files
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .filter_map(|k| {
                let name = &k[prefix.len()..];
                if name.contains('/') {
                    return None;
                }
                name.strip_suffix(&suffix).filter(|s| !s.is_empty()).map(str::to_string)
            })
            .collect()
    }

    /// How `to` differs from `self`, file by file in path order; files equal in both are left
    /// out.
    pub fn diff(&self, to: &ProjectFiles) -> Vec<FileDiff> {
        let mut out = Vec::new();
        let mut paths: Vec<&String> = self.files.keys().chain(to.files.keys()).collect();
        paths.sort();
        paths.dedup();
        for p in paths {
            let (old, new) = (self.files.get(p), to.files.get(p));
            let change = match (old, new) {
                (Some(a), Some(b)) if a == b => continue,
                (Some(_), Some(_)) => Change::Changed,
                (None, Some(_)) => Change::Added,
                (Some(_), None) => Change::Removed,
                (None, None) => continue,
            };
            let (a, b) = (old.map_or("", String::as_str), new.map_or("", String::as_str));
            let unified = TextDiff::from_lines(a, b)
                .unified_diff()
                .context_radius(3)
                .header(
                    &if old.is_some() { format!("a/{p}") } else { "/dev/null".into() },
                    &if new.is_some() { format!("b/{p}") } else { "/dev/null".into() },
                )
                .to_string();
            out.push(FileDiff { path: p.clone(), change, unified });
        }
        out
    }
}

/// Where the loader reads a project from: its directory, or its files in memory.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    Dir(&'a Path),
    Files(&'a ProjectFiles),
}

impl Source<'_> {
    pub(crate) fn read(&self, rel: &str) -> Result<String, String> {
        match self {
            Source::Dir(d) => std::fs::read_to_string(d.join(rel)).map_err(|e| e.to_string()),
            Source::Files(f) => f
                .get(rel)
                .map(str::to_string)
                .ok_or_else(|| "No such file or directory (os error 2)".to_string()),
        }
    }

    pub(crate) fn is_file(&self, rel: &str) -> bool {
        match self {
            Source::Dir(d) => d.join(rel).is_file(),
            Source::Files(f) => f.get(rel).is_some(),
        }
    }

    /// [`ProjectFiles::stems`], or the same of a directory.
    pub(crate) fn stems(&self, dir: &str, ext: &str) -> Vec<String> {
        match self {
            Source::Dir(d) => {
                let mut v: Vec<String> = std::fs::read_dir(d.join(dir))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == ext))
                    .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                    .collect();
                v.sort();
                v
            }
            Source::Files(f) => f.stems(dir, ext),
        }
    }
}

/// A path of a project given relative to one of its folders (a test case's `request_file`)
/// made relative to the project, `..` resolved; None when it leaves the project.
pub(crate) fn join_rel(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str()?),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(v: &[(&str, &str)]) -> ProjectFiles {
        ProjectFiles::new(v.iter().map(|(k, t)| (k.to_string(), t.to_string())).collect()).unwrap()
    }

    #[test]
    fn paths_outside_the_project_or_hidden_are_refused() {
        for bad in ["", "/etc/passwd", "a/../b", "./a", "a//b", ".git/config", "a\\b", "rules/.x"] {
            assert!(bad_path(bad).is_some(), "{bad:?}");
        }
        assert_eq!(bad_path("rules/sm.toml"), None);
        let e = ProjectFiles::new([("../x".to_string(), String::new())].into()).unwrap_err();
        assert_eq!(e[0].file, "../x");
    }

    #[test]
    fn stems_list_one_folder_by_extension_in_order() {
        let f = files(&[
            ("lists/b.txt", ""),
            ("lists/a.txt", ""),
            ("lists/c.csv", ""),
            ("lists/sub/d.txt", ""),
            ("listsx/e.txt", ""),
        ]);
        assert_eq!(f.stems("lists", "txt"), ["a", "b"]);
        assert!(f.stems("tables", "csv").is_empty());
    }

    #[test]
    fn a_diff_names_each_file_added_removed_or_changed_with_a_unified_diff() {
        let a = files(&[("project.toml", "name = \"x\"\nversion = \"1\"\n"), ("old.txt", "o\n")]);
        let b = files(&[("project.toml", "name = \"x\"\nversion = \"2\"\n"), ("new.txt", "n\n")]);
        let d = a.diff(&b);
        let got: Vec<(&str, Change)> = d.iter().map(|f| (f.path.as_str(), f.change)).collect();
        assert_eq!(
            got,
            [
                ("new.txt", Change::Added),
                ("old.txt", Change::Removed),
                ("project.toml", Change::Changed)
            ]
        );
        let changed = &d[2].unified;
        assert!(changed.starts_with("--- a/project.toml\n+++ b/project.toml\n"), "{changed}");
        assert!(changed.contains("-version = \"1\"\n+version = \"2\"\n"), "{changed}");
        assert!(d[0].unified.contains("--- /dev/null\n+++ b/new.txt\n"), "{}", d[0].unified);
        assert!(a.diff(&a).is_empty());
    }

    #[test]
    fn relative_data_files_stay_inside_the_project() {
        assert_eq!(join_rel("tests", "req.json").as_deref(), Some("tests/req.json"));
        assert_eq!(join_rel("tests", "../data/r.json").as_deref(), Some("data/r.json"));
        assert_eq!(join_rel("tests", "../../r.json"), None);
        assert_eq!(join_rel("tests", "/etc/passwd"), None);
    }
}
