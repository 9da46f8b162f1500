//! Wheel tags: the file name's `{name}-{ver}(-{build})?-{python}-{abi}-{platform}.whl` and the
//! WHEEL file's `Tag:` lines, with compressed tag sets expanded.

use serde::Serialize;

/// Wheel file name parts.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct FilenameTags {
    /// The distribution name, as in the file name.
    pub name: String,
    /// The version, as in the file name.
    pub version: String,
    /// Expanded tags "py-abi-platform" (compressed tag sets like `cp39.cp310` expanded).
    pub tags: Vec<String>,
}

/// The parts of a wheel file name; None when it is not `{name}-{ver}(-{build})?-{py}-{abi}-{plat}.whl`.
pub fn parse_filename(file_name: &str) -> Option<FilenameTags> {
    let stem = file_name.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    if parts.len() != 5 && parts.len() != 6 {
        return None;
    }
    let n = parts.len();
    Some(FilenameTags {
        name: parts[0].to_string(),
        version: parts[1].to_string(),
        // A file name whose tags expand past the cap has no usable tags.
        tags: expand_tag_bounded(
            &format!("{}-{}-{}", parts[n - 3], parts[n - 2], parts[n - 1]),
            MAX_EXPANDED_TAGS,
        )?,
    })
}

/// Most tags one wheel may expand to. Real wheels carry a handful (a compressed set of a few
/// Python versions x two platform aliases); `a.b.c…-…-…` with 300 parts each is 27 M tags.
pub const MAX_EXPANDED_TAGS: usize = 4096;

/// [`expand_tag`], or None when it would give more than `limit` tags (counted before expanding).
pub fn expand_tag_bounded(tag: &str, limit: usize) -> Option<Vec<String>> {
    let parts: Vec<&str> = tag.split('-').collect();
    if parts.len() == 3 {
        let n = parts
            .iter()
            .map(|p| p.split('.').count())
            .try_fold(1usize, |acc, c| acc.checked_mul(c))?;
        if n > limit {
            return None;
        }
    } else if limit == 0 {
        return None;
    }
    Some(expand_tag(tag))
}

/// "cp39.cp310-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64" -> every combination.
pub fn expand_tag(tag: &str) -> Vec<String> {
    let parts: Vec<&str> = tag.split('-').collect();
    if parts.len() != 3 {
        return vec![tag.to_string()];
    }
    let mut out = Vec::new();
    for py in parts[0].split('.') {
        for abi in parts[1].split('.') {
            for plat in parts[2].split('.') {
                out.push(format!("{py}-{abi}-{plat}"));
            }
        }
    }
    out
}

/// The `Tag:` values of a WHEEL file, as written (not expanded).
pub fn wheel_file_tags(wheel_file: &str) -> Vec<String> {
    crate::metadata::parse_headers(wheel_file)
        .into_iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("Tag"))
        .map(|(_, v)| v)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filename_tags_expand() {
        let t =
            parse_filename("kiln-0.1.0-cp39-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
                .unwrap();
        assert_eq!(
            t.tags,
            [
                "cp39-abi3-manylinux_2_17_x86_64",
                "cp39-abi3-manylinux2014_x86_64"
            ]
        );
        assert!(parse_filename("x.whl").is_none());
        // 30 x 30 x 30 = 27000 combinations: over the cap, refused before expanding.
        let many = |c: char| {
            (0..30)
                .map(|i| format!("{c}{i}"))
                .collect::<Vec<_>>()
                .join(".")
        };
        let tag = format!("{}-{}-{}", many('p'), many('a'), many('l'));
        assert!(expand_tag_bounded(&tag, MAX_EXPANDED_TAGS).is_none());
        assert_eq!(
            expand_tag_bounded("py3-none-any", 1).unwrap(),
            ["py3-none-any"]
        );
    }
}
