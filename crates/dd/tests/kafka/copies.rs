//! Envelopes like the ones NFs send, for the Kafka tests.

/// An envelope of about `size` bytes as the PCF would copy an SM policy request: its SUPI (one of
/// 50,000), headers and a JSON body whose ids differ from copy to copy, so compression sees what
/// real copies give it.
pub fn copy(i: u64, size: usize) -> Vec<u8> {
    copy_of(i, &format!("imsi-0010100{:08}", i % 50_000), size)
}

/// The same, for subscriber `supi` (empty: a copy without one).
pub fn copy_of(i: u64, supi: &str, size: usize) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut hex = |n: usize| -> String {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from_digit((x % 16) as u32, 16).unwrap()
            })
            .collect()
    };
    let mut body = format!(
        r#"{{"supi":"{supi}","pduSessionId":{},"dnn":"internet","sliceInfo":{{"sst":1,"sd":"{}"}},"notificationUri":"http://10.0.{}.{}:8080/npcf-callback/v1/{}","ipv4Address":"10.45.{}.{}","ratType":"NR","servingNetwork":{{"mcc":"001","mnc":"01"}},"userLocationInfo":{{"nrLocation":{{"tai":{{"plmnId":{{"mcc":"001","mnc":"01"}},"tac":"{}"}},"ncgi":{{"plmnId":{{"mcc":"001","mnc":"01"}},"nrCellId":"{}"}}}}}},"suppFeat":"{}","#,
        i % 15 + 1,
        hex(6),
        i % 250,
        i % 200,
        hex(32),
        (i / 250) % 250,
        i % 250,
        hex(6),
        hex(9),
        hex(4),
    );
    let encode = |body: &str| {
        let path = "/npcf-smpolicycontrol/v1/sm-policies";
        let headers: [(&[u8], &[u8]); 4] = [
            (b":method", b"POST"),
            (b":path", path.as_bytes()),
            (b"content-type", b"application/json"),
            (b"user-agent", b"SMF-5a7bd676"),
        ];
        let m = dd::envelope::CopyMeta {
            trigger: dd::envelope::TriggerPoint::IngressRequest,
            protocol: dd::envelope::Protocol::Http2,
            timestamp_ns: 1_790_000_000_000_000_000 + i * 1000,
            sequence: i,
            transaction: i,
            stream_id: (i % 1_000_000) as u32 * 2 + 1,
            status: 0,
            nf_type: "PCF",
            nf_instance: "5a7bd676-ceeb-44bb-95e0-f6a55a328b03",
            service: "npcf-smpolicycontrol",
            operation: "Npcf_SMPolicyControl_Create",
            method: "POST",
            path,
            peer: "10.0.3.7:40412",
            supi,
            gpsi: "",
            session_id: "",
        };
        let mut out = bytes::BytesMut::new();
        dd::envelope::encode(&m, headers, body.as_bytes(), &mut out).unwrap();
        out
    };
    // Padded with a vendor attribute to the size asked.
    let pad = size.saturating_sub(encode(&body).len() + 12);
    body.push_str(&format!(r#""vendor":"{}"}}"#, hex(pad)));
    encode(&body).to_vec()
}
