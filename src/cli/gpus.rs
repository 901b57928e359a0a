//! `shareq gpus [--config DIR]`: what GPUs this machine has, how they were found (or why
//! none were), their MIG instances, and which unit each would serve; and `shareq slurm-conf`: what a Slurm
//! cluster needs so that shareq can pin the GPUs of its nodes.

use super::error::{CliError, ExitKind};
use crate::config::load_dir;
use crate::exec::{Discovery, Method};
use std::path::Path;

/// `shareq slurm-conf --config DIR`: what the Slurm admin adds for the Slurm executor.
pub fn slurm_conf(dir: &Path) -> Result<(), CliError> {
    match load_dir(dir) {
        Ok(loaded) if loaded.config.has_nodes() => {
            print!(
                "{}",
                crate::exec::slurm::commands::slurm_conf(&loaded.config)
            );
            Ok(())
        }
        Ok(_) => Err(CliError::usage(format!(
            "shareq slurm-conf: {} lists no `nodes`: the Slurm executor needs them (docs/CONFIG.md, Nodes)",
            dir.display()
        ))),
        Err(errors) => {
            eprintln!(
                "shareq slurm-conf: the config in {} is not valid:",
                dir.display()
            );
            for e in errors {
                eprintln!("  {e}");
            }
            Err(CliError::printed(ExitKind::Usage))
        }
    }
}

pub fn gpus(config: Option<&Path>, state: Option<&Path>) -> Result<(), CliError> {
    let done = discovered(config);
    scheduler_view(state);
    done
}

/// What the scheduler answering on `state` hands out, device by device: the job on
/// each, free, or lost (and since when). Nothing when no scheduler answers there.
fn scheduler_view(state: Option<&Path>) {
    use crate::server::{Request, Response};
    let Ok(Response {
        ok: true,
        status: Some(s),
        ..
    }) = super::request(state, &Request::Status)
    else {
        return;
    };
    println!("The running scheduler's view:");
    for u in &s.units {
        let lost = u.devices.iter().filter(|d| d.lost_since.is_some()).count();
        println!(
            "  unit {}: {} usable, {} in use{}{}",
            u.name,
            u.amount(u.usable),
            u.amount(u.used),
            if lost > 0 {
                format!(", {lost} lost")
            } else {
                String::new()
            },
            u.unusable
                .as_ref()
                .map(|why| format!(" ({why})"))
                .unwrap_or_default()
        );
        for d in &u.devices {
            let what = match (d.lost_since, &d.share, &d.job_name) {
                (Some(at), _, _) => format!(
                    "LOST since {}",
                    chrono::DateTime::from_timestamp_millis(at)
                        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                        .unwrap_or_default()
                ),
                (None, Some(share), name) => format!(
                    "{share}: {}",
                    crate::visible::visible(name.as_deref().unwrap_or("?"))
                ),
                (None, None, _) => "free".to_string(),
            };
            let instance = d
                .mig
                .as_ref()
                .map(|m| format!(" {} {}", m.label(), m.uuid))
                .unwrap_or_default();
            // A sliced device (SPEC §15): every job on it with its GiB.
            let what = match u.memory_gib {
                Some(gib) if !d.slices.is_empty() && d.lost_since.is_none() => format!(
                    "{}/{gib} GiB: {}",
                    d.gib_used(),
                    d.slices
                        .iter()
                        .map(|s| format!(
                            "{}: {} {} GiB",
                            s.share,
                            crate::visible::visible(&s.job_name),
                            s.gib
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => what,
            };
            println!("    {}:{}{instance}  {what}", d.node, d.index);
        }
    }
}

fn discovered(config: Option<&Path>) -> Result<(), CliError> {
    let d = Discovery::run();
    match d.method {
        Method::None => println!("No GPU found."),
        Method::Nvml => println!("Found {} GPU(s) through NVML:", d.gpus.len()),
        Method::NvidiaSmi => println!("Found {} GPU(s) through nvidia-smi:", d.gpus.len()),
    }
    for g in &d.gpus {
        println!(
            "  {:>2}  {}  {}  {} MiB",
            g.index, g.name, g.uuid, g.memory_mib
        );
    }
    for g in &d.mig {
        use crate::exec::gpu::mig::MigState;
        let what = match &g.state {
            MigState::Enabled if g.instances.is_empty() => "MIG enabled, no instance".to_string(),
            MigState::Enabled => format!("MIG enabled, {} instance(s):", g.instances.len()),
            MigState::Disabled => "MIG disabled".to_string(),
            MigState::NotSupported => continue,
            MigState::Unknown(e) => format!("MIG mode unknown: {e}"),
        };
        println!("  GPU {}: {what}", g.index);
        for m in &g.instances {
            println!(
                "      MIG {}  {}  (GPU instance {}, compute instance {})",
                crate::exec::gpu::mig::profile_of(&m.name).unwrap_or(&m.name),
                m.uuid,
                m.gi,
                m.ci
            );
        }
    }
    for n in &d.notes {
        println!("  {n}");
    }
    if d.method == Method::None {
        println!("Units with `devices: auto` or a list of indices get no GPU here;");
        println!("`devices: {{fake: N}}` gives N simulated devices on any machine.");
    }
    println!(
        "Containment: {}",
        crate::exec::containment::cgroup::Containment::describe(
            crate::exec::start::starts_inside_groups(),
        )
    );
    if let Some(dir) = config {
        match load_dir(dir) {
            Ok(loaded) => {
                let (caps, warnings) = d.capacity(&loaded.config);
                println!("Units of {}:", dir.display());
                for c in &caps {
                    let max = loaded.config.max_capacity(&c.unit);
                    let on = if loaded.config.has_nodes() {
                        format!(" on node {}", c.node)
                    } else {
                        String::new()
                    };
                    println!(
                        "  {}{on}: devices {:?} (maxCapacity {max}, usable {})",
                        c.unit,
                        c.devices,
                        max.min(c.devices.len() as u32)
                    );
                }
                for (unit, instances) in &d.mig_units(&loaded.config).0 {
                    for (i, m) in instances.iter().enumerate() {
                        let on = match m.parent {
                            Some(p) => {
                                let caps: Vec<String> =
                                    m.caps.iter().map(|c| format!("nvidia-cap{c}")).collect();
                                format!("GPU {p}, opens /dev/nvidia{p} {}", caps.join(" "))
                            }
                            None => "fake".to_string(),
                        };
                        println!("    {unit} {i}: MIG {}  {}  ({on})", m.profile, m.uuid);
                    }
                }
                for w in warnings {
                    println!("  warning: {w}");
                }
                for n in crate::config::slice_notes(&loaded.config) {
                    println!("  {n}");
                }
            }
            Err(errors) => {
                eprintln!("shareq gpus: the config in {} is not valid:", dir.display());
                for e in errors {
                    eprintln!("  {e}");
                }
                return Err(CliError::printed(ExitKind::Usage));
            }
        }
    }
    Ok(())
}
