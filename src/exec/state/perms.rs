//! The state directory's permissions (SPEC §9): it belongs to the scheduler's user and is
//! never writable by group or others; everything in it is private (0600/0700) except the
//! socket; and nothing in it is followed through a symbolic link. Job logs too belong to
//! the scheduler (SPEC §7): the supervisor writes them from the job's output pipe, so a
//! job cannot create or grow files on the state filesystem; their owners read them
//! through the scheduler (`shareq log`).
//!
//! [`prepare`] checks (and tightens) the directory, its `logs/` and `runs/` folders and the
//! files a scheduler opens by name, before anything is opened. [`open_job_log`] is how the
//! supervisor opens an attempt's log: relative to a directory handle, `O_NOFOLLOW` at
//! every step, owned by the scheduler's user.

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, fchmod, fstat, mkdirat};
use nix::unistd::{Uid, fchown};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Files the scheduler opens by name in its state directory.
const PRIVATE_FILES: &[&str] = &[
    "shareq.db",
    "shareq.db-wal",
    "shareq.db-shm",
    "shareq.lock",
    "shareq.log",
];

fn refuse(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, msg)
}

fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| format!("uid {uid}"), |u| u.name)
}

/// Is this a directory (or file) we may trust: ours (or root's), not writable by group or
/// others? `what` names it in the refusal.
fn check_owned(path: &Path, meta: &std::fs::Metadata, what: &str) -> io::Result<()> {
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(refuse(format!(
            "{what} {} belongs to {} (uid {}), not to {} who runs this scheduler: use a \
             directory of your own, or `chown -R {} {}`",
            path.display(),
            user_name(meta.uid()),
            meta.uid(),
            user_name(me),
            user_name(me),
            path.display()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(refuse(format!(
            "{what} {} is writable by group or others (mode {mode:04o}), so another user could \
             replace what the scheduler reads there: run `chmod go-w {}`",
            path.display(),
            path.display()
        )));
    }
    Ok(())
}

/// The directories above the state directory (SPEC §8, as sshd checks the path to a key):
/// each must belong to root or to the scheduler's user and be writable by nobody else —
/// or else be sticky and root's, like `/tmp`, where nobody may rename another's entry. A
/// user who could write one of them could swap the state directory for one of their own.
fn check_parents(root: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let real = std::fs::canonicalize(root)?;
    let me = nix::unistd::geteuid().as_raw();
    for dir in real.ancestors().skip(1) {
        let m = std::fs::metadata(dir)?;
        let mode = m.mode() & 0o7777;
        let sticky = mode & 0o1000 != 0;
        let owner_ok = m.uid() == 0 || m.uid() == me;
        let writable_by_others = mode & 0o022 != 0;
        if !owner_ok {
            return Err(refuse(format!(
                "the state directory {} lies inside {}, which belongs to {} (uid {}): that user \
                 could replace the state directory; put it in a directory of root's or of {}",
                root.display(),
                dir.display(),
                user_name(m.uid()),
                m.uid(),
                user_name(me)
            )));
        }
        if writable_by_others && !(sticky && m.uid() == 0) {
            return Err(refuse(format!(
                "the state directory {} lies inside {}, which group or others may write (mode \
                 {mode:04o}): another user could replace the state directory; run `chmod go-w \
                 {}` or move the state directory",
                root.display(),
                dir.display(),
                dir.display()
            )));
        }
    }
    Ok(())
}

/// `lstat` that refuses a symbolic link.
fn no_link(path: &Path, what: &str) -> io::Result<Option<std::fs::Metadata>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(refuse(format!(
            "{what} {} is a symbolic link; shareq follows no link inside its state \
             directory: remove it (`rm {}`)",
            path.display(),
            path.display()
        ))),
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn set_mode(path: &Path, meta: &std::fs::Metadata, mode: u32) -> io::Result<()> {
    if meta.mode() & 0o7777 != mode && meta.uid() == nix::unistd::geteuid().as_raw() {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Create or check the state directory at `root` and its `logs/` and `runs/` folders.
/// `shared`: other local users reach the socket (a root scheduler, or `controlSocket.group`),
/// so the directory is 0711 (enter, not list) instead of 0700. Also sets this process's
/// umask to 077, so that everything it creates afterwards is private.
pub fn prepare(root: &Path, shared: bool) -> io::Result<()> {
    nix::sys::stat::umask(Mode::from_bits_truncate(0o077));
    let dir_mode = if shared { 0o711 } else { 0o700 };
    if !root.exists() {
        if let Some(parent) = root.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match std::fs::create_dir(root) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    // The state directory itself may be reached through a link (/var/lib/shareq → /data/…);
    // what it points at must pass the checks.
    let meta = std::fs::metadata(root)?;
    if !meta.is_dir() {
        return Err(refuse(format!("{} is not a directory", root.display())));
    }
    check_owned(root, &meta, "state directory")?;
    check_parents(root)?;
    set_mode(root, &meta, dir_mode)?;
    for (name, mode) in [("logs", 0o700), ("runs", 0o700)] {
        let path = root.join(name);
        match no_link(&path, "state folder")? {
            Some(m) if !m.is_dir() => {
                return Err(refuse(format!("{} is not a directory", path.display())));
            }
            Some(m) => {
                check_owned(&path, &m, "state folder")?;
                if name == "logs" && m.mode() & 0o044 != 0 {
                    // A state directory from before SPEC §9 (world-readable logs): close
                    // each job's folder too; the supervisor hands new ones to submitters.
                    close_children(&path)?;
                }
                set_mode(&path, &m, mode)?;
            }
            None => {
                std::fs::create_dir(&path)?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
            }
        }
    }
    for name in PRIVATE_FILES {
        let path = root.join(name);
        if let Some(m) = no_link(&path, "state file")? {
            check_owned(&path, &m, "state file")?;
            set_mode(&path, &m, 0o600)?;
        }
    }
    Ok(())
}

fn close_children(dir: &Path) -> io::Result<()> {
    let me = nix::unistd::geteuid().as_raw();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let Ok(m) = entry.path().symlink_metadata() else {
            continue;
        };
        if m.is_dir() && m.uid() == me && m.mode() & 0o077 != 0 {
            std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

/// Open a file for reading without following a link at its last step.
pub fn open_nofollow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_nofollow())
        .open(path)
}

fn libc_nofollow() -> i32 {
    OFlag::O_NOFOLLOW.bits()
}

/// Open (create, append) `logs_root/<job>/<file>` for the supervisor: no link followed at
/// any step, the job's folder (0700) and file (0600) owned by the scheduler's user. A
/// folder or file that exists and belongs to `earlier_owner` (a state directory from when
/// logs belonged to the submitter) is taken back; one that belongs to anyone else is
/// refused.
pub fn open_job_log(
    logs_root: &Path,
    job: &str,
    file: &str,
    earlier_owner: Option<Uid>,
) -> io::Result<File> {
    let dir_flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_RDONLY;
    let logs: OwnedFd = nix::fcntl::open(logs_root, dir_flags, Mode::empty())?;
    match mkdirat(logs.as_fd(), job, Mode::from_bits_truncate(0o700)) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => return Err(e.into()),
    }
    let linked = |e: nix::errno::Errno, what: &str| -> io::Error {
        if e == nix::errno::Errno::ELOOP || e == nix::errno::Errno::ENOTDIR {
            refuse(format!(
                "{what} in {} is a symbolic link or not what it should be; shareq follows no \
                 link inside its state directory",
                logs_root.display()
            ))
        } else {
            e.into()
        }
    };
    let dir = openat(logs.as_fd(), job, dir_flags, Mode::empty())
        .map_err(|e| linked(e, &format!("the log folder {job}")))?;
    let me = nix::unistd::geteuid();
    let my_gid = nix::unistd::getegid();
    let trusted = |uid: u32| uid == me.as_raw() || earlier_owner.is_some_and(|u| u.as_raw() == uid);
    let st = fstat(dir.as_fd())?;
    if !trusted(st.st_uid) {
        return Err(refuse(format!(
            "the log folder {}/{job} belongs to uid {}, not to the scheduler",
            logs_root.display(),
            st.st_uid
        )));
    }
    if st.st_uid != me.as_raw() {
        fchown(dir.as_fd(), Some(me), Some(my_gid))?;
    }
    fchmod(dir.as_fd(), Mode::from_bits_truncate(0o700))?;
    let fd = openat(
        dir.as_fd(),
        file,
        OFlag::O_WRONLY | OFlag::O_APPEND | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(|e| linked(e, &format!("the log {job}/{file}")))?;
    let st = fstat(fd.as_fd())?;
    if !trusted(st.st_uid) || st.st_nlink > 1 {
        return Err(refuse(format!(
            "the log {}/{job}/{file} belongs to uid {} or has other names (hard links): not \
             writing to it",
            logs_root.display(),
            st.st_uid
        )));
    }
    if st.st_uid != me.as_raw() {
        fchown(fd.as_fd(), Some(me), Some(my_gid))?;
    }
    fchmod(fd.as_fd(), Mode::from_bits_truncate(0o600))?;
    Ok(File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_writable_state_directory_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("state");
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o775)).unwrap();
        let e = prepare(&root, false).unwrap_err().to_string();
        assert!(e.contains("writable by group or others (mode 0775)"), "{e}");
        assert!(e.contains("chmod go-w"), "{e}");
    }

    #[test]
    fn a_state_directory_below_a_directory_others_may_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = prepare(&open.join("state"), false).unwrap_err().to_string();
        assert!(
            e.contains("which group or others may write (mode 0777)"),
            "{e}"
        );
        // Sticky but not root's (anyone's /tmp-like folder) is refused too; under root's
        // sticky /tmp itself (where tempdir lives) it is fine.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let sticky_mine = prepare(&open.join("state2"), false);
        if nix::unistd::geteuid().is_root() {
            assert!(sticky_mine.is_ok(), "{sticky_mine:?}");
        } else {
            assert!(sticky_mine.is_err());
        }
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        prepare(&open.join("state3"), false).unwrap();
    }

    #[test]
    fn prepare_makes_the_directory_private_and_refuses_links_inside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("state");
        prepare(&root, false).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(&root.join("runs")), 0o700);
        std::os::unix::fs::symlink("/etc/passwd", root.join("shareq.db")).unwrap();
        let e = prepare(&root, false).unwrap_err().to_string();
        assert!(e.contains("is a symbolic link"), "{e}");
    }

    #[test]
    fn an_old_world_readable_state_directory_is_closed_on_start() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("state");
        for d in ["", "logs", "logs/3", "runs"] {
            let p = root.join(d);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(root.join("shareq.db"), b"").unwrap();
        std::fs::set_permissions(
            root.join("shareq.db"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        prepare(&root, true).unwrap();
        let mode = |p: &str| std::fs::metadata(root.join(p)).unwrap().mode() & 0o777;
        assert_eq!(
            [
                mode(""),
                mode("logs"),
                mode("logs/3"),
                mode("runs"),
                mode("shareq.db")
            ],
            [0o711, 0o700, 0o700, 0o700, 0o600]
        );
    }

    #[test]
    fn a_job_log_is_not_opened_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir(&logs).unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        std::os::unix::fs::symlink(&target, logs.join("5")).unwrap();
        assert!(open_job_log(&logs, "5", "1.log", None).is_err());
        std::fs::create_dir(logs.join("6")).unwrap();
        std::os::unix::fs::symlink(target.join("x"), logs.join("6/1.log")).unwrap();
        assert!(open_job_log(&logs, "6", "1.log", None).is_err());
        assert!(!target.join("x").exists());
        let mut f = open_job_log(&logs, "7", "1.log", None).unwrap();
        std::io::Write::write_all(&mut f, b"hi").unwrap();
        assert_eq!(std::fs::read(logs.join("7/1.log")).unwrap(), b"hi");
    }
}
