//! METADATA and WHEEL: RFC 822-style headers; Requires-Dist read as PEP 508 and added.

use std::str::FromStr;

use serde::Serialize;

/// RFC 822-style headers (METADATA, WHEEL): (key, value) in order; continuation lines joined.
pub fn parse_headers(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            break; // the body (long description) starts here
        }
        if line.starts_with([' ', '\t']) {
            if let Some(last) = out.last_mut() {
                last.1.push('\n');
                last.1.push_str(line.trim());
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

/// One Requires-Dist line, parsed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Requirement {
    /// Normalized distribution name (PEP 503).
    pub name: String,
    /// The line as written.
    pub raw: String,
    /// Versions the specifier admits are checked with [`Requirement::admits`].
    #[serde(skip)]
    parsed: Option<pep508_rs::Requirement>,
    /// The environment marker, when the requirement is conditional (e.g. an extra).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marker: Option<String>,
}

impl Requirement {
    /// Does the version specifier admit `version`? (true when there is no specifier)
    pub fn admits(&self, version: &str) -> bool {
        let Some(req) = &self.parsed else { return true };
        let Ok(v) = pep508_rs::pep440_rs::Version::from_str(version) else {
            return false;
        };
        match &req.version_or_url {
            Some(pep508_rs::VersionOrUrl::VersionSpecifier(specs)) => specs.contains(&v),
            _ => true,
        }
    }

    /// The one release an `==X` / `===X` specifier allows (not `==X.*`, which is a range).
    pub fn exact_pin(&self) -> Option<String> {
        use pep508_rs::pep440_rs::Operator;
        let Some(pep508_rs::VersionOrUrl::VersionSpecifier(specs)) =
            self.parsed.as_ref()?.version_or_url.as_ref()
        else {
            return None;
        };
        specs
            .iter()
            .find(|s| matches!(s.operator(), Operator::Equal | Operator::ExactEqual))
            .map(|s| s.version().to_string())
    }
}

/// PEP 503 normalization: lower case, runs of `-_.` become `-`.
pub fn normalize_name(name: &str) -> String {
    let mut out = String::new();
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// A Requires-Dist value that is not PEP 508, with the parser's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequirement {
    /// The value as written.
    pub value: String,
    /// Why it is not PEP 508.
    pub error: String,
}

/// Longest Requires-Dist value read (real ones are well under 200 bytes).
pub const MAX_REQUIREMENT_LEN: usize = 4096;
/// Deepest parenthesis nesting accepted in a marker.
const MAX_MARKER_DEPTH: usize = 16;

/// Every Requires-Dist header. One that is not PEP 508 is returned as a [`BadRequirement`], and
/// still listed by the name it starts with (so linkage sees the declaration).
///
/// The text is untrusted, so only the part before the marker goes to the PEP 508 parser: its
/// marker algebra (simplification to normal form) is exponential in the clauses and recursive
/// in the nesting, and its URL handling expands `${VAR}` from the auditor's environment. The
/// marker is kept as raw text, checked only for length, quotes and bracket depth.
pub fn parse_requires_dist(
    headers: &[(String, String)],
) -> (Vec<Requirement>, Vec<BadRequirement>) {
    let mut reqs = Vec::new();
    let mut bad = Vec::new();
    for (k, v) in headers {
        if !k.eq_ignore_ascii_case("Requires-Dist") {
            continue;
        }
        match parse_one(v) {
            Ok(r) => reqs.push(r),
            Err(error) => {
                // An over-long value is kept cut at the limit (it is echoed in the report).
                let v = &clip(v, MAX_REQUIREMENT_LEN);
                bad.push(BadRequirement {
                    value: v.clone(),
                    error: error.to_string(),
                });
                let name: String = v
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
                    .take(200)
                    .collect();
                if !name.is_empty() {
                    reqs.push(Requirement {
                        name: normalize_name(&name),
                        raw: v.clone(),
                        parsed: None,
                        marker: None,
                    });
                }
            }
        }
    }
    (reqs, bad)
}

/// `v` cut to at most `max` bytes (at a char boundary), with `…` when cut.
pub fn clip(v: &str, max: usize) -> String {
    if v.len() <= max {
        return v.to_string();
    }
    let mut end = max;
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &v[..end])
}

/// Why one Requires-Dist value is refused (the text a [`BadRequirement`] carries).
#[derive(Debug, thiserror::Error)]
enum RequirementError {
    #[error("{0} bytes, over the limit of {MAX_REQUIREMENT_LEN}")]
    TooLong(usize),
    #[error(
        "`$` in a requirement: environment variables are never expanded from untrusted metadata"
    )]
    Dollar,
    #[error("marker nested deeper than {MAX_MARKER_DEPTH}")]
    MarkerTooDeep,
    #[error("unbalanced `)` in the marker")]
    UnbalancedClose,
    #[error("unbalanced `(` in the marker")]
    UnbalancedOpen,
    #[error("control character in the marker")]
    MarkerControl,
    #[error("unterminated string in the marker")]
    MarkerString,
    /// The PEP 508 parser's own message.
    #[error("{0}")]
    Pep508(String),
}

fn parse_one(v: &str) -> Result<Requirement, RequirementError> {
    if v.len() > MAX_REQUIREMENT_LEN {
        return Err(RequirementError::TooLong(v.len()));
    }
    let (req, marker) = split_marker(v);
    if req.contains('$') {
        return Err(RequirementError::Dollar);
    }
    let marker = marker.map(str::trim).filter(|m| !m.is_empty());
    if let Some(m) = marker {
        check_marker_shape(m)?;
    }
    let r = pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(req.trim())
        .map_err(|e| RequirementError::Pep508(e.message.to_string()))?;
    Ok(Requirement {
        name: normalize_name(r.name.as_ref()),
        raw: v.to_string(),
        parsed: Some(r),
        marker: marker.map(String::from),
    })
}

/// (requirement, marker): the marker starts at the first `;`, except in a URL requirement
/// (`name @ url ; marker`), where PEP 508 requires whitespace before the `;`.
fn split_marker(v: &str) -> (&str, Option<&str>) {
    let at = v.find('@').filter(|&a| v.find(';').is_none_or(|s| a < s));
    let cut = match at {
        Some(a) => v[a..]
            .match_indices(';')
            .find(|(i, _)| v[a..][..*i].ends_with(char::is_whitespace))
            .map(|(i, _)| a + i),
        None => v.find(';'),
    };
    match cut {
        Some(c) => (&v[..c], Some(&v[c + 1..])),
        None => (v, None),
    }
}

/// A marker's shape, in one linear pass: quotes closed, brackets balanced and not too deep.
fn check_marker_shape(m: &str) -> Result<(), RequirementError> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for c in m.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => {
                depth += 1;
                if depth > MAX_MARKER_DEPTH {
                    return Err(RequirementError::MarkerTooDeep);
                }
            }
            (None, ')') => {
                depth = depth
                    .checked_sub(1)
                    .ok_or(RequirementError::UnbalancedClose)?;
            }
            (None, c) if c.is_control() => return Err(RequirementError::MarkerControl),
            _ => {}
        }
    }
    if quote.is_some() {
        return Err(RequirementError::MarkerString);
    }
    if depth != 0 {
        return Err(RequirementError::UnbalancedOpen);
    }
    Ok(())
}

/// METADATA with `requires` added as `Requires-Dist:` lines at the end of the header block
/// (before the blank line and the body). A requirement METADATA already names is refused: the
/// pins are the only place for it.
pub fn with_requires(metadata: &str, requires: &[String]) -> crate::Result<String> {
    let (headers, body) = match metadata.find("\n\n") {
        Some(i) => (&metadata[..i + 1], &metadata[i + 1..]),
        None => (metadata, ""),
    };
    let (existing, _) = parse_requires_dist(&parse_headers(headers));
    for r in requires {
        let name = normalize_name(
            r.split(['=', '<', '>', '!', '~', ' ', ';'])
                .next()
                .unwrap_or(r),
        );
        if let Some(e) = existing.iter().find(|e| e.name == name) {
            return crate::invalid(format!(
                "METADATA already has `Requires-Dist: {}`; the pins are the only place for it",
                e.raw
            ));
        }
    }
    let mut out = headers.to_string();
    for r in requires {
        out.push_str(&format!("Requires-Dist: {r}\n"));
    }
    out.push_str(body);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requires_dist_with_markers_and_pins() {
        let headers = parse_headers(
            "Metadata-Version: 2.1\nName: x\nRequires-Dist: nvidia_cudnn_cu13 (==9.27.0.42)\nRequires-Dist: nvidia-nccl-cu13>=2.30; extra == 'cuda'\nRequires-Dist: !!bad\n\nbody: no\n",
        );
        let (reqs, bad) = parse_requires_dist(&headers);
        assert_eq!(reqs[0].name, "nvidia-cudnn-cu13");
        assert!(reqs[0].admits("9.27.0.42") && !reqs[0].admits("9.28"));
        assert!(reqs[1].marker.as_deref().unwrap().contains("extra"));
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].value, "!!bad");
    }

    #[test]
    fn untrusted_text_is_bounded_and_never_expanded() {
        std::env::set_var("KILN_TEST_SECRET", "hunter2");
        let deep = format!(
            "x; {}python_version>'3'{}",
            "(".repeat(200),
            ")".repeat(200)
        );
        let clauses = (0..40)
            .map(|i| format!("(python_version == '3.{i}' or extra == 'e{i}')"))
            .collect::<Vec<_>>()
            .join(" and ");
        let wide = format!("y; {clauses}");
        let headers = vec![
            (
                "Requires-Dist".to_string(),
                "z @ https://h/${KILN_TEST_SECRET}.whl".to_string(),
            ),
            ("Requires-Dist".to_string(), deep),
            ("Requires-Dist".to_string(), wide.clone()),
            (
                "Requires-Dist".to_string(),
                "u @ https://h/u.whl ; extra == 'a'".to_string(),
            ),
        ];
        let t = std::time::Instant::now();
        let (reqs, bad) = parse_requires_dist(&headers);
        assert!(t.elapsed().as_secs() < 2, "{:?}", t.elapsed());
        let all = format!("{reqs:?} {bad:?}");
        assert!(!all.contains("hunter2"), "{all}");
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(bad[0].error.contains("never expanded"), "{bad:?}");
        assert!(bad[1].error.contains("deeper"), "{bad:?}");
        // The wide marker is kept as written, not simplified.
        let y = reqs.iter().find(|r| r.name == "y").unwrap();
        assert_eq!(y.marker.as_deref(), Some(wide[3..].trim()));
        let u = reqs.iter().find(|r| r.name == "u").unwrap();
        assert_eq!(u.marker.as_deref(), Some("extra == 'a'"));
    }

    #[test]
    fn only_one_release_specifiers_are_exact_pins() {
        let headers = parse_headers(
            "Requires-Dist: a==9.27.0.42\nRequires-Dist: b>=9.19,<10\nRequires-Dist: c==9.*\nRequires-Dist: d===1.0\nRequires-Dist: e\nRequires-Dist: f>=1,==1.2\n",
        );
        let (reqs, _) = parse_requires_dist(&headers);
        let pins: Vec<Option<String>> = reqs.iter().map(Requirement::exact_pin).collect();
        assert_eq!(
            pins,
            [
                Some("9.27.0.42".into()),
                None,
                None,
                Some("1.0".into()),
                None,
                Some("1.2".into())
            ]
        );
    }

    #[test]
    fn requires_go_at_the_end_of_the_headers() {
        let m = "Metadata-Version: 2.4\nName: kiln\nVersion: 0.1.0\n\nbody\n\nmore\n";
        let out = with_requires(m, &["a==1".into(), "b==2".into()]).unwrap();
        assert_eq!(out, "Metadata-Version: 2.4\nName: kiln\nVersion: 0.1.0\nRequires-Dist: a==1\nRequires-Dist: b==2\n\nbody\n\nmore\n");
        let no_body = with_requires("Name: kiln\n", &["a==1".into()]).unwrap();
        assert_eq!(no_body, "Name: kiln\nRequires-Dist: a==1\n");
    }

    #[test]
    fn a_restated_requirement_is_refused() {
        let m = "Name: kiln\nRequires-Dist: nvidia_cublas>=13\n\n";
        let e = with_requires(m, &["nvidia-cublas==13.1.0.3".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("already has"), "{e}");
        // Declared ranges (the runtime pins' `requires`) are matched by name too.
        let m = "Name: kiln\nRequires-Dist: nvidia-cublas==13.1.0.3\n\n";
        assert!(with_requires(m, &["nvidia-cublas>=13.0,<14".into()]).is_err());
        assert!(with_requires(m, &["nvidia-cudnn-cu13>=9.19,<10".into()]).is_ok());
    }
}
