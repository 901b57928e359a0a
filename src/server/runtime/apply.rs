//! Applying the inputs that change the scheduler: submits, cancels, priorities, reloads
//! and new configs (a config this runtime cannot carry out is refused like an invalid one).

use super::*;

impl Runtime {
    /// Apply one input.
    pub(super) fn handle(
        &mut self,
        input: Input,
        now: i64,
        deferred: &mut Vec<Deferred>,
    ) -> Outcome {
        match input {
            Input::Submit { spec, reply } => {
                let result = self.submit(spec, now);
                match &result {
                    Ok(id) => tracing::info!(job = %id, "submit accepted"),
                    Err(why) => tracing::info!("submit refused: {why}"),
                }
                if let Ok(id) = result {
                    self.picture.touch(id);
                }
                if let Some(tx) = reply {
                    deferred.push(Deferred::Submit(tx, result));
                }
                Outcome::Reschedule
            }
            Input::Cancel { ids, by, reply } => {
                let outcomes: Vec<CancelOutcome> = ids
                    .into_iter()
                    .map(|id| self.cancel(id, &by, now))
                    .collect();
                if let Some(tx) = reply {
                    deferred.push(Deferred::Cancel(tx, outcomes));
                }
                Outcome::Reschedule
            }
            Input::SetPriority {
                id,
                priority,
                by,
                reply,
            } => {
                let r = if self.sched.job(id).is_none() && self.existed(id) {
                    Ok(false)
                } else {
                    self.sched.set_priority_by(id, priority, Some(&by), now)
                };
                match &r {
                    Ok(true) => tracing::info!(job = %id, priority, by = %by, "priority set"),
                    Ok(false) => {
                        tracing::info!(job = %id, priority, "priority unchanged (job ended)")
                    }
                    Err(why) => tracing::info!(job = %id, priority, "priority refused: {why}"),
                }
                let r = r.map_err(Refusal::Priority);
                self.picture.touch(id);
                if let Some(tx) = reply {
                    deferred.push(Deferred::Priority(tx, r));
                }
                Outcome::Reschedule
            }
            Input::Config(update) => {
                self.apply_config(update, now);
                Outcome::Reschedule
            }
            Input::Reload { reply } => {
                // Reading and validating the directory can take long (a huge or odd file):
                // never on this task. The result comes back as `Reloaded`.
                let (dir, tx) = (self.opts.config_dir.clone(), self.inputs.clone());
                tokio::spawn(async move {
                    let (loaded, hash) = tokio::task::spawn_blocking(move || read_dir(&dir))
                        .await
                        .unwrap_or_else(|e| {
                            let why = format!("reading the config failed: {e}");
                            (Err(vec![crate::config::ConfigError::new(why)]), None)
                        });
                    let report = ExecKind::Reloaded {
                        loaded,
                        hash,
                        reply,
                    };
                    let _ = tx.send(Input::Exec(ExecReport(report)));
                });
                Outcome::Nothing
            }
            Input::PutConfig {
                file,
                text,
                dry_run,
                reply,
            } => {
                // Files are read and written off this task; a written file is reloaded
                // through `Reloaded`, as `reload` is, and answered once applied.
                let (dir, tx) = (self.opts.config_dir.clone(), self.inputs.clone());
                tokio::spawn(put_config(dir, file, text, dry_run, tx, reply));
                Outcome::Nothing
            }
            Input::Exec(ExecReport(ExecKind::StateLost(why))) => {
                self.halted = Some(why);
                Outcome::Nothing
            }
            Input::Watching(refusals) => {
                if let Some(hash) = self.refused_config.clone() {
                    refusals.refused(hash);
                }
                self.config_refusals = Some(refusals);
                Outcome::Nothing
            }
            Input::Exec(ExecReport(ExecKind::Reloaded {
                loaded,
                hash,
                reply,
            })) => {
                // A config this build cannot carry out is refused like an invalid one.
                let loaded = loaded.and_then(|l| match self.executor_refusal(&l) {
                    Some(e) => Err(vec![e]),
                    None => Ok(l),
                });
                let result = match loaded {
                    Ok(loaded) => {
                        self.apply_config(ConfigUpdate::Applied(loaded), now);
                        Ok(())
                    }
                    Err(errors) => {
                        let text = errors_text(&errors);
                        self.apply_config(ConfigUpdate::Rejected(errors), now);
                        // The watcher may never see this directory (a file removed right
                        // after): it delivers whatever differs from it, which clears this.
                        if let (Some(r), Some(hash)) = (&self.config_refusals, &hash) {
                            r.refused(hash.clone());
                        }
                        self.refused_config = hash;
                        Err(Refusal::Config(text))
                    }
                };
                if let Some(tx) = reply {
                    deferred.push(Deferred::Reload(tx, result));
                }
                Outcome::Reschedule
            }
            Input::Exec(ExecReport(kind)) => self.exec_report(kind, now),
            Input::Predict { spec, reply } => {
                self.predictions.push((spec, reply));
                Outcome::Nothing
            }
            Input::Checkpoint { report, reply } => {
                let taken = self.checkpoint(report, now);
                let outcome = if taken.is_ok() {
                    Outcome::Redraw
                } else {
                    Outcome::Nothing
                };
                let _ = reply.send(taken);
                outcome
            }
            Input::AllJobs { .. }
            | Input::History { .. }
            | Input::Shutdown { .. }
            | Input::Sync { .. } => Outcome::Nothing,
        }
    }

    fn cancel(&mut self, id: JobId, by: &str, now: i64) -> CancelOutcome {
        if self.sched.job(id).is_none() {
            // Finished and archived: nothing to do; never handed out: an error.
            let error = (!self.existed(id)).then(|| format!("no job {id}"));
            return CancelOutcome {
                id,
                cancelled: false,
                error,
            };
        }
        let cancelled = self.sched.cancel(id, by, now);
        self.maybe_done.push(id);
        self.picture.touch(id);
        tracing::info!(job = %id, by = %by, cancelled, "cancel");
        CancelOutcome {
            id,
            cancelled,
            error: None,
        }
    }

    /// Was this id ever handed out? (Finished jobs leave the scheduler's tables.)
    fn existed(&self, id: JobId) -> bool {
        id.0 >= 1 && id < self.sched.next_job_id()
    }

    /// The checks in order: the spec's own fields that need no I/O (the model's; whether
    /// `workingDirectory` is a directory the sender asked before, off this task), the
    /// state filesystem's reserve (a reading taken off this task, read again here only to
    /// confirm a refusal), the client token (a retry answers with the first job: the
    /// batch's tokens and the stored ones are looked up here, in order with the batch),
    /// the user's cap, then the scheduler's own (SPEC §2).
    fn submit(&mut self, spec: JobSpec, now: i64) -> Result<JobId, Refusal> {
        spec.check_command()?;
        spec.check_size()?;
        // A gang (SPEC §16) in an environment with `nodes` needs an executor with several
        // machines: refused by name here. Without `nodes`, or with a numNodes out of
        // range, the core's own rejection says why.
        if let Some(n) = spec.num_nodes
            && (2..=64).contains(&n)
            && self.sched.has_nodes()
            && self.executor == crate::model::Executor::Local
        {
            return Err(Refusal::GangOnLocal(n));
        }
        // A full state filesystem stops nothing (SPEC §8): below the reserve, new jobs wait
        // outside, running ones go on.
        // The database's ballast, while given up, is owed on top of the reserve: the
        // space it held stays the scheduler's own (`store::room`).
        let owed = self.persist.as_ref().map_or(0, |p| p.store.ballast_owed());
        let reserve = self.exec.log_limits.reserve_bytes();
        let cost = super::free_space::cost(&spec);
        if let Err(free) =
            self.free_space
                .take(cost, reserve.saturating_add(owed), &self.exec.state)
        {
            return Err(Refusal::StateFull {
                free_mib: free.saturating_sub(cost.saturating_add(owed)) >> 20,
                reserve_mib: reserve >> 20,
            });
        }
        let mut spec = spec;
        spec.check_client_token()?;
        if let Some(t) = &spec.client_token {
            // Scoped to the caller (SPEC §9): another user's token is a different token.
            spec.client_token = Some(super::tokens::scoped(t, spec.submitter.as_deref()));
        }
        let token = spec.client_token.clone();
        if let Some(t) = &token
            && let Some(id) = self
                .tokens
                .lookup(t, self.persist.as_ref().map(|p| &p.store))
        {
            tracing::info!(job = %id, "submit retried with the same client token");
            return Ok(id);
        }
        // One user's jobs not yet ended are capped (SPEC §9); an array's children count,
        // its parent (never scheduled) does not.
        let jobs = spec.array_properties.map_or(1, |a| u64::from(a.size));
        if let Some(sub) = spec.submitter.clone() {
            let most = self.access.limits.max_queued_jobs_per_user;
            let has = self.per_user.get(&sub.uid).copied().unwrap_or(0);
            if has + jobs > most {
                return Err(Refusal::UserLimit {
                    user: sub.name.clone(),
                    has,
                    asks: jobs,
                    most,
                });
            }
        }
        // One user's bytes on the state filesystem are capped too, long before the
        // reserve: their jobs' commands and envs, and their logs.
        let rows = spec.array_properties.map_or(1, |a| u64::from(a.size) + 1);
        let data = (spec.carried_bytes() as u64 + 512).saturating_mul(rows);
        if let Some(sub) = &spec.submitter {
            let budget = self
                .access
                .limits
                .max_data_mib_per_user
                .saturating_mul(1 << 20);
            let held = self.data_per_user.get(&sub.uid).copied().unwrap_or(0)
                + self.exec.log_budget.held(sub.uid);
            if held.saturating_add(data) > budget {
                return Err(Refusal::UserData {
                    user: sub.name.clone(),
                    held,
                    budget,
                });
            }
        }
        let uid = spec.submitter.as_ref().map(|s| s.uid);
        let submitter = spec.submitter.as_deref().cloned();
        let id = self.sched.submit(spec, now)?;
        if let Some(uid) = uid {
            *self.per_user.entry(uid).or_default() += jobs;
            *self.data_per_user.entry(uid).or_default() += data;
        }
        if let Some(sub) = submitter {
            self.user_names.entry(sub.uid).or_insert(sub.name);
        }
        if let Some(t) = token {
            self.tokens.remember(t, id);
        }
        Ok(id)
    }

    /// Why a new config cannot be applied by this running scheduler: an executor it
    /// cannot carry out, or a different executor than the one it started with.
    fn executor_refusal(&self, loaded: &LoadedConfig) -> Option<crate::config::ConfigError> {
        if let Some(e) = crate::exec::choice::unavailable(loaded) {
            return Some(e);
        }
        (loaded.config.executor() != self.executor).then(|| {
            crate::config::ConfigError::new(
                "executor: changing the executor (or its partition or start) takes a restart of `shareq serve`; the running one stays",
            )
            .field("executor")
        })
    }

    pub(super) fn apply_config(&mut self, update: ConfigUpdate, now: i64) {
        let update = match update {
            ConfigUpdate::Applied(loaded) => match self.executor_refusal(&loaded) {
                Some(e) => ConfigUpdate::Rejected(vec![e]),
                None => ConfigUpdate::Applied(loaded),
            },
            other => other,
        };
        match update {
            ConfigUpdate::Applied(loaded) => {
                let (mut capacity, warnings) = self.opts.discovery.capacity(&loaded.config);
                for w in &warnings {
                    tracing::warn!("{w}");
                }
                for c in &mut capacity {
                    c.devices
                        .retain(|d| !self.lost_devices.contains_key(&(c.unit.clone(), *d)));
                }
                // What the change does to the jobs, worked out on a copy of the state before
                // it, off this task (the console shows it with the config's status).
                let before = self.sched.clone();
                self.sched.apply_config(&loaded.config, &capacity, now);
                self.fake_devices = super::devices_of(&capacity, &loaded, true)
                    .into_iter()
                    .collect();
                self.config.effects = None;
                self::forecasts::config_effects(
                    before,
                    &loaded,
                    capacity.clone(),
                    now,
                    &self.inputs.clone(),
                );
                self.exec.log_limits = loaded.config.env.logs.unwrap_or_default();
                self.exec.pids_per_job = loaded.config.env.limits.unwrap_or_default().pids_per_job;
                self.exec.mig = self.opts.discovery.mig_units(&loaded.config);
                self.access = Arc::new(crate::access::Access::new(&loaded.config));
                self.picture.touch_all();
                if let Some(p) = &mut self.persist {
                    p.retain_days = retain_days(&loaded);
                    if p.config_hash.as_deref() != Some(loaded.hash.as_str()) {
                        let source = self.opts.config_dir.display().to_string();
                        let recorded = off_the_async_workers(|| {
                            let docs = loaded.documents();
                            p.store
                                .record_config(&loaded.hash, &source, docs.as_deref(), now)
                        });
                        match recorded {
                            Ok(()) => p.config_hash = Some(loaded.hash.clone()),
                            Err(e) => tracing::warn!("cannot record the applied config: {e}"),
                        }
                    }
                }
                self.refused_config = None;
                let user_labels = loaded.config.env.metrics.as_ref();
                self.metrics
                    .show_user_labels(user_labels.is_some_and(|m| m.user_labels));
                self.config.applied_at = Some(now);
                self.config.hash = Some(loaded.hash);
                self.config.error = None;
                self.config.error_at = None;
                tracing::info!("config applied");
            }
            ConfigUpdate::Rejected(errors) => {
                let text = errors_text(&errors);
                tracing::warn!("config rejected, the previous one stays in force: {text}");
                self.sched.config_rejected(text.clone(), now);
                self.config.error = Some(text);
                self.config.error_at = Some(now);
            }
        }
    }
}

/// `put_config` off the runtime task: validate and write the file (`config_write`); a
/// written one is reloaded as `reload` reloads (`Reloaded`, answered once applied), and
/// the answer says what was written.
async fn put_config(
    dir: PathBuf,
    file: String,
    text: String,
    dry_run: bool,
    inputs: mpsc::UnboundedSender<Input>,
    reply: oneshot::Sender<Result<super::config_write::ConfigWritten, Refusal>>,
) {
    let d = dir.clone();
    let put =
        tokio::task::spawn_blocking(move || super::config_write::put(&d, &file, &text, dry_run))
            .await
            .unwrap_or_else(|e| Err(Refusal::Config(format!("writing the config failed: {e}"))));
    let written = match put {
        Ok(w) if w.written => w,
        other => {
            let _ = reply.send(other);
            return;
        }
    };
    let (loaded, hash) = tokio::task::spawn_blocking(move || read_dir(&dir))
        .await
        .unwrap_or_else(|e| {
            let why = format!("reading the config failed: {e}");
            (Err(vec![crate::config::ConfigError::new(why)]), None)
        });
    let (tx, rx) = oneshot::channel();
    let report = ExecKind::Reloaded {
        loaded,
        hash,
        reply: Some(tx),
    };
    if inputs.send(Input::Exec(ExecReport(report))).is_err() {
        let _ = reply.send(Err(Refusal::Stopped(
            "the scheduler stopped before it reloaded the config".into(),
        )));
        return;
    }
    let answer = match rx.await {
        Ok(Ok(())) => Ok(written),
        // Changed between the check and the reload (another writer), or a config this
        // build cannot carry out: the file stays written, and the answer says so.
        Ok(Err(Refusal::Config(errors))) => Err(Refusal::Config(format!(
            "{} was written, but the directory was refused when reloaded (the previous \
             config stays in force):\n{errors}",
            written.path
        ))),
        Ok(Err(refusal)) => Err(refusal),
        Err(_) => Err(Refusal::Stopped(
            "the scheduler stopped before it reloaded the config".into(),
        )),
    };
    let _ = reply.send(answer);
}
