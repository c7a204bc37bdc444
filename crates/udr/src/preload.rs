//! Sample data of the reference call models, shared by the benchmark kit (which preloads it
//! with `fivecore udr import`) and the measurement in `benches/policy_data_perf.rs`: the 2.5 KB
//! SmPolicyData of T4b/T4c.

use serde_json::{json, Value};

/// About 2.5 KB of SmPolicyData (TS 29.519), the size of the reference's T4b/T4c profile: one
/// S-NSSAI with three DNNs (PRA, CHF, BDT references), a usage monitoring limit and its data,
/// `volume` being the allowed total volume.
pub fn sm_data_document(volume: u64) -> Value {
    let dnn = |name: &str| {
        json!({"dnn": name, "allowedServices": ["svc-a", "svc-b", "svc-c"], "subscCats": ["gold", "silver"],
            "gbrUl": "100 Mbps", "gbrDl": "200 Mbps", "adcSupport": true, "subscSpendingLimits": true,
            "ipv4Index": 1, "ipv6Index": 2, "offline": true, "online": false,
            "chfInfo": {"primaryChfAddress": "http://chf1.operator.example.com:8080",
                "secondaryChfAddress": "http://chf2.operator.example.com:8080"},
            "refUmDataLimitIds": {"lim1": {"limitId": "lim1", "monkey": ["mk1", "mk2"]}},
            "praInfos": {"pra1": {"praId": "pra1", "presenceState": "IN_AREA", "trackingAreaList": [
                {"plmnId": {"mcc": "001", "mnc": "01"}, "tac": "000001"},
                {"plmnId": {"mcc": "001", "mnc": "01"}, "tac": "000002"}]}},
            "bdtRefIds": {"b1": "bdt-ref-0001"}, "locRoutNotAllowed": false})
    };
    json!({"smPolicySnssaiData": {"1-000001": {"snssai": {"sst": 1, "sd": "000001"},
            "smPolicyDnnData": {"internet": dnn("internet"), "ims": dnn("ims"), "mms": dnn("mms")}}},
        "umDataLimits": {"lim1": {"limitId": "lim1", "umLevel": "SESSION_LEVEL",
            "startDate": "2024-01-01T00:00:00Z", "endDate": "2034-01-01T00:00:00Z",
            "usageLimit": {"totalVolume": 100000000000u64, "uplinkVolume": 50000000000u64},
            "resetPeriod": {"period": "MONTHLY"}}},
        "umData": {"lim1": {"limitId": "lim1", "umLevel": "SESSION_LEVEL",
            "allowedUsage": {"totalVolume": volume}, "resetTime": "2030-01-01T00:00:00Z"}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sm_data_is_valid_and_about_two_and_a_half_kilobytes() {
        let doc = sm_data_document(1);
        let len = doc.to_string().len();
        assert!((2000..3200).contains(&len), "{len} bytes");
        crate::policy_data::provisioning::profile_parts(
            "imsi-001010000000001",
            &json!({"smData": doc}),
        )
        .unwrap();
    }
}
