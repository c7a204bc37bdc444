//! RFC 7396 merge patch of a stored document, member by member.
//!
//! A stored document was checked when it was written, and a merge patch replaces, merges into or
//! removes only the top-level members it names. So a PATCH needs to parse, check and re-encode
//! those members alone; the others are copied as the stored bytes they are. For the T4c mix's
//! sm-data PATCH (a 150-byte `umData` into a 2.5 KB SmPolicyData) this spares the writer thread
//! the parse, check and encoding of the whole document (about a seventh of its CPU).
//!
//! [`merge_stored`] answers `None` whenever this shortcut does not apply (the type is not a plain
//! object type, the stored bytes are not an object of distinct, unescaped keys); the caller then
//! merges the whole document. The result is the same JSON value either way; the checks name the
//! same attributes with the same JSON pointers.

use sbi::ProblemDetails;
use serde_json::{Map, Value};

use super::model::{self, Errors, Ty};
use super::resources::merge;

/// One top-level member of a stored JSON object.
struct Member<'a> {
    /// The key, as written (without its quotes; it has no escape).
    key: &'a str,
    /// The value's bytes as stored.
    value: &'a [u8],
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The index after the string starting (with its quote) at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The index after the value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let end = b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(b.len(), |n| i + n);
            (end > i).then_some(end)
        }
    }
}

/// The members of the JSON object `doc`, in order; `None` if it is not an object, or a key has
/// an escape or appears twice (then only a full parse says what it means).
fn members(doc: &[u8]) -> Option<Vec<Member<'_>>> {
    let mut out: Vec<Member<'_>> = Vec::with_capacity(8);
    let mut i = skip_ws(doc, 0);
    if doc.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(doc, i + 1);
    if doc.get(i) == Some(&b'}') {
        return (skip_ws(doc, i + 1) == doc.len()).then_some(out);
    }
    loop {
        if doc.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(doc, i)?;
        let key = &doc[i + 1..key_end - 1];
        if key.contains(&b'\\') {
            return None;
        }
        let key = std::str::from_utf8(key).ok()?;
        if out.iter().any(|m| m.key == key) {
            return None;
        }
        i = skip_ws(doc, key_end);
        if doc.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(doc, i + 1);
        let end = value_end(doc, start)?;
        out.push(Member { key, value: &doc[start..end] });
        i = skip_ws(doc, end);
        match doc.get(i) {
            Some(b',') => i = skip_ws(doc, i + 1),
            Some(b'}') => return (skip_ws(doc, i + 1) == doc.len()).then_some(out),
            _ => return None,
        }
    }
}

/// Applies the merge patch `patch` to the stored document `old` of type `ty`, checking the
/// members it changes: the new document's bytes, or every wrong attribute (400). `None`: the
/// shortcut does not apply (see the module), merge the whole document instead.
pub fn merge_stored(
    old: &[u8],
    patch: &Map<String, Value>,
    ty: &Ty,
) -> Option<Result<Vec<u8>, ProblemDetails>> {
    let Ty::Obj(obj) = ty else { return None };
    if !obj.one_of.is_empty() {
        return None;
    }
    let stored = members(old)?;
    // The new value of each member the patch names (`None`: removed), stored order first.
    let mut changed: Vec<(&str, Option<Value>)> = Vec::with_capacity(patch.len());
    for (key, p) in patch {
        let before = stored.iter().find(|m| m.key == key.as_str());
        let new = match (p, before) {
            (Value::Null, None) => continue,
            (Value::Null, Some(_)) => None,
            (Value::Object(_), Some(m)) => {
                let mut v: Value = serde_json::from_slice(m.value).ok()?;
                merge(&mut v, p.clone());
                Some(v)
            }
            _ => {
                let mut v = Value::Null;
                merge(&mut v, p.clone());
                Some(v)
            }
        };
        changed.push((key.as_str(), new));
    }
    // Checked in the type's order, as a check of the whole document lists them.
    let mut errs = Errors::default();
    for f in obj.fields {
        match changed.iter().find(|(k, _)| *k == f.name) {
            Some((_, Some(v))) => model::check(v, &f.ty, &mut format!("/{}", f.name), &mut errs),
            Some((_, None)) if f.required => errs.missing(format!("/{}", f.name)),
            _ => {}
        }
    }
    if let Err(p) = errs.finish() {
        return Some(Err(p));
    }
    let mut out = Vec::with_capacity(old.len() + 64);
    out.push(b'{');
    let member = |out: &mut Vec<u8>, key: &str, value: &[u8]| {
        if out.len() > 1 {
            out.push(b',');
        }
        // Serialising a &str into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        out.extend_from_slice(value);
    };
    for m in &stored {
        match changed.iter().find(|(k, _)| *k == m.key) {
            None => member(&mut out, m.key, m.value),
            Some((_, None)) => {}
            Some((_, Some(v))) => member(&mut out, m.key, &serde_json::to_vec(v).ok()?),
        }
    }
    for (key, v) in &changed {
        if let (Some(v), false) = (v, stored.iter().any(|m| m.key == *key)) {
            member(&mut out, key, &serde_json::to_vec(v).ok()?);
        }
    }
    out.push(b'}');
    Some(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy_data::model::{SM_POLICY_DATA, UE_POLICY_SET};
    use serde_json::json;

    /// What merging the whole document gives.
    fn full(old: &[u8], patch: &Value, ty: &Ty) -> Result<Value, ProblemDetails> {
        let mut doc: Value = serde_json::from_slice(old).unwrap();
        merge(&mut doc, patch.clone());
        model::validate(&doc, ty).map(|()| doc)
    }

    fn fast(old: &[u8], patch: &Value, ty: &Ty) -> Option<Result<Value, ProblemDetails>> {
        merge_stored(old, patch.as_object().unwrap(), ty)
            .map(|r| r.map(|b| serde_json::from_slice(&b).expect("valid JSON out")))
    }

    fn params(p: ProblemDetails) -> (Option<String>, Vec<String>) {
        (p.cause.clone(), p.invalid_params.into_iter().map(|i| i.param).collect())
    }

    fn sm_data() -> Vec<u8> {
        crate::preload::sm_data_document(7).to_string().into_bytes()
    }

    #[test]
    fn same_document_as_a_whole_merge() {
        let spaced = b" {\"smPolicySnssaiData\" : {\"1-000001\": {\"snssai\": {\"sst\": 1}, \
            \"x\": \"a \\\"}\\\\ b\"}} ,\n \"umData\":{\"l\":{\"limitId\":\"l\"}}, \"n\": 3 } ";
        let cases: Vec<(Vec<u8>, Value)> = vec![
            (sm_data(), json!({"umData": {"lim1": {"allowedUsage": {"totalVolume": 9}}}})),
            (sm_data(), json!({"umData": {"lim1": null, "lim2": {"limitId": "lim2"}}})),
            (sm_data(), json!({"umData": null})),
            (sm_data(), json!({"umDataLimits": null, "umData": {"a": {"limitId": "a"}}})),
            (sm_data(), json!({"newAttr": {"x": null, "y": [1, {"z": null}]}, "absent": null})),
            (
                sm_data(),
                json!({"smPolicySnssaiData": {"1-000001": {"smPolicyDnnData": {"ims": {
                    "bdtRefIds": {"b1": null, "b2": "ref-2"}}}}}}),
            ),
            (spaced.to_vec(), json!({"umData": {"l": {"umLevel": "SESSION_LEVEL"}}, "n": 4})),
            (spaced.to_vec(), json!({"n": null})),
            (b"{\"smPolicySnssaiData\":{\"1\":{\"snssai\":{\"sst\":1}}}}".to_vec(), json!({})),
        ];
        for (old, patch) in cases {
            let want = full(&old, &patch, &SM_POLICY_DATA).unwrap();
            let got = fast(&old, &patch, &SM_POLICY_DATA).expect("shortcut applies").unwrap();
            assert_eq!(got, want, "patch {patch}");
        }
    }

    #[test]
    fn same_errors_as_a_whole_merge() {
        let cases = [
            json!({"umData": {"lim1": {"allowedUsage": {"totalVolume": "many"}}}}),
            json!({"umData": {"lim1": {"resetTime": "soon"}}, "umDataLimits": 3}),
            json!({"smPolicySnssaiData": null}),
            json!({"smPolicySnssaiData": null, "umData": {"lim1": {"limitId": 5}}}),
            json!({"umData": {"lim1": null}}),
        ];
        for patch in cases {
            let want = full(&sm_data(), &patch, &SM_POLICY_DATA).map(|_| ());
            let got = fast(&sm_data(), &patch, &SM_POLICY_DATA).expect("shortcut applies");
            let (want, got) = (want.unwrap_err(), got.unwrap_err());
            assert_eq!(params(got), params(want), "patch {patch}");
        }
    }

    #[test]
    fn falls_back_when_only_a_full_parse_can_tell() {
        let patch = json!({"umData": null});
        let p = patch.as_object().unwrap();
        for old in [
            &b"{\"umData\":{},\"umData\":{}}"[..],
            b"{\"um\\u0044ata\":{}}",
            b"[1]",
            b"{\"a\":1,}",
            b"{\"a\":1} x",
            b"{\"a\":{\"b\":1}",
            b"{\"a\":\"x}",
            b"",
        ] {
            assert!(merge_stored(old, p, &SM_POLICY_DATA).is_none(), "{:?}", old);
        }
        // A type with a oneOf is checked as a whole.
        assert!(merge_stored(b"{}", p, &Ty::Str).is_none());
        assert!(merge_stored(&sm_data(), p, &UE_POLICY_SET).is_some());
    }

    #[test]
    fn member_spans() {
        let doc = br#"{"a":"x\"}","b":[1,{"c":[]}],"d":-1.5e3,"e":true,"f":null}"#;
        let m = members(doc).unwrap();
        let got: Vec<(&str, &[u8])> = m.iter().map(|m| (m.key, m.value)).collect();
        let want: Vec<(&str, &[u8])> = vec![
            ("a", br#""x\"}""#),
            ("b", br#"[1,{"c":[]}]"#),
            ("d", b"-1.5e3"),
            ("e", b"true"),
            ("f", b"null"),
        ];
        assert_eq!(got, want);
        assert_eq!(members(b" { } ").unwrap().len(), 0);
    }
}
