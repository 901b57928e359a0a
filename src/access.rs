//! Who is asking and what they may do (SPEC §9). The caller comes from the kernel's peer
//! credentials, their name and groups from the user database; [`Access`] holds the rules
//! of the config in force and answers every question with `Ok` or a [`Denied`] that names
//! the user, the action and the rule. The socket and the console ask the same functions,
//! so a refusal reads the same everywhere.

use crate::model::ValidConfig;
use crate::model::{JobId, Submitter};
use nix::unistd::{Gid, Group, Uid, User};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The exit code of every CLI command whose request the scheduler refused as not allowed.
pub const EXIT_NOT_ALLOWED: u8 = 3;

/// The person on the other end of a connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub uid: u32,
    /// The user name, or `uid N` when the user database does not know the uid.
    pub name: String,
    /// Names of the primary and supplementary groups.
    pub groups: Vec<String>,
}

impl Caller {
    /// Look a uid (and its primary gid, as the kernel reported it) up in the user database.
    pub fn lookup(uid: u32, gid: u32) -> Caller {
        let user = User::from_uid(Uid::from_raw(uid)).ok().flatten();
        let name = user
            .as_ref()
            .map_or_else(|| format!("uid {uid}"), |u| u.name.clone());
        let mut gids = vec![Gid::from_raw(gid)];
        if let Some(u) = &user {
            gids.push(u.gid);
            if let Ok(cname) = std::ffi::CString::new(u.name.clone())
                && let Ok(more) = nix::unistd::getgrouplist(&cname, u.gid)
            {
                gids.extend(more);
            }
        }
        gids.sort_by_key(|g| g.as_raw());
        gids.dedup();
        let groups = gids
            .into_iter()
            .filter_map(|g| Group::from_gid(g).ok().flatten().map(|g| g.name))
            .collect();
        Caller { uid, name, groups }
    }

    /// [`Caller::lookup`] as the scheduler's socket does it for every connection: from a
    /// cache while the answer is fresh ([`CALLER_FRESH`]) and neither `/etc/passwd` nor
    /// `/etc/group` changed since; `None` when it must be looked up again (blocking:
    /// the user database may be a network service), which [`Caller::remember`] stores.
    pub fn cached(uid: u32, gid: u32) -> Option<Caller> {
        let cache = CALLERS.lock().unwrap_or_else(|p| p.into_inner());
        let (caller, at, files) = cache.get(&(uid, gid))?;
        (at.elapsed() < CALLER_FRESH && *files == user_files()).then(|| caller.clone())
    }

    /// Look the caller up, and keep the answer for [`Caller::cached`].
    pub fn remember(uid: u32, gid: u32) -> Caller {
        let files = user_files();
        let caller = Caller::lookup(uid, gid);
        let mut cache = CALLERS.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CALLERS_KEPT {
            cache.retain(|_, (_, at, _)| at.elapsed() < CALLER_FRESH);
        }
        cache.insert(
            (uid, gid),
            (caller.clone(), std::time::Instant::now(), files),
        );
        caller
    }

    /// This process (the scheduler itself, or a console at the keyboard).
    pub fn current() -> Caller {
        Caller::lookup(
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        )
    }

    /// The owner a job submitted by this caller records.
    pub fn submitter(&self) -> Submitter {
        Submitter {
            name: self.name.clone(),
            uid: self.uid,
        }
    }

    /// Is the caller named by `principal` (`name` or `@group`)?
    fn is(&self, principal: &str) -> bool {
        match principal.strip_prefix('@') {
            Some(g) => self.groups.iter().any(|mine| mine == g),
            None => principal == self.name,
        }
    }
}

/// How long the socket trusts a caller's name and groups without asking the user
/// database again: a change made with `usermod` or in a directory service is seen within
/// this time, one made to `/etc/passwd` or `/etc/group` at once (their change is looked
/// for on every connection). Looking a user up reads both files (or asks a service) on
/// every request otherwise: a third of the socket's cost per submit (docs/PERFORMANCE.md).
pub const CALLER_FRESH: std::time::Duration = std::time::Duration::from_secs(5);

/// At most this many callers are kept; past it the stale ones go.
const CALLERS_KEPT: usize = 4096;

/// What a cached caller was looked up against: the modification time, size and inode of
/// `/etc/passwd` and `/etc/group` (`None` for one that cannot be read).
type UserFiles = [Option<(std::time::SystemTime, u64, u64)>; 2];

fn user_files() -> UserFiles {
    use std::os::unix::fs::MetadataExt;
    ["/etc/passwd", "/etc/group"].map(|f| {
        std::fs::metadata(f).ok().map(|m| {
            (
                m.modified().unwrap_or(std::time::UNIX_EPOCH),
                m.len(),
                m.ino(),
            )
        })
    })
}

type CallerCache = std::collections::HashMap<(u32, u32), (Caller, std::time::Instant, UserFiles)>;

static CALLERS: std::sync::LazyLock<std::sync::Mutex<CallerCache>> =
    std::sync::LazyLock::new(Default::default);

/// An action on one job that only its owner and admins may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobAction {
    Cancel,
    Priority,
    Log,
}

impl JobAction {
    fn words(self, id: JobId) -> String {
        match self {
            JobAction::Cancel => format!("cancel job {id}"),
            JobAction::Priority => format!("change the priority of job {id}"),
            JobAction::Log => format!("read the log of job {id}"),
        }
    }
}

/// A refusal: "bob may not cancel job 12: it belongs to alice (admins: carol, @ops)".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(pub String);

/// The rules in force: who the scheduler is, its admins and each share's members.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    pub scheduler_uid: u32,
    pub scheduler_user: String,
    /// The environment's `admins` (users and `@groups`).
    #[serde(default)]
    pub admins: Vec<String>,
    /// `members` of each share that has them (a share not listed lets everyone submit).
    #[serde(default)]
    pub members: BTreeMap<String, Vec<String>>,
    /// What one user may hold of the scheduler (`limits`, SPEC §9).
    #[serde(default)]
    pub limits: crate::model::UserLimits,
}

impl Access {
    /// The rules of a config, for a scheduler running as this process's user.
    pub fn new(config: &ValidConfig) -> Access {
        let uid = nix::unistd::geteuid().as_raw();
        let scheduler_user = User::from_uid(Uid::from_raw(uid))
            .ok()
            .flatten()
            .map_or_else(|| format!("uid {uid}"), |u| u.name);
        Access::with_scheduler(config, uid, scheduler_user)
    }

    pub fn with_scheduler(config: &ValidConfig, uid: u32, user: String) -> Access {
        Access {
            scheduler_uid: uid,
            scheduler_user: user,
            admins: config.env.admins.clone().unwrap_or_default(),
            members: config
                .shares
                .iter()
                .filter_map(|s| Some((s.quota_share_name.clone(), s.members.clone()?)))
                .collect(),
            limits: config.env.limits.unwrap_or_default(),
        }
    }

    /// Root, the scheduler's own user, and whoever `admins` names.
    pub fn is_admin(&self, c: &Caller) -> bool {
        c.uid == 0 || c.uid == self.scheduler_uid || self.admins.iter().any(|p| c.is(p))
    }

    /// "(admins: carol, @ops)": who could do it instead.
    fn admins_note(&self) -> String {
        let mut who: Vec<&str> = self.admins.iter().map(String::as_str).collect();
        if who.is_empty() {
            who.push("root");
            if self.scheduler_uid != 0 {
                who.push(&self.scheduler_user);
            }
        }
        format!("(admins: {})", who.join(", "))
    }

    pub fn may_submit(&self, c: &Caller, share: &str) -> Result<(), Denied> {
        if self.scheduler_uid != 0 && c.uid != self.scheduler_uid && c.uid != 0 {
            return Err(Denied(format!(
                "{} may not submit to {share}: this scheduler runs as {} (not root), so it runs \
                 jobs only as {} and accepts submissions only from {} and root",
                c.name, self.scheduler_user, self.scheduler_user, self.scheduler_user
            )));
        }
        if self.is_admin(c) {
            return Ok(());
        }
        match self.members.get(share) {
            Some(m) if !m.iter().any(|p| c.is(p)) => Err(Denied(format!(
                "{} may not submit to {share}: members are {}",
                c.name,
                if m.is_empty() {
                    "nobody (`members: []`)".to_string()
                } else {
                    m.join(", ")
                }
            ))),
            _ => Ok(()),
        }
    }

    /// Cancel, priority, log: the job's owner and admins.
    pub fn may_touch(
        &self,
        c: &Caller,
        action: JobAction,
        id: JobId,
        owner: Option<&Submitter>,
    ) -> Result<(), Denied> {
        if self.is_admin(c) || owner.is_some_and(|o| o.uid == c.uid) {
            return Ok(());
        }
        let whose = match owner {
            Some(o) => format!("it belongs to {}", o.name),
            None => "it has no recorded owner".to_string(),
        };
        Err(Denied(format!(
            "{} may not {}: {whose} {}",
            c.name,
            action.words(id),
            self.admins_note()
        )))
    }

    /// Reload, the audit trail: admins only. `what` is e.g. "reload the config".
    pub fn may_administer(&self, c: &Caller, what: &str) -> Result<(), Denied> {
        if self.is_admin(c) {
            return Ok(());
        }
        Err(Denied(format!(
            "{} may not {what}: only admins may {}",
            c.name,
            self.admins_note()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_is_looked_up_once_while_fresh_and_again_when_the_user_files_change() {
        // A uid no other test asks for, so the shared cache starts without it.
        let (uid, gid) = (4_000_123, 4_000_123);
        assert_eq!(Caller::cached(uid, gid), None);
        let looked = Caller::remember(uid, gid);
        assert_eq!(looked, Caller::lookup(uid, gid));
        assert_eq!(looked.name, format!("uid {uid}"));
        assert_eq!(Caller::cached(uid, gid), Some(looked.clone()));
        // Another primary group is another caller.
        assert_eq!(Caller::cached(uid, gid + 1), None);
        // Looked up against other user files (as after `useradd`): asked again.
        CALLERS.lock().unwrap().get_mut(&(uid, gid)).unwrap().2 = [None, None];
        assert_eq!(Caller::cached(uid, gid), None);
        // And once stale.
        Caller::remember(uid, gid);
        CALLERS.lock().unwrap().get_mut(&(uid, gid)).unwrap().1 =
            std::time::Instant::now() - CALLER_FRESH;
        assert_eq!(Caller::cached(uid, gid), None);
    }

    fn caller(uid: u32, name: &str, groups: &[&str]) -> Caller {
        Caller {
            uid,
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn access(admins: &[&str], members: &[(&str, &[&str])]) -> Access {
        Access {
            scheduler_uid: 0,
            scheduler_user: "root".into(),
            admins: admins.iter().map(|a| a.to_string()).collect(),
            members: members
                .iter()
                .map(|(s, m)| (s.to_string(), m.iter().map(|x| x.to_string()).collect()))
                .collect(),
            limits: Default::default(),
        }
    }

    #[test]
    fn refusals_name_the_user_the_action_and_the_rule() {
        let a = access(&["carol", "@ops"], &[("qs3", &["alice", "@vision"])]);
        let bob = caller(1002, "bob", &["bob"]);
        let alice = Submitter {
            name: "alice".into(),
            uid: 1001,
        };
        assert_eq!(
            a.may_touch(&bob, JobAction::Cancel, JobId(12), Some(&alice))
                .unwrap_err()
                .0,
            "bob may not cancel job 12: it belongs to alice (admins: carol, @ops)"
        );
        assert_eq!(
            a.may_submit(&bob, "qs3").unwrap_err().0,
            "bob may not submit to qs3: members are alice, @vision"
        );
        assert!(a.may_submit(&bob, "qs1").is_ok(), "no members: everyone");
        let vision = caller(1003, "dan", &["dan", "vision"]);
        assert!(a.may_submit(&vision, "qs3").is_ok());
        assert!(
            a.may_administer(&bob, "reload the config")
                .unwrap_err()
                .0
                .starts_with("bob may not reload the config: only admins may")
        );
    }

    #[test]
    fn admins_are_root_the_scheduler_and_the_listed() {
        let mut a = access(&["carol", "@ops"], &[]);
        a.scheduler_uid = 500;
        assert!(a.is_admin(&caller(0, "root", &[])));
        assert!(a.is_admin(&caller(500, "sam", &[])));
        assert!(a.is_admin(&caller(7, "carol", &[])));
        assert!(a.is_admin(&caller(8, "eve", &["ops"])));
        assert!(!a.is_admin(&caller(9, "bob", &["bob"])));
        let owner = Submitter {
            name: "bob".into(),
            uid: 9,
        };
        let bob = caller(9, "bob", &[]);
        assert!(
            a.may_touch(&bob, JobAction::Log, JobId(1), Some(&owner))
                .is_ok()
        );
        assert!(
            a.may_touch(
                &caller(8, "eve", &["ops"]),
                JobAction::Priority,
                JobId(1),
                Some(&owner)
            )
            .is_ok()
        );
    }

    #[test]
    fn a_personal_scheduler_takes_jobs_only_from_its_user_and_root() {
        let mut a = access(&["carol"], &[]);
        a.scheduler_uid = 500;
        a.scheduler_user = "sam".into();
        let e = a.may_submit(&caller(7, "carol", &[]), "qs1").unwrap_err();
        assert!(e.0.contains("runs jobs only as sam"), "{e}");
        assert!(a.may_submit(&caller(500, "sam", &[]), "qs1").is_ok());
        assert!(a.may_submit(&caller(0, "root", &[]), "qs1").is_ok());
    }
}
