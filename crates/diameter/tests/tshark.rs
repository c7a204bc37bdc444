//! Wireshark's dissector must decode our Gx, Rx, Sy and Sh messages with no malformed packet,
//! unknown AVP or error-level expert info. Skips (printing "skipped") when tshark is absent.

mod common;

#[test]
fn wireshark_decodes_our_messages_cleanly() {
    let all = common::all_messages();
    let wire: Vec<Vec<u8>> = all.iter().map(|(_, m)| m.to_bytes().unwrap().to_vec()).collect();
    // Every frame dissected as Diameter, none with a complaint (testkit's check).
    let Some(text) = testkit::tshark::tshark_check(&wire) else { return };
    // Spot checks that the dissector saw what we meant.
    for needle in [
        "Charging-Rule-Install",
        "Media-Component-Description",
        "Policy-Counter-Status-Report",
        "Sh-User-Data",
        "IP-CAN_SESSION_NOT_AVAILABLE",
        "Framed-IP-Address(8) l=12 f=-M- val=10.45.0.2",
        "val=2001:db8:45::/64",
    ] {
        assert!(text.contains(needle), "{needle} missing from tshark output");
    }
}
