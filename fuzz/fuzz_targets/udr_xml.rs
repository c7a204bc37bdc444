//! cargo-fuzz entry for [`fivecore_fuzz::udr_xml`]; the body lives in the library so that
//! tests/replay.rs runs the same code over the corpus on stable.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fivecore_fuzz::udr_xml(data));
