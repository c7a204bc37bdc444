//! Constructors for the grouped AVPs NF code builds most, and message builder shortcuts.

use std::net::Ipv6Addr;

use crate::avp::Avp;
use crate::dictionary::{base, dcca, nasreq, sh, VENDOR_3GPP};
use crate::message::Message;

/// Subscription-Id { Subscription-Id-Type, Subscription-Id-Data }.
pub fn subscription_id(id_type: u32, data: &str) -> Avp {
    dcca::SUBSCRIPTION_ID.grouped(vec![
        dcca::SUBSCRIPTION_ID_TYPE.enumerated(id_type),
        dcca::SUBSCRIPTION_ID_DATA.utf8(data),
    ])
}

/// Supported-Features { Vendor-Id = 10415, Feature-List-ID, Feature-List }.
pub fn supported_features(list_id: u32, list: u32) -> Avp {
    sh::SUPPORTED_FEATURES.grouped(vec![
        base::VENDOR_ID.u32(VENDOR_3GPP),
        sh::FEATURE_LIST_ID.u32(list_id),
        sh::FEATURE_LIST.u32(list),
    ])
}

/// Experimental-Result { Vendor-Id, Experimental-Result-Code }.
pub fn experimental_result(vendor_id: u32, code: u32) -> Avp {
    base::EXPERIMENTAL_RESULT
        .grouped(vec![base::VENDOR_ID.u32(vendor_id), base::EXPERIMENTAL_RESULT_CODE.u32(code)])
}

/// Vendor-Specific-Application-Id { Vendor-Id, Auth-Application-Id }.
pub fn vendor_specific_auth_app(vendor_id: u32, application_id: u32) -> Avp {
    base::VENDOR_SPECIFIC_APPLICATION_ID.grouped(vec![
        base::VENDOR_ID.u32(vendor_id),
        base::AUTH_APPLICATION_ID.u32(application_id),
    ])
}

/// Framed-IPv6-Prefix in RFC 3162 layout.
pub fn framed_ipv6_prefix(prefix: Ipv6Addr, len: u8) -> Avp {
    nasreq::FRAMED_IPV6_PREFIX.bytes(nasreq::ipv6_prefix_payload(prefix, len))
}

/// Sh User-Identity { Public-Identity }.
pub fn user_identity_public(public_identity: &str) -> Avp {
    sh::USER_IDENTITY.grouped(vec![sh::PUBLIC_IDENTITY.utf8(public_identity)])
}

impl Message {
    /// Builder: Session-Id.
    pub fn session_id_avp(self, session_id: &str) -> Message {
        self.avp(base::SESSION_ID.utf8(session_id))
    }

    /// Builder: Origin-Host and Origin-Realm.
    pub fn origin(self, host: &str, realm: &str) -> Message {
        self.avp(base::ORIGIN_HOST.identity(host)).avp(base::ORIGIN_REALM.identity(realm))
    }

    /// Builder: Destination-Realm, and Destination-Host when given.
    pub fn destination(self, realm: &str, host: Option<&str>) -> Message {
        let m = self.avp(base::DESTINATION_REALM.identity(realm));
        match host {
            Some(h) => m.avp(base::DESTINATION_HOST.identity(h)),
            None => m,
        }
    }

    /// Builder: Result-Code.
    pub fn result_code_avp(self, code: u32) -> Message {
        self.avp(base::RESULT_CODE.u32(code))
    }
}
