//! The UE policy delivery service's messages (TS 24.501 Annex D): the PCF's MANAGE UE POLICY
//! COMMAND (D.5.1) carrying URSP in one UE policy section, and the UE's MANAGE UE POLICY
//! COMPLETE (D.5.2) or COMMAND REJECT (D.5.3) the AMF relays back. These are the octets of the
//! N1 message container of class UPDP; the AMF wraps them in its DL NAS TRANSPORT.

/// The UE policy delivery service's message types (TS 24.501 §D.6.1).
pub const MANAGE_UE_POLICY_COMMAND: u8 = 0x01;
pub const MANAGE_UE_POLICY_COMPLETE: u8 = 0x02;
pub const MANAGE_UE_POLICY_COMMAND_REJECT: u8 = 0x03;

/// UE policy part type URSP (TS 24.501 §D.6.2, the part type's lower four bits).
const PART_URSP: u8 = 0x01;

/// The UE policy section code this PCF gives the URSP section. The PCF keeps the UE's whole
/// URSP in one section, so each command replaces the section (an empty one deletes it).
pub const URSP_UPSC: u16 = 1;

/// A PLMN's three octets (TS 24.008 §10.5.1.13 as TS 24.501 §D.6.2 refers to it): MCC digits
/// 2|1, MNC digit 3 (F for a two-digit MNC)|MCC digit 3, MNC digits 2|1.
pub fn plmn_octets(mcc: &str, mnc: &str) -> Option<[u8; 3]> {
    let d = |s: &str| -> Option<Vec<u8>> {
        s.bytes().map(|b| b.is_ascii_digit().then_some(b - b'0')).collect()
    };
    let (c, n) = (d(mcc)?, d(mnc)?);
    if c.len() != 3 || !(n.len() == 2 || n.len() == 3) {
        return None;
    }
    let n3 = n.get(2).copied().unwrap_or(0x0f);
    Some([c[1] << 4 | c[0], n3 << 4 | c[2], n[1] << 4 | n[0]])
}

fn lv16(out: &mut Vec<u8>, body: &[u8]) {
    // The URSP fits in a section: a project's rules are far below 64 KiB; a longer section
    // is cut by the length, which the encoder refuses earlier (ursp::encode).
    out.extend_from_slice(&(body.len().min(u16::MAX as usize) as u16).to_be_bytes());
    out.extend_from_slice(body);
}

/// MANAGE UE POLICY COMMAND (TS 24.501 §D.5.1): `pti`, then the UE policy section management
/// list (LV-E) of one sublist for `plmn` with one instruction for [`URSP_UPSC`] whose section
/// holds one URSP part of `ursp` (or nothing, which deletes the section at the UE).
pub fn manage_ue_policy_command(pti: u8, plmn: [u8; 3], ursp: Option<&[u8]>) -> Vec<u8> {
    let mut section = Vec::new();
    if let Some(u) = ursp {
        let mut part = vec![PART_URSP];
        part.extend_from_slice(u);
        lv16(&mut section, &part);
    }
    let mut instruction = URSP_UPSC.to_be_bytes().to_vec();
    instruction.extend_from_slice(&section);
    let mut sublist = plmn.to_vec();
    lv16(&mut sublist, &instruction);
    let mut list = Vec::new();
    lv16(&mut list, &sublist);
    let mut msg = vec![pti, MANAGE_UE_POLICY_COMMAND];
    lv16(&mut msg, &list);
    msg
}

/// A UE policy delivery message as the PCF reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A command (what the tests read back): PLMN, UPSC and the URSP part's contents (None:
    /// the section is deleted).
    Command {
        pti: u8,
        plmn: [u8; 3],
        upsc: u16,
        ursp: Option<Vec<u8>>,
    },
    Complete {
        pti: u8,
    },
    /// The 5GSM-like causes of each failed instruction (TS 24.501 §D.6.3), in order.
    Reject {
        pti: u8,
        causes: Vec<u8>,
    },
}

fn take<'a>(b: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], String> {
    let end = at.checked_add(n).filter(|e| *e <= b.len()).ok_or("truncated message")?;
    let s = &b[*at..end];
    *at = end;
    Ok(s)
}

fn take16<'a>(b: &'a [u8], at: &mut usize) -> Result<&'a [u8], String> {
    let l = take(b, at, 2)?;
    take(b, at, u16::from_be_bytes([l[0], l[1]]) as usize)
}

/// Reads a UE policy delivery message.
pub fn parse(b: &[u8]) -> Result<Message, String> {
    let [pti, kind, rest @ ..] = b else { return Err("shorter than its header".into()) };
    let pti = *pti;
    let mut at = 0;
    match *kind {
        MANAGE_UE_POLICY_COMPLETE => Ok(Message::Complete { pti }),
        MANAGE_UE_POLICY_COMMAND_REJECT => {
            // UE policy section management result (§D.6.3): sublists of a result count,
            // the PLMN, then per result UPSC (2), failed instruction order (2), cause (1).
            let list = take16(rest, &mut at)?;
            let mut causes = Vec::new();
            let mut i = 0;
            while i < list.len() {
                let n = take(list, &mut i, 1)?[0];
                take(list, &mut i, 3)?;
                for _ in 0..n {
                    causes.push(take(list, &mut i, 5)?[4]);
                }
            }
            Ok(Message::Reject { pti, causes })
        }
        MANAGE_UE_POLICY_COMMAND => {
            let list = take16(rest, &mut at)?;
            let mut i = 0;
            let sublist = take16(list, &mut i)?;
            let mut j = 0;
            let plmn = take(sublist, &mut j, 3)?;
            let instruction = take16(sublist, &mut j)?;
            let upsc = u16::from_be_bytes([instruction[0], *instruction.get(1).ok_or("no UPSC")?]);
            let mut k = 2;
            let ursp = if k < instruction.len() {
                let part = take16(instruction, &mut k)?;
                match part.split_first() {
                    Some((t, c)) if t & 0x0f == PART_URSP => Some(c.to_vec()),
                    _ => return Err("a UE policy part that is not URSP".into()),
                }
            } else {
                None
            };
            Ok(Message::Command { pti, plmn: [plmn[0], plmn[1], plmn[2]], upsc, ursp })
        }
        other => Err(format!("UE policy delivery message type {other:#04x} not handled")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The octets of D.5.1 with D.6.2's list, sublist, instruction and part, by hand.
    #[test]
    fn a_command_is_the_octets_annex_d_gives() {
        let plmn = plmn_octets("001", "01").unwrap();
        assert_eq!(plmn, [0x00, 0xf1, 0x10]);
        assert_eq!(plmn_octets("310", "260"), Some([0x13, 0x00, 0x62]));
        let ursp = [0xaa, 0xbb];
        let m = manage_ue_policy_command(7, plmn, Some(&ursp));
        let want = [
            0x07, 0x01, // PTI 7, MANAGE UE POLICY COMMAND
            0x00, 0x0e, // UE policy section management list contents: 14
            0x00, 0x0c, // sublist length: 12
            0x00, 0xf1, 0x10, // PLMN 001/01
            0x00, 0x07, // instruction contents length: 7
            0x00, 0x01, // UPSC 1
            0x00, 0x03, // UE policy part length: 3
            0x01, // part type URSP
            0xaa, 0xbb, // URSP
        ];
        assert_eq!(m, want);
        assert_eq!(
            parse(&m).unwrap(),
            Message::Command { pti: 7, plmn, upsc: 1, ursp: Some(ursp.to_vec()) }
        );
        let del = manage_ue_policy_command(8, plmn, None);
        assert_eq!(
            del,
            [0x08, 0x01, 0x00, 0x09, 0x00, 0x07, 0x00, 0xf1, 0x10, 0x00, 0x02, 0x00, 0x01]
        );
        assert_eq!(parse(&del).unwrap(), Message::Command { pti: 8, plmn, upsc: 1, ursp: None });
    }

    #[test]
    fn complete_and_reject_are_read() {
        assert_eq!(parse(&[0x07, 0x02]).unwrap(), Message::Complete { pti: 7 });
        // One sublist, one result: UPSC 1, instruction 1, cause #111 (protocol error).
        let reject = [0x09, 0x03, 0x00, 0x09, 0x01, 0x00, 0xf1, 0x10, 0x00, 0x01, 0x00, 0x01, 0x6f];
        assert_eq!(parse(&reject).unwrap(), Message::Reject { pti: 9, causes: vec![0x6f] });
        assert!(parse(&[0x01]).is_err());
        assert!(parse(&[0x01, 0x03, 0x00, 0x09, 0x01]).is_err());
    }
}
