//! What comes back to the runtime: timers that fire, the executor's reports (relayed to
//! the core), telemetry, lost devices, forecasts and config effects made off its task.

use super::*;

impl Runtime {
    /// A timer fired.
    pub(super) fn on_timer(&mut self, timer: Timer, now: i64) -> Outcome {
        match timer {
            Timer::Grace { job, attempt } => {
                self.exec.kill_if_current(job, attempt);
                Outcome::Nothing
            }
            Timer::Timeout { job, attempt } => {
                if !self.exec.is_current(job, attempt) {
                    return Outcome::Nothing;
                }
                tracing::info!(job = %job, "timeout");
                self.sched.timeout(job, now);
                self.picture.touch(job);
                Outcome::Reschedule
            }
            // The turn publishes what the rate limit held back.
            Timer::Flush => Outcome::Nothing,
            // The turn stores the labels held back.
            Timer::Labels => {
                self.labels_due = true;
                Outcome::Nothing
            }
            Timer::ProtectionEnd | Timer::Wakeup => Outcome::Reschedule,
            Timer::Forecast => {
                let tx = self.inputs.clone();
                self.forecasts
                    .start_estimate(&self.sched, now, &self.finished, &tx);
                self.timers
                    .set(Timer::Forecast, self.forecasts.next_after());
                Outcome::Nothing
            }
            Timer::Watch => {
                self.exec.look(&mut self.timers);
                Outcome::Nothing
            }
            Timer::Prune => {
                self.timers.set(Timer::Prune, PRUNE_EVERY);
                if let Some(p) = &mut self.persist {
                    let days = p.retain_days;
                    match off_the_async_workers(|| p.store.prune_jobs(days, now)) {
                        Ok(ids) => {
                            tracing::info!(jobs = ids.len(), days, "history pruned");
                            self.exec.log_budget.forget(&ids);
                            match off_the_async_workers(|| p.store.data_by_user()) {
                                Ok(rows) => self.set_data_per_user(rows),
                                Err(e) => tracing::warn!("cannot sum the users' job data: {e}"),
                            }
                            let state = self.opts.state.clone();
                            tokio::task::spawn_blocking(move || {
                                crate::exec::state::runfiles::remove_jobs(&state, &ids)
                            });
                        }
                        Err(e) => tracing::warn!("cannot prune the history: {e}"),
                    }
                }
                Outcome::Nothing
            }
        }
    }

    pub(super) fn exec_report(&mut self, kind: ExecKind, now: i64) -> Outcome {
        match kind {
            ExecKind::Attempt(report) => self.attempt_report(report, now),
            ExecKind::Telemetry(samples) => {
                let changed = samples != self.samples;
                self.samples = samples;
                if changed {
                    Outcome::Redraw
                } else {
                    Outcome::Nothing
                }
            }
            ExecKind::GpuProcesses(procs) => self.gpu_processes(&procs, now),
            ExecKind::DeviceLost { unit, device, why } => self.device_gone(unit, device, &why, now),
            ExecKind::ConfigEffects { hash, dry_run } => {
                if self.config.hash.as_deref() != Some(hash.as_str()) {
                    return Outcome::Nothing;
                }
                if !dry_run.is_empty() {
                    let at = chrono::DateTime::from_timestamp_millis(now)
                        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                        .unwrap_or_default();
                    tracing::info!("the config applied at {at}:\n{}", dry_run.text());
                }
                self.config.effects = Some(dry_run.summary());
                Outcome::Redraw
            }
            ExecKind::Estimated {
                estimates,
                runtimes,
            } => {
                let (estimates, soon) = self.forecasts.estimated(&estimates, runtimes, now);
                if let Some(d) = soon {
                    self.timers.set(Timer::Forecast, d);
                }
                self.picture.set_estimates(estimates);
                Outcome::Redraw
            }
            // Handled in `handle`.
            ExecKind::Reloaded { .. } | ExecKind::StateLost(_) => Outcome::Nothing,
        }
    }

    /// A GPU lost (telemetry) or held by something outside this scheduler: its jobs are
    /// preempted (DEVICE_LOST) and it is never handed out again by this runtime.
    /// One round of the devices' compute processes: each sliced job's memory on its
    /// device, fed to the two-samples-over rule; a job over is reported, or with
    /// `overuse: STOP` stopped (SPEC §15).
    fn gpu_processes(
        &mut self,
        procs: &crate::exec::gpu::telemetry::Processes,
        now: i64,
    ) -> Outcome {
        let mut samples = Vec::new();
        for ((unit, device), ps) in procs {
            let held = crate::exec::gpu::overuse::memory_by_attempt(ps, |pid| {
                self.exec.attempt_of_process(pid as i32)
            });
            for ((job, attempt), mib) in held {
                let Some(j) = self.sched.job(job) else {
                    continue;
                };
                let sliced = self.sched.slice_of(j.unit).is_some();
                if sliced
                    && j.is_holding()
                    && j.attempts_started == attempt
                    && self.sched.unit_name(j.unit) == unit
                    && j.devices().contains(device)
                {
                    samples.push((job, mib, u64::from(j.quantity)));
                }
            }
        }
        let over = self.overuse.round(&samples);
        if over.is_empty() {
            return Outcome::Nothing;
        }
        for o in over {
            let Some(j) = self.sched.job(o.job) else {
                continue;
            };
            let stop = self.sched.overuse_stops(j.unit);
            tracing::warn!(job = %o.job, stop, "{o}");
            self.sched
                .over_memory(o.job, o.held_gib, o.of_gib, stop, now);
        }
        self.picture.touch_all();
        Outcome::Reschedule
    }

    fn device_gone(&mut self, unit: String, device: u32, why: &str, now: i64) -> Outcome {
        if self.lost_devices.contains_key(&(unit.clone(), device)) {
            return Outcome::Nothing;
        }
        self.lost_devices.insert((unit.clone(), device), now);
        tracing::error!(unit = %unit, device, "GPU unusable ({why}): its jobs are preempted (DEVICE_LOST) and it is no longer handed out");
        self.sched.device_lost(None, &unit, device, now);
        self.picture.touch_all();
        Outcome::Reschedule
    }

    /// A GPU held by something outside this scheduler (an earlier scheduler's attempt,
    /// SPEC §8): withheld until [`Report::DeviceFree`]; jobs that need it wait, saying why.
    fn device_held(&mut self, unit: String, device: u32, why: &str, now: i64) -> Outcome {
        if self.lost_devices.contains_key(&(unit.clone(), device)) {
            return Outcome::Nothing;
        }
        self.lost_devices.insert((unit.clone(), device), now);
        tracing::warn!(unit = %unit, device, "GPU withheld: {why}");
        self.sched.device_withheld(None, &unit, device, why, now);
        self.picture.touch_all();
        Outcome::Reschedule
    }

    /// A withheld GPU is free again: it is handed out as before.
    fn device_free(&mut self, unit: String, device: u32, now: i64) -> Outcome {
        if !self.sched.device_returned(&unit, device, now) {
            return Outcome::Nothing;
        }
        self.lost_devices.remove(&(unit.clone(), device));
        tracing::info!(unit = %unit, device, "GPU given back: it is handed out again");
        self.picture.touch_all();
        Outcome::Reschedule
    }

    /// Relay what the executor saw to the core.
    fn attempt_report(&mut self, report: Report, now: i64) -> Outcome {
        match report {
            Report::DeviceHeld { unit, device, why } => self.device_held(unit, device, &why, now),
            Report::DeviceFree { unit, device } => self.device_free(unit, device, now),
            Report::Accepted { job, attempt } => {
                let starting = self
                    .sched
                    .job(job)
                    .is_some_and(|j| j.state == JobState::Scheduled);
                if starting && self.exec.is_current(job, attempt) {
                    // SCHEDULED → STARTING: the attempt is taken on, its command not yet.
                    self.set_state(job, JobState::Starting);
                    return Outcome::Redraw;
                }
                Outcome::Nothing
            }
            Report::Running { job, attempt } => {
                if self.exec.is_current(job, attempt) {
                    self.set_state(job, JobState::Running);
                    return Outcome::Redraw;
                }
                Outcome::Nothing
            }
            Report::Ended {
                job,
                attempt,
                status,
            } => self.attempt_ended(job, attempt, status, now),
            // Its supervisor checked the attempt's token on the node (SPEC §14).
            Report::Checkpoint { job, attempt, note } => {
                match self.take_checkpoint(job, attempt, note, now) {
                    Ok(_) => Outcome::Redraw,
                    Err(why) => {
                        tracing::info!(job = %job, attempt, "a relayed checkpoint refused: {why}");
                        Outcome::Nothing
                    }
                }
            }
            Report::NodeDown { node } => {
                tracing::error!(node = %node, "the executor says the node is down: its jobs are preempted (DEVICE_LOST) and their GPUs count as released (nothing of them can come back)");
                self.sched.node_lost(&node, now);
                self.picture.touch_all();
                Outcome::Reschedule
            }
            Report::NodeDrained { node, drained } => {
                if self.sched.is_drained(&node) == drained {
                    return Outcome::Nothing;
                }
                tracing::warn!(node = %node, drained, "the executor says the node is {}", if drained { "drained: it takes no new jobs, its running jobs go on" } else { "back in service" });
                self.sched.node_drained(&node, drained, now);
                self.picture.touch_all();
                Outcome::Reschedule
            }
        }
    }

    fn set_state(&mut self, job: JobId, state: JobState) {
        self.sched.set_running_state(job, state);
        self.observed.push(Observed::StateChanged { job });
        self.picture.touch(job);
    }

    /// An attempt's supervisor ended with `status`.
    fn attempt_ended(
        &mut self,
        job: JobId,
        attempt: u32,
        status: crate::exec::ExitStatus,
        now: i64,
    ) -> Outcome {
        if !self.exec.finished(&mut self.timers, job, attempt) {
            return Outcome::Nothing;
        }
        let code = status.code;
        let now = self.ended_at(job, &status, now);
        if status.timed_out {
            // The supervisor stopped it at its timeout (SPEC §7): the same end as a
            // timeout the runtime would have ordered.
            tracing::info!(job = %job, attempt, "timed out (stopped by its supervisor)");
            self.sched.timeout(job, now);
        }
        let stopping = self.sched.job(job).is_some_and(|j| j.is_stopping());
        if let Some(t) = self.sched.job(job).and_then(|j| j.started_at()) {
            self.ended_starts.insert(job, t);
        }
        tracing::info!(job = %job, attempt, code, stopping, "attempt ended");
        self.maybe_done.push(job);
        self.picture.touch(job);
        let fact = if stopping {
            Observed::Released {
                job,
                code: Some(code),
            }
        } else {
            Observed::ended(job, code, status.signal)
        };
        fact.apply(&mut self.sched, now);
        self.observed.push(fact);
        Outcome::Reschedule
    }
}
