//! Diameter messages checked by Wireshark's dissector (skipped without tshark).

use std::io::Write;
use std::process::Command;

/// A classic pcap with one fake Ethernet/IPv4/TCP frame per message on port 3868 (as the
/// diameter crate's tshark test builds it).
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

/// Wireshark decodes every message with no malformed or unknown AVP and no error or warning.
pub fn tshark_check(messages: &[Vec<u8>]) {
    if Command::new("tshark").arg("--version").output().is_err() {
        println!("skipped: tshark not installed");
        return;
    }
    assert!(!messages.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gx.pcap");
    std::fs::File::create(&path).unwrap().write_all(&pcap(messages)).unwrap();
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args(["-o", "tcp.check_checksum:FALSE", "-V"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
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
        .collect();
    assert!(bad.is_empty(), "tshark complaints:\n{}\n\nfull output:\n{text}", bad.join("\n"));
}
