//! Validation against the 3GPP OpenAPI files (`../shared/3gpp/Rel-17`, beside the project).
//!
//! The named files are merged into one JSON Schema document under `$defs/<file stem>`; `$ref`s
//! between them become local pointers, and `$ref`s to files not loaded are accepted as anything
//! (the caller names every file whose schemas its answers use). Without `../shared`, every
//! check is skipped with a note, so the suites still run on a bare clone.

use std::path::PathBuf;

use serde_json::{json, Value};

pub struct Specs {
    files: Vec<&'static str>,
    doc: Option<Value>,
}

impl Specs {
    /// Loads `stems` (e.g. `"TS29571_CommonData"`); `None` inside when any is absent.
    pub fn load(stems: &[&'static str]) -> Specs {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/3gpp/Rel-17");
        let mut specs = Specs { files: stems.to_vec(), doc: None };
        let mut defs = serde_json::Map::new();
        for stem in stems {
            let Ok(text) = std::fs::read_to_string(dir.join(format!("{stem}.yaml"))) else {
                return specs;
            };
            let yaml: serde_yaml::Value = serde_yaml::from_str(&text).expect("spec parses");
            let mut v: Value = serde_json::to_value(yaml).expect("yaml to json");
            specs.rewrite_refs(&mut v, stem);
            defs.insert((*stem).to_owned(), v);
        }
        specs.doc = Some(json!({ "$defs": defs }));
        specs
    }

    /// Whether the 3GPP files were found (checks run) or not (checks are skipped).
    pub fn available(&self) -> bool {
        self.doc.is_some()
    }

    fn rewrite_refs(&self, v: &mut Value, own: &str) {
        match v {
            Value::Object(map) => {
                if let Some(r) = map.get("$ref").and_then(Value::as_str).map(str::to_owned) {
                    let target = match r.split_once('#') {
                        Some(("", ptr)) => Some(format!("#/$defs/{own}{ptr}")),
                        Some((file, ptr)) => self
                            .files
                            .iter()
                            .find(|stem| file.strip_suffix(".yaml") == Some(**stem))
                            .map(|stem| format!("#/$defs/{stem}{ptr}")),
                        None => None,
                    };
                    match target {
                        Some(t) => {
                            map.insert("$ref".into(), Value::from(t));
                        }
                        None => map.clear(),
                    }
                    return;
                }
                // OpenAPI 3.0's `nullable: true` is JSON Schema's `null` type (TS 29.512's
                // removable map entries: a PccRule of `null` in a decision delta).
                if map.get("nullable") == Some(&Value::Bool(true)) {
                    if let Some(Value::String(t)) = map.get("type").cloned() {
                        map.insert("type".into(), json!([t, "null"]));
                    }
                    if let Some(Value::Array(e)) = map.get_mut("enum") {
                        if !e.contains(&Value::Null) {
                            e.push(Value::Null);
                        }
                    }
                }
                map.values_mut().for_each(|x| self.rewrite_refs(x, own));
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.rewrite_refs(x, own)),
            _ => {}
        }
    }

    /// Asserts `value` is a valid `components/schemas/<schema>` of `spec`.
    pub fn assert_valid(&self, spec: &str, schema: &str, value: &Value) {
        let Some(doc) = &self.doc else {
            eprintln!("skipped: ../shared/3gpp absent, {schema} not checked");
            return;
        };
        let errors = self.errors(doc, spec, schema, value);
        assert!(errors.is_empty(), "{schema} {value} fails {spec}: {errors:?}");
    }

    /// Whether `value` is valid (`true` when the files are absent, as checks are skipped).
    pub fn is_valid(&self, spec: &str, schema: &str, value: &Value) -> bool {
        self.doc.as_ref().is_none_or(|doc| self.errors(doc, spec, schema, value).is_empty())
    }

    fn errors(&self, doc: &Value, spec: &str, schema: &str, value: &Value) -> Vec<String> {
        let mut root = doc.clone();
        root["$ref"] = Value::from(format!("#/$defs/{spec}/components/schemas/{schema}"));
        let validator = jsonschema::validator_for(&root).expect("schema compiles");
        validator.iter_errors(value).map(|e| format!("{e} at {}", e.instance_path)).collect()
    }
}
