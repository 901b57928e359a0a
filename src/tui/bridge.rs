//! Connects the console to the live runtime: each [`Action`] becomes a runtime
//! [`Input`], and the answers an operator must see (a refused submission, a failed cancel,
//! priority change or reload) come back as [`Notice`]s for the console's footer, the
//! utilisation history the `h` view asked for as [`Feed::History`].

use super::action::Action;
use crate::access::Caller;
use crate::model::JobId;
use crate::server::Input;
use crate::server::Refusal;
use crate::server::runtime::audit::{Audit, AuditEntry};
use crate::server::runtime::input::check_before_submit;
use crate::snapshot::usage::UsageHistory;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// A line for the footer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub text: String,
    pub error: bool,
}

/// What the runtime's answers bring back to the console.
#[derive(Debug, Clone, PartialEq)]
pub enum Feed {
    /// A line for the footer.
    Notice(Notice),
    /// The utilisation history of a window, for the `h` view.
    History(Result<UsageHistory, Refusal>),
    /// A prediction for the submit form, with the form key it answers.
    Prediction(Box<(String, crate::forecast::Prediction)>),
}

impl From<Notice> for Feed {
    fn from(n: Notice) -> Feed {
        Feed::Notice(n)
    }
}

/// The receiving end of the feed, in a form [`super::ConsoleOptions`] can carry (it is
/// taken once, by the console that runs).
#[derive(Debug, Clone, Default)]
pub struct NoticeFeed(Arc<Mutex<Option<mpsc::UnboundedReceiver<Feed>>>>);

impl NoticeFeed {
    pub fn new(rx: mpsc::UnboundedReceiver<Feed>) -> NoticeFeed {
        NoticeFeed(Arc::new(Mutex::new(Some(rx))))
    }

    pub fn take(&self) -> Option<mpsc::UnboundedReceiver<Feed>> {
        self.0.lock().ok().and_then(|mut g| g.take())
    }
}

/// How the console's session ended; the caller carries it out (e.g.
/// `RuntimeHandle::shutdown(stop_jobs)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Quit {
        stop_jobs: bool,
    },
    Detach,
    /// The console dropped its sender without saying (it failed).
    ConsoleGone,
    /// The runtime stopped taking inputs.
    RuntimeGone,
}

fn notice(notices: &mpsc::UnboundedSender<Feed>, text: String, error: bool) {
    let _ = notices.send(Feed::Notice(Notice { text, error }));
}

/// Forward the console's actions to the runtime until the console quits or detaches.
/// `user` is who cancels ("CANCELLED: by <user>").
/// Accepted actions go to `audit` (`Audit::off()` for a console attached to another
/// scheduler, whose socket records them).
pub async fn forward(
    mut actions: mpsc::Receiver<Action>,
    inputs: mpsc::UnboundedSender<Input>,
    user: String,
    notices: mpsc::UnboundedSender<Feed>,
    audit: Audit,
) -> Exit {
    let me = Caller::current();
    let submitter = std::sync::Arc::new(me.submitter());
    while let Some(action) = actions.recv().await {
        let n = notices.clone();
        let (audit, me) = (audit.clone(), me.clone());
        let record = move |what: &str, job: Option<JobId>, detail: String| {
            audit.record(AuditEntry::new(&me, what, job, detail));
        };
        let sent = match action {
            Action::Quit { stop_jobs } => return Exit::Quit { stop_jobs },
            Action::Detach => return Exit::Detach,
            Action::Submit(mut spec) => {
                // Jobs submitted at this keyboard belong to whoever sits at it (SPEC §9); an
                // attached console's socket stamps the same from the peer credentials.
                spec.submitter = Some(submitter.clone());
                let name = spec.job_name.clone();
                let detail = format!("{name} to {}", spec.quota_share_name);
                if let Err(refused) = check_before_submit(&spec).await {
                    notice(&n, format!("{name} refused: {refused}"), true);
                    continue;
                }
                let (tx, rx) = oneshot::channel();
                let sent = inputs.send(Input::Submit {
                    spec: *spec,
                    reply: Some(tx),
                });
                tokio::spawn(async move {
                    match rx.await {
                        Ok(Ok(id)) => {
                            record("submit", Some(id), detail);
                            notice(&n, format!("job {id} {name} submitted"), false)
                        }
                        Ok(Err(e)) => notice(&n, format!("{name} refused: {e}"), true),
                        Err(_) => {}
                    }
                });
                sent
            }
            Action::Predict { key, mut spec } => {
                spec.submitter = Some(submitter.clone());
                let (tx, rx) = oneshot::channel();
                let sent = inputs.send(Input::Predict {
                    spec: *spec,
                    reply: tx,
                });
                tokio::spawn(async move {
                    if let Ok(p) = rx.await {
                        let _ = n.send(Feed::Prediction(Box::new((key, p))));
                    }
                });
                sent
            }
            Action::Cancel(id) => {
                let (tx, rx) = oneshot::channel();
                let sent = inputs.send(Input::Cancel {
                    ids: vec![id],
                    by: user.clone(),
                    reply: Some(tx),
                });
                tokio::spawn(async move {
                    if let Ok(outcomes) = rx.await {
                        for o in outcomes {
                            match (o.error, o.cancelled) {
                                (Some(e), _) => notice(&n, format!("cancel {}: {e}", o.id), true),
                                (None, true) => {
                                    record("cancel", Some(o.id), String::new());
                                    notice(&n, format!("job {} cancelled", o.id), false)
                                }
                                (None, false) => {
                                    notice(&n, format!("job {} had already finished", o.id), true)
                                }
                            }
                        }
                    }
                });
                sent
            }
            Action::SetPriority(id, priority) => {
                let (tx, rx) = oneshot::channel();
                let sent = inputs.send(Input::SetPriority {
                    id,
                    priority,
                    by: user.clone(),
                    reply: Some(tx),
                });
                tokio::spawn(async move {
                    match rx.await {
                        Ok(Err(e)) => notice(&n, format!("priority of job {id}: {e}"), true),
                        Ok(Ok(false)) => notice(&n, format!("job {id} has already finished"), true),
                        Ok(Ok(true)) => {
                            record("priority", Some(id), format!("priority {priority}"))
                        }
                        Err(_) => {}
                    }
                });
                sent
            }
            Action::History(window) => {
                let (tx, rx) = oneshot::channel();
                let sent = inputs.send(Input::History { window, reply: tx });
                tokio::spawn(async move {
                    if let Ok(answer) = rx.await {
                        let _ = n.send(Feed::History(answer));
                    }
                });
                sent
            }
            Action::Reload => {
                let (tx, rx) = oneshot::channel();
                let sent = inputs.send(Input::Reload { reply: Some(tx) });
                tokio::spawn(async move {
                    match rx.await {
                        Ok(Ok(())) => {
                            record("reload", None, String::new());
                            notice(&n, "config re-read".into(), false)
                        }
                        Ok(Err(e)) => notice(&n, format!("reload refused: {e}"), true),
                        Err(_) => {}
                    }
                });
                sent
            }
        };
        if sent.is_err() {
            return Exit::RuntimeGone;
        }
    }
    Exit::ConsoleGone
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobSpec;

    /// A stand-in runtime that answers like the real one.
    fn fake_runtime(mut rx: mpsc::UnboundedReceiver<Input>) {
        tokio::spawn(async move {
            while let Some(input) = rx.recv().await {
                match input {
                    Input::Submit { spec, reply } => {
                        // The console's user owns what it submits.
                        let me = Caller::current();
                        assert_eq!(
                            spec.submitter.as_deref().map(|s| (s.name.as_str(), s.uid)),
                            Some((me.name.as_str(), me.uid))
                        );
                        let answer = if spec.quota_share_name == "nope" {
                            Err(Refusal::Rejected(crate::sched::Rejection::UnknownShare {
                                share: "nope".into(),
                                known: vec!["a".into()],
                            }))
                        } else {
                            Ok(JobId(7))
                        };
                        let _ = reply.map(|r| r.send(answer));
                    }
                    Input::Cancel { ids, by, reply } => {
                        assert_eq!(by, "alice");
                        let out = ids
                            .into_iter()
                            .map(|id| crate::server::CancelOutcome {
                                id,
                                cancelled: id.0 == 7,
                                error: None,
                            })
                            .collect();
                        let _ = reply.map(|r| r.send(out));
                    }
                    Input::SetPriority { reply, .. } => {
                        let out_of_range = crate::sched::PriorityError::OutOfRange {
                            priority: 10_000,
                            max: 9999,
                        };
                        let _ = reply.map(|r| r.send(Err(out_of_range.into())));
                    }
                    Input::Reload { reply } => {
                        let bad = Refusal::Config("qs.yaml:3:1: bad".to_string());
                        let _ = reply.map(|r| r.send(Err(bad)));
                    }
                    Input::History { window, reply } => {
                        let unread = format!("no {} here", window.label());
                        let _ = reply.send(Err(Refusal::HistoryUnreadable(unread)));
                    }
                    _ => {}
                }
            }
        });
    }

    #[tokio::test]
    async fn actions_become_inputs_and_answers_become_notices() {
        let (act_tx, act_rx) = mpsc::channel(8);
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let (n_tx, mut n_rx) = mpsc::unbounded_channel();
        fake_runtime(in_rx);
        let task = tokio::spawn(forward(act_rx, in_tx, "alice".into(), n_tx, Audit::off()));
        let mut next = async || match n_rx.recv().await.unwrap() {
            Feed::Notice(n) => n,
            other => panic!("not a notice: {other:?}"),
        };
        act_tx
            .send(Action::Submit(Box::new(JobSpec::new("a", "qs1", 1, 0))))
            .await
            .unwrap();
        assert_eq!(
            next().await,
            Notice {
                text: "job 7 a submitted".into(),
                error: false,
            }
        );
        act_tx
            .send(Action::Submit(Box::new(JobSpec::new("b", "nope", 1, 0))))
            .await
            .unwrap();
        assert_eq!(
            next().await.text,
            "b refused: quota share `nope` does not exist (shares: a)"
        );
        act_tx.send(Action::Cancel(JobId(7))).await.unwrap();
        assert_eq!(next().await.text, "job 7 cancelled");
        act_tx.send(Action::Cancel(JobId(8))).await.unwrap();
        assert!(next().await.error);
        act_tx.send(Action::SetPriority(JobId(7), 3)).await.unwrap();
        assert_eq!(
            next().await.text,
            "priority of job 7: priority 10000 is out of range 0..9999"
        );
        act_tx.send(Action::Reload).await.unwrap();
        assert_eq!(next().await.text, "reload refused: qs.yaml:3:1: bad");
        act_tx
            .send(Action::History(crate::snapshot::usage::Window::Day))
            .await
            .unwrap();
        assert_eq!(
            n_rx.recv().await.unwrap(),
            Feed::History(Err(Refusal::HistoryUnreadable("no day here".into())))
        );
        act_tx.send(Action::Quit { stop_jobs: true }).await.unwrap();
        assert_eq!(task.await.unwrap(), Exit::Quit { stop_jobs: true });
    }

    #[tokio::test]
    async fn a_stopped_runtime_or_console_ends_forwarding() {
        let (act_tx, act_rx) = mpsc::channel(8);
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        drop(in_rx);
        let (n_tx, _n_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(forward(act_rx, in_tx, "u".into(), n_tx, Audit::off()));
        act_tx.send(Action::Reload).await.unwrap();
        assert_eq!(task.await.unwrap(), Exit::RuntimeGone);
        let (act_tx, act_rx) = mpsc::channel::<Action>(8);
        let (in_tx, _in_rx) = mpsc::unbounded_channel();
        let (n_tx, _n_rx) = mpsc::unbounded_channel();
        drop(act_tx);
        assert_eq!(
            forward(act_rx, in_tx, "u".into(), n_tx, Audit::off()).await,
            Exit::ConsoleGone
        );
    }
}
