//! Direct preload of policy data subscriptions into the UDR's store file, for the benchmark
//! kit (`fivecore bench`, crates/bench/src/udr.rs): a UDR started afterwards loads them like
//! the subscriptions it made itself (`subs_to_notify::load`). Policy data itself is loaded with
//! [`crate::policy_data::store::put_profiles`], SLF and EIR entries with [`crate::import`].
//!
//! Also the 2.5 KB SmPolicyData of the reference call models T4b/T4c, shared by the kit and the
//! measurement in `tests/policy_data_perf.rs`.

use bytes::Bytes;
use rusqlite::{params, OptionalExtension, Transaction};
use serde_json::{json, Value};

use crate::policy_data::subs_to_notify;

/// Writes PolicyDataSubscriptions `(subsId, document)` into the store (inside the caller's
/// writer transaction). Each document is checked exactly as a POST to `subs-to-notify` checks
/// it (`subs_to_notify::decode`, no expiry bound); a bad one fails the call naming its index.
/// Not indexed in memory: a UDR started on the file loads them. Returns how many were written.
pub fn put_subscriptions(tx: &Transaction<'_>, subs: &[(String, Value)]) -> store::Result<usize> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO udr_policy_subscription (subs_id, expiry_ms, json_content) VALUES (?1, ?2, ?3)",
    )?;
    for (i, (id, doc)) in subs.iter().enumerate() {
        let bytes = Bytes::from(
            serde_json::to_vec(doc).map_err(|e| store::Error::InvalidArgument(e.to_string()))?,
        );
        let sub = subs_to_notify::decode(id, bytes, doc.clone(), subs_to_notify::now_ms(), 0)
            .map_err(|p| store::Error::InvalidArgument(format!("subscription {i} ({id}): {p}")))?;
        stmt.execute(params![sub.id, sub.expiry_ms, sub.json.as_ref()])?;
    }
    Ok(subs.len())
}

/// The ETag a GET of `ues/{ueId}/sm-data` answers for each of `ue_ids` (`None`: the UE has no
/// sm-data), read in one job of a store reader: what a PCF that had read them would hold.
pub async fn sm_data_etags(
    db: &store::SqliteStore,
    ue_ids: Vec<String>,
) -> store::Result<Vec<Option<String>>> {
    db.read(move |c| {
        let mut st = c.prepare_cached(
            "SELECT version FROM udr_policy_data WHERE kind = 'ue' AND id = ?1 AND part = ?2",
        )?;
        let mut out = Vec::with_capacity(ue_ids.len());
        for ue in &ue_ids {
            let v: Option<i64> = st
                .query_row(params![ue, crate::policy_data::ids::SM_DATA], |r| r.get(0))
                .optional()?;
            out.push(v.map(crate::policy_data::etag::etag));
        }
        Ok(out)
    })
    .await
}

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

    #[test]
    fn subscriptions_are_checked_like_a_post() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE udr_policy_subscription (subs_id TEXT PRIMARY KEY, expiry_ms INTEGER, json_content BLOB)",
        )
        .unwrap();
        let mut conn = conn;
        let tx = conn.transaction().unwrap();
        let good = json!({"notificationUri": "http://127.0.0.1:9/notify",
            "monitoredResourceUris": ["http://udr/nudr-dr/v2/policy-data/ues/imsi-001010000000001/sm-data"]});
        assert_eq!(put_subscriptions(&tx, &[("a".into(), good)]).unwrap(), 1);
        let bad = json!({"notificationUri": "not a uri", "monitoredResourceUris": []});
        assert!(put_subscriptions(&tx, &[("b".into(), bad)]).is_err());
    }
}
