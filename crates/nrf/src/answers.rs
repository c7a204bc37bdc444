//! SearchResult bodies (TS 29.510 §6.2.6.2.2) kept for reuse. A discovery answer is fully
//! determined by the profiles chosen, in order, with the services kept of each and their
//! priority offsets, the services' form and the validity period; between two writes to
//! the index the same queries choose the same profiles, so the body assembled once (a large
//! allocation and copy: 11-37 KB in the reference mix) is answered again as a shared `Bytes`.
//!
//! Entries are named by address: the index holds every entry of the current generation alive
//! (so no two have the same address), and the cache is emptied when the generation changes,
//! before any address of a freed entry could be reused.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http::HeaderValue;

use crate::context::Entry;
use crate::view::ServiceForm;

/// One profile of an answer: which of its services it holds (a mask over its view's services)
/// and the offset added to its priorities.
#[derive(Clone, Copy)]
pub struct Chosen<'a> {
    pub entry: &'a Arc<Entry>,
    pub selected: u64,
    pub offset: u32,
}

/// Distinct answers kept per generation; beyond, the cache starts over (a bound, not a target:
/// the reference mix has a few dozen).
const MAX_ANSWERS: usize = 4096;

/// A SearchResult body and its `Cache-Control`.
#[derive(Clone)]
pub struct Answer {
    pub body: Bytes,
    pub cache_control: HeaderValue,
}

#[derive(Default)]
pub struct AnswerCache {
    inner: RwLock<Inner>,
}

#[derive(Default)]
struct Inner {
    generation: u64,
    /// By hash of what an answer is built from (see [`key_hash`]).
    answers: HashMap<u64, Vec<Kept>, rustc_hash::FxBuildHasher>,
}

/// Validity and entry addresses under the workspace's fast hash (FxHash): every discovery
/// computes one, and SipHash (a keyed hash against flooding) cost more here than the rest of
/// the lookup. The inputs are not chosen by consumers (addresses of the index's entries), and a
/// collision only costs a comparison: [`Kept`] holds what the answer was built from.
fn key_hash(validity: u32, form: ServiceForm, chosen: &[Chosen<'_>]) -> u64 {
    let mut h = rustc_hash::FxBuildHasher.build_hasher();
    h.write_u32(validity);
    h.write_u8(form as u8);
    for c in keys(chosen) {
        h.write_usize(c.0);
        h.write_u64(c.1);
        h.write_u32(c.2);
    }
    h.finish()
}

/// One kept answer, with what it was built from to tell hash collisions apart.
struct Kept {
    entries: Box<[(usize, u64, u32)]>,
    validity: u32,
    form: ServiceForm,
    answer: Answer,
}

fn keys<'a>(chosen: &'a [Chosen<'a>]) -> impl Iterator<Item = (usize, u64, u32)> + 'a {
    chosen.iter().map(|c| (Arc::as_ptr(c.entry) as usize, c.selected, c.offset))
}

impl AnswerCache {
    /// The answer for `chosen` (in order) at index `generation`, built by `build` when not kept.
    pub fn get_or_build(
        &self,
        generation: u64,
        validity: u32,
        form: ServiceForm,
        chosen: &[Chosen<'_>],
        build: impl FnOnce() -> Answer,
    ) -> Answer {
        let same = |k: &&Kept| {
            k.validity == validity
                && k.form == form
                && k.entries.len() == chosen.len()
                && k.entries.iter().copied().eq(keys(chosen))
        };
        let hash = key_hash(validity, form, chosen);
        {
            let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
            if inner.generation == generation {
                if let Some(k) = inner.answers.get(&hash).and_then(|l| l.iter().find(same)) {
                    return k.answer.clone();
                }
            }
        }
        let answer = build();
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if inner.generation != generation || inner.answers.len() >= MAX_ANSWERS {
            inner.answers.clear();
            inner.generation = generation;
        }
        let list = inner.answers.entry(hash).or_default();
        if !list.iter().any(|x| same(&x)) {
            list.push(Kept {
                entries: keys(chosen).collect(),
                validity,
                form,
                answer: answer.clone(),
            });
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(n: u32) -> Arc<Entry> {
        let id = format!("{n:08x}-0000-4000-8000-000000000000");
        let v = json!({"nfInstanceId": id, "nfType": "PCF", "nfStatus": "REGISTERED"});
        Arc::new(Entry::new(id, serde_json::from_value(v.clone()).unwrap(), v, 1))
    }

    fn answer(text: &'static str) -> Answer {
        Answer {
            body: Bytes::from_static(text.as_bytes()),
            cache_control: HeaderValue::from_static("x"),
        }
    }

    #[test]
    fn kept_per_generation_validity_and_order() {
        let cache = AnswerCache::default();
        let (a, b) = (entry(1), entry(2));
        let get = |g, v, chosen: &[&Arc<Entry>], text| {
            let chosen: Vec<Chosen<'_>> =
                chosen.iter().map(|&entry| Chosen { entry, selected: 1, offset: 0 }).collect();
            cache.get_or_build(g, v, ServiceForm::Array, &chosen, || answer(text)).body
        };
        let get_as = |form, selected, offset, text| {
            let chosen = [Chosen { entry: &a, selected, offset }];
            cache.get_or_build(1, 60, form, &chosen, || answer(text)).body
        };
        assert_eq!(get(1, 60, &[&a, &b], "ab"), "ab");
        // Kept: the builder is not called again.
        assert_eq!(get(1, 60, &[&a, &b], "other"), "ab");
        // Another order, another set, another validity: other answers.
        assert_eq!(get(1, 60, &[&b, &a], "ba"), "ba");
        assert_eq!(get(1, 60, &[&a], "a"), "a");
        assert_eq!(get(1, 30, &[&a, &b], "ab30"), "ab30");
        assert_eq!(get(1, 60, &[], "none"), "none");
        assert_eq!(get(1, 60, &[&a, &b], "other"), "ab");
        // Other services kept, another offset, another form: other answers.
        assert_eq!(get(1, 60, &[&a], "other"), "a");
        assert_eq!(get_as(ServiceForm::Array, 2, 0, "a-2"), "a-2");
        assert_eq!(get_as(ServiceForm::Array, 1, 5, "a+5"), "a+5");
        assert_eq!(get_as(ServiceForm::Map, 1, 0, "a-map"), "a-map");
        assert_eq!(get_as(ServiceForm::Array, 1, 0, "other"), "a");
        // A new generation (a write to the index) drops everything kept.
        assert_eq!(get(2, 60, &[&a, &b], "ab2"), "ab2");
        assert_eq!(get(2, 60, &[&b, &a], "ba2"), "ba2");
    }
}
