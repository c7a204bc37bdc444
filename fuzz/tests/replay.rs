//! Every corpus input and every crash regression through its target, on stable: a crash fixed
//! once stays fixed where libFuzzer cannot run, and the corpus is checked to be there.

use std::path::Path;

fn inputs(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut v: Vec<_> = rd.map(|e| e.expect("directory entry").path()).collect();
    v.retain(|p| p.is_file() && p.file_name().is_some_and(|n| n != ".gitkeep"));
    v.sort();
    v
}

#[test]
fn every_corpus_and_regression_input_runs_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, target) in fivecore_fuzz::TARGETS {
        let corpus = inputs(&root.join("corpus").join(name));
        assert!(corpus.len() >= 3, "fuzz/corpus/{name} holds {} seeds", corpus.len());
        for path in corpus.iter().chain(&inputs(&root.join("regressions").join(name))) {
            let data = std::fs::read(path).expect("read input");
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                panic!("{name} fails on {}", path.display());
            }
        }
    }
}
