//! A small XML 1.0 well-formedness check for the kit's tests: the Sh service data, PUR
//! documents and SOAP calls the kit sends must be XML the UDR takes. The UDR's own parser is
//! not a dependency of the kit (the kit talks to NFs over the wire only); the smoke runs
//! against a real UDR check acceptance end to end, this checks the shape here.
//!
//! Checked: one root element after an optional XML declaration, balanced and properly nested
//! tags, well-formed attributes (quoted, unique per element), comments, and that `<` and `&`
//! appear in text and attribute values only as markup and the predefined or numeric entities.

/// An element met while checking: its depth (the root is 0) and its local name (the prefix
/// removed).
#[derive(Debug, Clone, PartialEq)]
pub struct Element {
    pub depth: usize,
    pub name: String,
}

/// The elements of `s` in document order, or why `s` is not well-formed XML.
pub fn elements(s: &str) -> Result<Vec<Element>, String> {
    let mut rest = s;
    if let Some(decl) = rest.strip_prefix("<?xml") {
        let end = decl.find("?>").ok_or("unterminated XML declaration")?;
        rest = &decl[end + 2..];
    }
    let mut out = Vec::new();
    let mut open: Vec<&str> = Vec::new();
    let mut roots = 0;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            text(rest, !open.is_empty())?;
            break;
        };
        text(&rest[..lt], !open.is_empty())?;
        rest = &rest[lt..];
        if let Some(c) = rest.strip_prefix("<!--") {
            let end = c.find("-->").ok_or("unterminated comment")?;
            rest = &c[end + 3..];
            continue;
        }
        let gt = rest.find('>').ok_or("unterminated tag")?;
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let name = name.trim_end();
            match open.pop() {
                Some(o) if o == name => {}
                Some(o) => return Err(format!("</{name}> closes <{o}>")),
                None => return Err(format!("</{name}> closes nothing")),
            }
            continue;
        }
        let (tag, empty) = match tag.strip_suffix('/') {
            Some(t) => (t, true),
            None => (tag, false),
        };
        let name_end = tag.find(|c: char| c.is_ascii_whitespace()).unwrap_or(tag.len());
        let name = &tag[..name_end];
        check_name(name)?;
        attributes(&tag[name_end..], name)?;
        if open.is_empty() {
            roots += 1;
            if roots > 1 {
                return Err(format!("a second root element <{name}>"));
            }
        }
        let local = name.rsplit(':').next().unwrap_or(name);
        out.push(Element { depth: open.len(), name: local.to_owned() });
        if !empty {
            open.push(name);
        }
    }
    if let Some(o) = open.pop() {
        return Err(format!("<{o}> is not closed"));
    }
    if roots == 0 {
        return Err("no root element".into());
    }
    Ok(out)
}

fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || "_:.-".contains(c)) {
        return Err(format!("bad name {name:?}"));
    }
    Ok(())
}

fn attributes(mut s: &str, element: &str) -> Result<(), String> {
    let mut seen = Vec::new();
    loop {
        s = s.trim_start();
        if s.is_empty() {
            return Ok(());
        }
        let eq = s.find('=').ok_or_else(|| format!("<{element}>: attribute without value"))?;
        let name = s[..eq].trim_end();
        check_name(name)?;
        if seen.contains(&name) {
            return Err(format!("<{element}>: attribute {name} twice"));
        }
        seen.push(name);
        let v = s[eq + 1..].trim_start();
        let quote = v.chars().next().filter(|q| *q == '"' || *q == '\'');
        let quote = quote.ok_or_else(|| format!("<{element}>: {name} is not quoted"))?;
        let end = v[1..].find(quote).ok_or_else(|| format!("<{element}>: {name} unterminated"))?;
        let value = &v[1..1 + end];
        if value.contains('<') {
            return Err(format!("<{element}>: '<' in {name}"));
        }
        entities(value)?;
        s = &v[end + 2..];
        if !s.is_empty() && !s.starts_with(|c: char| c.is_ascii_whitespace()) {
            return Err(format!("<{element}>: no space after {name}"));
        }
    }
}

fn text(s: &str, inside: bool) -> Result<(), String> {
    if !inside && !s.trim().is_empty() {
        return Err(format!("text outside the root element: {s:?}"));
    }
    entities(s)
}

fn entities(s: &str) -> Result<(), String> {
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        rest = &rest[amp + 1..];
        let semi = rest.find(';').ok_or("'&' without ';'")?;
        let name = &rest[..semi];
        let ok = matches!(name, "lt" | "gt" | "amp" | "quot" | "apos")
            || name
                .strip_prefix("#x")
                .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
            || name
                .strip_prefix('#')
                .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
        if !ok {
            return Err(format!("unknown entity &{name};"));
        }
        rest = &rest[semi + 1..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_well_formed_documents() {
        let doc = "<?xml version=\"1.0\"?><a:r xmlns:a=\"u\"><b x='1' y=\"&amp;\"/>t &lt; \
                   &#60;<!-- c --><c>d</c></a:r>";
        let names: Vec<_> = elements(doc).unwrap().into_iter().map(|e| (e.depth, e.name)).collect();
        assert_eq!(names, [(0, "r".into()), (1, "b".into()), (1, "c".into())]);
    }

    #[test]
    fn refuses_what_is_not() {
        for bad in [
            "<a><b></a></b>",
            "<a>",
            "</a>",
            "<a/><b/>",
            "text<a/>",
            "<a x=1/>",
            "<a x='1' x='2'/>",
            "<a>&nbsp;</a>",
            "<a>& b</a>",
            "<1a/>",
            "",
        ] {
            assert!(elements(bad).is_err(), "{bad:?} passed");
        }
    }
}
