//! Wireshark's dissector as a check of Diameter messages: each message goes into a classic
//! pcap as one fake Ethernet/IPv4/TCP frame on port 3868 (which tshark dissects as Diameter
//! without `-d`), and tshark must decode every one with no malformed or unknown AVP, no error
//! and no warning. Skipped (with a line on stdout) when tshark is not installed.

use std::io::Write;
use std::process::Command;

/// A classic pcap holding `messages`, one TCP segment each, 127.0.0.1 → 127.0.0.2:3868.
pub fn pcap(messages: &[Vec<u8>]) -> Vec<u8> {
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
        frame.extend_from_slice(&(40000 + i as u16).to_be_bytes());
        frame.extend_from_slice(&3868u16.to_be_bytes());
        frame.extend_from_slice(&1u32.to_be_bytes());
        frame.extend_from_slice(&1u32.to_be_bytes());
        frame.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        frame.extend_from_slice(payload);
        out.extend_from_slice(&(i as u32 + 1).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
    }
    out
}

/// tshark's full decode (`-V`) of `messages`, checked: one Diameter message per frame, and no
/// line saying Malformed, Unknown AVP, an unknown enumerated value, or an expert error or
/// warning. `None` when tshark is not installed.
pub fn tshark_check(messages: &[Vec<u8>]) -> Option<String> {
    tshark_check_tolerating(messages, &[])
}

/// [`tshark_check`], tolerating the complaints whose line contains one of `tolerated` (an
/// answer's Failed-AVP echoing a peer's empty AVP, RFC 6733 §7.5, is "Data is empty").
pub fn tshark_check_tolerating(messages: &[Vec<u8>], tolerated: &[&str]) -> Option<String> {
    if Command::new("tshark").arg("--version").output().is_err() {
        println!("skipped: tshark not installed");
        return None;
    }
    assert!(!messages.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("diameter.pcap");
    std::fs::File::create(&path).unwrap().write_all(&pcap(messages)).unwrap();
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args(["-o", "tcp.check_checksum:FALSE", "-V"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.matches("Diameter Protocol").count(), messages.len(), "{text}");
    let bad: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.contains("Malformed")
                || l.contains("Unknown AVP")
                || l.contains("Unknown(")
                || l.contains("Expert Info (Error")
                || l.contains("Expert Info (Warning")
        })
        .filter(|l| !tolerated.iter().any(|t| l.contains(t)))
        .collect();
    assert!(bad.is_empty(), "tshark complaints:\n{}\n\nfull output:\n{text}", bad.join("\n"));
    Some(text)
}
