//! `kiln-kernel-job --project DIR --job ID --out DIR [--prebuilt DIR]`: runs one job of the
//! kernel build of the project at DIR (its Cargo.toml's kiln table, its kernels directory) and
//! files the output as a prebuilt entry (`output`, `key`) in --out. One Nix derivation per job
//! runs this (nix/kernel-jobs.nix), so the job is kiln-build's own — same command, same key —
//! not a restatement of it. Exit 0 done, 1 the job failed, 2 bad arguments.

use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut project, mut job, mut out, mut prebuilt) = (None, None, None, None);
    while let Some(a) = args.next() {
        let mut value = || args.next().map(PathBuf::from);
        match a.as_str() {
            "--project" => project = value(),
            "--job" => job = value(),
            "--out" => out = value(),
            "--prebuilt" => prebuilt = value(),
            _ => usage(&format!("unknown argument {a:?}")),
        }
    }
    let (Some(project), Some(job), Some(out)) = (project, job, out) else {
        usage("--project, --job and --out are required");
    };
    let result = kiln_build::Pins::load(&project.join("Cargo.toml"))
        .map_err(kiln_build::BuildError::from)
        .and_then(|pins| {
            let kernels = project.join(&pins.kernels.dir);
            let scratch =
                std::env::temp_dir().join(format!("kiln-kernel-job-{}", std::process::id()));
            let mut b = kiln_build::KernelBuild::new(pins, kernels, scratch.join("out"))
                .cache_dir(scratch.join("cache"))
                .bindgen(false);
            if let Some(p) = prebuilt {
                b = b.prebuilt(p);
            }
            let r = b.run_job(&job.to_string_lossy(), &out);
            let _ = std::fs::remove_dir_all(&scratch);
            r
        });
    if let Err(e) = result {
        eprintln!("kiln-kernel-job: {e}");
        std::process::exit(1);
    }
}

fn usage(why: &str) -> ! {
    eprintln!("kiln-kernel-job: {why}\nusage: kiln-kernel-job --project DIR --job ID --out DIR [--prebuilt DIR]");
    std::process::exit(2);
}
