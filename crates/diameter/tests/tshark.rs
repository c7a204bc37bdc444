//! Wireshark's dissector must decode our Gx, Rx, Sy and Sh messages with no malformed packet,
//! unknown AVP or error-level expert info. Skips (printing "skipped") when tshark is absent.

mod common;

use std::io::Write;
use std::process::Command;

/// A classic pcap (LINKTYPE_ETHERNET) with one fake Ethernet/IPv4/TCP frame per message, each
/// on its own TCP connection so the dissector needs no stream reassembly.
fn pcap(messages: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, payload) in messages.iter().enumerate() {
        let mut frame = Vec::new();
        frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
        let total = 20 + 20 + payload.len();
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&(total as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0, 127, 0, 0, 1, 127, 0, 0, 2]);
        let sum = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum::<u32>();
        let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        frame.extend_from_slice(&ip);
        let sport = 40000 + i as u16;
        frame.extend_from_slice(&sport.to_be_bytes());
        frame.extend_from_slice(&3868u16.to_be_bytes());
        frame.extend_from_slice(&1u32.to_be_bytes()); // seq
        frame.extend_from_slice(&1u32.to_be_bytes()); // ack
        frame.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]); // PSH|ACK, no checksum
        frame.extend_from_slice(payload);
        out.extend_from_slice(&(i as u32 + 1).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
    }
    out
}

#[test]
fn wireshark_decodes_our_messages_cleanly() {
    if Command::new("tshark").arg("--version").output().is_err() {
        println!("skipped: tshark not installed");
        return;
    }
    let all = common::all_messages();
    let wire: Vec<Vec<u8>> = all.iter().map(|(_, m)| m.to_bytes().unwrap().to_vec()).collect();
    let dir = std::env::temp_dir().join(format!("fivecore-diameter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("messages.pcap");
    std::fs::File::create(&path).unwrap().write_all(&pcap(&wire)).unwrap();
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args(["-o", "tcp.check_checksum:FALSE", "-V"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    let frames = text.matches("Diameter Protocol").count();
    assert_eq!(frames, all.len(), "every frame dissected as Diameter:\n{text}");
    let bad: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.contains("Malformed")
                || l.contains("Unknown AVP")
                || l.contains("Unknown(")
                || l.contains("Expert Info (Error")
                || l.contains("Expert Info (Warning")
        })
        .collect();
    assert!(bad.is_empty(), "tshark complaints:\n{}\n\nfull output:\n{text}", bad.join("\n"));
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
