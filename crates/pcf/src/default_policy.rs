//! The default policy project (`policies/default` in the repository), built into the binary so
//! a PCF started anywhere has a project to decide with: when `[pcf] policy` is not set, it is
//! written beside the PCF's store at first start and loaded from there (an operator may edit
//! that copy and deploy it; it is never overwritten).

use std::path::Path;

const FILES: [(&str, &str); 6] = [
    ("project.toml", include_str!("../../../policies/default/project.toml")),
    ("rules/sm.toml", include_str!("../../../policies/default/rules/sm.toml")),
    ("rules/am.toml", include_str!("../../../policies/default/rules/am.toml")),
    ("rules/ue.toml", include_str!("../../../policies/default/rules/ue.toml")),
    ("rules/pa.toml", include_str!("../../../policies/default/rules/pa.toml")),
    ("tests/cases.toml", include_str!("../../../policies/default/tests/cases.toml")),
];

/// Writes the default project into `dir` unless it already holds a project.
pub fn materialize(dir: &Path) -> std::io::Result<()> {
    if dir.join("project.toml").exists() {
        return Ok(());
    }
    for (rel, text) in FILES {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_built_in_copy_is_the_whole_default_project_and_passes_its_cases() {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/default");
        let mut on_disk = Vec::new();
        let mut todo = vec![repo.clone()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                if e.path().is_dir() {
                    todo.push(e.path());
                } else {
                    let rel = e.path().strip_prefix(&repo).unwrap().display().to_string();
                    on_disk.push(rel);
                }
            }
        }
        on_disk.sort();
        let mut built_in: Vec<String> = super::FILES.iter().map(|(r, _)| r.to_string()).collect();
        built_in.sort();
        assert_eq!(on_disk, built_in, "policies/default gained or lost a file: list it in FILES");
        let d = tempfile::tempdir().unwrap();
        super::materialize(d.path()).unwrap();
        let p = policy::Project::load(d.path()).unwrap();
        let cases = policy::testcase::load_cases(d.path()).unwrap();
        assert!(!cases.is_empty());
        assert_eq!(p.name, "default");
    }
}
