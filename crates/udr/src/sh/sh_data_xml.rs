//! Sh-Data, the XML document of the User-Data AVP (TS 29.328 Annex D, ShDataType.xsd), for the
//! data references this UDR serves:
//!
//! ```xml
//! <Sh-Data>
//!   <PublicIdentifiers>                      IMSPublicIdentity (10) and/or MSISDN (17)
//!     <IMSPublicIdentity>sip:alice@ims.example</IMSPublicIdentity>
//!     <MSISDN>33600000001</MSISDN>
//!   </PublicIdentifiers>
//!   <RepositoryData>                         RepositoryData (0), one per Service-Indication
//!     <ServiceIndication>svc</ServiceIndication>
//!     <SequenceNumber>3</SequenceNumber>
//!     <ServiceData>...any XML...</ServiceData>
//!   </RepositoryData>
//!   <Sh-IMS-Data>
//!     <S-CSCFName>sip:scscf.ims.example</S-CSCFName>   S-CSCFName (12)
//!     <IMSUserState>1</IMSUserState>                    IMSUserState (11)
//!   </Sh-IMS-Data>
//! </Sh-Data>
//! ```
//!
//! Elements are written in the order of the schema's sequences. ServiceData is opaque: what a
//! PUR carried between `<ServiceData>` and `</ServiceData>` is stored and returned verbatim.

use std::fmt::Write;

use super::data::RepoUpdate;
use super::xml::{self, escape};

/// The parts of one Sh-Data document; each is written when present.
#[derive(Debug, Default)]
pub struct ShData<'a> {
    pub public_identities: Vec<&'a str>,
    pub msisdns: Vec<&'a str>,
    /// (Service-Indication, Sequence-Number, ServiceData); None: no ServiceData (deleted).
    pub repository: Vec<(&'a str, u16, Option<&'a str>)>,
    pub scscf_name: Option<&'a str>,
    pub ims_user_state: Option<u8>,
}

impl ShData<'_> {
    pub fn to_xml(&self) -> String {
        let mut out = String::with_capacity(
            256 + self.repository.iter().map(|r| r.2.map_or(64, |d| d.len() + 96)).sum::<usize>(),
        );
        out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
        out.push_str("<Sh-Data xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">");
        if !self.public_identities.is_empty() || !self.msisdns.is_empty() {
            out.push_str("<PublicIdentifiers>");
            for p in &self.public_identities {
                let _ = write!(out, "<IMSPublicIdentity>{}</IMSPublicIdentity>", escape(p));
            }
            for m in &self.msisdns {
                let _ = write!(out, "<MSISDN>{}</MSISDN>", escape(m));
            }
            out.push_str("</PublicIdentifiers>");
        }
        for (si, seq, data) in &self.repository {
            let _ = write!(
                out,
                "<RepositoryData><ServiceIndication>{}</ServiceIndication>\
                 <SequenceNumber>{seq}</SequenceNumber>",
                escape(si)
            );
            if let Some(d) = data {
                let _ = write!(out, "<ServiceData>{d}</ServiceData>");
            }
            out.push_str("</RepositoryData>");
        }
        if self.scscf_name.is_some() || self.ims_user_state.is_some() {
            out.push_str("<Sh-IMS-Data>");
            if let Some(s) = self.scscf_name {
                let _ = write!(out, "<S-CSCFName>{}</S-CSCFName>", escape(s));
            }
            if let Some(s) = self.ims_user_state {
                let _ = write!(out, "<IMSUserState>{s}</IMSUserState>");
            }
            out.push_str("</Sh-IMS-Data>");
        }
        out.push_str("</Sh-Data>");
        out
    }
}

/// Why a PUR's User-Data is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PurDataError {
    /// Not Sh-Data, or not the RepositoryData it should carry: DIAMETER_ERROR_USER_DATA_NOT_RECOGNIZED.
    NotRecognized(String),
    /// A ServiceData larger than allowed: DIAMETER_ERROR_TOO_MUCH_DATA.
    TooMuchData(String),
}

/// The repository updates of a PUR's User-Data: every `RepositoryData` of the `Sh-Data`, in
/// order. An absent or empty `ServiceData` deletes the Service-Indication's data.
pub fn parse_repository_updates(
    user_data: &[u8],
    max_service_data: usize,
) -> Result<Vec<RepoUpdate>, PurDataError> {
    let nr = PurDataError::NotRecognized;
    let text = std::str::from_utf8(user_data).map_err(|_| nr("User-Data is not UTF-8".into()))?;
    let root = xml::parse(text).map_err(|e| nr(format!("User-Data: {e}")))?;
    if root.name != "Sh-Data" {
        return Err(nr(format!("User-Data root is <{}>, not <Sh-Data>", root.name)));
    }
    let mut updates = Vec::new();
    for el in &root.children {
        if el.name != "RepositoryData" {
            return Err(nr(format!("<{}> cannot be updated here; only RepositoryData", el.name)));
        }
        let si = el
            .child_text("ServiceIndication")
            .filter(|s| !s.is_empty())
            .ok_or_else(|| nr("RepositoryData without ServiceIndication".into()))?;
        super::data::check_service_indication(si).map_err(|e| nr(e.reason))?;
        let seq = el
            .child_text("SequenceNumber")
            .ok_or_else(|| nr(format!("RepositoryData {si}: no SequenceNumber")))?;
        let seq: u16 = seq
            .parse()
            .map_err(|_| nr(format!("RepositoryData {si}: SequenceNumber {seq:?} not 0..65535")))?;
        let data = el.child("ServiceData").map(|d| &text[d.content.clone()]);
        let data = data.filter(|d| !d.trim().is_empty());
        if let Some(d) = data {
            xml::check_fragment(d).map_err(|e| nr(format!("ServiceData of {si}: {e}")))?;
            if d.len() > max_service_data {
                return Err(PurDataError::TooMuchData(format!(
                    "ServiceData of {si} is {} bytes, more than {max_service_data}",
                    d.len()
                )));
            }
        }
        updates.push(RepoUpdate {
            service_indication: si.to_owned(),
            sequence_number: seq,
            data: data.map(str::to_owned),
        });
    }
    if updates.is_empty() {
        return Err(nr("Sh-Data carries no RepositoryData".into()));
    }
    Ok(updates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_in_schema_order_and_escapes() {
        let d = ShData {
            public_identities: vec!["sip:a&b@ims"],
            msisdns: vec!["3360000"],
            repository: vec![("svc<1>", 7, Some("<x a=\"1\">t</x>")), ("gone", 2, None)],
            scscf_name: Some("sip:scscf"),
            ims_user_state: Some(1),
        };
        let x = d.to_xml();
        let root = xml::parse(&x).unwrap();
        let names: Vec<_> = root.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["PublicIdentifiers", "RepositoryData", "RepositoryData", "Sh-IMS-Data"]);
        let pi = &root.children[0];
        assert_eq!(pi.child_text("IMSPublicIdentity"), Some("sip:a&b@ims"));
        assert_eq!(root.children[1].child_text("ServiceIndication"), Some("svc<1>"));
        let sd = root.children[1].child("ServiceData").unwrap();
        assert_eq!(&x[sd.content.clone()], "<x a=\"1\">t</x>");
        assert!(root.children[2].child("ServiceData").is_none());
        let ims = &root.children[3];
        assert_eq!(ims.children[0].name, "S-CSCFName");
        assert_eq!(ims.child_text("IMSUserState"), Some("1"));
        assert_eq!(ShData::default().to_xml().matches("<Sh-Data").count(), 1);
    }

    #[test]
    fn parses_pur_updates() {
        let doc = br#"<?xml version="1.0"?><Sh-Data><RepositoryData>
            <ServiceIndication>svc</ServiceIndication><SequenceNumber>4</SequenceNumber>
            <ServiceData><cfu xmlns="urn:x"><to>tel:+331</to></cfu></ServiceData></RepositoryData>
            <RepositoryData><ServiceIndication>old</ServiceIndication>
            <SequenceNumber>9</SequenceNumber><ServiceData>  </ServiceData></RepositoryData></Sh-Data>"#;
        let u = parse_repository_updates(doc, 1000).unwrap();
        assert_eq!(u.len(), 2);
        assert_eq!(u[0].sequence_number, 4);
        assert_eq!(u[0].data.as_deref(), Some(r#"<cfu xmlns="urn:x"><to>tel:+331</to></cfu>"#));
        assert_eq!((u[1].service_indication.as_str(), &u[1].data), ("old", &None));
        assert!(matches!(parse_repository_updates(doc, 10), Err(PurDataError::TooMuchData(_))));
        for bad in [
            &b"<Sh-Data></Sh-Data>"[..],
            b"<Other/>",
            b"<Sh-Data><RepositoryData><SequenceNumber>1</SequenceNumber></RepositoryData></Sh-Data>",
            b"<Sh-Data><RepositoryData><ServiceIndication>s</ServiceIndication><SequenceNumber>65536</SequenceNumber></RepositoryData></Sh-Data>",
            b"<Sh-Data><Sh-IMS-Data/></Sh-Data>",
            b"<Sh-Data><RepositoryData>",
            b"\xff\xfe",
            b"<Sh-Data xmlns:p=\"urn:p\"><RepositoryData><ServiceIndication>s</ServiceIndication><SequenceNumber>1</SequenceNumber><ServiceData><p:x/></ServiceData></RepositoryData></Sh-Data>",
        ] {
            assert!(
                matches!(parse_repository_updates(bad, 1000), Err(PurDataError::NotRecognized(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
