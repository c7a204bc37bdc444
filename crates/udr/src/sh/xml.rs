//! A small element tree over quick-xml, for the XML documents the UDR receives: Sh-Data in a PUR
//! (TS 29.328) and SOAP envelopes (provisioning). Both are a few kilobytes, so a tree is simpler
//! than streaming and costs one pass.
//!
//! Names are namespace-resolved (`ns` is the URI, `name` the local name). Each element remembers
//! where its content lies in the source, so opaque content (Sh `ServiceData`) is kept verbatim.
//! Refused: a DOCTYPE (no DTD, so no entity expansion at all), entity references other than the
//! five predefined ones and character references, more than [`MAX_DEPTH`] levels, and anything
//! quick-xml finds malformed (mismatched end tags, bad attributes, text after the root).

use std::ops::Range;

use quick_xml::events::Event;
use quick_xml::name::ResolveResult;
use quick_xml::NsReader;

/// Deepest nesting accepted; Sh-Data and our SOAP bodies need fewer than ten levels.
pub const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// Namespace URI, `None` when unqualified.
    pub ns: Option<String>,
    /// Local name.
    pub name: String,
    /// Attributes by local name (namespace declarations left out), values unescaped.
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    /// The element's own character data (CDATA included), unescaped, concatenated.
    pub text: String,
    /// Byte range of the element's content (between its start and end tags) in the source.
    pub content: Range<usize>,
}

/// Why a document was refused; the message names the place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct XmlError(pub String);

impl Element {
    /// The first child with this local name.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Every child with this local name.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The trimmed text of the first child with this local name.
    pub fn child_text(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.trim())
    }

    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Parses a whole document into its root element.
pub fn parse(input: &str) -> Result<Element, XmlError> {
    let mut reader = NsReader::from_str(input);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        let before = reader.buffer_position() as usize;
        let read = reader.read_resolved_event();
        let (resolved, event) = match read {
            Ok(x) => x,
            Err(e) => {
                let at = reader.error_position();
                return Err(XmlError(format!("malformed XML at byte {at}: {e}")));
            }
        };
        let ns = match resolved {
            ResolveResult::Bound(n) => Some(String::from_utf8_lossy(n.as_ref()).into_owned()),
            ResolveResult::Unbound => None,
            ResolveResult::Unknown(p) => {
                return Err(XmlError(format!(
                    "undeclared namespace prefix {:?}",
                    String::from_utf8_lossy(&p)
                )))
            }
        };
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                if root.is_some() {
                    return Err(XmlError("more than one root element".into()));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(XmlError(format!("nesting deeper than {MAX_DEPTH} levels")));
                }
                let name = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
                let mut attrs = Vec::new();
                for a in e.attributes() {
                    let a = a.map_err(|e| XmlError(format!("bad attribute in <{name}>: {e}")))?;
                    let key = a.key;
                    if key.as_namespace_binding().is_some() {
                        continue;
                    }
                    let value = a
                        .unescape_value()
                        .map_err(|e| XmlError(format!("bad attribute value in <{name}>: {e}")))?;
                    attrs.push((
                        String::from_utf8_lossy(key.local_name().as_ref()).into_owned(),
                        value.into_owned(),
                    ));
                }
                let here = reader.buffer_position() as usize;
                let el = Element {
                    ns,
                    name,
                    attrs,
                    children: Vec::new(),
                    text: String::new(),
                    content: here..here,
                };
                if matches!(event, Event::Start(_)) {
                    stack.push(el);
                } else {
                    close(el, &mut stack, &mut root);
                }
            }
            Event::End(_) => {
                let mut el = stack.pop().ok_or_else(|| XmlError("unexpected end tag".into()))?;
                el.content.end = before;
                close(el, &mut stack, &mut root);
            }
            Event::Text(t) => {
                let s = t.decode().map_err(|e| XmlError(format!("bad text: {e}")))?;
                match stack.last_mut() {
                    Some(top) => top.text.push_str(&s),
                    None if s.trim().is_empty() => {}
                    None => return Err(XmlError("text outside the root element".into())),
                }
            }
            Event::CData(t) => {
                let s = t.decode().map_err(|e| XmlError(format!("bad CDATA: {e}")))?;
                let top =
                    stack.last_mut().ok_or_else(|| XmlError("CDATA outside the root".into()))?;
                top.text.push_str(&s);
            }
            Event::GeneralRef(r) => {
                let resolved = if r.is_char_ref() {
                    r.resolve_char_ref()
                        .map_err(|e| XmlError(format!("bad character reference: {e}")))?
                        .map(String::from)
                } else {
                    let n = r.decode().map_err(|e| XmlError(format!("bad reference: {e}")))?;
                    quick_xml::escape::resolve_predefined_entity(&n).map(String::from)
                };
                let s = resolved.ok_or_else(|| {
                    XmlError(format!("unknown entity &{};", String::from_utf8_lossy(&r)))
                })?;
                let top = stack
                    .last_mut()
                    .ok_or_else(|| XmlError("reference outside the root".into()))?;
                top.text.push_str(&s);
            }
            Event::DocType(_) => return Err(XmlError("a DOCTYPE is not accepted".into())),
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
            Event::Eof => break,
        }
    }
    if !stack.is_empty() {
        return Err(XmlError(format!("<{}> is not closed", stack[stack.len() - 1].name)));
    }
    root.ok_or_else(|| XmlError("no root element".into()))
}

fn close(el: Element, stack: &mut [Element], root: &mut Option<Element>) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(el),
        None => *root = Some(el),
    }
}

/// Checks that `fragment` is well-formed element content on its own, every namespace prefix it
/// uses declared inside it: opaque content (ServiceData) is stored as text and later embedded
/// in other documents, where the declarations of its first context would be missing.
pub fn check_fragment(fragment: &str) -> Result<(), XmlError> {
    parse(&format!("<fragment>{fragment}</fragment>")).map(|_| ())
}

/// Escapes text for element content or a double-quoted attribute.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    quick_xml::escape::escape(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_names_text_and_content_ranges() {
        let src = r#"<?xml version="1.0"?>
<a:Root xmlns:a="urn:x" k="v&amp;w"><b>one &lt;two&gt; &#65;</b><c/><d><![CDATA[<raw>]]></d><e><x y="1">t</x></e></a:Root>"#;
        let root = parse(src).unwrap();
        assert_eq!(root.ns.as_deref(), Some("urn:x"));
        assert_eq!(root.name, "Root");
        assert_eq!(root.attr("k"), Some("v&w"));
        assert_eq!(root.child_text("b"), Some("one <two> A"));
        assert!(root.child("c").unwrap().children.is_empty());
        assert_eq!(root.child_text("d"), Some("<raw>"));
        let e = root.child("e").unwrap();
        assert_eq!(&src[e.content.clone()], r#"<x y="1">t</x>"#);
        assert_eq!(e.child("x").unwrap().ns, None);
    }

    #[test]
    fn refusals() {
        for bad in [
            "",
            "<a>",
            "<a></b>",
            "<a/><b/>",
            "<a>&ext;</a>",
            "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>",
            "<p:a/>",
            "text",
            "<a x='1' x='2'/>",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        let deep = "<a>".repeat(MAX_DEPTH + 1) + &"</a>".repeat(MAX_DEPTH + 1);
        assert!(parse(&deep).is_err());
        assert!(check_fragment("<p:x xmlns:p=\"urn:p\"><p:y/></p:x> text").is_ok());
        assert!(check_fragment("<p:y/>").is_err(), "prefix declared outside the fragment");
        assert!(check_fragment("</fragment><fragment>").is_err());
    }
}
