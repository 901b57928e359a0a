//! A gang's attempt as the Slurm executor watches it (SPEC §16): one Slurm job with one
//! supervisor per node, each reporting for its rank. What the ranks say comes together
//! here: the attempt runs once every rank has reported in; it ends once every rank has
//! its status, as the first failure (else success); when one rank fails, or its
//! supervisor is lost, the others are told to stop (and cancelled outright if they
//! outlast their grace), so that the attempt ends as one.

use crate::exec::ExitStatus;
use crate::exec::state::runfiles::gang_status;
use std::time::{Duration, Instant};

/// How long a rank's supervisor may stay away (its connection ended without its exit
/// status) before it counts as lost (255): a live one that dropped its connection makes
/// it again a second later, when it next has something to send.
pub(crate) const GONE_LIMIT: Duration = Duration::from_secs(5);
/// After a restart, how long an adopted rank has to connect to the new scheduler: an idle
/// supervisor speaks at least every `report::BEAT_EVERY`.
pub(crate) const ADOPTED_LIMIT: Duration =
    Duration::from_secs(crate::exec::supervisor::report::BEAT_EVERY.as_secs() + 10);
/// How long past their grace the other ranks of a failed gang may run before their job is
/// cancelled outright.
const BACKSTOP: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Default)]
struct Rank {
    reported: bool,
    exit: Option<ExitStatus>,
    /// Since when it has been away, and for how long it may be.
    away: Option<(Instant, Duration)>,
}

/// Every rank of one gang attempt.
#[derive(Debug, Clone)]
pub(crate) struct GangWatch {
    /// Each rank's node, rank 0 first.
    pub(crate) nodes: Vec<String>,
    ranks: Vec<Rank>,
    grace: Duration,
    /// When the other ranks were told to stop (one failed or was lost).
    stopping: Option<Instant>,
    killed: bool,
    /// Some rank's supervisor was lost: what it left in its allocation is taken back.
    lost: bool,
}

/// What a look at the gang asks of the executor.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Due {
    /// SIGTERM to every rank (the supervisors' stop path, with its grace).
    pub(crate) stop_others: bool,
    /// Cancel the gang's job outright (the others outlasted their grace).
    pub(crate) kill: bool,
    /// The attempt ended so.
    pub(crate) ended: Option<ExitStatus>,
}

impl GangWatch {
    pub(crate) fn new(nodes: Vec<String>, grace_seconds: u32) -> GangWatch {
        GangWatch {
            ranks: vec![Rank::default(); nodes.len()],
            nodes,
            grace: Duration::from_secs(u64::from(grace_seconds)),
            stopping: None,
            killed: false,
            lost: false,
        }
    }

    /// Adopted after a restart: every rank runs (the runtime says so) and must connect to
    /// this scheduler within [`ADOPTED_LIMIT`].
    pub(crate) fn adopted(nodes: Vec<String>, grace_seconds: u32, now: Instant) -> GangWatch {
        let mut g = GangWatch::new(nodes, grace_seconds);
        for r in &mut g.ranks {
            r.reported = true;
            r.away = Some((now, ADOPTED_LIMIT));
        }
        g
    }

    /// A rank's supervisor claimed its part (again, after a reconnect). True when this
    /// makes every rank reported in.
    pub(crate) fn started(&mut self, rank: u32) -> bool {
        let before = self.all_reported();
        if let Some(r) = self.ranks.get_mut(rank as usize) {
            r.reported = true;
            r.away = None;
        }
        !before && self.all_reported()
    }

    pub(crate) fn all_reported(&self) -> bool {
        self.ranks.iter().all(|r| r.reported)
    }

    /// A rank's exit status (heard, or read from its record).
    pub(crate) fn exited(&mut self, rank: u32, status: ExitStatus) {
        if let Some(r) = self.ranks.get_mut(rank as usize) {
            r.exit.get_or_insert(status);
            r.away = None;
        }
    }

    /// A rank's record was found claimed.
    pub(crate) fn claimed(&mut self, rank: u32) {
        if let Some(r) = self.ranks.get_mut(rank as usize) {
            r.reported = true;
        }
    }

    /// A rank's connection ended without its exit status.
    pub(crate) fn gone(&mut self, rank: u32, now: Instant) {
        if let Some(r) = self.ranks.get_mut(rank as usize)
            && r.exit.is_none()
        {
            r.away = Some((now, GONE_LIMIT));
        }
    }

    /// Slurm no longer has the gang's job: every rank without a status is lost.
    pub(crate) fn lose_the_rest(&mut self) {
        for r in self.ranks.iter_mut().filter(|r| r.exit.is_none()) {
            r.exit = Some(ExitStatus::ended_now(255));
            self.lost = true;
        }
    }

    /// How the attempt ended, once every rank has its status.
    pub(crate) fn ended(&self) -> Option<ExitStatus> {
        let all: Option<Vec<ExitStatus>> = self.ranks.iter().map(|r| r.exit).collect();
        gang_status(&all?)
    }

    pub(crate) fn lost_any(&self) -> bool {
        self.lost
    }

    /// The ranks now: those away too long are lost (255); the attempt ends once every
    /// rank has its status; a failed rank stops the others (`stop_asked`: a stop of the
    /// whole attempt is under way already), then their job is cancelled if they outlast
    /// their grace.
    pub(crate) fn due(&mut self, now: Instant, stop_asked: bool) -> Due {
        for (i, r) in self.ranks.iter_mut().enumerate() {
            if let Some((since, limit)) = r.away
                && r.exit.is_none()
                && now.saturating_duration_since(since) >= limit
            {
                tracing::warn!(
                    rank = i,
                    "a gang rank's supervisor is gone without its exit status: lost"
                );
                r.exit = Some(ExitStatus::ended_now(255));
                r.away = None;
                self.lost = true;
            }
        }
        let mut due = Due {
            ended: self.ended(),
            ..Due::default()
        };
        if due.ended.is_some() {
            return due;
        }
        let failed = self
            .ranks
            .iter()
            .any(|r| r.exit.is_some_and(|s| s.code != 0));
        match self.stopping {
            None if failed => {
                self.stopping = Some(now);
                due.stop_others = !stop_asked;
            }
            Some(since)
                if !self.killed
                    && now.saturating_duration_since(since) >= self.grace + BACKSTOP =>
            {
                self.killed = true;
                due.kill = true;
            }
            _ => {}
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: i32, at: i64) -> ExitStatus {
        ExitStatus {
            code,
            finished_at: at,
            ..ExitStatus::default()
        }
    }

    #[test]
    fn a_gang_runs_when_every_rank_reported_and_succeeds_when_every_rank_exited_0() {
        let mut g = GangWatch::new(vec!["n1".into(), "n2".into()], 5);
        let t = Instant::now();
        assert!(!g.started(1));
        assert!(g.started(0), "the last rank in makes it run");
        assert!(!g.started(0), "once");
        g.exited(0, exit(0, 10));
        assert_eq!(g.due(t, false), Due::default(), "rank 1 still runs");
        g.exited(1, exit(0, 12));
        let end = g.due(t, false).ended.unwrap();
        assert_eq!((end.code, end.finished_at), (0, 12));
    }

    #[test]
    fn one_failed_rank_stops_the_others_once_and_its_failure_is_the_gangs() {
        let mut g = GangWatch::new(vec!["n1".into(), "n2".into(), "n3".into()], 2);
        let t = Instant::now();
        g.exited(1, exit(3, 10));
        let d = g.due(t, false);
        assert!(d.stop_others && !d.kill && d.ended.is_none(), "{d:?}");
        assert_eq!(g.due(t + Duration::from_secs(1), false), Due::default());
        // Past the grace and the backstop: cancelled outright, once.
        assert!(g.due(t + Duration::from_secs(12), false).kill);
        assert!(!g.due(t + Duration::from_secs(13), false).kill);
        g.exited(0, exit(143, 11));
        g.exited(2, exit(143, 11));
        let end = g.due(t, false).ended.unwrap();
        assert_eq!((end.code, end.finished_at), (3, 11));
        // A stop of the whole attempt under way: the others are not told again.
        let mut h = GangWatch::new(vec!["n1".into(), "n2".into()], 2);
        h.exited(0, exit(143, 10));
        assert!(!h.due(t, true).stop_others);
    }

    #[test]
    fn a_rank_away_too_long_is_lost_and_a_reconnect_in_time_is_not() {
        let mut g = GangWatch::new(vec!["n1".into(), "n2".into()], 0);
        let t = Instant::now();
        g.started(0);
        g.started(1);
        g.gone(1, t);
        assert!(g.due(t + Duration::from_secs(1), false).ended.is_none());
        g.started(1);
        assert!(!g.due(t + GONE_LIMIT, false).stop_others, "it came back");
        g.gone(1, t);
        let d = g.due(t + GONE_LIMIT, false);
        assert!(d.stop_others && g.lost_any(), "{d:?}");
        g.exited(0, exit(143, i64::MAX));
        assert_eq!(g.due(t, false).ended.map(|e| e.code), Some(255));
        // Adopted ranks that never connect again are lost too.
        let mut a = GangWatch::adopted(vec!["n1".into(), "n2".into()], 0, t);
        a.started(0);
        assert!(!a.due(t + GONE_LIMIT, false).stop_others);
        assert!(a.due(t + ADOPTED_LIMIT, false).stop_others);
    }
}
