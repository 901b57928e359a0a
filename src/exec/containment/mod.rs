//! Containment (SPEC §7): finding and ending every process of an attempt, whatever it
//! did. [`cgroup`] puts each attempt in a group of its own (and limits its device files);
//! [`session`] reads the kernel's view of an attempt's session in `/proc`, for a
//! supervisor that died and for machines without usable cgroups; [`fds`] keeps what a
//! job inherits to its standard descriptors, without a way to gain privileges;
//! [`mig_caps`] says what a MIG job may open.

pub mod cgroup;
pub mod fds;
pub mod mig_caps;
pub mod session;
