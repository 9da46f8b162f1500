//! wheel/*, input/*, tags/filename-mismatch, metadata/bad-requires-dist: what
//! the reader met in the archive and its dist-info, and RECORD against every member's digest.

use std::collections::BTreeMap;

use crate::facts::{Artifact, InputKind, MemberDigest, ReadProblem, RecordRow};
use crate::finding::{finding, Finding, Rule};

const FIX_RECORD: &str =
    "rebuild the wheel (or rewrite RECORD with the real sha256 and size of every member)";

pub fn check(artifact: &Artifact, findings: &mut Vec<Finding>) {
    for p in &artifact.problems {
        findings.push(problem(p));
    }
    let is_wheel = artifact.kind == InputKind::Wheel;
    // A directory's RECORDs are its distributions' (each lists its own files).
    let records: Vec<&crate::facts::DistRecord> = match artifact.kind {
        InputKind::Directory => artifact
            .distributions
            .iter()
            .flat_map(|d| &d.records)
            .collect(),
        _ => artifact.wheel.iter().flat_map(|w| &w.records).collect(),
    };
    for r in records {
        let record_path = r.record_path();
        match &r.rows {
            Some(rows) => verify_record(rows, &artifact.digests, &record_path, is_wheel, findings),
            None if is_wheel => findings.push(finding(
                Rule::WheelRecordMissing,
                &r.dist_info,
                format!("{} has no RECORD", r.dist_info),
                "rebuild the wheel with a PEP 427 build backend",
            )),
            None => {}
        }
    }
    let Some(meta) = &artifact.wheel else { return };
    if is_wheel && meta.dist_info.is_empty() {
        findings.push(finding(
            Rule::WheelNoDistInfo,
            "",
            "no .dist-info/ with RECORD, WHEEL or METADATA".into(),
            "build the wheel with maturin or pip wheel",
        ));
    }
    if let Some(f) = &meta.filename {
        if !meta.tags.is_empty() && f.tags.iter().any(|t| !meta.tags.contains(t)) {
            findings.push(finding(
                Rule::TagsFilenameMismatch,
                "",
                format!(
                    "file name tags {:?} differ from WHEEL tags {:?}",
                    f.tags, meta.tags
                ),
                "rename the file to match the WHEEL Tag lines (or fix WHEEL)",
            ));
        }
    }
}

/// The finding for one read problem.
fn problem(p: &ReadProblem) -> Finding {
    match p {
        ReadProblem::UnsafePath { member, why } => finding(
            Rule::WheelUnsafePath,
            member,
            format!("member path {member:?} is unsafe ({why}); it was not read"),
            "rebuild the wheel: members must be relative paths inside it",
        ),
        ReadProblem::UnreadableMember {
            member,
            action,
            error,
        } => finding(
            Rule::InputUnreadableMember,
            member,
            format!("cannot {action} member: {error}"),
            "rebuild the wheel",
        ),
        ReadProblem::MemberTooLarge {
            member,
            declared,
            limit,
        } => finding(
            Rule::WheelMemberTooLarge,
            member,
            match declared {
                Some(size) => format!("member claims {size} bytes, over the limit of {limit}"),
                None => format!("member inflates past the limit of {limit} bytes"),
            },
            "raise --max-member-size if this is genuine",
        ),
        ReadProblem::BadRecordLine {
            record,
            line,
            error,
        } => finding(
            Rule::WheelRecordMismatch,
            record,
            format!("RECORD line {line}: {error}"),
            "regenerate RECORD with the build backend (maturin/pip wheel)",
        ),
        ReadProblem::BadRequiresDist {
            metadata,
            value,
            error,
        } => finding(
            Rule::MetadataBadRequiresDist,
            metadata,
            format!(
                "Requires-Dist {:?} is not PEP 508: {error}",
                kiln_wheel::metadata::clip(value, 200)
            ),
            "write the requirement as PEP 508 (name, specifier, marker)",
        ),
        ReadProblem::ZipDifferential { member, why } => finding(
            Rule::WheelZipDifferential,
            member,
            format!("pip would not install what was audited: {why}"),
            "rebuild the wheel with a standard zip writer (one central directory, one entry per name, local headers that match it)",
        ),
        ReadProblem::SymlinkMember { member } => finding(
            Rule::WheelSymlinkMember,
            member,
            "member is a symbolic link; pip writes it as a regular file holding the link target, so it is not what it names".into(),
            "store the real file (auditwheel copies libraries; never symlink inside a wheel)",
        ),
        ReadProblem::BadDistInfo { dist_info, why } => finding(
            Rule::WheelBadDistInfo,
            dist_info,
            why.clone(),
            "build the wheel with a PEP 427 backend: one {name}-{version}.dist-info with WHEEL (Wheel-Version: 1.0), METADATA and RECORD",
        ),
        ReadProblem::InflatedTooLarge { inflated, limit } => finding(
            Rule::InputTooLarge,
            "",
            format!("members inflate to more than {limit} bytes in total (counted {inflated}); reading stopped there"),
            "raise --max-total-size if this is genuine",
        ),
        ReadProblem::OverLimit { file, what, limit } => finding(
            Rule::InputOverLimit,
            file,
            format!("more {what} than the limit of {limit}; the rest was not read"),
            "this input is not a plausible wheel or library; inspect it by hand",
        ),
    }
}

/// Compares every member with RECORD (RECORD itself and signatures are exempt by the spec). An
/// unpacked tree (`require_listed` false) may hold files RECORD does not list.
fn verify_record(
    record: &BTreeMap<String, RecordRow>,
    members: &BTreeMap<String, MemberDigest>,
    record_path: &str,
    require_listed: bool,
    findings: &mut Vec<Finding>,
) {
    // An unpacked tree: walk RECORD's rows, not every file of the tree (a site-packages holds
    // ~100k files and hundreds of RECORDs).
    let pairs: Box<dyn Iterator<Item = (&String, &MemberDigest)>> = if require_listed {
        Box::new(members.iter())
    } else {
        Box::new(
            record
                .keys()
                .filter_map(|name| members.get_key_value(name.as_str())),
        )
    };
    for (name, got) in pairs {
        let exempt = name == record_path
            || name.ends_with(".dist-info/RECORD.jws")
            || name.ends_with(".dist-info/RECORD.p7s");
        if exempt {
            continue;
        }
        match record.get(name) {
            None if require_listed => findings.push(finding(
                Rule::WheelRecordMissing,
                name,
                format!("{name} is in the archive but not in {record_path}"),
                FIX_RECORD,
            )),
            None => {}
            Some(row) => findings.extend(row_mismatch(name, row, got, record_path, require_listed)),
        }
    }
    if require_listed {
        for name in record.keys() {
            if !members.contains_key(name) && name != record_path {
                findings.push(finding(
                    Rule::WheelRecordMismatch,
                    record_path,
                    format!("{record_path} lists {name}, which is not in the archive"),
                    FIX_RECORD,
                ));
            }
        }
    }
}

/// One member against its RECORD row: a missing hash (in a wheel), another algorithm than
/// sha256, another hash, another size.
fn row_mismatch(
    name: &str,
    row: &RecordRow,
    got: &MemberDigest,
    record_path: &str,
    require_listed: bool,
) -> Option<Finding> {
    if row.hash.is_empty() {
        require_listed.then(|| {
            finding(
                Rule::WheelRecordMismatch,
                name,
                format!("{record_path} has no hash for {name}"),
                FIX_RECORD,
            )
        })
    } else if !row.hash.starts_with("sha256=") {
        Some(finding(
            Rule::WheelRecordMismatch,
            name,
            format!(
                "{record_path} uses {} for {name}; only sha256 is verified",
                row.hash.split('=').next().unwrap_or("")
            ),
            "use sha256 in RECORD",
        ))
    } else if row.hash != got.hash {
        Some(finding(
            Rule::WheelRecordMismatch,
            name,
            format!(
                "sha256 mismatch: RECORD says {}, content is {}",
                row.hash, got.hash
            ),
            FIX_RECORD,
        ))
    } else if row.size.is_some_and(|s| s != got.size) {
        Some(finding(
            Rule::WheelRecordMismatch,
            name,
            format!(
                "size mismatch: RECORD says {}, content is {} bytes",
                row.size.unwrap_or(0),
                got.size
            ),
            FIX_RECORD,
        ))
    } else {
        None
    }
}

/// Each formerly read-time rule, driven from facts built by hand (no zip, no file).
#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::facts::{DistRecord, FilenameTags, WheelMeta};
    use crate::finding::{severity_of, Severity};

    fn wheel(meta: WheelMeta) -> Artifact {
        Artifact {
            wheel: Some(meta),
            ..Artifact::empty(InputKind::Wheel)
        }
    }

    fn dist(rows: Option<&[(&str, &str, Option<u64>)]>) -> WheelMeta {
        WheelMeta {
            dist_info: vec!["x-1.0.dist-info".into()],
            records: vec![DistRecord {
                dist_info: "x-1.0.dist-info".into(),
                rows: rows.map(|rows| {
                    rows.iter()
                        .map(|(n, h, s)| {
                            (
                                n.to_string(),
                                RecordRow {
                                    hash: h.to_string(),
                                    size: *s,
                                },
                            )
                        })
                        .collect()
                }),
            }],
            ..Default::default()
        }
    }

    fn run(a: &Artifact) -> Vec<Finding> {
        let mut f = Vec::new();
        check(a, &mut f);
        for x in &f {
            assert!(
                x.severity == severity_of(x.rule),
                "{} not at its registered severity",
                x.rule
            );
        }
        f
    }

    fn rules(f: &[Finding]) -> Vec<(Rule, &str)> {
        f.iter().map(|f| (f.rule, f.file.as_str())).collect()
    }

    #[test]
    fn each_read_problem_is_decided_by_its_own_rule() {
        let mut a = wheel(dist(Some(&[])));
        a.problems = vec![
            ReadProblem::UnsafePath {
                member: "../evil".into(),
                why: "`..` component",
            },
            ReadProblem::UnreadableMember {
                member: "x/a.so".into(),
                action: "decompress",
                error: "corrupt deflate stream".into(),
            },
            ReadProblem::MemberTooLarge {
                member: "x/big".into(),
                declared: Some(10),
                limit: 5,
            },
            ReadProblem::MemberTooLarge {
                member: "x/bomb".into(),
                declared: None,
                limit: 5,
            },
            ReadProblem::BadRecordLine {
                record: "x-1.0.dist-info/RECORD".into(),
                line: 3,
                error: "bad quote".into(),
            },
            ReadProblem::BadRequiresDist {
                metadata: "x-1.0.dist-info/METADATA".into(),
                value: "!!bad".into(),
                error: "expected a name".into(),
            },
        ];
        let f = run(&a);
        assert_eq!(
            rules(&f),
            [
                (Rule::WheelUnsafePath, "../evil"),
                (Rule::InputUnreadableMember, "x/a.so"),
                (Rule::WheelMemberTooLarge, "x/big"),
                (Rule::WheelMemberTooLarge, "x/bomb"),
                (Rule::WheelRecordMismatch, "x-1.0.dist-info/RECORD"),
                (Rule::MetadataBadRequiresDist, "x-1.0.dist-info/METADATA"),
            ]
        );
        assert_eq!(
            f[1].message,
            "cannot decompress member: corrupt deflate stream"
        );
        assert_eq!(f[2].message, "member claims 10 bytes, over the limit of 5");
        assert_eq!(f[3].message, "member inflates past the limit of 5 bytes");
        assert_eq!(f[4].message, "RECORD line 3: bad quote");
    }

    #[test]
    fn record_against_member_digests() {
        let good = MemberDigest::of(b"good");
        let mut a = wheel(dist(Some(&[
            ("x/ok.py", &good.hash, Some(4)),
            ("x/changed.py", &good.hash, Some(4)),
            ("x/resized.py", &good.hash, Some(5)),
            ("x/md5.py", "md5=abc", None),
            ("x/nohash.py", "", None),
            ("x/gone.py", &good.hash, Some(4)),
        ])));
        a.digests = BTreeMap::from([
            ("x/ok.py".to_string(), good.clone()),
            ("x/changed.py".to_string(), MemberDigest::of(b"evil")),
            ("x/resized.py".to_string(), good.clone()),
            ("x/md5.py".to_string(), good.clone()),
            ("x/nohash.py".to_string(), good.clone()),
            ("x/unlisted.py".to_string(), good.clone()),
            ("x-1.0.dist-info/RECORD".to_string(), good.clone()),
        ]);
        let f = run(&a);
        let mut got = rules(&f);
        got.sort();
        assert_eq!(
            got,
            [
                (Rule::WheelRecordMismatch, "x-1.0.dist-info/RECORD"),
                (Rule::WheelRecordMismatch, "x/changed.py"),
                (Rule::WheelRecordMismatch, "x/md5.py"),
                (Rule::WheelRecordMismatch, "x/nohash.py"),
                (Rule::WheelRecordMismatch, "x/resized.py"),
                (Rule::WheelRecordMissing, "x/unlisted.py"),
            ]
        );
        // An unpacked tree may hold unlisted files and rows without hashes; content still counts.
        a.kind = InputKind::Directory;
        // As the directory reader gives it: each dist-info is a distribution (read/dists.rs).
        a.distributions = a.wheel.iter().cloned().collect();
        let f = run(&a);
        let mut got = rules(&f);
        got.sort();
        assert_eq!(
            got,
            [
                (Rule::WheelRecordMismatch, "x/changed.py"),
                (Rule::WheelRecordMismatch, "x/md5.py"),
                (Rule::WheelRecordMismatch, "x/resized.py"),
            ]
        );
    }

    #[test]
    fn missing_record_and_missing_dist_info() {
        assert_eq!(
            rules(&run(&wheel(dist(None)))),
            [(Rule::WheelRecordMissing, "x-1.0.dist-info")]
        );
        assert_eq!(
            rules(&run(&wheel(WheelMeta::default()))),
            [(Rule::WheelNoDistInfo, "")]
        );
        // Not a wheel: neither applies.
        let mut dir = wheel(dist(None));
        dir.kind = InputKind::Directory;
        assert!(run(&dir).is_empty());
    }

    #[test]
    fn file_name_tags_against_wheel_tags() {
        let mut meta = dist(Some(&[]));
        meta.tags = vec!["cp39-abi3-manylinux_2_34_x86_64".into()];
        meta.filename = Some(FilenameTags {
            name: "x".into(),
            version: "1.0".into(),
            tags: vec!["cp39-abi3-manylinux_2_17_x86_64".into()],
        });
        let f = run(&wheel(meta.clone()));
        assert_eq!(rules(&f), [(Rule::TagsFilenameMismatch, "")]);
        assert_eq!(f[0].severity, Severity::Warning);
        meta.filename.as_mut().unwrap().tags = meta.tags.clone();
        assert!(run(&wheel(meta)).is_empty());
    }
}
