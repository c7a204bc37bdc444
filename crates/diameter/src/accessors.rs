//! Typed getters on [`Message`] for the AVPs our NFs read.
//!
//! They return `None` both when the AVP is absent and when it is malformed: NF code runs them
//! after [`crate::validate`], which has already rejected malformed AVPs with the right error.

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::Bytes;

use crate::avp::Avp;
use crate::dictionary::dcca::{self, CcRequestType};
use crate::dictionary::{base, gx, nasreq, rx, sh, sy, AvpDef};
use crate::message::Message;
use crate::types::{Address, Time};

/// Experimental-Result content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExperimentalResult {
    pub vendor_id: u32,
    pub code: u32,
}

/// Subscription-Id content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionId {
    pub id_type: u32,
    pub data: String,
}

/// Supported-Features content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportedFeatures {
    pub vendor_id: u32,
    pub feature_list_id: u32,
    pub feature_list: u32,
}

impl Message {
    pub fn get_u32(&self, def: &AvpDef) -> Option<u32> {
        self.find(def)?.as_u32().ok()
    }
    pub fn get_u64(&self, def: &AvpDef) -> Option<u64> {
        self.find(def)?.as_u64().ok()
    }
    pub fn get_i32(&self, def: &AvpDef) -> Option<i32> {
        self.find(def)?.as_i32().ok()
    }
    pub fn get_str(&self, def: &AvpDef) -> Option<&str> {
        self.find(def)?.as_str().ok()
    }
    pub fn get_bytes(&self, def: &AvpDef) -> Option<Bytes> {
        self.find(def)?.as_bytes().ok()
    }
    /// The payload, borrowed (no copy, unlike [`Message::get_bytes`] for a short one).
    pub fn get_slice(&self, def: &AvpDef) -> Option<&[u8]> {
        self.find(def)?.as_slice().ok()
    }
    pub fn get_time(&self, def: &AvpDef) -> Option<Time> {
        self.find(def)?.as_time().ok()
    }
    pub fn get_address(&self, def: &AvpDef) -> Option<Address> {
        self.find(def)?.as_address().ok()
    }
    /// Every value of a repeated 4-byte AVP (Event-Trigger, Data-Reference, ...).
    pub fn get_all_u32(&self, def: &AvpDef) -> Vec<u32> {
        self.find_all(def).filter_map(|a| a.as_u32().ok()).collect()
    }

    pub fn session_id(&self) -> Option<&str> {
        self.get_str(&base::SESSION_ID)
    }
    pub fn origin_host(&self) -> Option<&str> {
        self.get_str(&base::ORIGIN_HOST)
    }
    pub fn origin_realm(&self) -> Option<&str> {
        self.get_str(&base::ORIGIN_REALM)
    }
    pub fn destination_host(&self) -> Option<&str> {
        self.get_str(&base::DESTINATION_HOST)
    }
    pub fn destination_realm(&self) -> Option<&str> {
        self.get_str(&base::DESTINATION_REALM)
    }
    pub fn origin_state_id(&self) -> Option<u32> {
        self.get_u32(&base::ORIGIN_STATE_ID)
    }
    pub fn auth_application_id(&self) -> Option<u32> {
        self.get_u32(&base::AUTH_APPLICATION_ID)
    }
    pub fn result_code(&self) -> Option<u32> {
        self.get_u32(&base::RESULT_CODE)
    }
    pub fn experimental_result(&self) -> Option<ExperimentalResult> {
        let g = self.find(&base::EXPERIMENTAL_RESULT)?;
        Some(ExperimentalResult {
            vendor_id: g.child(&base::VENDOR_ID)?.as_u32().ok()?,
            code: g.child(&base::EXPERIMENTAL_RESULT_CODE)?.as_u32().ok()?,
        })
    }
    /// Result-Code, or else the Experimental-Result-Code: what decides success.
    pub fn any_result_code(&self) -> Option<u32> {
        self.result_code().or_else(|| self.experimental_result().map(|e| e.code))
    }
    /// Whether the answer reports success (2xxx).
    pub fn is_success(&self) -> bool {
        self.any_result_code().is_some_and(|c| (2000..3000).contains(&c))
    }
    pub fn failed_avps(&self) -> Vec<Avp> {
        self.find(&base::FAILED_AVP)
            .and_then(|f| f.children().ok())
            .map(|c| c.into_owned())
            .unwrap_or_default()
    }
    pub fn termination_cause(&self) -> Option<u32> {
        self.get_u32(&base::TERMINATION_CAUSE)
    }
    pub fn re_auth_request_type(&self) -> Option<u32> {
        self.get_u32(&base::RE_AUTH_REQUEST_TYPE)
    }
    pub fn disconnect_cause(&self) -> Option<u32> {
        self.get_u32(&base::DISCONNECT_CAUSE)
    }

    // --- DCCA / Gx ---

    pub fn cc_request_type(&self) -> Option<CcRequestType> {
        CcRequestType::from_u32(self.get_u32(&dcca::CC_REQUEST_TYPE)?)
    }
    pub fn cc_request_number(&self) -> Option<u32> {
        self.get_u32(&dcca::CC_REQUEST_NUMBER)
    }
    pub fn subscription_ids(&self) -> Vec<SubscriptionId> {
        self.find_all(&dcca::SUBSCRIPTION_ID)
            .filter_map(|g| {
                Some(SubscriptionId {
                    id_type: g.child(&dcca::SUBSCRIPTION_ID_TYPE)?.as_u32().ok()?,
                    data: g.child(&dcca::SUBSCRIPTION_ID_DATA)?.as_str().ok()?.to_owned(),
                })
            })
            .collect()
    }
    /// The Subscription-Id-Data of the first Subscription-Id of `id_type`.
    pub fn subscription_id_of(&self, id_type: u32) -> Option<String> {
        self.subscription_ids().into_iter().find(|s| s.id_type == id_type).map(|s| s.data)
    }
    pub fn imsi(&self) -> Option<String> {
        self.subscription_id_of(dcca::subscription_id_type::END_USER_IMSI)
    }
    pub fn msisdn(&self) -> Option<String> {
        self.subscription_id_of(dcca::subscription_id_type::END_USER_E164)
    }
    pub fn framed_ip_address(&self) -> Option<Ipv4Addr> {
        self.find(&nasreq::FRAMED_IP_ADDRESS)?.as_ipv4_octets().ok()
    }
    pub fn framed_ipv6_prefix(&self) -> Option<(Ipv6Addr, u8)> {
        nasreq::parse_ipv6_prefix(self.get_slice(&nasreq::FRAMED_IPV6_PREFIX)?)
    }
    /// The APN.
    pub fn called_station_id(&self) -> Option<&str> {
        self.get_str(&nasreq::CALLED_STATION_ID)
    }
    pub fn supported_features(&self) -> Vec<SupportedFeatures> {
        self.find_all(&sh::SUPPORTED_FEATURES)
            .filter_map(|g| {
                Some(SupportedFeatures {
                    vendor_id: g.child(&base::VENDOR_ID)?.as_u32().ok()?,
                    feature_list_id: g.child(&sh::FEATURE_LIST_ID)?.as_u32().ok()?,
                    feature_list: g.child(&sh::FEATURE_LIST)?.as_u32().ok()?,
                })
            })
            .collect()
    }
    pub fn ip_can_type(&self) -> Option<u32> {
        self.get_u32(&gx::IP_CAN_TYPE)
    }
    pub fn rat_type(&self) -> Option<u32> {
        self.get_u32(&gx::RAT_TYPE)
    }
    pub fn event_triggers(&self) -> Vec<u32> {
        self.get_all_u32(&gx::EVENT_TRIGGER)
    }
    pub fn charging_rule_installs(&self) -> impl Iterator<Item = &Avp> {
        self.find_all(&gx::CHARGING_RULE_INSTALL)
    }
    pub fn charging_rule_reports(&self) -> impl Iterator<Item = &Avp> {
        self.find_all(&gx::CHARGING_RULE_REPORT)
    }
    pub fn usage_monitoring_information(&self) -> impl Iterator<Item = &Avp> {
        self.find_all(&gx::USAGE_MONITORING_INFORMATION)
    }
    pub fn qos_information(&self) -> Option<&Avp> {
        self.find(&gx::QOS_INFORMATION)
    }

    // --- Rx ---

    pub fn rx_request_type(&self) -> Option<u32> {
        self.get_u32(&rx::RX_REQUEST_TYPE)
    }
    pub fn af_application_identifier(&self) -> Option<Bytes> {
        self.get_bytes(&rx::AF_APPLICATION_IDENTIFIER)
    }
    pub fn af_charging_identifier(&self) -> Option<Bytes> {
        self.get_bytes(&rx::AF_CHARGING_IDENTIFIER)
    }
    pub fn ip_domain_id(&self) -> Option<Bytes> {
        self.get_bytes(&rx::IP_DOMAIN_ID)
    }
    pub fn specific_actions(&self) -> Vec<u32> {
        self.get_all_u32(&rx::SPECIFIC_ACTION)
    }
    pub fn abort_cause(&self) -> Option<u32> {
        self.get_u32(&rx::ABORT_CAUSE)
    }
    pub fn media_component_descriptions(&self) -> impl Iterator<Item = &Avp> {
        self.find_all(&rx::MEDIA_COMPONENT_DESCRIPTION)
    }

    // --- Sy ---

    pub fn sl_request_type(&self) -> Option<u32> {
        self.get_u32(&sy::SL_REQUEST_TYPE)
    }
    pub fn policy_counter_identifiers(&self) -> Vec<&str> {
        self.find_all(&sy::POLICY_COUNTER_IDENTIFIER).filter_map(|a| a.as_str().ok()).collect()
    }
    /// (Policy-Counter-Identifier, Policy-Counter-Status) pairs of the status reports.
    pub fn policy_counter_statuses(&self) -> Vec<(String, String)> {
        self.find_all(&sy::POLICY_COUNTER_STATUS_REPORT)
            .filter_map(|g| {
                Some((
                    g.child(&sy::POLICY_COUNTER_IDENTIFIER)?.as_str().ok()?.to_owned(),
                    g.child(&sy::POLICY_COUNTER_STATUS)?.as_str().ok()?.to_owned(),
                ))
            })
            .collect()
    }

    // --- Sh ---

    /// Public-Identity inside User-Identity.
    pub fn user_public_identity(&self) -> Option<String> {
        let g = self.find(&sh::USER_IDENTITY)?;
        Some(g.child(&sh::PUBLIC_IDENTITY)?.as_str().ok()?.to_owned())
    }
    /// MSISDN inside User-Identity.
    pub fn user_msisdn(&self) -> Option<Bytes> {
        self.find(&sh::USER_IDENTITY)?.child(&sh::MSISDN)?.as_bytes().ok()
    }
    pub fn user_data(&self) -> Option<Bytes> {
        self.get_bytes(&sh::USER_DATA)
    }
    pub fn data_references(&self) -> Vec<u32> {
        self.get_all_u32(&sh::DATA_REFERENCE)
    }
    pub fn subs_req_type(&self) -> Option<u32> {
        self.get_u32(&sh::SUBS_REQ_TYPE)
    }
    pub fn server_name(&self) -> Option<&str> {
        self.get_str(&sh::SERVER_NAME)
    }
}
