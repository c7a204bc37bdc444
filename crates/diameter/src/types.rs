//! RFC 6733 §4.2–4.3 data formats: the type tags the dictionary uses, the value types that need
//! more than a primitive (Address, Time), and the per-type payload check the validator runs.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};

/// The type of an AVP's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    OctetString,
    Integer32,
    Integer64,
    Unsigned32,
    Unsigned64,
    Float32,
    Float64,
    Grouped,
    /// 2-byte IANA address family followed by the address.
    Address,
    /// NTP seconds since 1900-01-01, 4 bytes.
    Time,
    UTF8String,
    DiameterIdentity,
    DiameterURI,
    /// Integer32 with named values.
    Enumerated,
    /// RFC 6733 §4.3 IPFilterRule: an ASCII rule such as `permit out 17 from any to 10.0.0.1 5060`.
    IPFilterRule,
    /// An OctetString that holds exactly an IPv4 address, as RADIUS-derived AVPs do
    /// (Framed-IP-Address, Framed-IP-Netmask: RFC 7155 §4.4.10.5.1). Not a base type, but giving
    /// it a tag lets the validator reject a wrong size with 5014.
    Ipv4Octets,
}

impl DataType {
    /// Payload size for fixed-size types.
    pub const fn fixed_len(self) -> Option<usize> {
        match self {
            DataType::Integer32
            | DataType::Unsigned32
            | DataType::Float32
            | DataType::Enumerated
            | DataType::Time
            | DataType::Ipv4Octets => Some(4),
            DataType::Integer64 | DataType::Unsigned64 | DataType::Float64 => Some(8),
            _ => None,
        }
    }
}

/// Why a payload does not fit its type: the two map to 5014 and 5004.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueError {
    Length,
    Value,
}

/// Checks a payload against its type. Grouped payloads are checked by the caller, which walks
/// the children (their framing errors need the child AVP for Failed-AVP).
pub fn check_value(ty: DataType, data: &[u8]) -> Result<(), ValueError> {
    if let Some(n) = ty.fixed_len() {
        return if data.len() == n { Ok(()) } else { Err(ValueError::Length) };
    }
    match ty {
        DataType::Address => Address::decode(data).map(|_| ()),
        DataType::UTF8String => {
            std::str::from_utf8(data).map(|_| ()).map_err(|_| ValueError::Value)
        }
        DataType::DiameterIdentity => {
            // An FQDN or realm: printable ASCII without spaces, never empty.
            if !data.is_empty() && data.iter().all(|b| b.is_ascii_graphic()) {
                Ok(())
            } else {
                Err(ValueError::Value)
            }
        }
        DataType::DiameterURI => {
            let s = std::str::from_utf8(data).map_err(|_| ValueError::Value)?;
            if s.starts_with("aaa://") || s.starts_with("aaas://") {
                Ok(())
            } else {
                Err(ValueError::Value)
            }
        }
        DataType::IPFilterRule => {
            if data.is_ascii() {
                Ok(())
            } else {
                Err(ValueError::Value)
            }
        }
        _ => Ok(()),
    }
}

/// IANA address family numbers used by the Address type.
pub const ADDRESS_FAMILY_IPV4: u16 = 1;
pub const ADDRESS_FAMILY_IPV6: u16 = 2;

/// RFC 6733 §4.3.1 Address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    Ip(IpAddr),
    /// Any other family (E.164 is 8, for instance), kept as raw bytes.
    Other {
        family: u16,
        bytes: Bytes,
    },
}

impl Address {
    pub fn decode(data: &[u8]) -> Result<Address, ValueError> {
        if data.len() < 2 {
            return Err(ValueError::Length);
        }
        let family = u16::from_be_bytes([data[0], data[1]]);
        let rest = &data[2..];
        match family {
            ADDRESS_FAMILY_IPV4 => {
                let b: [u8; 4] = rest.try_into().map_err(|_| ValueError::Length)?;
                Ok(Address::Ip(IpAddr::V4(Ipv4Addr::from(b))))
            }
            ADDRESS_FAMILY_IPV6 => {
                let b: [u8; 16] = rest.try_into().map_err(|_| ValueError::Length)?;
                Ok(Address::Ip(IpAddr::V6(Ipv6Addr::from(b))))
            }
            _ => Ok(Address::Other { family, bytes: Bytes::copy_from_slice(rest) }),
        }
    }

    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(18);
        match self {
            Address::Ip(IpAddr::V4(a)) => {
                b.put_u16(ADDRESS_FAMILY_IPV4);
                b.put_slice(&a.octets());
            }
            Address::Ip(IpAddr::V6(a)) => {
                b.put_u16(ADDRESS_FAMILY_IPV6);
                b.put_slice(&a.octets());
            }
            Address::Other { family, bytes } => {
                b.put_u16(*family);
                b.put_slice(bytes);
            }
        }
        b.freeze()
    }

    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Address::Ip(a) => Some(*a),
            Address::Other { .. } => None,
        }
    }
}

impl From<IpAddr> for Address {
    fn from(a: IpAddr) -> Self {
        Address::Ip(a)
    }
}

/// Seconds between the NTP epoch (1900) and the Unix epoch (1970).
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// RFC 6733 §4.3.1 Time: the NTP seconds field, 4 bytes.
///
/// The field wraps in February 2036. Following RFC 5905 era handling (and RFC 6733's note),
/// values with the top bit clear are read as the era after 2036, so the representable range is
/// 1968-01-20 .. 2104-02-26.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Time(pub u32);

impl Time {
    pub fn from_unix_secs(secs: u64) -> Time {
        Time(((secs + NTP_UNIX_OFFSET) & 0xffff_ffff) as u32)
    }

    pub fn unix_secs(self) -> u64 {
        let s = u64::from(self.0);
        if s & 0x8000_0000 != 0 {
            s - NTP_UNIX_OFFSET
        } else {
            s + (1 << 32) - NTP_UNIX_OFFSET
        }
    }

    pub fn from_system_time(t: SystemTime) -> Time {
        Time::from_unix_secs(t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0))
    }

    pub fn system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.unix_secs())
    }

    pub fn now() -> Time {
        Time::from_system_time(SystemTime::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trips_across_the_2036_wrap() {
        for secs in [0u64, 1_700_000_000, 2_085_978_495, 2_085_978_496, 3_000_000_000] {
            assert_eq!(Time::from_unix_secs(secs).unix_secs(), secs, "{secs}");
        }
        // 1970-01-01 is NTP 2208988800 = 0x83AA7E80.
        assert_eq!(Time::from_unix_secs(0).0, 0x83AA_7E80);
    }

    #[test]
    fn address_families() {
        let v4 = Address::Ip("192.0.2.1".parse().unwrap());
        assert_eq!(&v4.encode()[..], &[0, 1, 192, 0, 2, 1]);
        assert_eq!(Address::decode(&v4.encode()).unwrap(), v4);
        let v6 = Address::Ip("2001:db8::1".parse().unwrap());
        assert_eq!(v6.encode().len(), 18);
        assert_eq!(Address::decode(&v6.encode()).unwrap(), v6);
        assert_eq!(Address::decode(&[0, 1, 1, 2, 3]), Err(ValueError::Length));
        assert_eq!(Address::decode(&[0]), Err(ValueError::Length));
        let e164 = Address::decode(&[0, 8, b'1', b'2']).unwrap();
        assert_eq!(e164, Address::Other { family: 8, bytes: Bytes::from_static(b"12") });
    }

    #[test]
    fn value_checks() {
        assert_eq!(check_value(DataType::Unsigned32, &[0; 3]), Err(ValueError::Length));
        assert_eq!(check_value(DataType::Unsigned64, &[0; 8]), Ok(()));
        assert_eq!(check_value(DataType::UTF8String, &[0xff]), Err(ValueError::Value));
        assert_eq!(check_value(DataType::DiameterIdentity, b""), Err(ValueError::Value));
        assert_eq!(check_value(DataType::DiameterIdentity, b"pcrf.example.com"), Ok(()));
        assert_eq!(check_value(DataType::DiameterURI, b"aaa://pcrf.example:3868"), Ok(()));
        assert_eq!(check_value(DataType::DiameterURI, b"http://x"), Err(ValueError::Value));
        assert_eq!(check_value(DataType::Ipv4Octets, &[10, 0, 0, 1, 0]), Err(ValueError::Length));
    }
}
