//! NASREQ (RFC 7155) subset reused by Gx and Rx: the framed-address and station-id AVPs.

use std::net::Ipv6Addr;

use bytes::Bytes;

use super::{ApplicationDef, AvpDef};
use crate::types::DataType as T;

/// NASREQ's own application id. Only its AVPs are used (by Gx and Rx); its AAR/ACR commands are
/// not carried, so the application lists no commands.
pub const APP_ID: u32 = 1;

/// OctetString of 4 bytes on the wire (RFC 7155 §4.4.10.5.1), hence `Ipv4Octets`.
pub static FRAMED_IP_ADDRESS: AvpDef = AvpDef::ietf("Framed-IP-Address", 8, T::Ipv4Octets);
pub static FRAMED_IP_NETMASK: AvpDef = AvpDef::ietf("Framed-IP-Netmask", 9, T::Ipv4Octets);
pub static FILTER_ID: AvpDef = AvpDef::ietf("Filter-Id", 11, T::UTF8String);
/// The APN on Gx.
pub static CALLED_STATION_ID: AvpDef = AvpDef::ietf("Called-Station-Id", 30, T::UTF8String);
pub static CALLING_STATION_ID: AvpDef = AvpDef::ietf("Calling-Station-Id", 31, T::UTF8String);
pub static FRAMED_INTERFACE_ID: AvpDef = AvpDef::ietf("Framed-Interface-Id", 96, T::Unsigned64);
/// RFC 3162 layout: reserved byte, prefix length, then the prefix bytes.
pub static FRAMED_IPV6_PREFIX: AvpDef = AvpDef::ietf("Framed-IPv6-Prefix", 97, T::OctetString);

pub static AVPS: &[&AvpDef] = &[
    &FRAMED_IP_ADDRESS,
    &FRAMED_IP_NETMASK,
    &FILTER_ID,
    &CALLED_STATION_ID,
    &CALLING_STATION_ID,
    &FRAMED_INTERFACE_ID,
    &FRAMED_IPV6_PREFIX,
];

pub static NASREQ: ApplicationDef =
    ApplicationDef { name: "NASREQ", id: APP_ID, vendor_id: 0, commands: &[] };

/// Encodes a Framed-IPv6-Prefix payload; `len` is capped at 128 and only the bytes the prefix
/// covers are sent, as RFC 3162 §2.3 asks.
pub fn ipv6_prefix_payload(prefix: Ipv6Addr, len: u8) -> Bytes {
    let len = len.min(128);
    let n = usize::from(len).div_ceil(8);
    let mut v = Vec::with_capacity(2 + n);
    v.push(0);
    v.push(len);
    v.extend_from_slice(&prefix.octets()[..n]);
    Bytes::from(v)
}

/// Decodes a Framed-IPv6-Prefix payload into (prefix, length); `None` when malformed.
pub fn parse_ipv6_prefix(data: &[u8]) -> Option<(Ipv6Addr, u8)> {
    let (&len, rest) = data.get(1..)?.split_first()?;
    if len > 128 || rest.len() > 16 || rest.len() < usize::from(len).div_ceil(8) {
        return None;
    }
    let mut b = [0u8; 16];
    b[..rest.len()].copy_from_slice(rest);
    Some((Ipv6Addr::from(b), len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_prefix_round_trip() {
        let p: Ipv6Addr = "2001:db8:1:2::".parse().unwrap();
        let b = ipv6_prefix_payload(p, 64);
        assert_eq!(&b[..], &[0, 64, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2]);
        assert_eq!(parse_ipv6_prefix(&b), Some((p, 64)));
        assert_eq!(parse_ipv6_prefix(&[0, 64, 1]), None);
        assert_eq!(parse_ipv6_prefix(&[0]), None);
    }
}
